"""CDH at scale: the B-step over data chunks, and sharded over devices (8 forced CPU
devices against one)."""

import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import _cdh_reference as ref
import jhash
from jhash import data
from jhash.methods._cdh import _bstep
from jhash.methods._cdh import _chunks
from jhash.methods._cdh import _objective
from jhash.methods._cdh import _supervision as sv

N, K, INNER = 203, 8, 16


def _instance(seed, n=N):
  rng = np.random.default_rng(seed)
  codes = np.where(rng.random((n, K)) < 0.5, 1, -1).astype(np.int8)
  labels = rng.integers(0, 5, n).astype(np.int32)
  z = (rng.random((n, K)) - 0.5).astype(np.float32)
  u = rng.random((4, K, INNER)).astype(np.float32)
  order = rng.permutation(n).astype(np.int32)
  return codes, labels, z, u, order


@pytest.mark.parametrize("n, m", [(203, 4), (200, 4), (7, 3), (9, 1)])
def test_chunk_groups_cover_every_item_once_in_nearly_equal_chunks(n, m):
  order = np.random.default_rng(n).permutation(n).astype(np.int32)
  groups = _chunks.chunk_groups(jnp.asarray(order), m)
  sizes = [g.shape[1] for g in groups for _ in range(g.shape[0])]
  assert len(sizes) == m and max(sizes) - min(sizes) <= 1
  np.testing.assert_array_equal(np.concatenate([np.asarray(g).reshape(-1) for g in groups]), order)


@pytest.mark.parametrize(
  "num_items, size, want",
  [(60_000, 10_000, 6), (60_001, 10_000, 7), (5, 10_000, 1), (10_000, 10_000, 1)],
)
def test_number_of_chunks(num_items, size, want):
  assert _chunks.num_chunks(num_items, size) == want


_sweep = jax.jit(lambda c, z, s, g, u, o: _chunks.sweep(c, z, s, g, u, o))
_one = jax.jit(lambda c, z, s, g, u: _bstep.sweep(c, z, s, g, u))
_update_bit = jax.jit(lambda c, k, z, s, g, u: _bstep.update_bit(c, k, z, s, g, u))


def _views_and_weights(seed, n=N, dims=(5, 7)):
  """Two views and their logistic weights (float64), for a ``Z`` the reference can rebuild."""
  rng = np.random.default_rng(seed)
  views = [rng.normal(size=(n, d)) for d in dims]
  weights = [rng.normal(size=(K, d + 1)) / np.sqrt(d) for d in dims]
  return views, weights


def _bit_by_bit(codes, z, labels, gamma, u):
  """One chunk's sweep replayed bit by bit (``update_bit`` in turn, as ``_bstep.sweep``
  runs it): the codes before the sweep and after each bit, and each bit's stats."""
  carry = _bstep.start_sweep(jnp.asarray(codes), "exponential")
  states, stats = [np.asarray(codes)], []
  for k in range(K):
    carry, st = _update_bit(
      carry, k, jnp.asarray(z[:, k]), sv.from_labels(labels), gamma, jnp.asarray(u[k])
    )
    states.append(np.asarray(carry.codes))
    stats.append(st)
  return states, stats


