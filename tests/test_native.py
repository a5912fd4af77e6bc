"""The native CPU kernels (jhash.native) against NumPy references and the array code."""

import os
import pathlib
import platform
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import _metrics_reference as ref
from _search_reference import np_popcount_dist
from _search_reference import np_topk
from _search_reference import random_codes
from jhash import codes as jcodes
from jhash import native
from jhash import metrics
from jhash import search
from jhash.metrics import _native_rank
from jhash.metrics import _ranking
from jhash.search import _native_topk

pytestmark = pytest.mark.skipif(not native.enabled(), reason="native kernels not built here")


np_dist = np_popcount_dist
codes = random_codes


# ----------------------------------------------------------------------------------------------
# Top-k.


# 1-4 64-bit words are unrolled kernels, 5 (9 and 10 uint32 words) the loop over any length;
# odd word counts end in a half word.
@pytest.mark.parametrize("words", [1, 2, 3, 4, 7, 9, 10])
@pytest.mark.parametrize("k", [1, 37, 600])
def test_topk_equals_reference(words, k, rng):
  db = codes(rng, 2500, words)
  q = np.concatenate([codes(rng, 19, words), db[[3, 2499]], ~db[[10]]])  # 22 queries
  got = _native_topk.topk(jnp.asarray(q), jnp.asarray(db), k, 32 * words)
  want = np_topk(np_dist(q, db), k)
  np.testing.assert_array_equal(got[0], want[0])
  np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("k", [1, 300, 4000])
def test_topk_heavy_ties_go_to_the_smaller_index(k, rng):
  # 8-bit codes from a pool of 25: every distance is shared by hundreds of items,
  # and k = 300 > 256 makes the buffer shrink again and again inside tied runs.
  db = codes(rng, 4000, 1, pool=25, mask=0xFF)
  q = codes(rng, 70, 1, pool=40, mask=0xFF)  # 70: a partial block of queries
  got = _native_topk.topk(jnp.asarray(q), jnp.asarray(db), k, 8)
  want = np_topk(np_dist(q, db), k)
  np.testing.assert_array_equal(got[0], want[0])
  np.testing.assert_array_equal(got[1], want[1])


def test_topk_with_k_the_whole_database_splits_queries_into_smaller_tasks(rng):
  # k = n = 70,000: buffers of 140,000 keys per query, so 14 queries per task, not 64.
  db = codes(rng, 70_000, 1, pool=5_000, mask=0xFFFF)
  q = codes(rng, 30, 1, pool=50, mask=0xFFFF)
  got = _native_topk.topk(jnp.asarray(q), jnp.asarray(db), 70_000, 32)
  want = np_topk(np_dist(q, db), 70_000)
  np.testing.assert_array_equal(got[0], want[0])
  np.testing.assert_array_equal(got[1], want[1])


def test_topk_rows_past_num_valid_are_padding(rng):
  db = codes(rng, 40, 2)
  q = codes(rng, 3, 2)
  d, i = _native_topk.topk(jnp.asarray(q), jnp.asarray(db), 8, 64, num_valid=jnp.int32(5))
  want = np_topk(np_dist(q, db[:5]), 5)
  np.testing.assert_array_equal(np.asarray(d)[:, :5], want[0])
  np.testing.assert_array_equal(np.asarray(i)[:, :5], want[1])
  np.testing.assert_array_equal(np.asarray(d)[:, 5:], 65)  # the sentinel, past every distance
  assert (np.asarray(i)[:, 5:] >= 5).all()


def test_topk_native_equals_array_code_under_jit_and_vmap(rng):
  db = jnp.asarray(codes(rng, 3000, 2, pool=300))
  qs = jnp.asarray(codes(rng, 4 * 9, 2, pool=300).reshape(4, 9, 2))

  def both(q):
    a = search.hamming_topk_unchecked(q, db, 20, 64, method="native")
    b = search.hamming_topk_unchecked(q, db, 20, 64, method="xor")
    return a, b

  (ad, ai), (bd, bi) = jax.jit(jax.vmap(both))(qs)
  assert ad.shape == (4, 9, 20)
  np.testing.assert_array_equal(ad, bd)
  np.testing.assert_array_equal(ai, bi)


def test_auto_uses_the_native_kernel_on_the_cpu(rng):
  q, db = jnp.asarray(codes(rng, 3, 2)), jnp.asarray(codes(rng, 100, 2))
  text = jax.jit(lambda a, b: search.hamming_topk_unchecked(a, b, 5, 64)).lower(q, db).as_text()
  assert "jhash_hamming_topk" in text
  text = (
    jax.jit(lambda a, b: search.hamming_topk_unchecked(a, b, 5, 64, method="xor"))
    .lower(q, db)
    .as_text()
  )
  assert "jhash_hamming_topk" not in text


