"""Property-based tests (hypothesis) of jhash's core against slow NumPy references.

What is checked against what:

* ``codes.pack_bits`` / ``unpack_bits``: the documented word layout (``np_pack`` of
  ``test_search.py``) and the round trip, at 1, 7, 8, 31, 32, 33, 63, 64, 65 and 129 bits.
* ``search.hamming_distance``: the count of differing bits (``np_hamming``, ibid.).
* ``search.hamming_topk``: a lexsort by (distance, index) (``_search_reference.np_topk``).
* ``metrics.average_precisions`` / ``mean_average_precision``, tie-aware and
  index-ordered, and ``metrics.precision_recall_at_radius``: ``_metrics_reference.py``.
* ``index.bucket_search`` (with and without substring tables): brute force
  (``expected_results`` of ``test_index.py``).

Codes come in five kinds: random, drawn integer by integer (bit j of the integer is bit j
of the code; shrinkable), all equal (every distance 0), queries the complement of every
database code (every distance K), and a pool of one code and its complement (distances
0 or K, ties everywhere). Sizes come from small fixed lists, as JAX compiles once per
shape. n = 0, which the top-k, the metrics and the index refuse, must raise the
documented error. Every test is derandomized, and the edges (each bit length, n = 1,
k = n, all-equal and all-complement codes, one class, no relevant item) are pinned
with ``@example`` so that every run reaches them, whatever hypothesis draws.
"""

from __future__ import annotations

import math
import warnings

import jax
import numpy as np
import pytest
from hypothesis import example
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

import _metrics_reference as ref
from _search_reference import np_topk
from jhash import codes
from jhash import index as index_lib
from jhash import metrics
from jhash import search
from test_index import assert_matches
from test_index import expected_results
from test_search import np_hamming
from test_search import np_pack

BITS = (1, 7, 8, 31, 32, 33, 63, 64, 65, 129)
INDEX_BITS = tuple(b for b in BITS if b <= index_lib.MAX_BITS)
KINDS = ("random", "drawn", "equal", "complement", "pool")
ATOL = 1e-5


def fixed(max_examples):
  return settings(derandomize=True, max_examples=max_examples, deadline=None)


def to_signs(values, num_bits):
  """Python ints -> int8 codes [len(values), num_bits] in {-1,+1}: bit j of the int is bit j."""
  bits = [[(v >> j) & 1 for j in range(num_bits)] for v in values]
  return (2 * np.array(bits, np.int8).reshape(len(values), num_bits) - 1).astype(np.int8)


@st.composite
def code_sets(draw, bits=BITS, queries=(3, 3, 0), items=(5, 1, 2, 8, 5, 2, 0)):
  """(num_bits, query codes [q, K], database codes [n, K]) of one of ``KINDS``: "random"
  from a seeded NumPy generator, "drawn" integer by integer (shrinkable), "equal" (every
  distance 0), "complement" (queries the complement of every item: every distance K) or
  "pool" (one code and its complement: distances 0 or K)."""
  num_bits = draw(st.sampled_from(bits))
  q, n = draw(st.sampled_from(queries)), draw(st.sampled_from(items))
  kind = draw(st.sampled_from(KINDS))
  if kind == "random":
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    signs = rng.choice(np.array([-1, 1], np.int8), (q + n, num_bits))
    return num_bits, signs[:q], signs[q:]
  full = 2**num_bits - 1
  word = st.integers(0, full)
  base = draw(word)
  if kind == "drawn":
    values = draw(st.lists(word, min_size=q + n, max_size=q + n))
  elif kind == "equal":
    values = [base] * (q + n)
  elif kind == "complement":
    values = [full ^ base] * q + [base] * n
  else:
    flips = draw(st.lists(st.booleans(), min_size=q + n, max_size=q + n))
    values = [full ^ base if f else base for f in flips]
  return num_bits, to_signs(values[:q], num_bits), to_signs(values[q:], num_bits)


@st.composite
def labelled_sets(draw):
  """A ``code_sets`` draw with class ids: random (class 3 is absent from the database),
  one class (every item relevant) or no query's class in the database."""
  num_bits, qc, dc = draw(code_sets(bits=(1, 8, 33, 64), queries=(3,)))
  kind = draw(st.sampled_from(("random", "one_class", "none_relevant")))
  q, n = len(qc), len(dc)
  if kind == "one_class":
    ql, dl = [0] * q, [0] * n
  else:
    dl = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    ql = (
      [3] * q
      if kind == "none_relevant"
      else draw(st.lists(st.integers(0, 3), min_size=q, max_size=q))
    )
  return num_bits, qc, dc, np.array(ql, np.int32), np.array(dl, np.int32)