def test_chunked_sweep_equals_each_chunk_alone():
  codes, labels, _, u, order = _instance(0)
  views, weights = _views_and_weights(0)
  z = ref.generative_linear_terms(weights, views).astype(np.float32)
  gamma = jnp.float32(0.02)
  got, stats = _sweep(codes, z, sv.from_labels(labels), gamma, u, order)
  got = np.asarray(got)
  want = codes.copy()
  groups = _chunks.chunk_groups(jnp.asarray(order), 4)
  index = [np.asarray(row) for g in groups for row in g]
  per_chunk = []
  for c, idx in enumerate(index):
    new, st = _one(codes[idx], z[idx], sv.from_labels(labels[idx]), gamma, u[c])
    want[idx] = np.asarray(new)
    per_chunk.append(st)
    # Theorem 1 within the chunk, bit by bit, on the dense float64 objective J of the
    # chunk's own items recomputed from the codes after each bit.
    states, bits = _bit_by_bit(codes[idx], z[idx], labels[idx], gamma, u[c])
    np.testing.assert_array_equal(states[-1], np.asarray(new))  # the same sweep
    y = ref.dense_supervision(labels[idx])
    j = np.array(
      [
        ref.objective(b, y, weights, [x[idx] for x in views], float(gamma), "exponential")
        for b in states
      ]
    )
    assert np.all(np.diff(j) >= -1e-9), (c, np.diff(j))
    # The J_k the B-step reports moved as the reference J did (J - J_k is constant).
    reported = [float(b.objective) - float(b.objective_before) for b in bits]
    np.testing.assert_allclose(reported, np.diff(j), rtol=1e-3, atol=1e-7)
  np.testing.assert_array_equal(got, want)
  np.testing.assert_array_equal(
    np.asarray(stats.flipped), sum(np.asarray(s.flipped) for s in per_chunk)
  )
  np.testing.assert_array_equal(
    np.asarray(stats.active), sum(np.asarray(s.active) for s in per_chunk)
  )
  np.testing.assert_allclose(
    np.asarray(stats.objective),
    np.mean([np.asarray(s.objective) for s in per_chunk], axis=0),
    rtol=1e-6,
  )
  assert np.asarray(stats.flipped).sum() > 0  # the instance is not already a fixed point


def test_each_chunk_ends_at_a_point_no_single_flip_improves():
  """Theorem 2 per chunk: with enough inner updates, no flip of one item raises its
  chunk's J_k (checked by brute force on the chunk's dense objective, bit by bit)."""
  codes, labels, z, _, order = _instance(1, n=90)
  u = np.random.default_rng(5).random((3, K, 200)).astype(np.float32)
  gamma = jnp.float32(0.05)
  got, stats = _sweep(codes, z, sv.from_labels(labels), gamma, u, order[:90])
  assert bool(np.all(np.asarray(stats.converged)))
  got = np.asarray(got)
  for g in _chunks.chunk_groups(jnp.asarray(order[:90]), 3):
    for idx in np.asarray(g):
      b = got[idx].astype(np.float64)
      y = np.where(labels[idx][:, None] == labels[idx][None, :], 1.0, -1.0)
      n = idx.size
      k = K - 1  # the last bit: the others are fixed after its update
      loo = b @ b.T - np.outer(b[:, k], b[:, k])
      a = y * np.sinh(1.0 / K) * np.exp(-y * loo / K)
      np.fill_diagonal(a, 0.0)
      col = b[:, k]
      base = col @ a @ col / n**2 + float(gamma) * z[idx, k] @ col / n
      for i in range(n):
        f = col.copy()
        f[i] = -f[i]
        assert f @ a @ f / n**2 + float(gamma) * z[idx, k] @ f / n <= base + 1e-9


def test_method_with_chunks_learns_and_one_chunk_matches_the_default():
  ds = data.load_mfeat(["fou", "kar"])
  rng = np.random.default_rng(0)
  idx = np.sort(rng.choice(ds.labels.size, 300, replace=False))
  batch = {"views": tuple(v[idx] for v in ds.views), "labels": ds.labels[idx]}
  key = jax.random.key(3)
  small = dict(w_iters=30, max_inner=8)
  default, _ = jhash.fit(jhash.methods.cdh(16, **small), key, batch, num_steps=1)
  whole, _ = jhash.fit(jhash.methods.cdh(16, chunk_size=300, **small), key, batch, num_steps=1)
  np.testing.assert_array_equal(np.asarray(default.codes), np.asarray(whole.codes))
  method = jhash.methods.cdh(16, chunk_size=100, **small)
  state, hist = jhash.fit(method, key, batch, num_steps=2)
  codes = np.asarray(state.codes)
  assert codes.shape == (300, 16) and set(np.unique(codes)) <= {-1, 1}
  # The chunked B-step raises the full semantic term from the initial codes, and the
  # learned codes rank the training items by class far above chance (0.1).
  init = jhash.init(method, key, batch)
  sup = sv.from_labels(batch["labels"])
  before = float(_objective.semantic_term(init.codes, sup, "exponential"))
  after = float(_objective.semantic_term(state.codes, sup, "exponential"))
  assert after > before
  assert jhash.metrics.mean_average_precision(codes, codes, batch["labels"], batch["labels"]) > 0.5
  assert hist["flipped"].shape == (2, 16)