def np_multi_dist(q, db, mask, num_bits):
  """Least distance over the held codes; num_bits + 1 for an item holding none."""
  d = np.stack([np_dist(q, db[:, j]) for j in range(db.shape[1])], axis=-1)
  return np.where(mask[None], d, num_bits + 1).min(-1)


# 1 and 2 words are unrolled kernels, 5 words the generic loop; 3 codes per item,
# some items holding one, some none (possible only with a traced mask), many ties.
@pytest.mark.parametrize("words", [1, 2, 5])
@pytest.mark.parametrize("k", [1, 40, 900])
def test_multi_code_topk_equals_reference(words, k, rng):
  db = codes(rng, 900 * 3, words, pool=200).reshape(900, 3, words)
  mask = rng.random((900, 3)) < 0.5
  mask[::7] = False  # items holding no code
  q = np.concatenate([codes(rng, 66, words), db[[4, 5], 0]])
  got = _native_topk.topk(jnp.asarray(q), jnp.asarray(db), k, 32 * words, db_mask=jnp.asarray(mask))
  want = np_topk(np_multi_dist(q, db, mask, 32 * words), k)
  np.testing.assert_array_equal(got[0], want[0])
  np.testing.assert_array_equal(got[1], want[1])
  if k == 900:  # the items holding no code come last, by index, at num_bits + 1
    assert (np.asarray(got[0])[:, -(900 // 7 + 1) :] == 32 * words + 1).all()


def test_multi_code_topk_native_equals_array_code(rng, monkeypatch):
  db = codes(rng, 2000 * 2, 1, pool=500, mask=0xFFF).reshape(2000, 2, 1)
  mask = rng.random((2000, 2)) < 0.7
  mask[:, 0] |= ~mask.any(axis=1)
  q = codes(rng, 50, 1, mask=0xFFF)
  f = jax.jit(lambda a, b, c: search.multi_code_topk_unchecked(a, b, c, 64, num_bits=12))
  assert "jhash_hamming_topk" in f.lower(q, db, mask).as_text()
  by_kernel = f(q, db, mask)
  jax.clear_caches()
  monkeypatch.setattr(native, "enabled", lambda: False)
  g = jax.jit(lambda a, b, c: search.multi_code_topk_unchecked(a, b, c, 64, num_bits=12))
  assert "jhash_hamming_topk" not in g.lower(q, db, mask).as_text()
  array_code = g(q, db, mask)
  jax.clear_caches()
  np.testing.assert_array_equal(by_kernel[0], array_code[0])
  np.testing.assert_array_equal(by_kernel[1], array_code[1])


# ----------------------------------------------------------------------------------------------
# Ranking metrics.

LABEL_CASES = ["class ids", "share_label", "same_class"]


def _labels(rng, case, q, n):
  """Query and database labels of one case (multi-hot over 40 labels: two words each),
  the relevance rule, and the relevance matrix they give."""
  if case == "class ids":
    lq, ld = rng.integers(0, 5, q), rng.integers(0, 5, n)
    return lq, ld, "same_class", lq[:, None] == ld[None, :]
  lq, ld = rng.random((q, 40)) < 0.05, rng.random((n, 40)) < 0.05
  ld[::7] = lq[0]  # identical label sets, for "same_class"
  if case == "share_label":
    return lq, ld, case, (lq[:, None, :] & ld[None, :, :]).any(-1)
  return lq, ld, case, (lq[:, None, :] == ld[None, :, :]).all(-1)


@pytest.mark.parametrize("case", LABEL_CASES)
def test_tie_groups_count_items_and_relevant_items_per_distance(case, rng):
  db = codes(rng, 1003, 3, pool=50, mask=0x3FF)  # 1003: not a whole number of 16-item groups
  q = codes(rng, 7, 3, pool=50, mask=0x3FF)
  lq, ld, kind, rel = _labels(rng, case, 7, 1003)
  assert 0 < rel.sum() < rel.size
  qw, overlap = _native_rank.label_words(jnp.asarray(lq), kind)
  dw, _ = _native_rank.label_words(jnp.asarray(ld), kind)
  (size, hits), total = _native_rank.tie_groups(
    jnp.asarray(q), jnp.asarray(db), None, qw, dw, 96, overlap
  )
  d = np_dist(q, db)
  for a in range(7):
    np.testing.assert_array_equal(size[a], np.bincount(d[a], minlength=97))
    np.testing.assert_array_equal(hits[a], np.bincount(d[a], weights=rel[a], minlength=97))
  np.testing.assert_array_equal(total, rel.sum(axis=1))


def test_items_holding_no_code_count_alike_in_kernel_and_array_code(rng, monkeypatch):
  # Inside jit the mask is not checked: an item holding no code is never retrieved
  # (in no tie group, outside every radius, last by index) but counts as relevant.
  qc, _, lq, ld = _map_cases(rng)
  dc = np.where(rng.random((700, 2, 16)) < 0.5, -1, 1).astype(np.int8)
  mask = rng.random((700, 2)) < 0.7
  mask[::4] = False  # a quarter of the items hold no code

  def all_metrics(m):
    out = [
      metrics.average_precisions(qc, dc, lq, ld, db_mask=m, ties=t)[0] for t in ("aware", "index")
    ]
    out += [
      metrics.precision_at_k(qc, dc, lq, ld, (10, 600), db_mask=m),
      metrics.recall_at_k(qc, dc, lq, ld, (10, 600), db_mask=m),
    ]
    out += [
      metrics.average_precisions(qc, dc, lq, ld, db_mask=m, ties="index", top_k=600)[0],
      metrics.precision_at_k(qc, dc, lq, ld, (10, 700), db_mask=m, ties="index"),
    ]
    return out

  by_kernel = jax.jit(all_metrics)(mask)
  jax.clear_caches()
  monkeypatch.setattr(native, "enabled", lambda: False)
  array_code = jax.jit(all_metrics)(mask)
  jax.clear_caches()
  for got, want in zip(by_kernel, array_code):
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)
  # Never retrieved: the AP of the items holding codes, over all relevant items.
  keep = mask.any(axis=1)
  rel = (lq[:, None, :] & ld[None, :, :]).any(-1)
  share = rel[:, keep].sum(1) / np.maximum(rel.sum(1), 1)
  for got, ties in zip(by_kernel[:2], ("aware", "index")):
    coded = metrics.average_precisions(qc, dc[keep], lq, ld[keep], db_mask=mask[keep], ties=ties)[0]
    np.testing.assert_allclose(got, np.asarray(coded) * share, rtol=0, atol=2e-6, err_msg=ties)
  assert share.min() < 0.9


@pytest.mark.parametrize("case", LABEL_CASES)
@pytest.mark.parametrize("top_k", [None, 1, 40, 1003])
def test_index_ap_equals_a_stable_sort(top_k, case, rng):
  db = codes(rng, 1003, 1, pool=30, mask=0xFF)
  q = codes(rng, 9, 1, pool=30, mask=0xFF)
  lq, ld, kind, rel = _labels(rng, case, 9, 1003)
  k = 1003 if top_k is None else top_k
  qw, overlap = _native_rank.label_words(jnp.asarray(lq), kind)
  dw, _ = _native_rank.label_words(jnp.asarray(ld), kind)
  numer, found, total = _native_rank.index_ap(
    jnp.asarray(q), jnp.asarray(db), None, qw, dw, 8, overlap, k
  )
  d = np_dist(q, db)
  for a in range(9):
    ranked = rel[a][np.argsort(d[a], kind="stable")][:k]
    hits = np.cumsum(ranked)
    want = np.sum(ranked * hits / np.arange(1, k + 1))
    assert numer[a] == pytest.approx(want, rel=1e-6)
    assert found[a] == ranked.sum()
    assert total[a] == rel[a].sum()


@pytest.fixture
def array_code_only(monkeypatch):
  """Run the metrics with the native kernels switched off (and nothing compiled kept)."""
  jax.clear_caches()
  monkeypatch.setattr(native, "enabled", lambda: False)
  yield
  jax.clear_caches()


def _map_cases(rng):
  qc = np.where(rng.random((30, 16)) < 0.5, -1, 1).astype(np.int8)
  dc = np.where(rng.random((700, 16)) < 0.5, -1, 1).astype(np.int8)
  dc[::3, 4:] = 1  # many exact ties
  labels_q = rng.random((30, 5)) < 0.3
  labels_d = rng.random((700, 5)) < 0.3
  labels_d[::5] = labels_q[0]  # label sets equal to query 0's, for relevance="same_class"
  return qc, dc, labels_q, labels_d


OPTIONS = [
  dict(ties="aware"),
  dict(ties="index"),
  dict(ties="aware", top_k=50),
  dict(ties="index", top_k=50, normalizer="retrieved"),
  dict(ties="index", top_k=700, normalizer="min"),
  dict(ties="aware", relevance="same_class"),
  dict(ties="index", relevance="same_class"),
]


@pytest.mark.parametrize("options", OPTIONS)
def test_map_native_equals_reference(options, rng):
  qc, dc, lq, ld = _map_cases(rng)
  got = metrics.mean_average_precision(qc, dc, lq, ld, **options)
  options = dict(options)
  options["relevance_kind"] = options.pop("relevance", "auto")
  want = ref.mean_average_precision(qc, dc, lq, ld, **options)
  assert got == pytest.approx(want, abs=2e-6)


def test_map_array_code_equals_native(array_code_only, rng):
  qc, dc, lq, ld = _map_cases(rng)
  off = [metrics.mean_average_precision(qc, dc, lq, ld, **o) for o in OPTIONS]
  jax.clear_caches()
  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(native, "enabled", lambda: True)
    on = [metrics.mean_average_precision(qc, dc, lq, ld, **o) for o in OPTIONS]
  assert on[0] == off[0] and on[2] == off[2]  # tie-aware: the same integer groups
  np.testing.assert_allclose(on, off, rtol=0, atol=2e-6)


RADIUS_OPTIONS = [
  dict(),
  dict(average="pooled"),
  dict(relevance="same_class", empty="skip"),
  dict(no_relevant="skip"),
]


@pytest.mark.parametrize("options", RADIUS_OPTIONS)
def test_radius_curves_native_equal_reference(options, rng):
  qc, dc, lq, ld = _map_cases(rng)
  got = metrics.pr_curve_by_radius(qc, dc, lq, ld, **options)
  options = dict(options)
  options["relevance_kind"] = options.pop("relevance", "auto")
  want = ref.pr_curve_by_radius(qc, dc, lq, ld, **options)
  for name in ("precision", "recall"):
    np.testing.assert_allclose(got[name], want[name], rtol=0, atol=2e-6, err_msg=name)
  assert 0.1 < got["recall"][8] < 0.9  # a curve, not a constant


def test_radius_curves_array_code_equal_native(array_code_only, rng):
  # Items with one code, and items with 1 to 3 codes (the nearest counts).
  qc, dc, lq, ld = _map_cases(rng)
  multi = np.where(rng.random((700, 3, 16)) < 0.5, -1, 1).astype(np.int8)
  mask = rng.random((700, 3)) < 0.6
  mask[:, 0] |= ~mask.any(axis=1)
  cases = [(dc, None, o) for o in RADIUS_OPTIONS] + [(multi, mask, dict(average="pooled"))]

  def curves():
    return [metrics.pr_curve_by_radius(qc, d, lq, ld, db_mask=m, **o) for d, m, o in cases]

  off = curves()
  jax.clear_caches()
  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(native, "enabled", lambda: True)
    on = curves()
  for a, b in zip(on, off):
    for name in ("precision", "recall"):
      np.testing.assert_array_equal(a[name], b[name])  # the same integer counts


@pytest.mark.parametrize("labels", ["multi-hot", "class ids", "40 labels"])
@pytest.mark.parametrize("gain", ["exp", "linear"])
def test_ndcg_native_equals_reference(labels, gain, rng):
  qc, dc, lq, ld = _map_cases(rng)
  if labels == "class ids":
    lq, ld = lq.argmax(1), ld.argmax(1)
  elif labels == "40 labels":  # two label words, grades up to 40
    lq, ld = rng.random((30, 40)) < 0.4, rng.random((700, 40)) < 0.4
  for k in (1, 25, 700):
    got = metrics.ndcg_at_k(qc, dc, lq, ld, k, gain=gain)
    want = ref.ndcg_at_k(qc, dc, lq, ld, k, gain=gain)
    assert got == pytest.approx(want, abs=2e-6), k
  assert 0.05 < got < 0.99


def test_ndcg_native_equals_array_code_for_several_codes_per_item(rng, monkeypatch):
  # Items of 1-3 codes, a fifth holding none (inside jit): never retrieved, but in the
  # ideal ranking, as in the array code.
  qc, _, lq, ld = _map_cases(rng)
  dc = np.where(rng.random((700, 3, 16)) < 0.5, -1, 1).astype(np.int8)
  mask = rng.random((700, 3)) < 0.6
  mask[:, 0] |= ~mask.any(axis=1)
  none = mask.copy()
  none[::5] = False

  def per_query_ndcg(m, ties, q_labels, db_labels):  # NDCG@700 of each query, jittable
    # (the mask traced; the labels too: as constants, XLA sorts the ideal gains while it
    # compiles, 4 s a call)
    corpus, setup = metrics._inputs.prepare(
      qc,
      dc,
      q_labels,
      db_labels,
      relevance="graded",
      db_mask=m,
      relevance_kinds=metrics._relevance.KINDS,
    )
    return metrics._ranking._per_query_ndcg(corpus, setup, 64, (700, ties, "exp"))[0]

  def both():
    return [
      metrics.ndcg_at_k(qc, dc, lq, ld, k, db_mask=mask, ties=t)
      for k in (10,)  # the whole ranking (k = 700): the jitted calls below
      for t in ("aware", "index")
    ] + [jax.jit(per_query_ndcg, static_argnums=1)(none, t, lq, ld) for t in ("aware", "index")]

  by_kernel = both()
  jax.clear_caches()
  monkeypatch.setattr(native, "enabled", lambda: False)
  array_code = both()
  jax.clear_caches()
  np.testing.assert_allclose(by_kernel[:2], array_code[:2], rtol=0, atol=2e-6)
  for got, want in zip(by_kernel[2:], array_code[2:]):
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)


@pytest.mark.parametrize(
  "options",
  [dict(ties="aware"), dict(ties="index"), dict(ties="index", top_k=100, normalizer="min")],
)
def test_map_of_items_with_several_codes_equals_reference(options, rng):
  # Items hold 1 to 3 codes (the least distance counts); 24 bits: many ties.
  qc, _, lq, ld = _map_cases(rng)
  qc = qc[:, :12]
  dc = np.where(rng.random((700, 3, 12)) < 0.5, -1, 1).astype(np.int8)
  dc[:, 1] = qc[rng.integers(0, 30, 700)]  # second codes equal to some query's
  mask = rng.random((700, 3)) < 0.6
  mask[:, 0] |= ~mask.any(axis=1)
  got = metrics.mean_average_precision(qc, dc, lq, ld, db_mask=mask, **options)
  want = ref.mean_average_precision(qc, dc, lq, ld, db_mask=mask, **options)
  assert got == pytest.approx(want, abs=2e-6)
  assert 0.05 < got < 0.95


@pytest.mark.parametrize("relevance", ["auto", "same_class"])
def test_precision_and_recall_at_k_native_equal_reference(relevance, rng):
  qc, dc, lq, ld = _map_cases(rng)
  ks = (1, 10, 333, 700)
  for name in ("precision_at_k", "recall_at_k"):
    got = getattr(metrics, name)(qc, dc, lq, ld, ks, relevance=relevance)
    want = getattr(ref, name)(qc, dc, lq, ld, ks, relevance_kind=relevance)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6, err_msg=name)


