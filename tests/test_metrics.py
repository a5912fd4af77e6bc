"""jhash.metrics against slow NumPy references (``_metrics_reference.py``) and hand-worked cases.

The first group of tests checks the references themselves: against cases worked
by hand and, for the tie-aware metrics, against the plain mean over every order
of the tied items. The rest compares the library with them on data with many
ties (8- and 16-bit codes), for every convention.
"""

from __future__ import annotations

import doctest
import functools
import itertools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import _metrics_reference as ref
from jhash import metrics

ATOL = 1e-5

# ------------------------------------------------------------------------------------------
# Data


class Data(NamedTuple):
  query_codes: np.ndarray  # int8 [q, K] in {-1, +1}
  db_codes: np.ndarray  # int8 [n, K] (or [n, m, K] with db_mask)
  query_labels: np.ndarray  # int32 [q] class ids, or bool [q, C] multi-hot
  db_labels: np.ndarray


def _flip(rng, codes, p):
  return np.where(rng.random(codes.shape) < p, -codes, codes).astype(np.int8)


def _signs(rng, shape):
  return rng.choice(np.array([-1, 1], np.int8), shape)


def make_class_data(seed=0, q=30, n=400, num_bits=8, num_classes=6) -> Data:
  """Codes near a per-class prototype; 8 bits give 9 distances, so ties everywhere."""
  rng = np.random.default_rng(seed)
  protos = _signs(rng, (num_classes, num_bits))
  db_labels = rng.integers(0, num_classes, n).astype(np.int32)
  db_codes = _flip(rng, protos[db_labels], 0.2)
  query_labels = rng.integers(0, num_classes, q).astype(np.int32)
  query_codes = _flip(rng, protos[query_labels], 0.2)
  query_labels[:3] = num_classes  # a class the database lacks: no relevant item
  query_codes[3:6] = db_codes[:3]  # copies of database codes: items at distance 0
  return Data(query_codes, db_codes, query_labels, db_labels)


def make_multilabel_data(seed=1, q=24, n=1200, num_bits=16, num_labels=8) -> Data:
  rng = np.random.default_rng(seed)
  protos = _signs(rng, (num_labels, num_bits))

  def codes_for(labels):
    first = np.where(
      labels.any(axis=1), labels.argmax(axis=1), rng.integers(0, num_labels, len(labels))
    )
    return _flip(rng, protos[first], 0.15)

  db_labels = rng.random((n, num_labels)) < 0.2
  db_labels[:, -1] = False  # a label no database item has
  query_labels = rng.random((q, num_labels)) < 0.25
  query_labels[0] = False  # no label at all: nothing relevant
  query_labels[1] = False
  query_labels[1, -1] = True  # only the label the database lacks: nothing relevant
  db_codes = codes_for(db_labels)
  query_codes = codes_for(query_labels)
  query_codes[2:5] = db_codes[:3]
  return Data(query_codes, db_codes, query_labels, db_labels)


def dyadic_weights(num_bits, seed=2):
  """Bit weights in quarters: sums are exact in float32, so ties stay exact ties."""
  return (np.random.default_rng(seed).integers(1, 9, num_bits) / 4).astype(np.float32)


def make_multicode(data: Data, seed=3, codes_per_item=3):
  """[n, m, K] codes (the first one the item's own) and a mask keeping the first always."""
  rng = np.random.default_rng(seed)
  n, num_bits = data.db_codes.shape
  extra = _flip(rng, np.repeat(data.db_codes[:, None, :], codes_per_item - 1, axis=1), 0.3)
  codes = np.concatenate([data.db_codes[:, None, :], extra], axis=1)
  mask = rng.random((n, codes_per_item)) < 0.5
  mask[:, 0] = True
  return codes, mask


class Case(NamedTuple):
  data: Data
  d: np.ndarray  # reference distances [q, n]
  rel: np.ndarray  # reference relevance [q, n] bool
  profile: ref.APProfile
  weights: np.ndarray | None
  db_mask: np.ndarray | None


@functools.lru_cache(maxsize=None)
def case(name: str) -> Case:
  """Data sets shared by the tests, with the reference's distances and AP profile."""
  weights = db_mask = None
  if name == "class":
    data = make_class_data()
  elif name == "multi":
    data = make_multilabel_data()
  elif name == "weighted":
    data = make_class_data(seed=4, num_bits=16, n=500)
    weights = dyadic_weights(16)
  elif name == "multicode":
    data = make_class_data(seed=5, num_bits=16, n=300, q=20)
    db_codes, db_mask = make_multicode(data)
    data = data._replace(db_codes=db_codes)
  else:
    raise KeyError(name)
  d = ref.distances(data.query_codes, data.db_codes, weights, db_mask)
  rel = ref.relevance(data.query_labels, data.db_labels)
  return Case(data, d, rel, ref.APProfile(d, rel), weights, db_mask)


def resolve_k(top_k, n):
  return {"n-1": n - 1, "n": n}.get(top_k, top_k)


def codes_at(num_bits, dists):
  """A query of all +1 and one database code per distance d (its first d bits flipped)."""
  query = np.ones((1, num_bits), np.int8)
  db = np.ones((len(dists), num_bits), np.int8)
  for i, d in enumerate(dists):
    db[i, :d] = -1
  return query, db


def low_ap(distances, rel, **kw):
  ap, defined = metrics.average_precision(distances, rel, **kw)
  return np.asarray(ap, np.float64), np.asarray(defined, bool)


def low_ndcg(distances, grades, **kw):
  value, defined = metrics.ndcg(distances, grades, **kw)
  return np.asarray(value, np.float64), np.asarray(defined, bool)


TOP_KS = (None, 1, 10, "n-1", "n")
AP_CONVENTIONS = [
  (t, norm, k)
  for t in ("aware", "index")
  for norm in ("relevant", "min", "retrieved")
  for k in TOP_KS
  if not (t == "aware" and norm == "retrieved" and k is not None)
]
# The conventions every run checks: each value of ties, normalizer and top_k with each
# value of the others. The full grid runs with --runslow (the library compiles once per
# static combination, seconds each on two cores).
DEFAULT_AP = [
  ("aware", "relevant", None),
  ("aware", "relevant", 1),
  ("aware", "min", 10),
  ("aware", "min", "n-1"),
  ("aware", "retrieved", None),
  ("aware", "relevant", "n"),
  ("index", "relevant", 10),
  ("index", "min", 1),
  ("index", "retrieved", 10),
  ("index", "retrieved", "n-1"),
  ("index", "min", "n"),
  ("index", "retrieved", None),
]


def grid(combos, default):
  """pytest params for every combination; those outside ``default`` are marked slow."""
  default = [tuple(c) for c in default]
  return [pytest.param(*c, marks=() if tuple(c) in default else pytest.mark.slow) for c in combos]


# Seven items, three distances (tie groups of 3, 3 and 1), and nine items in groups of 2, 4, 3:
# 3! 3! 1! = 36 and 2! 4! 3! = 288 orders.
ENUM_DISTANCES = (np.array([0, 1, 0, 2, 1, 0, 1]), np.array([2, 2, 0, 1, 1, 1, 2, 0, 1]))


def enum_relevance(n, seed=0):
  """Every relevance pattern worth trying: random ones, none relevant, all relevant."""
  rng = np.random.default_rng(seed)
  rows = [rng.random(n) < p for p in (0.2, 0.35, 0.5, 0.5, 0.65, 0.8)]
  rows += [np.zeros(n, bool), np.ones(n, bool), np.eye(n, dtype=bool)[-1]]
  return np.stack(rows)