def edge(num_bits, kind, q, n):
  """A fixed ``code_sets`` value of one of ``KINDS`` ("drawn" is "random" here)."""
  rng = np.random.default_rng(num_bits)
  signs = rng.choice(np.array([-1, 1], np.int8), (q + n, num_bits))
  base = signs[:1]
  if kind == "equal":
    signs = np.repeat(base, q + n, axis=0)
  elif kind == "complement":
    signs = np.concatenate([np.repeat(-base, q, axis=0), np.repeat(base, n, axis=0)])
  elif kind == "pool":
    signs = np.where((np.arange(q + n) % 3 == 1)[:, None], -base, base)
  return num_bits, signs[:q], signs[q:]


def labelled(case, kind):
  """``edge`` with the class ids of ``labelled_sets``."""
  num_bits, qc, dc = case
  q, n = len(qc), len(dc)
  ql = {"one_class": np.zeros(q), "none_relevant": np.full(q, 3)}.get(kind, np.arange(q) % 4)
  dl = np.zeros(n) if kind == "one_class" else np.arange(n) % 3
  return num_bits, qc, dc, ql.astype(np.int32), dl.astype(np.int32)


def pinned(*rows):
  """``@example(**row)`` for every row: edges that every run checks."""

  def apply(test):
    for row in reversed(rows):
      test = example(**row)(test)
    return test

  return apply


def assert_same(got, want):
  """Floats equal to ATOL, NaN only where NaN is expected."""
  assert math.isnan(want) == math.isnan(got), (got, want)
  if not math.isnan(want):
    assert got == pytest.approx(want, abs=ATOL)


# ----------------------------------------------------------------------------------------------
# Packing, distances and exact top-k.


@pytest.mark.parametrize("num_bits", BITS)
@fixed(3)
@given(data=st.data())
def test_pack_matches_layout_and_round_trips(num_bits, data):
  _, _, signs = data.draw(code_sets(bits=(num_bits,), queries=(0,), items=(3, 1, 0)))
  bits = (signs > 0).astype(np.uint8)
  packed = np.asarray(codes.pack_bits(signs))
  assert packed.dtype == np.uint32
  np.testing.assert_array_equal(packed, np_pack(bits))  # layout, zero padding bits
  np.testing.assert_array_equal(codes.unpack_bits(packed, num_bits), signs)
  np.testing.assert_array_equal(codes.unpack_bits(packed, num_bits, signed=False), bits)


def test_unpack_bits_of_no_codes():
  packed = codes.pack_bits(np.ones((0, 7), np.int8))  # [0, 1], as test_codes.py checks
  assert codes.unpack_bits(packed, 7).shape == (0, 7)
  assert codes.unpack_bits(np.zeros((2, 0, 1), np.uint32), 7, signed=False).shape == (2, 0, 7)


DISTANCE_EDGES = [  # every bit length once: (num_bits, kind, q, n, method)
  (1, "equal", 3, 5, "auto"),
  (7, "complement", 3, 8, "xor"),
  (8, "pool", 3, 2, "matmul"),
  (31, "random", 3, 1, "auto"),
  (32, "random", 0, 5, "xor"),
  (33, "complement", 3, 5, "matmul"),
  (63, "random", 3, 0, "auto"),
  (64, "pool", 3, 8, "auto"),
  (65, "random", 3, 5, "matmul"),
  (129, "equal", 3, 5, "xor"),
]


@fixed(8)
@given(case=code_sets(), method=st.sampled_from(("auto", "xor", "matmul")))
@pinned(*(dict(case=edge(*row[:4]), method=row[4]) for row in DISTANCE_EDGES))
def test_hamming_distance_counts_differing_bits(case, method):
  num_bits, qc, dc = case
  got = search.hamming_distance(
    codes.pack_bits(qc), codes.pack_bits(dc), num_bits=num_bits, method=method
  )
  np.testing.assert_array_equal(np.asarray(got), np_hamming(qc > 0, dc > 0))


def topk_reference(dist, k):
  """``np_topk``, and empty [0, k] results for no queries (np_topk stacks the rows)."""
  if len(dist) == 0:
    return np.zeros((0, k), np.int64), np.zeros((0, k), np.int64)
  return np_topk(dist, k)