def test_export_needs_the_checks_and_then_runs_the_kernel(rng):
  q, db = jnp.asarray(codes(rng, 5, 2)), jnp.asarray(codes(rng, 300, 2))
  f = jax.jit(lambda a, b: search.hamming_topk_unchecked(a, b, 7, 64))
  with pytest.raises(ValueError, match="custom call"):
    jax.export.export(f)(q, db)
  exported = jax.export.export(f, disabled_checks=native.export_checks())(q, db)
  assert "jhash_hamming_topk" in exported.mlir_module()
  want = np_topk(np_dist(np.asarray(q), np.asarray(db)), 7)
  for got, want in zip(exported.call(q, db), want):
    np.testing.assert_array_equal(got, want)
  # For accelerators only, the program holds the array code and needs no checks.
  exported = jax.export.export(f, platforms=("cuda",))(q, db)
  assert "jhash_hamming_topk" not in exported.mlir_module()


# ----------------------------------------------------------------------------------------------
# Every build path, and turning the kernels off.

BUILD_SCRIPT = textwrap.dedent("""
    import numpy as np, jax.numpy as jnp
    from jhash import native, metrics, search
    assert native.enabled()
    rng = np.random.default_rng(0)
    for words in (1, 2, 4, 9):
      db = rng.integers(0, 2**32, (1500, words), dtype=np.uint64).astype(np.uint32)
      db[::2] &= np.uint32(0xF0F0F0F0)  # ties
      q = db[:20] ^ np.uint32(5)
      a = search.hamming_topk(q, db, 40, method="native")
      b = search.hamming_topk(q, db, 40, method="xor")
      assert all((np.asarray(x) == np.asarray(y)).all() for x, y in zip(a, b)), words
    qc = np.where(rng.random((20, 24)) < 0.5, -1, 1)
    dc = np.where(rng.random((900, 24)) < 0.5, -1, 1)
    ql, dl = rng.integers(0, 4, 20), rng.integers(0, 4, 900)
    for ties in ("aware", "index"):
      print(ties, repr(metrics.mean_average_precision(qc, dc, ql, dl, ties=ties)))
""")


