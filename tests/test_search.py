"""Hamming distances and exact top-k search against slow NumPy references."""

import doctest
import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from _search_reference import np_popcount_dist
from _search_reference import np_topk
from _search_reference import random_codes
from jhash import codes
from jhash import search

BIT_LENGTHS = [1, 7, 31, 32, 33, 48, 64, 100, 128]


# ----------------------------------------------------------------------------------------------
# NumPy references, written for clarity.


def np_pack(bits):
  """0/1 bits [n, K] -> uint32 words [n, ceil(K/32)]: bit j is bit j % 32 of word j // 32."""
  n, k = bits.shape
  words = np.zeros((n, -(-k // 32)), np.uint32)
  for j in range(k):
    words[:, j // 32] |= bits[:, j].astype(np.uint32) << np.uint32(j % 32)
  return words


def np_hamming(q_bits, db_bits):
  return (q_bits[:, None, :] != db_bits[None, :, :]).sum(-1)


def pooled_codes(rng, n, words, pool_size, mask=0xFFFFFFFF):
  """n packed codes drawn from a pool of pool_size codes (many exact duplicates)."""
  return random_codes(rng, n, words, pool=pool_size, mask=mask)


def assert_topk_equal(got, want_dist, want_idx):
  d, i = (np.asarray(a) for a in got)
  assert d.dtype == np.int32 or d.dtype == np.float32
  assert i.dtype == np.int32
  np.testing.assert_array_equal(d, want_dist)
  np.testing.assert_array_equal(i, want_idx)


# ----------------------------------------------------------------------------------------------
# Distances and packing.


@pytest.mark.parametrize("num_bits", BIT_LENGTHS)
def test_distances_equal_bit_count(num_bits, rng):
  q_bits = rng.integers(0, 2, size=(5, num_bits))
  db_bits = rng.integers(0, 2, size=(11, num_bits))
  q, db = np_pack(q_bits), np_pack(db_bits)
  want = np_hamming(q_bits, db_bits)
  np.testing.assert_array_equal(search.hamming_distance(q, db), want)
  pairwise = jax.jit(search.pairwise_hamming, static_argnums=(2, 3))  # one compile per case
  np.testing.assert_array_equal(pairwise(q, db, num_bits, "xor"), want)
  np.testing.assert_array_equal(pairwise(q, db, num_bits, "matmul"), want)


@pytest.mark.parametrize("num_bits", BIT_LENGTHS)
def test_pack_unpack_round_trip(num_bits, rng):
  signs = rng.choice(np.array([-1, 1], np.int8), size=(6, num_bits))
  bits = (signs > 0).astype(np.uint8)
  pack = jax.jit(codes.pack_bits)  # one compile per case instead of one per operation
  unpack = jax.jit(codes.unpack_bits, static_argnums=(1, 2))
  packed = np.asarray(pack(signs))
  np.testing.assert_array_equal(packed, np_pack(bits))  # the documented layout, padding zero
  np.testing.assert_array_equal(unpack(packed, num_bits, True), signs)
  np.testing.assert_array_equal(unpack(packed, num_bits, False), bits)


# ----------------------------------------------------------------------------------------------
# Plain top-k.

# "auto" runs the native CPU kernel where it is built (jhash.native), "xor" the array code.
TOPK_METHODS = ["auto", "xor"]


def test_top_k_keeps_lower_index_first_on_ties():
  # Every selection in jhash.search relies on this documented property of lax.top_k.
  keys = jnp.asarray([[3.0, 5.0, 5.0, 1.0, 5.0, 3.0, 5.0, 0.0, -0.0]])
  _, idx = lax.top_k(keys, 6)
  np.testing.assert_array_equal(idx, [[1, 2, 4, 6, 0, 5]])


@pytest.mark.parametrize("method", TOPK_METHODS)
@pytest.mark.parametrize("k", [1, 100, 3000])
def test_hamming_topk_many_ties(method, k, rng):
  # 8-bit codes from a pool of 40: every distance is shared by hundreds of items.
  db = pooled_codes(rng, 3000, 1, 40, mask=0xFF)
  q = pooled_codes(rng, 37, 1, 60, mask=0xFF)
  want = np_topk(np_popcount_dist(q, db), k)
  # 3000 is not a multiple of the block or of 32; 37 queries are not a multiple of 16.
  got = search.hamming_topk(q, db, k, num_bits=8, query_chunk=16, db_block=512, method=method)
  assert_topk_equal(got, *want)


@pytest.mark.parametrize("method", TOPK_METHODS)
@pytest.mark.parametrize("num_bits", [33, 100])
def test_hamming_topk_longer_codes(method, num_bits, rng):
  # 2 and 4 words: the unrolled and the compact kernels, both bit-sliced.
  bits = rng.integers(0, 2, size=(1200, num_bits))
  bits[600:900] = bits[:300]  # exact duplicates at larger indices
  db = np_pack(bits)
  # Queries: database rows, a complement (distance num_bits to row 7), random codes.
  q = np_pack(
    np.concatenate([bits[[5, 650, 1199]], 1 - bits[[7]], rng.integers(0, 2, size=(5, num_bits))])
  )
  want = np_topk(np_popcount_dist(q, db), 50)
  got = search.hamming_topk(q, db, 50, query_chunk=4, db_block=256, method=method)
  assert_topk_equal(got, *want)


@pytest.mark.parametrize("method", TOPK_METHODS)
@pytest.mark.parametrize("num_bits", [64, 128, 300])
def test_hamming_topk_extreme_distances(method, num_bits, rng):
  # Rows 0-299 are all ones (distance num_bits from the zero query, the largest
  # possible): a bit-sliced count that overflowed would rank them near instead.
  # 2, 4 and 10 words: unrolled, compact, and a count in two 7-word parts.
  bits = np.concatenate([np.ones((300, num_bits), int), rng.integers(0, 2, size=(300, num_bits))])
  db = np_pack(bits)
  q = np_pack(np.stack([np.zeros(num_bits, int), np.ones(num_bits, int), bits[450]]))
  want = np_topk(np_popcount_dist(q, db), 3)
  assert_topk_equal(search.hamming_topk(q, db, 3, method=method), *want)


@pytest.mark.parametrize("method", TOPK_METHODS)
def test_hamming_topk_ties_across_blocks_go_to_smaller_index(method):
  # Two super-blocks of 256 rows. The later one holds the nearest row (distance 3)
  # and a row at distance 5; the earlier one also holds a row at distance 5, which
  # must win the tie for second place.
  db = np.full((512, 1), 0xFF, np.uint32)
  db[10], db[300], db[330] = 0x1F, 0x07, 0x1F
  q = np.zeros((1, 1), np.uint32)
  got = search.hamming_topk(q, db, 2, num_bits=8, method=method)
  assert_topk_equal(got, [[3, 5]], [[300, 10]])


@pytest.mark.parametrize("method", ["xor", "matmul"])
def test_hamming_topk_identical_codes(method, rng):
  # All distances tie: the answer is the first k indices, for every query.
  db = np.full((1001, 2), 0x0F0F1234, np.uint32)
  q = rng.integers(0, 2**32, size=(5, 2), dtype=np.uint64).astype(np.uint32)
  want = np_topk(np_popcount_dist(q, db), 300)
  np.testing.assert_array_equal(want[1][0], np.arange(300))
  got = search.hamming_topk(q, db, 300, query_chunk=2, db_block=128, method=method)
  assert_topk_equal(got, *want)


@pytest.mark.parametrize("method", TOPK_METHODS)
def test_hamming_topk_padding_rows_never_returned(method):
  # The last row is the only exact match, in a partly filled sub-block; k = n asks
  # for every row, so any padded row would show up.
  db = np.zeros((45, 1), np.uint32)
  db[-1] = 7
  q = np.array([[7], [0]], np.uint32)
  want = np_topk(np_popcount_dist(q, db), 45)
  got = search.hamming_topk(q, db, 45, num_bits=3, method=method)
  assert_topk_equal(got, *want)
  assert np.asarray(got[1])[0, 0] == 44


def complement_blocks(rng, n, num_bits=8):
  """Three queries and n packed K-bit codes, whole blocks of them at distance K.

  Rows before 700 are the complement of query 0 (all ones; six random rows among
  them), rows from 700 on the complement of query 1 (all zeros): for each of the two,
  whole super-blocks and sub-blocks have minimum distance K, so a padding sentinel
  that does not exceed K ties with them. Query 2 is a random code.
  """
  full = np.uint32((1 << num_bits) - 1)
  q = np.array([[0], [full], [0b1011]], np.uint32)
  db = np.full((n, 1), full, np.uint32)
  db[3:9] = rng.integers(0, full + 1, size=(6, 1), dtype=np.uint32)
  db[700:] = 0
  return q, db


@pytest.mark.parametrize("method", TOPK_METHODS)
@pytest.mark.parametrize("k", [600, 1000])
def test_hamming_topk_blocks_at_the_largest_distance(method, k, rng):
  # 1000 rows: 4 super-blocks (the last partly filled), in one group. k = 600 needs
  # rows of the super-blocks whose minimum is K; k = n needs every row.
  q, db = complement_blocks(rng, 1000)
  want = np_topk(np_popcount_dist(q, db), k)
  assert_topk_equal(search.hamming_topk(q, db, k, num_bits=8, db_block=256, method=method), *want)


def test_multi_code_topk_blocks_at_the_largest_distance(rng):
  k = 600
  q, flat = complement_blocks(rng, 2000)
  db = flat.reshape(1000, 2, 1)
  mask = np.ones((1000, 2), bool)
  mask[::3, 1] = False
  dist = np.where(mask[None], np_popcount_dist(q, flat).reshape(-1, 1000, 2), 10**6).min(-1)
  want = np_topk(dist, k)
  assert_topk_equal(search.multi_code_topk(q, db, mask, k, num_bits=8, db_block=256), *want)


@pytest.mark.parametrize("method", TOPK_METHODS)
def test_hamming_topk_partial_sub_block_keeps_its_true_minimum(method):
  # Row 32 sits alone in the last, partly filled sub-block; the padding must not
  # lower that sub-block's minimum below its real one, or it would displace row 5.
  db = np.full((33, 1), 0xFF, np.uint32)
  db[5], db[32] = 0x01, 0x1F
  q = np.zeros((1, 1), np.uint32)
  assert_topk_equal(search.hamming_topk(q, db, 1, num_bits=8, method=method), [[1]], [[5]])


@pytest.mark.parametrize("method", TOPK_METHODS)
def test_hamming_topk_several_merges(method, rng):
  # 2.2 million rows make 3 groups of blocks (about 32768 sub-blocks each), so the
  # kept super-blocks are carried and merged from group to group.
  # Uniform 32-bit codes put the nearest rows in every group; planted copies of the
  # queries (and of their 1-bit neighbours, in two groups) add ties across groups.
  db = pooled_codes(rng, 2_200_000, 1, 2_200_000)
  q = pooled_codes(rng, 3, 1, 3)
  db[[1_900_000, 2_199_999]] = q[0]
  db[[5, 1_500_000]] = q[1] ^ np.uint32(1 << 7)
  db[[800_000, 2_000_000]] = q[2] ^ np.uint32(1)
  want = np_topk(np_popcount_dist(q, db), 64)
  assert_topk_equal(search.hamming_topk(q, db, 64, method=method), *want)


def test_hamming_topk_unchecked_composes_in_jit(rng):
  db = pooled_codes(rng, 500, 2, 30)
  q = pooled_codes(rng, 9, 2, 30)

  @jax.jit
  def nearest_twice(q, db):
    d, i = search.hamming_topk_unchecked(q, db, 10, query_chunk=4, db_block=128)
    return d * 2, i

  d, i = nearest_twice(q, db)
  want_d, want_i = np_topk(np_popcount_dist(q, db), 10)
  np.testing.assert_array_equal(d, 2 * want_d)
  np.testing.assert_array_equal(i, want_i)


def test_docstring_example_of_hamming_topk_runs():
  # The example in the docstring, run by doctest so that it cannot rot.
  runner = doctest.DocTestRunner()
  for test in doctest.DocTestFinder().find(search.hamming_topk, "hamming_topk", globs={}):
    runner.run(test)
  assert runner.tries > 0 and runner.failures == 0, "see the doctest report above"


# ----------------------------------------------------------------------------------------------
# Weighted and multi-code top-k.


def test_weighted_hamming_topk(rng):
  num_bits = 40
  # Weights in multiples of 1/8 (some negative) keep float32 sums exact, so ties are real.
  weights = rng.integers(-8, 17, size=num_bits) / 8.0
  db = rng.choice(np.array([-1, 1], np.int8), size=(700, num_bits))
  db[350:] = db[rng.integers(0, 350, size=350)]  # duplicates
  q = rng.choice(np.array([-1, 1], np.int8), size=(7, num_bits))
  dist = ((q[:, None, :] != db[None, :, :]) * weights).sum(-1)
  want_d, want_i = np_topk(dist, 40)
  d, i = search.weighted_hamming_topk(q, db, weights, 40, query_chunk=3, db_block=128)
  np.testing.assert_array_equal(np.asarray(d, np.float64), want_d)
  np.testing.assert_array_equal(i, want_i)


def test_weighted_topk_distances_are_weighted_hamming_distance(rng):
  weights = rng.normal(size=24)
  db = rng.choice(np.array([-1, 1], np.int8), size=(300, 24))
  q = rng.choice(np.array([-1, 1], np.int8), size=(4, 24))
  d, i = search.weighted_hamming_topk(q, db, weights, 20)
  full = np.asarray(search.weighted_hamming_distance(q, db, weights))
  np.testing.assert_allclose(d, np.take_along_axis(full, np.asarray(i), 1), rtol=0, atol=1e-5)
  np.testing.assert_allclose(d, np.sort(full, axis=1)[:, :20], rtol=0, atol=1e-5)


def test_weight_units_round_to_one_power_of_two(rng):
  for weights in (
    rng.normal(size=48),
    rng.normal(size=300) * 1e-6,
    np.array([3.0, -0.3, 0.0]),
    np.array([3e38, 3e38, 1.0, -2e38]),
    np.array([1e-30, 3e-31]),
  ):
    units, unit = (np.asarray(x, np.float64) for x in search.weight_units(weights))
    w32 = weights.astype(np.float32).astype(np.float64)  # the weights as used
    span = np.abs(w32).sum()  # float64: no overflow
    assert np.log2(unit) == np.round(np.log2(unit))  # a power of two
    assert span / 2**23 <= unit <= span / 2**22  # 2^-23 of the span
    np.testing.assert_array_equal(units, np.round(units))  # integers
    assert np.abs(units * unit - w32).max() <= unit / 2
    assert np.abs(units).sum() < 2**23 + len(weights)
  ints = rng.integers(-40, 41, size=64).astype(np.float32)  # dyadic: kept exactly
  units, unit = search.weight_units(ints)
  np.testing.assert_array_equal(np.asarray(units) * np.asarray(unit), ints)


def test_weighted_distance_is_the_exact_sum_of_the_units(rng):
  # 300 bits of units near 2^23 / 300 each: partial sums up to 2^23, exact in float32.
  weights = rng.normal(size=300).astype(np.float32)
  q = rng.choice(np.array([-1, 1], np.int8), size=(5, 300))
  db = rng.choice(np.array([-1, 1], np.int8), size=(200, 300))
  units, unit = search.weight_units(weights)
  want = ((q[:, None, :] != db[None]) * np.asarray(units, np.int64)).sum(-1)
  got = search.weighted_hamming_distance(q, db, weights)
  np.testing.assert_array_equal(np.asarray(got, np.float64), want * float(unit))
  d, i = search.weighted_hamming_topk(q, db, weights, 30)
  np.testing.assert_array_equal(
    np.asarray(d, np.float64), np.take_along_axis(want, np.asarray(i), 1) * float(unit)
  )
  np.testing.assert_array_equal(i, np.argsort(want, axis=1, kind="stable")[:, :30])


@pytest.mark.parametrize("codes_per_item", [1, 3])
def test_multi_code_topk(codes_per_item, rng):
  n, m = 900, codes_per_item
  db = pooled_codes(rng, n * m, 1, 25, mask=0x3FF).reshape(n, m, 1)
  mask = rng.random((n, m)) < 0.5
  mask[np.arange(n), rng.integers(0, m, size=n)] = True
  if m > 1:
    mask[:100] = False
    mask[:100, 0] = True  # items with exactly one valid code
  q = pooled_codes(rng, 11, 1, 25, mask=0x3FF)
  flat = np_popcount_dist(q, db.reshape(n * m, 1)).reshape(-1, n, m)
  dist = np.where(mask[None], flat, 10**6).min(-1)
  want = np_topk(dist, 60)
  got = search.multi_code_topk(q, db, mask, 60, num_bits=10, query_chunk=4, db_block=256)
  assert_topk_equal(got, *want)


# ----------------------------------------------------------------------------------------------
# Sharded search: a fresh interpreter with 8 host devices.

SHARDED_SCRIPT = textwrap.dedent("""
    import os
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=8")
    import jax
    import numpy as np
    from jhash import search
    assert jax.device_count() == 8, jax.devices()
    rng = np.random.default_rng(1)
    # 1003 rows: not a multiple of 8 devices (shards of 126, the last with 121 real
    # rows); k = 200 is above a shard's size, so every shard returns all its rows.
    n, k = 1003, 200
    pool = rng.integers(0, 64, size=(50, 2), dtype=np.uint32)  # 12-bit codes: many ties
    db = pool[rng.integers(0, 50, size=n)]
    q = pool[rng.integers(0, 50, size=13)] ^ np.uint32(1)
    want = search.hamming_topk(q, db, k, db_block=256)
    got = search.sharded_hamming_topk(q, db, k, db_block=256)
    for a, b in zip(want, got):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    ref = np.bitwise_count(q[:, None, :] ^ db[None]).sum(-1)
    order = np.stack([np.lexsort((np.arange(n), r))[:k] for r in ref])
    np.testing.assert_array_equal(np.asarray(got[1]), order)
    # k = n: every row comes back, in order, from shards that each give all of theirs.
    for a, b in zip(search.hamming_topk(q, db, n, db_block=256),
                    search.sharded_hamming_topk(q, db, n, db_block=256)):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # The k nearest all in one shard: shard 2 (rows 252-377) holds the query's code, every
    # other row its complement; k = 126, the shard's size, needs its every row.
    near = np.tile(q[:1] ^ np.uint32(0x3F), (n, 1))
    near[252:378] = q[:1]
    d, i = search.sharded_hamming_topk(q[:1], near, 126, db_block=256)
    np.testing.assert_array_equal(np.asarray(i)[0], np.arange(252, 378))
    np.testing.assert_array_equal(np.asarray(d), 0)
    d0, i0 = search.sharded_hamming_topk(q[:0], db, 5, db_block=256)  # no queries: empty
    assert d0.shape == i0.shape == (0, 5), (d0.shape, i0.shape)
    # A mesh of Explicit axes, jax.make_mesh's default, and one of Auto axes: the same.
    for types in (jax.sharding.AxisType.Explicit, jax.sharding.AxisType.Auto):
      mesh = jax.make_mesh((8,), ("data",), axis_types=(types,))
      for a, b in zip(want, search.sharded_hamming_topk(q, db, k, mesh=mesh, db_block=256)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # Several codes an item (up to 3): equal to multi_code_topk, and to a NumPy
    # minimum over each item's codes, at k past a shard's size and at k = n.
    codes = pool[rng.integers(0, 50, size=(n, 3))]
    held = rng.random((n, 3)) < 0.6
    held[:, 0] |= ~held.any(1)
    for kk in (k, n):
      want_m = search.multi_code_topk(q, codes, held, kk, db_block=256)
      got_m = search.sharded_multi_code_topk(q, codes, held, kk, db_block=256)
      for a, b in zip(want_m, got_m):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    per_code = np.bitwise_count(q[:, None, None, :] ^ codes[None]).sum(-1)
    items = np.where(held[None], per_code, 99).min(-1)
    order = np.stack([np.lexsort((np.arange(n), r))[:k] for r in items])
    got_m = search.sharded_multi_code_topk(q, codes, held, k, db_block=256)
    np.testing.assert_array_equal(np.asarray(got_m[1]), order)
    # Padding rows past num_rows (no code, as jhash.distributed.global_rows pads) never
    # come back, even at k = num_rows.
    padded = np.concatenate([codes, np.zeros((5, 3, 2), np.uint32)])
    mask = np.concatenate([held, np.zeros((5, 3), bool)])
    got_p = search.sharded_multi_code_topk(q, padded, mask, n, num_rows=n)
    want_p = search.multi_code_topk(q, codes, held, n)
    for a, b in zip(want_p, got_p):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    print("sharded ok")
""")


def test_sharded_equals_single_device():
  root = pathlib.Path(__file__).resolve().parents[1]
  env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
  env["JAX_PLATFORMS"] = "cpu"  # the forced host devices are CPU devices, on any machine
  out = subprocess.run(
    [sys.executable, "-c", SHARDED_SCRIPT], env=env, capture_output=True, text=True, timeout=300
  )
  assert out.returncode == 0, out.stderr[-3000:]
  assert "sharded ok" in out.stdout


# ----------------------------------------------------------------------------------------------
# Bad input is refused at the door, naming the argument.


def _small(rng, words=1, n=10):
  return rng.integers(0, 2**32, size=(n, words), dtype=np.uint64).astype(np.uint32)


def test_bad_inputs(rng):
  q, db = _small(rng), _small(rng)
  with pytest.raises(ValueError, match="same number of words"):
    search.hamming_topk(q, _small(rng, words=2), 3)
  with pytest.raises(ValueError, match="db_packed must be packed codes of dtype uint32"):
    search.hamming_topk(q, db.astype(np.int32), 3)
  with pytest.raises(ValueError, match="query_packed must be packed codes of dtype uint32"):
    search.hamming_topk(q.astype(np.int64), db, 3)
  with pytest.raises(ValueError, match=r"k must be at most the database size \(db_packed"):
    search.hamming_topk(q, db, 11)
  with pytest.raises(ValueError, match="k must be >= 1"):
    search.hamming_topk(q, db, 0)
  with pytest.raises(ValueError, match="num_bits"):
    search.hamming_topk(q, db, 3, num_bits=40)
  with pytest.raises(ValueError, match="k must be at most"):
    search.sharded_hamming_topk(q, db, 11)
  with pytest.raises(ValueError, match="mesh must be a 1-D"):
    search.sharded_hamming_topk(q, db, 3, mesh="db")


def test_padding_bits_set_are_refused(rng):
  # 12-bit codes with bit 12 set in one database code: XOR + popcount would count it
  # (hamming_distance of two such codes could reach 20 > 12).
  signs = rng.choice(np.array([-1, 1], np.int8), size=(6, 12))
  q, db = np.asarray(codes.pack_bits(signs[:2])), np.asarray(codes.pack_bits(signs))
  bad = db.copy()
  bad[4, 0] |= np.uint32(0xFF000)
  mask = np.ones((3, 2), bool)
  match = r"db_packed sets bits past num_bits=12 .*code 4"
  with pytest.raises(ValueError, match=match):
    search.hamming_distance(q, bad, num_bits=12)
  with pytest.raises(ValueError, match=match):
    search.hamming_topk(q, bad, 2, num_bits=12)
  with pytest.raises(ValueError, match=match):
    search.sharded_hamming_topk(q, bad, 2, num_bits=12)
  with pytest.raises(ValueError, match=match):
    search.multi_code_topk(q, bad.reshape(3, 2, 1), mask, 2, num_bits=12)
  with pytest.raises(ValueError, match=r"query_packed sets bits past num_bits=12 .*code 1"):
    search.hamming_topk(bad[3:5], db, 2, num_bits=12)
  # Without num_bits every one of the 32 bits counts, as documented.
  np.testing.assert_array_equal(
    search.hamming_distance(q, bad)[:, 4], np_popcount_dist(q, bad)[:, 4]
  )


def test_no_queries_give_empty_results(rng):
  db = _small(rng, n=40)
  q0 = np.zeros((0, 1), np.uint32)
  signs = rng.choice(np.array([-1, 1], np.int8), size=(40, 6))
  mask = np.ones((20, 2), bool)
  results = [
    search.hamming_topk(q0, db, 5, num_bits=32),
    search.multi_code_topk(q0, db.reshape(20, 2, 1), mask, 5),
    search.weighted_hamming_topk(signs[:0], signs, np.ones(6), 5),
    jax.jit(lambda q, d: search.hamming_topk_unchecked(q, d, 5))(q0, db),
  ]
  for d, i in results:
    assert d.shape == (0, 5) and i.shape == (0, 5) and i.dtype == np.int32
  assert results[0][0].dtype == np.int32 and results[2][0].dtype == np.float32
  assert search.hamming_distance(q0, db).shape == (0, 40)
  assert search.weighted_hamming_distance(signs[:0], signs, np.ones(6)).shape == (0, 40)
  # No database items: distances [q, 0]; a top-k cannot be met and names k.
  db0 = np.zeros((0, 2, 1), np.uint32)
  assert search.multi_code_hamming(db[:3], db0, np.ones((0, 2), bool)).shape == (3, 0)
  with pytest.raises(ValueError, match=r"k must be at most the database size \(db_packed has 0"):
    search.hamming_topk(db[:3], db[:0], 1)
  with pytest.raises(ValueError, match=r"k must be at most the database size \(db_codes has 0"):
    search.weighted_hamming_topk(signs, signs[:0], np.ones(6), 1)


def test_bad_multi_code_and_weighted_inputs(rng):
  q = _small(rng)
  db = _small(rng, n=12).reshape(4, 3, 1)
  mask = np.ones((4, 3), bool)
  mask[2] = False
  with pytest.raises(ValueError, match="db_mask must mark at least one valid code.*item 2"):
    search.multi_code_topk(q, db, mask, 2)
  with pytest.raises(ValueError, match="db_mask must have shape"):
    search.multi_code_topk(q, db, np.ones((4, 2), bool), 2)
  with pytest.raises(ValueError, match="same number of words"):
    search.multi_code_topk(_small(rng, words=2), db, np.ones((4, 3), bool), 2)
  with pytest.raises(ValueError, match="k must be at most"):
    search.multi_code_topk(q, db, np.ones((4, 3), bool), 5)
  signs = np.ones((5, 4), np.int8)
  with pytest.raises(ValueError, match="weights must have one entry per bit"):
    search.weighted_hamming_topk(signs, signs, np.ones(3), 2)
  with pytest.raises(ValueError, match="weights must hold finite values"):
    search.weighted_hamming_topk(signs, signs, np.array([1.0, np.nan, 0, 0]), 2)
  with pytest.raises(ValueError, match="db_codes must hold only -1 and \\+1"):
    search.weighted_hamming_topk(signs, np.zeros((5, 4)), np.ones(4), 2)
  with pytest.raises(ValueError, match="k must be >= 1"):
    search.weighted_hamming_topk(signs, signs, np.ones(4), 0)