def test_bad_chunk_size_and_mesh_name_themselves():
  with pytest.raises(ValueError, match="chunk_size"):
    jhash.methods.cdh(8, chunk_size=1)
  with pytest.raises(ValueError, match="chunk_size"):
    jhash.methods.cdh(8, chunk_size=0)
  with pytest.raises(ValueError, match="mesh"):
    jhash.methods.cdh(8, mesh="rows")


SHARDED_SCRIPT = textwrap.dedent("""
    import os
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=8")
    import jax
    import numpy as np
    from jax.sharding import Mesh
    import jhash
    import jhash.data
    from jhash.methods._cdh import _bstep
    from jhash.methods._cdh import _supervision as sv
    assert jax.device_count() == 8, jax.devices()
    mesh = Mesh(np.array(jax.devices()), ("rows",))
    rng = np.random.default_rng(0)
    # 301 items: not a multiple of 8 (shards of 38 rows, the last with 35 real ones).
    n, k = 301, 12
    codes = np.where(rng.random((n, k)) < 0.5, 1, -1).astype(np.int8)
    z = (rng.random((n, k)) - 0.5).astype(np.float32)
    u = rng.random((k, 24)).astype(np.float32)
    labels = rng.integers(0, 6, n)
    y = np.where(rng.random((n, n)) < 0.5, 1, -1) * (rng.random((n, n)) < 0.7)
    y = np.triu(y, 1); y = (y + y.T).astype(np.int8)
    # Both merits and both kinds of supervision (labels, an explicit Y with unknowns);
    # the exponential merit on labels runs sharded in the method below.
    for merit, sup in (("exponential", sv.from_matrix(y)),
                       ("linear", sv.from_labels(labels))):
      one = jax.jit(lambda c, zz, s, uu: _bstep.sweep(c, zz, s, 0.03, uu, merit=merit))
      many = jax.jit(lambda c, zz, s, uu: _bstep.sweep(c, zz, s, 0.03, uu, merit=merit,
                                                       mesh=mesh))
      a, sa = one(codes, z, sup, u)
      b, sb = many(codes, z, sup, u)
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
      for x, w in zip(sa, sb):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(w))
      assert int(np.asarray(sa.flipped).sum()) > 0
    # The method: chunks of 150 (three chunks of 100 or 101), each sharded over 8 devices.
    ds = jhash.data.load_mfeat(["fou", "kar"])
    idx = np.sort(rng.choice(ds.labels.size, 301, replace=False))
    batch = {"views": tuple(v[idx] for v in ds.views), "labels": ds.labels[idx]}
    key = jax.random.key(0)
    opts = dict(chunk_size=150, w_iters=20, max_inner=8)
    s1, _ = jhash.fit(jhash.methods.cdh(16, **opts), key, batch, num_steps=1)
    s8, _ = jhash.fit(jhash.methods.cdh(16, mesh=mesh, **opts), key, batch, num_steps=1)
    np.testing.assert_array_equal(np.asarray(s1.codes), np.asarray(s8.codes))
    print("sharded cdh ok")
""")