def _run(script, **env):
  root = pathlib.Path(__file__).resolve().parents[1]
  full = dict(os.environ, JAX_PLATFORMS="cpu", **env)
  full["PYTHONPATH"] = str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")
  return subprocess.run(
    [sys.executable, "-c", script], env=full, capture_output=True, text=True, timeout=600
  )


def _cpu_flags() -> set[str]:
  """The CPU's feature flags (Linux), empty where unknown."""
  try:
    with open("/proc/cpuinfo") as f:
      return next(
        (set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set()
      )
  except OSError:
    return set()


def _has_simde() -> bool:
  """Whether the compiler finds SIMDe's AVX-512 header (Debian's libsimde-dev)."""
  cxx = native._compiler()
  if cxx is None or platform.machine() not in ("x86_64", "AMD64"):
    return False
  out = subprocess.run(
    [cxx, "-E", "-x", "c++", "-"],
    input="#include <simde/x86/avx512.h>\n",
    capture_output=True,
    text=True,
  )
  return out.returncode == 0


@pytest.fixture(scope="module")
def array_code_values():
  """BUILD_SCRIPT's printed mAP values with the kernels off (JHASH_NATIVE=0: the array
  code), and whether method="native" was refused there."""
  refusal = textwrap.dedent("""
      assert not native.enabled()
      try:
        search.hamming_topk(np.zeros((1, 1), np.uint32), np.zeros((4, 1), np.uint32), 2,
                            method="native")
      except ValueError as err:
        print("refused", "yes" if "method='native' needs" in str(err) else "other")
  """)
  script = (
    BUILD_SCRIPT.replace("assert native.enabled()", "").replace('method="native"', 'method="xor"')
    + refusal
  )
  off = _run(script, JHASH_NATIVE="0")
  assert off.returncode == 0, off.stderr[-3000:]
  return dict(line.split() for line in off.stdout.splitlines())


@pytest.mark.parametrize(
  "flags",
  [
    "-mno-avx512f",
    "-mno-avx2 -mno-avx512f",
    pytest.param("-DJHASH_EMULATE_AVX512 -Wno-psabi", id="avx512-emulated"),
  ],
)
def test_other_instruction_sets_give_the_same_results(flags, tmp_path, array_code_values):
  # The AVX2 path (on a CPU with AVX-512), the scalar path, and the AVX-512
  # path on any x86-64 through SIMDe's portable intrinsics, each built into a
  # fresh cache; the default build of this machine's CPU is what the other tests run.
  if "EMULATE" in flags and not _has_simde():
    pytest.skip("SIMDe headers not installed (Debian: libsimde-dev; ./install.sh test adds it)")
  # Where the default build already is the path, the other tests run it.
  flags_here = _cpu_flags()
  if flags == "-mno-avx512f" and "avx512f" not in flags_here:
    pytest.skip("no AVX-512 here: the default build is the AVX2 path")
  if "EMULATE" in flags and {"avx512f", "avx512_vpopcntdq"} <= flags_here:
    pytest.skip("AVX-512 VPOPCNTDQ here: the default build runs that path natively")
  # -O0: these builds check results, not speed; they compile in 7 s against 10-11 s at
  # -O1 (2 cores, AMD EPYC, 2026-12-05). The default -O3 build runs every other test.
  out = _run(BUILD_SCRIPT, JHASH_NATIVE_CFLAGS=flags + " -O0", JHASH_CACHE_DIR=str(tmp_path))
  assert out.returncode == 0, out.stderr[-3000:]
  assert list(tmp_path.glob("jhash_kernels_*.so")), "no library was built"
  on_values = dict(line.split() for line in out.stdout.splitlines())
  assert on_values["aware"] == array_code_values["aware"]  # the same integer tie groups
  # Index order: the kernel sums in float64, the array code in float32.
  assert float(on_values["index"]) == pytest.approx(float(array_code_values["index"]), abs=1e-6)


def test_method_native_is_refused_when_the_kernels_are_off(array_code_values):
  assert array_code_values.get("refused") == "yes"


def test_a_failed_build_warns_and_falls_back(tmp_path):
  script = textwrap.dedent("""
      import warnings, numpy as np
      from jhash import native, search
      with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not native.enabled()
      assert any("native CPU kernels unavailable" in str(w.message) for w in caught)
      db = np.arange(100, dtype=np.uint32)[:, None]
      print(np.asarray(search.hamming_topk(db[:2], db, 3)[1]).tolist())
  """)
  out = _run(script, CXX=str(tmp_path / "no-such-compiler"), JHASH_CACHE_DIR=str(tmp_path))
  assert out.returncode == 0, out.stderr[-3000:]
  assert out.stdout.strip() == "[[0, 1, 2], [1, 0, 3]]"


# ----------------------------------------------------------------------------------------------
# Weighted Hamming distance.


def _weighted_case(rng, n, num_bits, q=9, pool=40):
  """Codes drawn from a pool of 40 (exact ties; pool=None: n random codes), queries partly
  from the pool, real weights of both signs, and the same weights in units (integers: the
  reference sums them exactly)."""
  pool = np.where(rng.random((pool or n, num_bits)) < 0.5, -1, 1).astype(np.int8)
  db = pool[rng.integers(0, len(pool), n)] if len(pool) < n else pool
  qc = np.where(rng.random((q, num_bits)) < 0.5, -1, 1).astype(np.int8)
  qc[:3] = pool[:3]
  weights = (rng.normal(size=num_bits) + 0.4).astype(np.float32)
  assert weights.min() < 0
  units = np.asarray(search.weight_units(weights)[0], np.int64)
  return qc, db, weights, units


def _pack(signs):
  return np.asarray(jcodes.pack_bits(signs))


@pytest.mark.parametrize("num_bits,pool", [(7, 40), (64, 40), (100, 40), (64, None)])
@pytest.mark.parametrize("k", [1, 37, 1003])
def test_weighted_topk_equals_reference(num_bits, pool, k, rng):
  qc, db, _, units = _weighted_case(rng, 1003, num_bits, pool=pool)
  want_d, want_i = np_topk(((qc[:, None, :] != db[None]) * units).sum(-1), k)
  d, i = _native_topk.weighted_topk(_pack(qc), _pack(db), jnp.asarray(units, jnp.float32), k)
  np.testing.assert_array_equal(d, want_d)
  np.testing.assert_array_equal(i, want_i)


@pytest.mark.parametrize("case", LABEL_CASES)
@pytest.mark.parametrize(
  "ties,top_k", [("aware", None), ("aware", 40), ("index", None), ("index", 40)]
)
def test_weighted_ap_equals_reference(case, ties, top_k, rng):
  qc, db, weights, units = _weighted_case(rng, 1003, 45)
  lq, ld, kind, rel = _labels(rng, case, 9, 1003)
  qw, overlap = _native_rank.label_words(jnp.asarray(lq), kind)
  dw, _ = _native_rank.label_words(jnp.asarray(ld), kind)
  k = 1003 if top_k is None else top_k
  numer, found, total = _native_rank.weighted_ap(
    _pack(qc), _pack(db), jnp.asarray(units), qw, dw, overlap, k, ties == "aware"
  )
  d = ref.distances(qc, db, units)
  want, _ = ref.average_precision(d, rel, top_k, ties)
  np.testing.assert_allclose(numer / np.maximum(total, 1), want, rtol=0, atol=2e-6)
  np.testing.assert_array_equal(total, rel.sum(axis=1))
  if ties == "index":
    ranked = np.take_along_axis(rel, np.argsort(d, axis=1, kind="stable"), axis=1)[:, :k]
    np.testing.assert_array_equal(found, ranked.sum(axis=1))
  # and through the public metric
  got = metrics.average_precisions(
    qc, db, lq, ld, weights=weights, ties=ties, top_k=top_k, relevance=kind
  )[0]
  np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)


