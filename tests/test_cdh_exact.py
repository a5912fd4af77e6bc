"""CDH's exact B-step at any n: the matrix-free mode (``chunk_size=None``), which stores
no Gram and recomputes every entry of ``K p^{-k}`` from the codes.

Its codes must equal the Gram's bit for bit (one device and rows sharded over 8 forced
host devices), and its memory must grow linearly with n (XLA's memory analysis)."""

import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jhash
from jhash import data
from jhash.methods._cdh import _bstep
from jhash.methods._cdh import _chunks
from jhash.methods._cdh import _supervision as sv

K, INNER = 16, 12


def _instance(seed, n, kind):
  """Random codes, Z, starts and supervision: class ids, or an explicit Y with unknowns."""
  rng = np.random.default_rng(seed)
  codes = np.where(rng.random((n, K)) < 0.5, 1, -1).astype(np.int8)
  z = (rng.random((n, K)) - 0.5).astype(np.float32)
  u = rng.random((K, INNER)).astype(np.float32)
  if kind == "labels":
    return codes, z, u, sv.from_labels(rng.integers(0, 6, n).astype(np.int32))
  y = np.where(rng.random((n, n)) < 0.5, 1, -1) * (rng.random((n, n)) < 0.7)
  y = np.triu(y, 1)
  return codes, z, u, sv.from_matrix((y + y.T).astype(np.int8))


def _sweep(merit, block_rows, matrix_free):
  return jax.jit(
    lambda c, z, s, u: _bstep.sweep(
      c, z, s, 0.03, u, merit=merit, block_rows=block_rows, matrix_free=matrix_free
    )
  )


@pytest.mark.parametrize(
  "merit, n, kind, block_rows",
  [
    ("exponential", 2000, "labels", 32),
    ("linear", 2000, "labels", 32),
    # 203 = 4 x 48 + 11: the last block is moved back and overlaps the one before.
    ("exponential", 203, "matrix", 48),
  ],
)
def test_matrix_free_sweep_equals_the_gram_sweep_bit_for_bit(merit, n, kind, block_rows):
  codes, z, u, sup = _instance(n, n, kind)
  dense, dense_stats = _sweep(merit, block_rows, False)(codes, z, sup, u)
  free, free_stats = _sweep(merit, block_rows, True)(codes, z, sup, u)
  np.testing.assert_array_equal(np.asarray(free), np.asarray(dense))
  for got, want in zip(free_stats, dense_stats):  # counts and float32 objectives alike
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  assert int(np.sum(dense_stats.flipped)) > n  # many flips: not a trivial fixed point
  if n > 256:  # Algorithm 2 ran at a restricted size above the smallest (lax.switch)
    assert int(np.max(dense_stats.active)) > 256


def test_entries_from_the_codes_equal_the_grams_after_bit_updates():
  """``loo_rows`` / ``loo_among`` give ``B B^T - b b^T`` (bit ``k`` left out) from a Gram
  with a pending rank-one update and from the codes alike, and ``A`` is the same."""
  codes, z, u, sup = _instance(7, 150, "matrix")
  carry = _bstep.start_sweep(jnp.asarray(codes), "exponential")
  update = jax.jit(_bstep.update_bit)
  for k in range(3):  # three bits in: the Gram carries a pending update
    carry, _ = update(carry, k, jnp.asarray(z[:, k]), sup, jnp.float32(0), jnp.asarray(u[k]))
  b = np.asarray(carry.codes, np.int64)
  free = _bstep.start_sweep(carry.codes, "exponential", matrix_free=True)
  assert free.gram is None
  k = 3
  b0 = jnp.asarray(b[:, k], jnp.float32)
  items = jnp.asarray([5, 0, 149, 77], jnp.int32)
  want = b @ b.T - np.outer(b[:, k], b[:, k])
  source = _bstep.from_codes(carry.codes, k)
  gram, _ = _bstep.a_times_b(carry, b0, sup, K, "exponential", 32)  # the update applied
  for src in (source, gram):
    np.testing.assert_array_equal(_bstep.loo_rows(src, items, b0), want[np.asarray(items)])
    row = _bstep.loo_among(src, items, b0)
    np.testing.assert_array_equal(row(1), want[0][np.asarray(items)])
  np.testing.assert_array_equal(
    _bstep.dense_bit_matrix(free, k, sup, "exponential"),
    _bstep.dense_bit_matrix(carry, k, sup, "exponential"),
  )


@pytest.fixture(scope="module")
def mfeat_batch():
  ds = data.load_mfeat(["fou", "kar"])
  idx = np.sort(np.random.default_rng(0).choice(ds.labels.size, 300, replace=False))
  return {"views": tuple(v[idx] for v in ds.views), "labels": ds.labels[idx]}