def test_sharded_bstep_equals_single_device():
  root = pathlib.Path(__file__).resolve().parents[1]
  env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
  env["JAX_PLATFORMS"] = "cpu"
  out = subprocess.run(
    [sys.executable, "-c", SHARDED_SCRIPT], env=env, capture_output=True, text=True, timeout=600
  )
  assert out.returncode == 0, out.stderr[-3000:]
  assert "sharded cdh ok" in out.stdout


def test_chunk_order_per_sweep_or_fixed():
  k1, k2 = jax.random.key(1), jax.random.key(2)
  assert _chunks.chunk_order(k1, 50, 50) is None  # one chunk: items in order
  a, b = (np.asarray(_chunks.chunk_order(k, 50, 20)) for k in (k1, k2))
  assert sorted(a) == list(range(50)) and not np.array_equal(a, b)
  np.testing.assert_array_equal(a, jax.random.permutation(jax.random.fold_in(k1, 1), 50))
  f1, f2 = (np.asarray(_chunks.chunk_order(k, 50, 20, "fixed", seed=7)) for k in (k1, k2))
  np.testing.assert_array_equal(f1, f2)
  np.testing.assert_array_equal(f1, jax.random.permutation(jax.random.key(7), 50))


def test_fixed_split_fits_and_differs_from_per_sweep_only_in_the_split():
  ds = data.load_mfeat(["fou", "kar"])
  idx = np.sort(np.random.default_rng(1).choice(ds.labels.size, 240, replace=False))
  batch = {"views": tuple(v[idx] for v in ds.views), "labels": ds.labels[idx]}
  key = jax.random.key(0)
  opts = dict(chunk_size=80, w_iters=20, max_inner=8)
  fixed, hist = jhash.fit(
    jhash.methods.cdh(8, chunk_split="fixed", chunk_seed=3, **opts),
    key,
    batch,
    num_steps=2,
    progress=False,
  )
  per_sweep, _ = jhash.fit(jhash.methods.cdh(8, **opts), key, batch, num_steps=2, progress=False)
  assert not np.array_equal(np.asarray(fixed.codes), np.asarray(per_sweep.codes))
  # Every chunk's B-step ascends: in each sweep, the dense float64 objective J of each
  # chunk's own items, recomputed from the states before and after the sweep (Z from the
  # weights before it: the B-step runs first), never falls.
  method = jhash.methods.cdh(8, chunk_split="fixed", chunk_seed=3, **opts)
  update, states = jax.jit(method.update), [jhash.init(method, key, batch)]
  for step in range(2):  # the steps jhash.fit ran, with its keys
    states.append(update(states[-1], batch, jax.random.fold_in(key, step + 1))[0])
  np.testing.assert_array_equal(np.asarray(states[-1].codes), np.asarray(fixed.codes))
  order = _chunks.chunk_order(key, 240, 80, "fixed", seed=3)
  chunks = [np.asarray(row) for g in _chunks.chunk_groups(order, 3) for row in g]
  for step, (old, new) in enumerate(zip(states, states[1:])):
    weights = [np.asarray(w, np.float64) for w in old.weights]
    rises = []
    for idx in chunks:
      y = ref.dense_supervision(batch["labels"][idx])
      views = [v[idx] for v in batch["views"]]
      j0, j1 = (
        ref.objective(np.asarray(s.codes)[idx], y, weights, views, float(old.gamma), "exponential")
        for s in (old, new)
      )
      assert j1 >= j0 - 1e-9, (step, j0, j1)
      rises.append(j1 - j0)
    assert max(rises) > 0  # the codes moved
    # What the sweep reports (per bit, the mean over chunks of J_k's change) adds up to
    # the mean of the chunks' reference changes.
    reported = np.sum(hist["bit_objective"][step] - hist["bit_objective_before"][step])
    np.testing.assert_allclose(reported, np.mean(rises), rtol=1e-3, atol=1e-7)
  with pytest.raises(ValueError, match="chunk_split"):
    jhash.methods.cdh(8, chunk_split="random")