@pytest.mark.parametrize("case", ["class ids", "share_label"])
@pytest.mark.parametrize("ties", ["aware", "index"])
def test_weighted_precision_and_ndcg_equal_reference(case, ties, rng):
  qc, db, weights, units = _weighted_case(rng, 1003, 45)
  lq, ld, _, rel = _labels(rng, case, 9, 1003)
  d = ref.distances(qc, db, units)
  ks = (1, 10, 200, 1003)
  got = metrics.recall_at_k(qc, db, lq, ld, ks, ties=ties, weights=weights)
  want = [
    np.mean([ref.hits_at_k(d[a], rel[a], k, ties) / max(rel[a].sum(), 1) for a in range(9)])
    for k in ks
  ]  # no_relevant="zero"
  np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)
  grades = ref.relevance(lq, ld, "graded")
  assert grades.max() > 1 or case == "class ids"
  for gain, k in (("exp", 1), ("exp", 30), ("linear", 1003)):
    got = metrics.ndcg_at_k(qc, db, lq, ld, k, ties=ties, gain=gain, weights=weights)
    want, _ = ref.ndcg(d, grades, k, ties, gain)  # 0 where undefined, as no_relevant="zero"
    assert got == pytest.approx(np.mean(want), abs=2e-6), f"{gain} {k}"