# ------------------------------------------------------------------------------------------
# The references themselves


def test_reference_distances_match_inner_product():
  data = case("class").data
  k = data.query_codes.shape[1]
  inner = data.query_codes.astype(np.int64) @ data.db_codes.T.astype(np.int64)
  np.testing.assert_array_equal(ref.distances(data.query_codes, data.db_codes), (k - inner) // 2)
  # Weighted with unit weights is Hamming; multi-code with one valid code is single-code.
  np.testing.assert_array_equal(
    ref.distances(data.query_codes, data.db_codes, np.ones(k)),
    ref.distances(data.query_codes, data.db_codes),
  )
  multi = np.stack([data.db_codes, -data.db_codes], axis=1)
  mask = np.zeros(multi.shape[:2], bool)
  mask[:, 0] = True
  np.testing.assert_array_equal(
    ref.distances(data.query_codes, multi, db_mask=mask),
    ref.distances(data.query_codes, data.db_codes),
  )
  plain = ref.distances(data.query_codes, data.db_codes)
  both = ref.distances(data.query_codes, multi, db_mask=np.ones_like(mask))
  np.testing.assert_array_equal(both, np.minimum(plain, k - plain))


def test_reference_hand_worked_ap():
  # Ranking [rel, irr, rel]: precision 1/1 at rank 1 and 2/3 at rank 3, over R = 2.
  d, rel = np.array([0, 1, 2]), np.array([True, False, True])
  assert ref.ap_one(d, rel, ties="index") == pytest.approx(((1 / 1 + 2 / 3) / 2, True))
  assert ref.ap_one(d, rel, ties="aware") == pytest.approx(((1 / 1 + 2 / 3) / 2, True))
  # AP@2 sums only the rank-1 term, 1: "relevant" divides by R = 2, "min" by min(2, 2) = 2,
  # "retrieved" by the 1 relevant item in the first two.
  assert ref.ap_one(d, rel, 2, "index", "relevant")[0] == pytest.approx(0.5)
  assert ref.ap_one(d, rel, 2, "index", "min")[0] == pytest.approx(0.5)
  assert ref.ap_one(d, rel, 2, "index", "retrieved")[0] == pytest.approx(1.0)
  # AP@1 of [irr, rel, rel]: nothing retrieved, so "retrieved" is undefined.
  assert ref.ap_one(d, np.array([False, True, True]), 1, "index", "retrieved") == (0.0, False)
  # Tie group {0: rel, 1: irr} at distance 0, then a relevant item at distance 1.
  # Orders: [rel, irr, rel] -> (1 + 2/3) / 2 = 5/6; [irr, rel, rel] -> (1/2 + 2/3) / 2 = 7/12.
  # Tie-aware AP = (5/6 + 7/12) / 2 = 17/24. Index order takes the first: 5/6.
  d, rel = np.array([0, 0, 1]), np.array([True, False, True])
  assert ref.ap_one(d, rel, ties="aware")[0] == pytest.approx(17 / 24)
  assert ref.ap_by_enumeration(d, rel)[0] == pytest.approx(17 / 24)
  assert ref.ap_one(d, rel, ties="index")[0] == pytest.approx(5 / 6)
  # Same ties, AP@1 over min(R, 1) = 1: E[rel at rank 1] = 1/2.
  assert ref.ap_one(d, rel, 1, "aware", "min")[0] == pytest.approx(0.5)
  # No relevant item: undefined.
  assert ref.ap_one(d, np.zeros(3, bool)) == (0.0, False)


def test_reference_hand_worked_ndcg_and_precision():
  # Grades in rank order [2, 0, 1]. exp gains [3, 0, 1]: DCG@3 = 3/log2(2) + 0 + 1/log2(4) = 3.5;
  # ideal order [3, 1, 0]: IDCG@3 = 3 + 1/log2(3). linear gains [2, 0, 1]: 2.5 / (2 + 1/log2(3)).
  d, grades = np.array([0, 1, 2]), np.array([2, 0, 1])
  assert ref.ndcg_one(d, grades, 3, "index", "exp")[0] == pytest.approx(
    3.5 / (3 + 1 / math.log2(3))
  )
  assert ref.ndcg_one(d, grades, 3, "index", "linear")[0] == pytest.approx(
    2.5 / (2 + 1 / math.log2(3))
  )
  # Ranks 1 and 2 tied: E[gain at rank 1] = (3 + 0) / 2 and IDCG@1 = 3, so NDCG@1 = 0.5.
  d = np.array([0, 0, 1])
  assert ref.ndcg_one(d, grades, 1, "aware", "exp")[0] == pytest.approx(0.5)
  # Three tied items, one relevant, then a relevant one: E[hits@2] = 2 * 1/3, precision 1/3.
  d, rel = np.array([0, 0, 0, 1]), np.array([True, False, False, True])
  assert ref.hits_at_k(d, rel, 2, "aware") / 2 == pytest.approx(1 / 3)
  assert ref.hits_at_k(d, rel, 2, "index") / 2 == pytest.approx(1 / 2)


@pytest.mark.parametrize("d", ENUM_DISTANCES, ids=["7items", "9items"])
def test_reference_tie_aware_equals_enumeration(d):
  n = len(d)
  assert ref.number_of_rankings(d) in (36, 288)
  for rel in enum_relevance(n):
    for top_k in [None, *range(1, n + 1)]:
      for normalizer in ("relevant", "min"):
        assert ref.ap_one(d, rel, top_k, "aware", normalizer) == pytest.approx(
          ref.ap_by_enumeration(d, rel, top_k, normalizer), abs=1e-12
        )
    for k in range(1, n + 1):
      assert ref.hits_at_k(d, rel, k, "aware") == pytest.approx(
        ref.hits_at_k_by_enumeration(d, rel, k)
      )
  grades = np.random.default_rng(1).integers(0, 4, (5, n))
  for g in grades:
    for k in range(1, n + 1):
      for gain in ("exp", "linear"):
        assert ref.ndcg_one(d, g, k, "aware", gain) == pytest.approx(
          ref.ndcg_by_enumeration(d, g, k, gain), abs=1e-12
        )


def test_reference_closed_form_of_the_methods_notes():
  # METHODS.md section 4: AP_tie = (1/R) sum_l (p_l/n_l) sum_j (P_l + 1 + (j-1) m_l) / (N_l + j).
  c = case("class")
  for d, rel in zip(c.d[:10], c.rel[:10]):
    total, before_items, before_rel = 0.0, 0, 0
    for g in ref.tie_groups(d):
      n_l, p_l = len(g), int(rel[g].sum())
      m_l = (p_l - 1) / (n_l - 1) if n_l > 1 else 0.0
      total += (
        p_l
        / n_l
        * sum((before_rel + 1 + (j - 1) * m_l) / (before_items + j) for j in range(1, n_l + 1))
      )
      before_items += n_l
      before_rel += p_l
    want = total / rel.sum() if rel.sum() else 0.0
    assert ref.ap_one(d, rel)[0] == pytest.approx(want, abs=1e-12)


def test_reference_index_ap_matches_rank_formula_and_sklearn():
  # Whole-ranking AP = mean over relevant items of (their count so far) / (their rank).
  c = case("multi")
  for d, rel in zip(c.d, c.rel):
    ranks = np.flatnonzero(rel[np.argsort(d, kind="stable")]) + 1
    want = float(np.mean(np.arange(1, len(ranks) + 1) / ranks)) if len(ranks) else 0.0
    assert ref.ap_one(d, rel, ties="index")[0] == pytest.approx(want, abs=1e-12)
  # On distinct distances there is one ranking; sklearn's AP is then the same number.
  sklearn_metrics = pytest.importorskip("sklearn.metrics")
  rng = np.random.default_rng(3)
  for _ in range(5):
    d = rng.permutation(50).astype(float)
    rel = rng.random(50) < 0.3
    rel[0] = True
    assert ref.ap_one(d, rel, ties="aware")[0] == pytest.approx(
      sklearn_metrics.average_precision_score(rel, -d), abs=1e-12
    )
    assert ref.ap_one(d, rel, ties="index")[0] == pytest.approx(
      sklearn_metrics.average_precision_score(rel, -d), abs=1e-12
    )


def test_reference_profile_equals_direct():
  c = case("class")
  for ties, normalizer, top_k in AP_CONVENTIONS:
    k = resolve_k(top_k, c.d.shape[1])
    want = ref.average_precision(c.d, c.rel, k, ties, normalizer)
    got = c.profile.ap(k, ties, normalizer)
    np.testing.assert_allclose(got[0], want[0], atol=1e-12)
    np.testing.assert_array_equal(got[1], want[1])
  data = c.data
  assert ref.mean_average_precision(*data, top_k=10, normalizer="min", no_relevant="skip") == (
    pytest.approx(ref.mean_over_queries(*c.profile.ap(10, "aware", "min"), "skip"))
  )


def make_tie_free_data(multilabel: bool):
  """17 items at distances 0..16 from the query (a chain of flipped bits), and the
  negated query at 16..0: no two items tie for any query."""
  rng = np.random.default_rng(8)
  num_bits = 16
  base = _signs(rng, (num_bits,))
  order = rng.permutation(num_bits)
  db = np.stack([base] * (num_bits + 1))
  for j in range(num_bits + 1):
    db[j, order[:j]] *= -1
  queries = np.stack([base, -base] * 4)
  if multilabel:
    db_labels = rng.random((num_bits + 1, 4)) < 0.4
    q_labels = rng.random((len(queries), 4)) < 0.4
    q_labels[0] = False
  else:
    db_labels = rng.integers(0, 3, num_bits + 1).astype(np.int32)
    q_labels = np.array([0, 0, 1, 1, 2, 2, 3, 1], np.int32)  # class 3: none relevant
  return Data(queries, db, q_labels, db_labels)


@pytest.mark.parametrize("multilabel", [False, True])
def test_reference_deephash_transcriptions_agree_without_ties(multilabel):
  # On tie-free data the default argsort is the stable one.
  data = make_tie_free_data(multilabel)
  d = ref.distances(data.query_codes, data.db_codes)
  assert all(len(np.unique(row)) == len(row) for row in d)
  n = d.shape[1]
  for topk in (-1, 1, 5, n - 1, n):
    assert ref.deephash_calc_top_map(*data, topk) == pytest.approx(
      ref.deephash_calc_top_map(*data, topk, argsort_kind="stable"), abs=1e-12
    )


@pytest.mark.parametrize("name", ["class", "multi"])
def test_reference_deephash_is_index_ap_over_retrieved(name):
  # The stable transcription is AP@k in index order over the relevant items retrieved,
  # no-relevant queries counted as 0; topk = -1 is AP@(n-1).
  c = case(name)
  n = c.d.shape[1]
  for topk, k in ((-1, n - 1), (1, 1), (10, 10), (n, n)):
    want = ref.mean_over_queries(*c.profile.ap(k, "index", "retrieved"), "zero")
    assert ref.deephash_calc_top_map(*c.data, topk, argsort_kind="stable") == pytest.approx(
      want, abs=1e-12
    )


@pytest.mark.parametrize("name", ["class", "multi", "weighted", "multicode"])
def test_reference_data_tells_the_conventions_apart(name):
  # A test can only catch a mixed-up convention if the data gives the two different answers:
  # every two AP conventions differ by far more than the tolerance on some query, and the
  # no_relevant rules differ on the mean.
  c = case(name)
  n = c.d.shape[1]

  def ap(ties, normalizer, top_k):
    return c.profile.ap(resolve_k(top_k, n), ties, normalizer)[0]

  pairs = [
    (("aware", norm, k), ("index", norm, k))
    for norm, k in (("relevant", None), ("relevant", 10), ("min", 1), ("min", "n-1"))
  ]
  for ties in ("aware", "index"):
    pairs += [
      ((ties, "relevant", 1), (ties, "min", 1)),
      ((ties, "relevant", 10), (ties, "min", 10)),
      ((ties, "relevant", 10), (ties, "relevant", "n-1")),
    ]
  pairs += [
    (("index", "min", 10), ("index", "retrieved", 10)),
    (("index", "relevant", 1), ("index", "retrieved", 1)),
  ]
  if name != "weighted":  # there no query has a relevant item ranked last
    pairs += [(("index", "relevant", None), ("index", "relevant", "n-1"))]
  for a, b in pairs:
    assert np.abs(ap(*a) - ap(*b)).max() > 10 * ATOL, (a, b)
  assert (~c.profile.num_relevant.astype(bool)).any()
  ap_full, defined = c.profile.ap(None, "aware", "relevant")
  assert (
    abs(
      ref.mean_over_queries(ap_full, defined, "zero")
      - ref.mean_over_queries(ap_full, defined, "skip")
    )
    > 10 * ATOL
  )


# ------------------------------------------------------------------------------------------
# Hand-worked cases on the library

DIST_KINDS = ["int", "int_no_max", "float"]


def as_distances(d, kind, max_distance):
  """Distances for the low-level API, and the keyword arguments describing them."""
  if kind == "int":
    return jnp.asarray(d, jnp.int32), {"max_distance": max_distance}
  if kind == "int_no_max":
    return jnp.asarray(d, jnp.int32), {}
  return jnp.asarray(d, jnp.float32), {}


@pytest.mark.parametrize("kind", ["int", "float"])
def test_hand_worked_average_precision(kind):
  # [rel, irr, rel] at distances 0, 1, 2: AP = (1/1 + 2/3) / 2 = 5/6 for both tie rules;
  # AP@2 = 1/2 ("relevant", "min") or 1/1 ("retrieved", index ties only).
  d, extra = as_distances([[0, 1, 2]], kind, 2)
  rel = jnp.asarray([[True, False, True]])
  for ties in ("aware", "index"):
    ap, ok = low_ap(d, rel, ties=ties, **extra)
    np.testing.assert_allclose(ap, [5 / 6], atol=ATOL)
    assert ok.tolist() == [True]
    for normalizer in ("relevant", "min"):
      np.testing.assert_allclose(
        low_ap(d, rel, top_k=2, ties=ties, normalizer=normalizer, **extra)[0], [0.5], atol=ATOL
      )
  np.testing.assert_allclose(
    low_ap(d, rel, top_k=2, ties="index", normalizer="retrieved", **extra)[0], [1.0], atol=ATOL
  )
  # [irr, rel, rel] at top_k = 1 retrieves nothing relevant: "retrieved" is undefined (0).
  ap, ok = low_ap(
    d, jnp.asarray([[False, True, True]]), top_k=1, ties="index", normalizer="retrieved", **extra
  )
  assert ap.tolist() == [0.0] and ok.tolist() == [False]


@pytest.mark.parametrize("kind", ["int", "float"])
def test_hand_worked_tie_aware_average_precision(kind):
  # Distances [0, 0, 1], relevance [rel, irr, rel]. Orders of the tie: [rel, irr, rel] gives
  # (1 + 2/3)/2 = 5/6, [irr, rel, rel] gives (1/2 + 2/3)/2 = 7/12; the mean is 17/24.
  # Index ties keep item 0 first: 5/6. AP@1 ("min", normaliser 1): E[rel at rank 1] = 1/2.
  d, extra = as_distances([[0, 0, 1], [1, 0, 0]], kind, 1)
  rel = jnp.asarray([[True, False, True], [True, False, True]])
  # Second row: item 0 alone at distance 1 after the tie {1: irr, 2: rel}: orders
  # [irr, rel, rel] -> (1/2 + 2/3)/2 = 7/12 and [rel, irr, rel] -> (1 + 2/3)/2 = 5/6.
  # Index order is [1, 2, 0] = [irr, rel, rel]: 7/12.
  ap, ok = low_ap(d, rel, ties="aware", **extra)
  np.testing.assert_allclose(ap, [17 / 24, 17 / 24], atol=ATOL)
  np.testing.assert_allclose(low_ap(d, rel, ties="index", **extra)[0], [5 / 6, 7 / 12], atol=ATOL)
  np.testing.assert_allclose(
    low_ap(d, rel, top_k=1, ties="aware", normalizer="min", **extra)[0], [0.5, 0.5], atol=ATOL
  )


def test_hand_worked_ndcg():
  # Grades [2, 0, 1] at distances 0, 1, 2. exp: DCG@3 = 3 + 0 + 1/log2(4) = 3.5,
  # IDCG@3 = 3 + 1/log2(3). linear: 2.5 / (2 + 1/log2(3)). DCG@1 = IDCG@1: NDCG@1 = 1.
  # With distances [0, 0, 1] (ranks 1, 2 tied), exp, k = 1: E[gain] = (3 + 0)/2 over 3 = 0.5.
  d = jnp.asarray([[0, 1, 2], [0, 0, 1]], jnp.int32)
  grades = jnp.asarray([[2, 0, 1], [2, 0, 1]], jnp.int32)
  value, ok = low_ndcg(d, grades, k=3, ties="index", gain="exp", max_distance=2)
  np.testing.assert_allclose(value[0], 3.5 / (3 + 1 / math.log2(3)), atol=ATOL)
  value, _ = low_ndcg(d, grades, k=3, ties="index", gain="linear", max_distance=2)
  np.testing.assert_allclose(value[0], 2.5 / (2 + 1 / math.log2(3)), atol=ATOL)
  value, _ = low_ndcg(d, grades, k=1, ties="aware", gain="exp", max_distance=2)
  np.testing.assert_allclose(value, [1.0, 0.5], atol=ATOL)
  # Nothing relevant: IDCG = 0, undefined.
  value, ok = low_ndcg(d, jnp.zeros_like(grades), k=3, ties="aware", gain="exp", max_distance=2)
  assert value.tolist() == [0.0, 0.0] and ok.tolist() == [False, False]


def test_hand_worked_precision_recall_at_k():
  # Items at distances [0, 0, 0, 1] with classes [a, b, b, a], query class a (R = 2).
  # Tie-aware: E[hits@2] = 2 * 1/3, so P@2 = 1/3 and R@2 = 1/3; index order: P@2 = 1/2.
  # At k = 4 everything is retrieved: P@4 = 2/4, R@4 = 1.
  qc, dc = codes_at(4, [0, 0, 0, 1])
  ql, dl = np.array([0], np.int32), np.array([0, 1, 1, 0], np.int32)
  np.testing.assert_allclose(
    metrics.precision_at_k(qc, dc, ql, dl, [2, 4], ties="aware"), [1 / 3, 1 / 2], atol=ATOL
  )
  np.testing.assert_allclose(
    metrics.recall_at_k(qc, dc, ql, dl, [2, 4], ties="aware"), [1 / 3, 1.0], atol=ATOL
  )
  np.testing.assert_allclose(
    metrics.precision_at_k(qc, dc, ql, dl, [2, 4], ties="index"), [1 / 2, 1 / 2], atol=ATOL
  )


def test_hand_worked_radius_and_f1():
  # 4-bit codes at distances [0, 1, 1, 2, 4], classes [a, a, b, a, b], query class a (R = 3).
  # Radius 1: ball {0, 1, 2}, 2 relevant: precision 2/3, recall 2/3, F1 2/3.
  # Radius 0: ball {0}: precision 1, recall 1/3, F1 = 2 (1)(1/3) / (4/3) = 1/2.
  # Buckets visited by radius r: 1, 1 + 4, 1 + 4 + 6, 15, 16.
  qc, dc = codes_at(4, [0, 1, 1, 2, 4])
  ql, dl = np.array([0], np.int32), np.array([0, 0, 1, 0, 1], np.int32)
  p, r = metrics.precision_recall_at_radius(qc, dc, ql, dl, 1)
  assert float(p) == pytest.approx(2 / 3, abs=ATOL) and float(r) == pytest.approx(2 / 3, abs=ATOL)
  curve = metrics.f1_bucket_curve(qc, dc, ql, dl)
  np.testing.assert_array_equal(np.asarray(curve["buckets"]), [1, 5, 11, 15, 16])
  np.testing.assert_allclose(np.asarray(curve["f1"])[:2], [1 / 2, 2 / 3], atol=ATOL)
  # Radius 2: {0, 1, 2, 3}, 3 relevant: precision 3/4, recall 1; radius 4: 3/5, 1.
  np.testing.assert_allclose(
    np.asarray(curve["precision"]), [1, 2 / 3, 3 / 4, 3 / 4, 3 / 5], atol=ATOL
  )
  np.testing.assert_allclose(np.asarray(curve["recall"]), [1 / 3, 2 / 3, 1, 1, 1], atol=ATOL)


def test_hand_worked_deephash_topk_minus_one():
  # One query, ranking [rel, irr, rel] (distances 0, 1, 2). topk = -1 slices gnd[0:-1] =
  # [rel, irr]: AP = 1/1. Whole list (topk = 3): (1/1 + 2/3) / 2 = 5/6. A second query with
  # nothing relevant adds 0 but counts in the division by 2 queries.
  qc, dc = codes_at(4, [0, 1, 2])
  qc = np.concatenate([qc, qc])
  ql, dl = np.array([0, 5], np.int32), np.array([0, 1, 0], np.int32)
  assert metrics.deephash_map(qc, dc, ql, dl, -1) == pytest.approx(1 / 2, abs=ATOL)
  assert metrics.deephash_map(qc, dc, ql, dl, 3) == pytest.approx(5 / 12, abs=ATOL)
  assert ref.deephash_calc_top_map(qc, dc, ql, dl, -1) == pytest.approx(1 / 2)
  assert ref.deephash_calc_top_map(qc, dc, ql, dl, 3) == pytest.approx(5 / 12)


# ------------------------------------------------------------------------------------------
# Tie-aware AP is the mean over all orders of the ties


@pytest.mark.parametrize(
  "which,kind", grid(itertools.product((0, 1), DIST_KINDS), [(0, "int"), (1, "float")])
)
def test_tie_aware_ap_equals_mean_over_orders(which, kind):
  d = ENUM_DISTANCES[which]
  n = len(d)
  rel = enum_relevance(n)
  dists, extra = as_distances(np.tile(d, (len(rel), 1)), kind, int(d.max()))
  for normalizer in ("relevant", "min"):
    for top_k in [None, *range(1, n + 1)]:
      want = [ref.ap_by_enumeration(d, r, top_k, normalizer) for r in rel]
      ap, ok = low_ap(
        dists, jnp.asarray(rel), top_k=top_k, ties="aware", normalizer=normalizer, **extra
      )
      np.testing.assert_allclose(
        ap, [a for a, _ in want], atol=ATOL, err_msg=f"top_k={top_k}, {normalizer}"
      )
      np.testing.assert_array_equal(ok, [o for _, o in want])


def test_tie_aware_ndcg_equals_mean_over_orders():
  d = ENUM_DISTANCES[1]
  grades = np.random.default_rng(4).integers(0, 4, (6, len(d)))
  grades[0] = 0
  for k, gain in ((1, "exp"), (5, "linear"), (9, "exp")):
    want = [ref.ndcg_by_enumeration(d, g, k, gain) for g in grades]
    value, ok = low_ndcg(
      jnp.asarray(np.tile(d, (6, 1)), jnp.int32),
      jnp.asarray(grades, jnp.int32),
      k=k,
      ties="aware",
      gain=gain,
      max_distance=2,
    )
    np.testing.assert_allclose(value, [v for v, _ in want], atol=ATOL, err_msg=f"k={k}")
    np.testing.assert_array_equal(ok, [o for _, o in want])


# ------------------------------------------------------------------------------------------
# Every convention, against the reference, on data with many ties


@pytest.mark.parametrize(
  "kind,ties,normalizer,top_k",
  grid(
    [(kind, *c) for kind in DIST_KINDS for c in AP_CONVENTIONS],
    [("int", *c) for c in DEFAULT_AP]
    + [("int_no_max", *c) for c in DEFAULT_AP[::5]]
    + [("float", *c) for c in DEFAULT_AP[1::5]],
  ),
)
def test_average_precision_matches_reference(kind, ties, normalizer, top_k):
  c = case("class")
  k = resolve_k(top_k, c.d.shape[1])
  want_ap, want_ok = c.profile.ap(k, ties, normalizer)
  dists, extra = as_distances(c.d, kind, c.data.query_codes.shape[1])
  ap, ok = low_ap(dists, jnp.asarray(c.rel), top_k=k, ties=ties, normalizer=normalizer, **extra)
  np.testing.assert_array_equal(ok, want_ok)
  np.testing.assert_allclose(ap, want_ap, atol=ATOL)


@pytest.mark.parametrize("ties,normalizer,top_k", grid(AP_CONVENTIONS, DEFAULT_AP[2::4]))
def test_average_precision_weighted_matches_reference(ties, normalizer, top_k):
  c = case("weighted")
  k = resolve_k(top_k, c.d.shape[1])
  want_ap, want_ok = c.profile.ap(k, ties, normalizer)
  ap, ok = low_ap(
    jnp.asarray(c.d, jnp.float32), jnp.asarray(c.rel), top_k=k, ties=ties, normalizer=normalizer
  )
  np.testing.assert_array_equal(ok, want_ok)
  np.testing.assert_allclose(ap, want_ap, atol=ATOL)


def test_average_precision_rows_are_independent():
  # One chunk of q queries gives what q one-query calls give; and jit changes nothing.
  c = case("class")
  dists, rel = jnp.asarray(c.d, jnp.int32), jnp.asarray(c.rel)
  kw = dict(top_k=10, ties="aware", normalizer="min", max_distance=8)
  whole = low_ap(dists, rel, **kw)
  rows = [low_ap(dists[i : i + 1], rel[i : i + 1], **kw) for i in range(5)]
  np.testing.assert_allclose(whole[0][:5], np.concatenate([r[0] for r in rows]), atol=1e-7)
  jitted = jax.jit(functools.partial(metrics.average_precision, **kw))(dists, rel)
  np.testing.assert_allclose(np.asarray(jitted[0]), whole[0], atol=1e-7)
  np.testing.assert_array_equal(np.asarray(jitted[1]), whole[1])


@pytest.mark.parametrize(
  "name,ties,normalizer,top_k,no_relevant",
  grid(
    [
      (name, *c, rule)
      for name in ("class", "multi")
      for c in AP_CONVENTIONS
      for rule in ("zero", "skip")
    ],
    # The plumbing (labels -> relevance, conventions, the mean) on both data sets; the
    # per-query AP of every convention is the low-level test's job.
    [
      ("class", "aware", "relevant", None, "zero"),
      ("multi", "aware", "min", 10, "skip"),
      ("class", "aware", "retrieved", None, "skip"),
      ("multi", "index", "relevant", "n", "zero"),
      ("class", "index", "min", 1, "skip"),
      ("multi", "index", "retrieved", "n-1", "zero"),
    ],
  ),
)
def test_mean_average_precision_matches_reference(name, ties, normalizer, top_k, no_relevant):
  c = case(name)
  k = resolve_k(top_k, c.d.shape[1])
  want = ref.mean_over_queries(*c.profile.ap(k, ties, normalizer), no_relevant)
  got = metrics.mean_average_precision(
    *c.data, top_k=k, ties=ties, normalizer=normalizer, no_relevant=no_relevant
  )
  assert float(got) == pytest.approx(want, abs=ATOL)


@pytest.mark.parametrize(
  "name,top_k,ties,normalizer,no_relevant",
  grid(
    itertools.product(
      ("weighted", "multicode"),
      (None, 10),
      ("aware", "index"),
      ("relevant", "min"),
      ("zero", "skip"),
    ),
    [
      ("weighted", 10, "aware", "min", "skip"),
      ("weighted", None, "index", "relevant", "zero"),
      ("multicode", 10, "aware", "relevant", "zero"),
      ("multicode", None, "index", "min", "skip"),
    ],
  ),
)
def test_mean_average_precision_weighted_and_multicode(name, top_k, ties, normalizer, no_relevant):
  c = case(name)
  want = ref.mean_over_queries(*c.profile.ap(top_k, ties, normalizer), no_relevant)
  got = metrics.mean_average_precision(
    *c.data,
    top_k=top_k,
    ties=ties,
    normalizer=normalizer,
    no_relevant=no_relevant,
    weights=c.weights,
    db_mask=c.db_mask,
  )
  assert float(got) == pytest.approx(want, abs=ATOL)


def test_weights_with_multicode_db_is_rejected():
  # The library does not combine weighted Hamming with multi-code items.
  c = case("multicode")
  with pytest.raises(ValueError, match="weights"):
    metrics.mean_average_precision(*c.data, weights=dyadic_weights(16), db_mask=c.db_mask)


def test_relevance_kinds_agree():
  c = case("class")
  data = c.data
  auto = metrics.mean_average_precision(*data, top_k=10)
  assert float(metrics.mean_average_precision(*data, top_k=10, relevance="same_class")) == (
    pytest.approx(float(auto), abs=ATOL)
  )
  # Class ids as one-hot rows: sharing a label is being in the same class.
  num = int(max(data.query_labels.max(), data.db_labels.max())) + 1
  onehot = data._replace(
    query_labels=np.eye(num, dtype=bool)[data.query_labels],
    db_labels=np.eye(num, dtype=bool)[data.db_labels],
  )
  assert float(metrics.mean_average_precision(*onehot, top_k=10)) == pytest.approx(
    float(auto), abs=ATOL
  )
  multi = case("multi").data
  assert float(metrics.mean_average_precision(*multi, relevance="share_label")) == pytest.approx(
    float(metrics.mean_average_precision(*multi)), abs=ATOL
  )


@pytest.mark.parametrize(
  "name,ties",
  grid(
    itertools.product(("class", "multi"), ("aware", "index")),
    [("class", "aware"), ("multi", "index")],
  ),
)
def test_precision_and_recall_at_k_match_reference(name, ties):
  c = case(name)
  n = c.d.shape[1]
  ks = [1, 5, 10, 100, n - 1, n]
  want_p = ref.precision_at_k(*c.data, ks, ties)
  np.testing.assert_allclose(
    np.asarray(metrics.precision_at_k(*c.data, ks, ties=ties)), want_p, atol=ATOL
  )
  for no_relevant in ("zero", "skip"):
    want_r = ref.recall_at_k(*c.data, ks, ties, no_relevant=no_relevant)
    got_r = metrics.recall_at_k(*c.data, ks, ties=ties, no_relevant=no_relevant)
    np.testing.assert_allclose(np.asarray(got_r), want_r, atol=ATOL, err_msg=no_relevant)


@pytest.mark.parametrize("average", ["query", "pooled"])
@pytest.mark.parametrize("name", ["class", "multi"])
def test_radius_metrics_match_reference(name, average):
  c = case(name)
  for empty, no_relevant in (("zero", "skip"), ("skip", "zero")):
    kw = dict(average=average, empty=empty, no_relevant=no_relevant)
    want = ref.pr_curve_by_radius(*c.data, **kw)
    got = metrics.pr_curve_by_radius(*c.data, **kw)
    np.testing.assert_array_equal(np.asarray(got["radius"]), want["radius"])
    np.testing.assert_allclose(
      np.asarray(got["precision"]), want["precision"], atol=ATOL, err_msg=str(kw)
    )
    np.testing.assert_allclose(
      np.asarray(got["recall"]), want["recall"], atol=ATOL, err_msg=str(kw)
    )
    for radius in (0, 2):
      p, r = metrics.precision_recall_at_radius(*c.data, radius, **kw)
      assert (float(p), float(r)) == pytest.approx(
        ref.precision_recall_at_radius(*c.data, radius, **kw), abs=ATOL
      ), (radius, kw)


@pytest.mark.parametrize("name", ["class", "multi"])
def test_f1_bucket_curve_matches_reference(name):
  c = case(name)
  want = ref.f1_bucket_curve(*c.data)
  got = metrics.f1_bucket_curve(*c.data)
  np.testing.assert_array_equal(np.asarray(got["buckets"]), want["buckets"])
  for key in ("precision", "recall", "f1"):
    np.testing.assert_allclose(np.asarray(got[key]), want[key], atol=ATOL, err_msg=key)


def test_f1_bucket_curve_with_every_small_ball_empty():
  # No database code within radius 1 of any query: the pooled precision there is 0/0,
  # counted 0, and F1 = 0 where P + R = 0.
  qc, dc = codes_at(6, [2, 3, 3, 6])
  ql, dl = np.array([0], np.int32), np.array([0, 1, 0, 0], np.int32)
  got = metrics.f1_bucket_curve(qc, dc, ql, dl)
  want = ref.f1_bucket_curve(qc, dc, ql, dl)
  for key in ("precision", "recall", "f1"):
    np.testing.assert_allclose(np.asarray(got[key]), want[key], atol=ATOL, err_msg=key)
  assert np.asarray(got["f1"])[:2].tolist() == [0.0, 0.0]


@pytest.mark.parametrize(
  "name,ties,gain,k",
  grid(
    itertools.product(
      ("multi", "weighted"), ("aware", "index"), ("exp", "linear"), (1, 10, 100, "n")
    ),
    [
      ("multi", "aware", "exp", 10),
      ("multi", "index", "linear", "n"),
      ("weighted", "aware", "linear", 100),
      ("weighted", "index", "exp", 1),
    ],
  ),
)
def test_ndcg_matches_reference(name, ties, gain, k):
  # Graded relevance from multi-hot labels (0..3 shared labels) and from class ids (0/1);
  # int Hamming distances, and float weighted ones.
  c = case(name)
  k = resolve_k(k, c.d.shape[1])
  grades = ref.relevance(c.data.query_labels, c.data.db_labels, "graded")
  want = ref.ndcg(c.d, grades, k, ties, gain)
  if c.weights is None:
    dists, extra = jnp.asarray(c.d, jnp.int32), {"max_distance": c.data.query_codes.shape[1]}
  else:
    dists, extra = jnp.asarray(c.d, jnp.float32), {}
  got = low_ndcg(dists, jnp.asarray(grades, jnp.int32), k=k, ties=ties, gain=gain, **extra)
  np.testing.assert_array_equal(got[1], want[1])
  np.testing.assert_allclose(got[0], want[0], atol=ATOL)


@pytest.mark.parametrize(
  "name,ties,gain,k",
  grid(
    itertools.product(("class", "multi"), ("aware", "index"), ("exp", "linear"), (1, 50, "n")),
    [("class", "aware", "exp", "n"), ("multi", "index", "linear", 50)],
  ),
)
def test_ndcg_at_k_matches_reference(name, ties, gain, k):
  c = case(name)
  k = resolve_k(k, c.d.shape[1])
  want = ref.ndcg_at_k(*c.data, k, ties, gain)
  got = metrics.ndcg_at_k(*c.data, k, ties=ties, gain=gain)
  assert float(got) == pytest.approx(want, abs=ATOL)


@pytest.mark.parametrize(
  "name,topk",
  grid(
    itertools.product(("class", "multi"), (-1, 1, 10, 100, "n")),
    [("class", -1), ("multi", 10), ("multi", "n")],
  ),
)
def test_deephash_map_matches_toolbox_transcription(name, topk):
  c = case(name)
  topk = resolve_k(topk, c.d.shape[1])
  want = ref.deephash_calc_top_map(*c.data, topk)
  assert float(metrics.deephash_map(*c.data, topk)) == pytest.approx(want, abs=1e-12)


def make_toolbox_tied_data(num_bits, multilabel, seed=9, q=20, n=3000) -> Data:
  """Uniform 4- or 8-bit codes: hundreds of items share each distance, inside every top k."""
  rng = np.random.default_rng(seed)
  query_codes, db_codes = _signs(rng, (q, num_bits)), _signs(rng, (n, num_bits))
  if multilabel:
    return Data(query_codes, db_codes, rng.random((q, 6)) < 0.2, rng.random((n, 6)) < 0.2)
  return Data(
    query_codes,
    db_codes,
    rng.integers(0, 5, q).astype(np.int32),
    rng.integers(0, 5, n).astype(np.int32),
  )


@pytest.mark.parametrize(
  "num_bits,multilabel,topk",
  [(4, False, 100), (8, False, 100), (8, True, -1), (8, False, 3000), (4, True, 5000)],
)
def test_deephash_map_equals_toolbox_on_heavily_tied_codes(num_bits, multilabel, topk):
  # AP@k depends on the order of the tied items inside the top k: the preset must order
  # them as the toolbox's default np.argsort does, not by index (which differs here).
  data = make_toolbox_tied_data(num_bits, multilabel)
  want = ref.deephash_calc_top_map(*data, topk)
  by_index = ref.deephash_calc_top_map(*data, topk, argsort_kind="stable")
  assert abs(want - by_index) > 1e-4  # the data tells the two tie orders apart
  assert metrics.deephash_map(*data, topk) == pytest.approx(want, abs=1e-12)
  assert metrics.deephash_map(*data, topk, query_chunk=7) == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("multilabel,topk", [(False, -1), (False, 17), (True, 3)])
def test_deephash_map_matches_plain_argsort_on_tie_free_data(multilabel, topk):
  # 17 database items: topk = 17 is the whole list, -1 drops the last.
  data = make_tie_free_data(multilabel)
  want = ref.deephash_calc_top_map(*data, topk)
  assert float(metrics.deephash_map(*data, topk)) == pytest.approx(want, abs=ATOL)


def test_docstring_example_of_mean_average_precision_runs():
  # The example in the docstring, run by doctest so that it cannot rot.
  runner = doctest.DocTestRunner()
  for test in doctest.DocTestFinder().find(
    metrics.mean_average_precision, "mean_average_precision", globs={}
  ):
    runner.run(test)
  assert runner.tries > 0 and runner.failures == 0, "see the doctest report above"


# ------------------------------------------------------------------------------------------
# Edge cases


@pytest.mark.parametrize("ties", ["aware", "index"])
def test_relevant_item_ranked_last(ties):
  # Nine items at distances 0..8, only the last relevant: AP = 1/9 (precision at rank 9).
  # All nine tied, one relevant: tie-aware AP = E[1/rank] = (1 + 1/2 + ... + 1/9) / 9;
  # by index, the relevant item (index 8) is last: 1/9.
  qc, dc = codes_at(8, list(range(9)))
  ql, dl = np.array([1], np.int32), np.array([0] * 8 + [1], np.int32)
  assert float(metrics.mean_average_precision(qc, dc, ql, dl, ties=ties)) == pytest.approx(
    1 / 9, abs=ATOL
  )
  tied = jnp.zeros((1, 9), jnp.int32)
  rel = jnp.asarray(dl[None] == 1)
  harmonic = sum(1 / j for j in range(1, 10)) / 9
  want = harmonic if ties == "aware" else 1 / 9
  np.testing.assert_allclose(low_ap(tied, rel, ties=ties, max_distance=8)[0], [want], atol=ATOL)
  # AP@8 misses it: 0, still defined for "relevant" and "min".
  ap, ok = low_ap(jnp.arange(9, dtype=jnp.int32)[None], rel, top_k=8, ties=ties, max_distance=8)
  assert ap.tolist() == [0.0] and ok.tolist() == [True]


@pytest.mark.parametrize("ties", ["aware", "index"])
def test_all_items_relevant(ties):
  # Every precision is 1: AP = 1; AP@k over R = n is k/n; over min(R, k) = k it is 1.
  c = case("class")
  n = c.d.shape[1]
  dists = jnp.asarray(c.d, jnp.int32)
  rel = jnp.ones(c.d.shape, bool)
  np.testing.assert_allclose(low_ap(dists, rel, ties=ties, max_distance=8)[0], 1.0, atol=ATOL)
  np.testing.assert_allclose(
    low_ap(dists, rel, top_k=10, ties=ties, max_distance=8)[0], 10 / n, atol=ATOL
  )
  np.testing.assert_allclose(
    low_ap(dists, rel, top_k=10, ties=ties, normalizer="min", max_distance=8)[0], 1.0, atol=ATOL
  )
  data = c.data._replace(
    query_labels=np.zeros_like(c.data.query_labels), db_labels=np.zeros_like(c.data.db_labels)
  )
  assert float(metrics.mean_average_precision(*data, ties=ties)) == pytest.approx(1.0, abs=ATOL)
  np.testing.assert_allclose(
    np.asarray(metrics.precision_at_k(*data, [1, 7, n], ties=ties)), 1.0, atol=ATOL
  )


@pytest.mark.parametrize("normalizer,ties", [("relevant", "aware"), ("min", "index")])
def test_top_k_n_equals_whole_ranking(normalizer, ties):
  data = case("multi").data
  n = data.db_codes.shape[0]
  whole = metrics.mean_average_precision(*data, ties=ties, normalizer=normalizer)
  at_n = metrics.mean_average_precision(*data, top_k=n, ties=ties, normalizer=normalizer)
  assert float(at_n) == pytest.approx(float(whole), abs=ATOL)


def test_no_relevant_rules_when_no_query_has_a_relevant_item():
  data = case("class").data
  data = data._replace(query_labels=np.full_like(data.query_labels, 99))
  assert float(metrics.mean_average_precision(*data, no_relevant="zero")) == 0.0
  assert math.isnan(float(metrics.mean_average_precision(*data, no_relevant="skip")))
  assert math.isnan(float(np.asarray(metrics.recall_at_k(*data, [5], no_relevant="skip"))[0]))


def test_cutoff_past_the_database_is_an_error():
  # One rule for every cut-off: an int in [1, n]. top_k=1000 on 40 items used to mean the
  # whole ranking in mAP while precision_at_k refused k > n.
  data = make_class_data(q=6, n=40)
  want = r"in \[1, 40\] \(the database holds 40 items\); got 1000"
  with pytest.raises(
    ValueError, match=r"top_k must be None \(the whole ranking\) or a Python int " + want
  ):
    metrics.mean_average_precision(*data, top_k=1000)
  with pytest.raises(ValueError, match=r"top_k must be None .*" + want):
    metrics.average_precisions(*data, top_k=1000, ties="index")
  with pytest.raises(ValueError, match=r"ks must be a Python int " + want):
    metrics.precision_at_k(*data, [5, 1000])
  with pytest.raises(ValueError, match=r"k must be a Python int " + want):
    metrics.ndcg_at_k(*data, 1000)
  dists, rel = jnp.zeros((2, 5), jnp.int32), jnp.ones((2, 5), bool)
  with pytest.raises(ValueError, match=r"top_k must be None .*\[1, 5\].*got 6"):
    metrics.average_precision(dists, rel, top_k=6)
  # k = n is the whole ranking, for both.
  assert metrics.mean_average_precision(*data, top_k=40) == pytest.approx(
    metrics.mean_average_precision(*data), abs=ATOL
  )
  np.testing.assert_allclose(
    metrics.precision_at_k(*data, 40),
    [np.mean(data.query_labels[:, None] == data.db_labels[None, :])],
    atol=ATOL,
  )


def test_empty_inputs_give_empty_results_or_name_the_argument():
  # Per-query results are empty for no queries; a mean over queries needs one query, and
  # every code-level metric a database item.
  qc, dc, ql, dl = make_class_data(q=6, n=40)
  ap, defined = metrics.average_precisions(qc[:0], dc, ql[:0], dl, top_k=5)
  assert ap.shape == defined.shape == (0,)
  dists, rel = jnp.zeros((0, 5), jnp.int32), jnp.zeros((0, 5), bool)
  assert low_ap(dists, rel, top_k=2, max_distance=8)[0].shape == (0,)
  assert low_ndcg(dists, rel.astype(jnp.int32), k=2, max_distance=8)[0].shape == (0,)
  assert metrics.hits_at_k(dists, rel, (1, 2)).shape == (0, 2)
  means = [
    lambda *a: metrics.mean_average_precision(*a),
    lambda *a: metrics.precision_at_k(*a, 1),
    lambda *a: metrics.recall_at_k(*a, 1),
    lambda *a: metrics.ndcg_at_k(*a, 1),
    lambda *a: metrics.pr_curve_by_radius(*a),
    lambda *a: metrics.f1_bucket_curve(*a),
    lambda *a: metrics.deephash_map(*a, 10),
  ]
  for mean in means:
    with pytest.raises(ValueError, match=r"query_codes must hold at least one query.*\(0, 8\)"):
      mean(qc[:0], dc, ql[:0], dl)
    with pytest.raises(ValueError, match=r"db_codes must hold at least one database item"):
      mean(qc, dc[:0], ql, dl[:0])
  with pytest.raises(ValueError, match=r"db_codes must hold at least one database item"):
    metrics.average_precisions(qc, dc[:0], ql, dl[:0])


# ------------------------------------------------------------------------------------------
# Bad input


def _bad_calls():
  data = make_class_data(q=6, n=40)
  multi = make_multilabel_data(q=6, n=40)
  qc, dc, ql, dl = data
  mp = metrics.mean_average_precision
  dists = jnp.zeros((2, 5), jnp.int32)
  rel = jnp.zeros((2, 5), bool)
  return [
    ("query_codes|db_codes", lambda: mp(qc, dc[:, :4], ql, dl)),
    ("query_codes", lambda: mp(np.zeros_like(qc), dc, ql, dl)),
    ("query_labels", lambda: mp(qc, dc, ql[:-1], dl)),
    ("db_labels", lambda: mp(qc, dc, ql, dl[:-1])),
    ("query_labels", lambda: mp(qc, dc, ql[:, None, None], dl)),
    (
      "labels",
      lambda: mp(multi.query_codes, multi.db_codes, multi.query_labels[:, :-1], multi.db_labels),
    ),
    ("ties", lambda: mp(qc, dc, ql, dl, ties="random")),
    ("normalizer", lambda: mp(qc, dc, ql, dl, normalizer="mean")),
    ("no_relevant", lambda: mp(qc, dc, ql, dl, no_relevant="nan")),
    ("relevance", lambda: mp(qc, dc, ql, dl, relevance="similar")),
    # NDCG's graded relevance is not a rule of relevant / not relevant items.
    ("relevance", lambda: mp(qc, dc, ql, dl, relevance="graded")),
    ("relevance", lambda: metrics.precision_at_k(qc, dc, ql, dl, [1], relevance="graded")),
    ("relevance", lambda: metrics.pr_curve_by_radius(qc, dc, ql, dl, relevance="graded")),
    ("normalizer", lambda: mp(qc, dc, ql, dl, top_k=10, ties="aware", normalizer="retrieved")),
    ("top_k", lambda: mp(qc, dc, ql, dl, top_k=0)),
    ("weights", lambda: mp(qc, dc, ql, dl, weights=np.ones(5, np.float32))),
    ("db_mask", lambda: mp(qc, np.stack([dc, dc], 1), ql, dl, db_mask=np.ones((40, 3), bool))),
    (
      "normalizer",
      lambda: metrics.average_precision(dists, rel, top_k=2, ties="aware", normalizer="retrieved"),
    ),
    ("ties", lambda: metrics.average_precision(dists, rel, ties="random")),
    ("relevance|distances", lambda: metrics.average_precision(dists, rel[:, :4])),
    ("ties", lambda: metrics.precision_at_k(qc, dc, ql, dl, [1], ties="random")),
    ("no_relevant", lambda: metrics.recall_at_k(qc, dc, ql, dl, [1], no_relevant="nan")),
    ("average", lambda: metrics.precision_recall_at_radius(qc, dc, ql, dl, 1, average="mean")),
    ("empty", lambda: metrics.precision_recall_at_radius(qc, dc, ql, dl, 1, empty="nan")),
    ("gain", lambda: metrics.ndcg_at_k(qc, dc, ql, dl, 5, gain="log")),
    ("gain", lambda: metrics.ndcg(dists, rel.astype(jnp.int32), k=2, gain="log")),
    ("ties", lambda: metrics.ndcg(dists, rel.astype(jnp.int32), k=2, ties="random")),
    ("query_codes|db_codes", lambda: metrics.deephash_map(qc, dc[:, :4], ql, dl, 10)),
  ]


@pytest.mark.parametrize("index", range(len(_bad_calls())))
def test_bad_input_raises_naming_the_argument(index):
  match, call = _bad_calls()[index]
  with pytest.raises(ValueError, match=match):
    call()


@pytest.mark.parametrize("values", ["bool", "float"])
def test_tie_groups_leave_out_distances_past_the_largest(values, rng):
  # Items holding no code have distances past K (the largest int32 from
  # multi_code_hamming): in no group, in no other query's row either.
  from jhash.metrics import _groups

  d = rng.integers(0, 9, size=(5, 60)).astype(np.int32)
  far = rng.random((5, 60)) < 0.3
  d_far = np.where(far, np.array([9, 13, np.iinfo(np.int32).max])[rng.integers(0, 3, (5, 60))], d)
  v = rng.random((5, 60)) < 0.5
  v = v if values == "bool" else v * rng.random((5, 60)).astype(np.float32)
  got = _groups.groups_by_count(jnp.asarray(d_far), jnp.asarray(v), 8)
  for a in range(5):
    keep = ~far[a]
    np.testing.assert_array_equal(got.size[a], np.bincount(d[a][keep], minlength=9))
    np.testing.assert_allclose(
      got.hits[a], np.bincount(d[a][keep], weights=v[a][keep], minlength=9), rtol=1e-6
    )


def test_harmonic_difference_equals_exact_float64_sums():
  # H(b) - H(a) = sum_{i=a+1..b} 1/i, summed exactly in float64: small a, a up to 10^6,
  # gaps 0 to 1000. float32 keeps it to a few 1e-7 relative (the AP tests' 1e-5 would not
  # see a wrong series term of about 7e-6).
  from jhash.metrics import _groups

  rng = np.random.default_rng(0)
  starts = np.concatenate([np.arange(60), rng.integers(0, 100_000, 200), [999_999]])
  pairs = np.array([(a, a + d) for a in starts for d in (0, 1, 2, 7, 40, 1000)])
  got = np.asarray(_groups.harmonic_difference(jnp.asarray(pairs[:, 0]), jnp.asarray(pairs[:, 1])))
  want = np.array([np.sum(1.0 / np.arange(a + 1, b + 1, dtype=np.float64)) for a, b in pairs])
  np.testing.assert_array_equal(got[want == 0], 0.0)
  np.testing.assert_allclose(got[want > 0], want[want > 0], rtol=1e-6)


def test_items_holding_no_code_rank_after_items_at_distance_k():
  # The whole ranking (k = n) by the (distance, index) sort key: an item holding no code
  # (the largest int32, past max_distance K = 4) at index 0 goes after the items at
  # distance exactly K, however low its index; it is never retrieved, so the AP counts only
  # the relevant item at index 4, ranked fourth: 1 / 4.
  from jhash.metrics import _ap

  distances = jnp.asarray([[np.iinfo(np.int32).max, 1, 4, 0, 4]], jnp.int32)
  order = _ap.ranked_positions(distances, 5, max_distance=4)
  np.testing.assert_array_equal(order, [[3, 1, 2, 4, 0]])
  relevant = jnp.asarray([[True, False, False, False, True]])
  total, hits = _ap._index_sum(distances, relevant, 5, 4)
  np.testing.assert_allclose(total, [0.25])
  np.testing.assert_array_equal(hits, [1.0])