TOPK_EDGES = [  # every bit length once, n = 0 and n = 1: (num_bits, kind, q, n, k, method)
  (1, "equal", 3, 1, "n", "auto"),
  (7, "complement", 3, 5, "n", "xor"),
  (8, "pool", 3, 8, "half", "auto"),
  (31, "random", 3, 8, "1", "xor"),
  (32, "equal", 3, 8, "half", "xor"),
  (33, "complement", 3, 1, "n", "auto"),
  (63, "random", 3, 5, "n", "auto"),
  (64, "pool", 3, 5, "n", "xor"),
  (65, "equal", 0, 5, "n", "auto"),
  (129, "complement", 3, 8, "n", "auto"),
  (129, "random", 3, 0, "1", "auto"),
]


@fixed(10)
@given(
  case=code_sets(),
  pick=st.sampled_from(("n", "1", "half")),
  method=st.sampled_from(("auto", "xor")),
)
@pinned(*(dict(case=edge(*row[:4]), pick=row[4], method=row[5]) for row in TOPK_EDGES))
def test_hamming_topk_orders_by_distance_then_index(case, pick, method):
  num_bits, qc, dc = case
  qp, dp, n = codes.pack_bits(qc), codes.pack_bits(dc), len(dc)
  if n == 0:  # a top-k needs 1 <= k <= n
    with pytest.raises(ValueError, match=r"k must be at most the database size \(db_packed has 0"):
      search.hamming_topk(qp, dp, 1, num_bits=num_bits, method=method)
    return
  k = {"n": n, "1": 1, "half": (n + 1) // 2}[pick]
  got_d, got_i = search.hamming_topk(qp, dp, k, num_bits=num_bits, method=method)
  want_d, want_i = topk_reference(np_hamming(qc > 0, dc > 0), k)
  np.testing.assert_array_equal(np.asarray(got_d), want_d)
  np.testing.assert_array_equal(np.asarray(got_i), want_i)


# ----------------------------------------------------------------------------------------------
# Metrics.


# (num_bits, kind, q, n, labels), then the arguments of the test.
MAP_EDGES = [
  ((8, "random", 3, 1, "one_class"), "relevant", None),  # n = 1, every item relevant
  ((33, "equal", 3, 5, "random"), "min", "1"),  # every distance tied
  ((64, "complement", 3, 5, "none_relevant"), "relevant", "n"),  # nothing relevant, k = n
  ((1, "pool", 3, 8, "random"), "retrieved", None),
  ((8, "random", 3, 0, "random"), "relevant", None),  # n = 0
]


@pytest.mark.parametrize("ties", ["aware", "index"])
@fixed(12)
@given(
  case=labelled_sets(),
  normalizer=st.sampled_from(("relevant", "min", "retrieved")),
  cut=st.sampled_from((None, "n", "1")),
)
@pinned(*(dict(case=labelled(edge(*c[:4]), c[4]), normalizer=z, cut=k) for c, z, k in MAP_EDGES))
def test_mean_average_precision_matches_reference(ties, case, normalizer, cut):
  num_bits, qc, dc, ql, dl = case
  n = len(dc)
  if n == 0:
    with pytest.raises(ValueError, match="db_codes must hold at least one database item"):
      metrics.mean_average_precision(qc, dc, ql, dl, ties=ties)
    return
  top_k = {None: None, "n": n, "1": 1}[cut]
  if ties == "aware" and normalizer == "retrieved" and top_k == 1 and n > 1:
    normalizer = "min"  # not defined for tie-aware AP (an error, tested in test_metrics.py)
  kw = dict(top_k=top_k, ties=ties, normalizer=normalizer)
  want_ap, want_defined = ref.average_precision(ref.distances(qc, dc), ref.relevance(ql, dl), **kw)
  got_ap, got_defined = metrics.average_precisions(qc, dc, ql, dl, **kw)
  np.testing.assert_array_equal(np.asarray(got_defined), want_defined)
  np.testing.assert_allclose(np.asarray(got_ap), want_ap, atol=ATOL)
  for rule in ("zero", "skip"):
    want = ref.mean_over_queries(want_ap, want_defined, rule)
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      got = metrics.mean_average_precision(qc, dc, ql, dl, no_relevant=rule, **kw)
    assert_same(got, want)
    # Documented: with every query left out, "skip" is NaN and "zero" 0, each with a
    # RuntimeWarning saying why.
    warned = any("no query has a relevant item" in str(w.message) for w in caught)
    assert warned == (not want_defined.any())


RADIUS_EDGES = [  # (num_bits, kind, q, n, labels), average, empty, no_relevant, radius / K
  ((8, "random", 3, 1, "one_class"), "query", "skip", "skip", 0.0),
  ((33, "pool", 3, 5, "random"), "pooled", "zero", "zero", 1.0),
  ((64, "complement", 3, 5, "none_relevant"), "query", "skip", "skip", 0.5),
  ((7, "equal", 3, 8, "random"), "pooled", "skip", "zero", 0.0),
  ((1, "random", 3, 0, "random"), "query", "zero", "zero", 1.0),
  ((8, "random", 3, 5, "none_relevant"), "pooled", "skip", "skip", 0.5),  # recall 0 / 0: NaN
]


@fixed(12)
@given(
  case=labelled_sets(),
  average=st.sampled_from(("query", "pooled")),
  empty=st.sampled_from(("zero", "skip")),
  no_relevant=st.sampled_from(("zero", "skip")),
  where=st.floats(0, 1),
)
@pinned(
  *(
    dict(case=labelled(edge(*c[:4]), c[4]), average=a, empty=e, no_relevant=r, where=w)
    for c, a, e, r, w in RADIUS_EDGES
  )
)
def test_precision_recall_at_radius_matches_reference(case, average, empty, no_relevant, where):
  num_bits, qc, dc, ql, dl = case
  radius = round(where * num_bits)
  kw = dict(average=average, empty=empty, no_relevant=no_relevant)
  if len(dc) == 0:
    with pytest.raises(ValueError, match="db_codes must hold at least one database item"):
      metrics.precision_recall_at_radius(qc, dc, ql, dl, radius, **kw)
    return
  got = metrics.precision_recall_at_radius(qc, dc, ql, dl, radius, **kw)
  want = ref.precision_recall_at_radius(qc, dc, ql, dl, radius, **kw)
  for got_value, want_value in zip(got, want):
    assert_same(got_value, want_value)


# ----------------------------------------------------------------------------------------------
# Hash-bucket index.


BUCKET_EDGES = [  # (num_bits, kind, q, n), num_wanted, max_radius, max_results, substrings
  ((1, "random", 3, 8), 9, 1, 4, False),  # every item in reach, more than the slots
  ((7, "random", 3, 1), 1, 2, 1, False),  # n = 1
  ((8, "pool", 3, 5), 6, 2, 4, True),
  ((33, "complement", 3, 5), 2, 2, 4, True),  # nothing within the radius
  ((64, "equal", 3, 5), 1, 0, 4, True),  # one bucket holds every item
  ((63, "random", 0, 5), 1, 1, 4, False),  # no queries
  ((32, "random", 3, 0), 1, 1, 4, False),  # n = 0
]


@fixed(10)
@given(
  case=code_sets(bits=INDEX_BITS),
  wanted=st.integers(1, 9),
  max_radius=st.integers(0, 2),
  max_results=st.sampled_from((4, 1)),
  substrings=st.booleans(),
)
@pinned(
  *(
    dict(case=edge(*c), wanted=w, max_radius=r, max_results=m, substrings=t)
    for c, w, r, m, t in BUCKET_EDGES
  )
)
def test_bucket_search_equals_brute_force(case, wanted, max_radius, max_results, substrings):
  num_bits, qc, dc = case
  n, max_radius = len(dc), min(max_radius, num_bits)
  tables = max(2, -(-num_bits // 24)) if substrings and num_bits >= 2 else 0
  if n == 0:
    with pytest.raises(ValueError, match="codes_or_packed must hold at least one code"):
      index_lib.build_index(dc, num_bits=num_bits)
    return
  index = index_lib.build_index(dc, num_bits=num_bits, num_substrings=tables)
  res = index_lib.bucket_search(
    index,
    codes.pack_bits(qc),
    num_wanted=wanted,
    max_radius=max_radius,
    max_results=max_results,
    use_substrings=bool(tables),
  )
  ones = np.ones((n, 1), bool)
  want = expected_results(dc[:, None], ones, np.arange(n), qc, wanted, max_radius, max_results)
  assert_matches(jax.tree.map(np.asarray, res), want, max_results)