def test_weighted_ranking_past_the_kernels_memory_cap_is_the_array_code(rng, monkeypatch):
  # The first-k groups of every query at once are capped (256 MB); past it, chunks of the
  # array code give the same values.
  qc, dc, lq, ld = _map_cases(rng)
  weights = (rng.normal(size=16) + 0.4).astype(np.float32)

  def values():
    jax.clear_caches()
    out = [
      metrics.precision_at_k(qc, dc, lq, ld, (1, 30, 700), ties=t, weights=weights)
      for t in ("aware", "index")
    ]
    out += [
      metrics.ndcg_at_k(qc, dc, lq, ld, 30, ties=t, weights=weights) for t in ("aware", "index")
    ]
    return out + [metrics.ndcg_at_k(qc, dc, lq, ld, 30, ties="index")]

  by_kernel = values()
  monkeypatch.setattr(_ranking, "_ranked_fits", lambda *args: False)
  capped = values()
  jax.clear_caches()
  for got, want in zip(capped, by_kernel):
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)


def _weighted_results(qc, db, lq, ld, weights):
  out = [metrics.mean_average_precision(qc, db, lq, ld, weights=weights, **o) for o in OPTIONS[:5]]
  out += [
    metrics.mean_average_precision(qc, db, lq, ld, weights=np.full(16, 0.1), ties=t)
    for t in ("aware", "index")
  ]
  for ties in ("aware", "index"):
    out += list(metrics.precision_at_k(qc, db, lq, ld, (1, 30, 700), ties=ties, weights=weights))
    out += [metrics.ndcg_at_k(qc, db, lq, ld, 30, ties=ties, weights=weights)]
  d, i = search.weighted_hamming_topk(qc, db, weights, 50)
  return out, np.asarray(d), np.asarray(i)