def test_chunk_size_none_is_one_exact_chunk_as_a_chunk_of_all_items(mfeat_batch):
  assert _chunks.num_chunks(60_000, None) == 1
  assert _chunks.chunk_order(jax.random.key(0), 60_000, None) is None
  key = jax.random.key(3)
  opts = dict(w_iters=30, max_inner=8)
  exact, hist = jhash.fit(
    jhash.methods.cdh(16, chunk_size=None, **opts), key, mfeat_batch, num_steps=2, progress=False
  )
  whole, want = jhash.fit(
    jhash.methods.cdh(16, chunk_size=300, **opts), key, mfeat_batch, num_steps=2, progress=False
  )
  np.testing.assert_array_equal(np.asarray(exact.codes), np.asarray(whole.codes))
  for name in ("objective", "flipped", "bit_objective"):
    np.testing.assert_array_equal(hist[name], want[name])
  assert hist["objective"][-1] > hist["objective_before"][0]


@pytest.mark.parametrize("value", [0, 1, -5, 2.5, "10", True])
def test_bad_chunk_sizes_name_themselves(value):
  with pytest.raises(ValueError, match="chunk_size"):
    jhash.methods.cdh(8, chunk_size=value)


def test_none_is_accepted_as_chunk_size():
  assert jhash.methods.cdh(8, chunk_size=None).num_bits == 8


def _temp_bytes(n, matrix_free):
  """Temp memory (bytes) of one compiled exponential sweep on ``n`` items, class ids."""
  args = (
    jax.ShapeDtypeStruct((n, K), jnp.int8),
    jax.ShapeDtypeStruct((n, K), jnp.float32),
    sv.Supervision(class_ids=jax.ShapeDtypeStruct((n,), jnp.int32)),
    jax.ShapeDtypeStruct((K, INNER), jnp.float32),
  )
  compiled = _sweep("exponential", 32, matrix_free).lower(*args).compile()
  return compiled.memory_analysis().temp_size_in_bytes


def test_matrix_free_memory_grows_linearly_and_the_grams_quadratically():
  """Expectation, written before the first run: from n = 2,000 to 8,000 the Gram sweep's
  temp memory (an int8 n x n Gram plus O(n)-row blocks) grows between 6x and 16x (16x
  for the Gram alone; the linear blocks pull it down), the matrix-free sweep's (only
  O(block_rows n + n K) buffers) about 4x: at most 5x."""
  small, large = 2000, 8000
  dense = [_temp_bytes(n, False) for n in (small, large)]
  free = [_temp_bytes(n, True) for n in (small, large)]
  print(f"temp bytes: Gram {dense}, matrix-free {free}")
  assert dense[1] >= large * large  # the Gram is there
  assert dense[1] / dense[0] > 6
  assert free[1] / free[0] < 5
  assert free[1] < dense[1]


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
    # 301 items: shards of 38 rows (the last with 35 real ones), blocks of 16 rows (the
    # last block of each shard overlaps the one before).
    n, k = 301, 12
    codes = np.where(rng.random((n, k)) < 0.5, 1, -1).astype(np.int8)
    z = (rng.random((n, k)) - 0.5).astype(np.float32)
    u = rng.random((k, 24)).astype(np.float32)
    labels = rng.integers(0, 6, n)
    y = np.where(rng.random((n, n)) < 0.5, 1, -1) * (rng.random((n, n)) < 0.7)
    y = np.triu(y, 1); y = (y + y.T).astype(np.int8)
    for merit, sup in (("exponential", sv.from_matrix(y)),
                       ("exponential", sv.from_labels(labels)),
                       ("linear", sv.from_labels(labels))):
      def run(free, mesh):
        return jax.jit(lambda c, zz, s, uu: _bstep.sweep(
          c, zz, s, 0.03, uu, merit=merit, block_rows=16, mesh=mesh, matrix_free=free))
      a, sa = run(False, None)(codes, z, sup, u)
      b, sb = run(True, mesh)(codes, z, sup, u)
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
      for x, w in zip(sa, sb):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(w))
      assert int(np.asarray(sa.flipped).sum()) > 0
    # The method, chunk_size=None over 8 devices against one chunk of the Gram on one.
    ds = jhash.data.load_mfeat(["fou", "kar"])
    idx = np.sort(rng.choice(ds.labels.size, 301, replace=False))
    batch = {"views": tuple(v[idx] for v in ds.views), "labels": ds.labels[idx]}
    key = jax.random.key(0)
    opts = dict(w_iters=20, max_inner=8)
    s1, _ = jhash.fit(jhash.methods.cdh(16, chunk_size=301, **opts), key, batch, num_steps=1)
    s8, _ = jhash.fit(jhash.methods.cdh(16, chunk_size=None, mesh=mesh, **opts), key, batch,
                      num_steps=1)
    np.testing.assert_array_equal(np.asarray(s1.codes), np.asarray(s8.codes))
    print("sharded matrix-free ok")
""")


def test_sharded_matrix_free_sweep_equals_the_single_device_gram_sweep():
  root = pathlib.Path(__file__).resolve().parents[1]
  env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
  env["JAX_PLATFORMS"] = "cpu"
  out = subprocess.run(
    [sys.executable, "-c", SHARDED_SCRIPT], env=env, capture_output=True, text=True, timeout=600
  )
  assert out.returncode == 0, out.stderr[-3000:]
  assert "sharded matrix-free ok" in out.stdout