def test_weighted_array_code_equals_native(array_code_only, rng):
  qc, dc, lq, ld = _map_cases(rng)
  weights = (rng.normal(size=16) + 0.4).astype(np.float32)
  off = _weighted_results(qc, dc, lq, ld, weights)
  jax.clear_caches()
  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(native, "enabled", lambda: True)
    on = _weighted_results(qc, dc, lq, ld, weights)
  np.testing.assert_allclose(on[0], off[0], rtol=0, atol=2e-6)
  np.testing.assert_array_equal(on[1], off[1])
  np.testing.assert_array_equal(on[2], off[2])
  # Equal weights (0.1: not exact in binary) rank as plain Hamming distance, ties exact.
  plain = [metrics.mean_average_precision(qc, dc, lq, ld, ties=t) for t in ("aware", "index")]
  assert on[0][5:7] == pytest.approx(plain, abs=1e-6)
  assert off[0][5:7] == pytest.approx(plain, abs=1e-6)


# ----------------------------------------------------------------------------------------------
# Hash-bucket search.


def _bucket_index(rng, num_bits, codes_per_item, num_substrings):
  from jhash import index as index_lib

  n, words = 3000, -(-num_bits // 32)
  pool = codes(rng, 200, codes_per_item * words).reshape(200, codes_per_item, words)
  if num_bits % 32:  # padding bits zero
    pool[..., -1] &= np.uint32((1 << (num_bits % 32)) - 1)
  noise = (rng.random((n, codes_per_item, words)) < 0.02).astype(np.uint32) << np.uint32(3)
  items = pool[rng.integers(0, 200, n)] ^ noise  # near-duplicates: buckets of many items
  mask = rng.random((n, codes_per_item)) < 0.7
  mask[:, 0] = True
  if codes_per_item == 1:
    idx = index_lib.build_index(items[:, 0], num_bits=num_bits, num_substrings=num_substrings)
  else:
    idx = index_lib.build_index(items, num_bits=num_bits, mask=mask, num_substrings=num_substrings)
  flip = np.zeros((words,), np.uint32)
  flip[0] = 5  # bits 0 and 2: distance 2 from a stored code
  queries = np.concatenate([items[:30, 0], items[:10, 0] ^ flip])
  return idx, queries


BUCKET_CASES = [  # bits, codes per item, tables, radius, wanted, slots, use_substrings
  (64, 3, None, 2, 10**6, 40, None),
  (64, 3, None, 2, 5, 3, None),
  (64, 1, None, 2, 10**6, 3, True),
  (64, 3, None, 1, 1, 40, False),
  (32, 3, 0, 2, 10**6, 40, None),
  (32, 1, 2, 2, 7, 40, True),
  (16, 3, None, 3, 10**6, 40, None),
  (64, 3, None, 0, 1, 5, None),
  # Two-word keys of 36 bits; radius 2's 630 flip masks in 5 chunks, queries stopping.
  (36, 3, None, 2, 5, 3, False),
]


@pytest.mark.parametrize("case", BUCKET_CASES)
def test_bucket_search_native_equals_array_code(case, rng, monkeypatch):
  from jhash import index as index_lib

  bits, m, tables, radius, wanted, slots, use = case
  idx, q = _bucket_index(rng, bits, m, tables)
  kw = dict(num_wanted=wanted, max_radius=radius, max_results=slots, use_substrings=use)
  by_kernel = index_lib.bucket_search(idx, q, **kw)
  monkeypatch.setattr(native, "enabled", lambda: False)
  array_code = index_lib.bucket_search(idx, q, **kw)
  assert int(np.max(by_kernel.num_found)) > 0
  for name in by_kernel._fields:
    np.testing.assert_array_equal(getattr(by_kernel, name), getattr(array_code, name), name)


@pytest.mark.parametrize("bits,m", [(64, 3), (32, 1), (16, 3)])
def test_lookup_native_equals_array_code_and_the_bucket(bits, m, rng, monkeypatch):
  from jhash import index as index_lib

  idx, q = _bucket_index(rng, bits, m, 0)
  q = np.concatenate([q, q[:3] ^ np.uint32(1 << 7)])  # 43 queries: a partial group of 16
  start, count = (np.asarray(x) for x in index_lib.lookup(idx, q))
  keys = np.asarray(idx.keys).astype(np.uint64)
  key = keys[:, 0] | (keys[:, 1] << np.uint64(32)) if keys.shape[1] == 2 else keys[:, 0]
  qk = q.astype(np.uint64)
  qk = qk[:, 0] | (qk[:, 1] << np.uint64(32)) if q.shape[1] == 2 else qk[:, 0]
  offsets = np.asarray(idx.offsets)
  where = np.searchsorted(key, qk)  # the bucket, or the insertion point
  hit = (where < key.size) & (key[np.minimum(where, key.size - 1)] == qk)
  np.testing.assert_array_equal(start, offsets[where])
  np.testing.assert_array_equal(
    count, np.where(hit, offsets[np.minimum(where + 1, key.size)] - offsets[where], 0)
  )
  assert hit.any() and not hit.all()
  monkeypatch.setattr(native, "enabled", lambda: False)
  array_code = index_lib.lookup(idx, q)
  np.testing.assert_array_equal(start, array_code[0])
  np.testing.assert_array_equal(count, array_code[1])
