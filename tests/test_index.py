"""Hash-bucket index against a brute-force NumPy reference.

The reference computes every item's distance to the query as the minimum over
its codes, and orders items as the bucket search documents: by that distance,
then by ``query XOR code`` (the visit order inside a radius) of the nearest
code, then by item id.
"""

import functools
import math
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jhash import codes as codes_lib
from jhash import index as index_lib
from jhash.search import hamming_distance


def pack(codes):
  """{-1,+1} codes [..., K] -> packed uint32 [..., ceil(K/32)] (NumPy, independent of jhash)."""
  codes = np.asarray(codes)
  k = codes.shape[-1]
  bits = np.zeros(codes.shape[:-1] + (32 * -(-k // 32),), np.uint8)
  bits[..., :k] = codes > 0
  return np.packbits(bits, axis=-1, bitorder="little").view("<u4").astype(np.uint32)


def unpack(packed, num_bits):
  """Inverse of ``pack``, as 0/1 bits."""
  as_bytes = np.ascontiguousarray(np.asarray(packed, "<u4")).view(np.uint8)
  return np.unpackbits(as_bytes, axis=-1, bitorder="little")[..., :num_bits]


def clustered_codes(rng, num_bits, shape, num_centres=4, flip_prob=None):
  """Codes in {-1,+1} of the given leading shape, near a few random centres."""
  flip_prob = 1.5 / num_bits if flip_prob is None else flip_prob
  centres = np.where(rng.random((num_centres, num_bits)) < 0.5, -1, 1).astype(np.int8)
  which = rng.integers(0, num_centres, size=shape)
  flips = rng.random(shape + (num_bits,)) < flip_prob
  return np.where(flips, -centres[which], centres[which]).astype(np.int8), centres


def near_queries(rng, centres, num_queries):
  num_bits = centres.shape[1]
  q = centres[rng.integers(0, len(centres), size=num_queries)].copy()
  for row in q:
    row[rng.choice(num_bits, size=rng.integers(0, 3), replace=False)] *= -1
  return q


def as_int(bits):
  """Rows of 0/1 bits [..., K] -> Python ints (bit j has weight 2**j)."""
  weights = [1 << j for j in range(bits.shape[-1])]
  return np.array(
    [sum(w for w, b in zip(weights, row) if b) for row in bits.reshape(-1, bits.shape[-1])],
    dtype=object,
  ).reshape(bits.shape[:-1])


def reference(codes, mask, ids, query):
  """Items within reach of one query: rows (distance, xor value, id) sorted, and the
  distinct codes' distances (for counting non-empty buckets)."""
  diff = codes != query  # [n, m, K]
  dist = diff.sum(-1)
  xor = as_int(diff)
  rows = []
  for i in range(codes.shape[0]):
    best = min(((dist[i, c], xor[i, c]) for c in range(codes.shape[1]) if mask[i, c]), default=None)
    if best is not None:
      rows.append((int(best[0]), best[1], int(ids[i])))
  rows.sort()
  distinct = np.unique(codes[mask], axis=0)
  return rows, (distinct != query).sum(-1)


def expected_results(codes, mask, ids, queries, num_wanted, max_radius, max_results):
  num_bits = codes.shape[-1]
  out = []
  for query in queries:
    rows, code_dist = reference(codes, mask, ids, query)
    dists = np.array([r[0] for r in rows])
    reached = max_radius
    for r in range(max_radius + 1):
      if np.sum(dists <= r) >= num_wanted:
        reached = r
        break
    kept = [r for r in rows if r[0] <= reached]
    out.append(
      dict(
        ids=[r[2] for r in kept][:max_results],
        radii=[r[0] for r in kept][:max_results],
        found=len(kept),
        reached=reached,
        visited=sum(math.comb(num_bits, i) for i in range(reached + 1)),
        nonempty=int(np.sum(code_dist <= reached)),
      )
    )
  return out


def assert_matches(res, expected, max_results):
  res = jax.tree.map(np.asarray, res)
  for i, e in enumerate(expected):
    pad = max_results - len(e["ids"])
    np.testing.assert_array_equal(res.item_ids[i], e["ids"] + [-1] * pad, err_msg=f"query {i}")
    np.testing.assert_array_equal(res.radii[i], e["radii"] + [-1] * pad, err_msg=f"query {i}")
    assert res.num_found[i] == e["found"], i
    assert res.radius_reached[i] == e["reached"], i
    assert res.buckets_visited[i] == e["visited"], i
    assert res.buckets_nonempty[i] == e["nonempty"], i


# K -> (number of items, search radius, centres): few items and radius 2 for the long
# codes; at K = 16 every query finds more than SLOTS items. The searched cases are
# cached so later tests reuse them (each new shape compiles).
CASES = {8: (300, 3, 4), 16: (500, 2, 2), 32: (200, 2, 4), 33: (100, 2, 4), 64: (100, 2, 4)}
SLOTS = 64


@functools.lru_cache(maxsize=None)
def searched_case(num_bits):
  num_items, radius, num_centres = CASES[num_bits]
  rng = np.random.default_rng(num_bits)
  codes, centres = clustered_codes(rng, num_bits, (num_items,), num_centres=num_centres)
  queries = near_queries(rng, centres, 12)
  index = index_lib.build_index(codes, num_bits=num_bits)
  res = index_lib.bucket_search(
    index, pack(queries), num_wanted=num_items + 1, max_radius=radius, max_results=SLOTS
  )
  return codes, queries, jax.tree.map(np.asarray, res), index


@pytest.mark.parametrize("num_bits", sorted(CASES))
def test_bucket_search_equals_brute_force(num_bits):
  codes, queries, res, _ = searched_case(num_bits)
  num_items, radius, _ = CASES[num_bits]
  expected = expected_results(
    codes[:, None],
    np.ones((num_items, 1), bool),
    np.arange(num_items),
    queries,
    num_items + 1,
    radius,
    SLOTS,
  )
  assert max(e["found"] for e in expected) > 1  # the data reach past radius 0
  assert_matches(res, expected, SLOTS)  # past SLOTS: counted in num_found, not returned


def test_multi_code_items_found_once_at_nearest_code(rng):
  num_bits, num_items, m = 64, 120, 3
  codes, centres = clustered_codes(rng, num_bits, (num_items, m))
  codes[::7, 1] = codes[::7, 0]  # an item's duplicate code is stored once
  mask = rng.random((num_items, m)) < 0.7
  mask[:, 0] = True
  mask[5] = False  # an item with no code is not indexed
  queries = near_queries(rng, centres, 10)
  index = index_lib.build_index(codes, num_bits=num_bits, mask=mask)
  assert index.max_codes_per_item == m
  res = index_lib.radius_search(index, pack(queries), 2)
  expected = expected_results(
    codes, mask, np.arange(num_items), queries, num_items + 1, 2, res.item_ids.shape[1]
  )
  assert max(e["found"] for e in expected) > 3
  assert_matches(res, expected, res.item_ids.shape[1])
  assert 5 not in np.asarray(res.item_ids)


def test_flat_pairs_equal_multi_code_rows(rng):
  num_bits, num_items, m = 32, 80, 3
  codes, centres = clustered_codes(rng, num_bits, (num_items, m))
  codes[::5, 2] = codes[::5, 0]
  ids = rng.permutation(1000)[:num_items] * 7  # non-contiguous, unsorted ids
  flat_codes = codes.reshape(-1, num_bits)
  flat_ids = np.repeat(ids, m)
  order = rng.permutation(flat_ids.size)
  flat = index_lib.build_index(pack(flat_codes[order]), num_bits=num_bits, item_ids=flat_ids[order])
  rows = index_lib.build_index(codes, num_bits=num_bits, item_ids=ids)
  distinct_pairs = sum(len(np.unique(codes[i], axis=0)) for i in range(num_items))
  assert flat.bucket_items.shape[0] == distinct_pairs == rows.bucket_items.shape[0]
  queries = pack(near_queries(rng, centres, 8))
  a = index_lib.bucket_search(flat, queries, num_wanted=6, max_radius=3, max_results=16)
  b = index_lib.bucket_search(rows, queries, num_wanted=6, max_radius=3, max_results=16)
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x, y)
  unpacked = 2 * unpack(queries, num_bits).astype(np.int8) - 1
  expected = expected_results(codes, np.ones((num_items, m), bool), ids, unpacked, 6, 3, 16)
  assert_matches(a, expected, 16)


@pytest.mark.parametrize("multi", [False, True])
def test_stops_at_first_radius_with_enough(rng, multi):
  num_bits, num_items, num_wanted, max_radius = 24, 400, 5, 3
  shape = (num_items, 2) if multi else (num_items,)
  codes, centres = clustered_codes(rng, num_bits, shape, num_centres=30, flip_prob=0.12)
  codes = codes if multi else codes[:, None]
  mask = np.ones(codes.shape[:2], bool)
  queries = near_queries(rng, centres, 16)
  index = index_lib.build_index(codes if multi else codes[:, 0], num_bits=num_bits)
  res = index_lib.bucket_search(
    index, pack(queries), num_wanted=num_wanted, max_radius=max_radius, max_results=64
  )
  expected = expected_results(
    codes, mask, np.arange(num_items), queries, num_wanted, max_radius, 64
  )
  reached = [e["reached"] for e in expected]
  assert len(set(reached)) > 1  # queries stop at different radii
  assert any(e["found"] > num_wanted for e in expected)  # a radius is finished, not cut
  assert_matches(res, expected, 64)


def test_tuning_knobs_change_no_result():
  # Blocks of 1 query or all of them, any searchsorted method: the same results.
  _, queries, res, index = searched_case(32)
  search = dict(num_wanted=201, max_radius=2, max_results=SLOTS)
  for probes, method in ((1, "compare_all"), (1 << 10, "sort"), (1 << 22, "scan_unrolled")):
    tuned = index_lib.bucket_search(
      index, pack(queries), probes_per_block=probes, searchsorted_method=method, **search
    )
    for x, y in zip(tuned, res):
      np.testing.assert_array_equal(x, y)
  with pytest.raises(ValueError, match="searchsorted_method must be one of"):
    index_lib.bucket_search(index, pack(queries), searchsorted_method="binary", **search)
  with pytest.raises(ValueError, match="probes_per_block must be >= 1"):
    index_lib.bucket_search(index, pack(queries), probes_per_block=0, **search)


def test_radius_search_widens_past_the_first_slots():
  codes, queries, cut, index = searched_case(16)
  num_items, radius, _ = CASES[16]
  full = index_lib.radius_search(index, pack(queries), radius)
  assert full.item_ids.shape[1] == 4 * SLOTS
  expected = expected_results(
    codes[:, None],
    np.ones((num_items, 1), bool),
    np.arange(num_items),
    queries,
    num_items + 1,
    radius,
    4 * SLOTS,
  )
  assert all(SLOTS < e["found"] <= 4 * SLOTS for e in expected)
  assert_matches(full, expected, 4 * SLOTS)
  np.testing.assert_array_equal(full.item_ids[:, :SLOTS], cut.item_ids)


@pytest.mark.parametrize("num_bits,skewed", [(20, False), (64, True)])
def test_lookup_equals_exact_matches(rng, num_bits, skewed):
  codes, centres = clustered_codes(rng, num_bits, (300,), flip_prob=0.03)
  if skewed:  # all codes share their top 52 bits: one directory run holds every key
    codes[:, 12:] = centres[:1, 12:]
    centres[:, 12:] = centres[:1, 12:]
  queries = np.concatenate([near_queries(rng, centres, 20), codes[:5]])
  index = index_lib.build_index(codes, num_bits=num_bits)
  if skewed:
    assert int(index.search_steps) == index.num_buckets.bit_length() > 4
  start, count = index_lib.lookup(index, pack(queries))
  items = np.asarray(index.item_ids)[np.asarray(index.bucket_items)]
  code_values, query_values = as_int(codes > 0), as_int(queries > 0)
  hits = 0
  for i, query in enumerate(queries):
    want = np.flatnonzero((codes == query).all(-1))
    got = items[int(start[i]) : int(start[i]) + int(count[i])]
    np.testing.assert_array_equal(got, want)
    assert start[i] == sum(v < query_values[i] for v in code_values)  # insertion point
    hits += want.size > 0
  assert 5 <= hits < len(queries)


def test_index_passes_into_jit_with_traced_num_wanted(rng):
  num_bits, num_items = 40, 200
  codes, centres = clustered_codes(rng, num_bits, (num_items,))
  queries = near_queries(rng, centres, 5)
  index = index_lib.build_index(codes, num_bits=num_bits)

  @jax.jit
  def search(index, queries, num_wanted):
    return index_lib.bucket_search(
      index, queries, num_wanted=num_wanted, max_radius=2, max_results=8
    )

  mask = np.ones((num_items, 1), bool)
  for num_wanted in (1, 30):
    res = search(index, pack(queries), jnp.int32(num_wanted))
    assert_matches(
      res,
      expected_results(codes[:, None], mask, np.arange(num_items), queries, num_wanted, 2, 8),
      8,
    )
  on_device = jax.device_put(index, jax.devices()[0])
  assert isinstance(on_device, index_lib.BucketIndex)
  np.testing.assert_array_equal(
    index_lib.lookup(on_device, pack(queries))[1], (codes[None] == queries[:, None]).all(-1).sum(-1)
  )


def test_a_search_first_traced_under_jit_leaves_eager_searches_working(rng):
  """The flip masks of a setting are made once and cached: made inside a trace (the
  first search of that setting under jit), a tracer must not be what the cache keeps."""
  from jhash.index import _search

  num_bits, num_items = 20, 50
  codes, centres = clustered_codes(rng, num_bits, (num_items,))
  queries = near_queries(rng, centres, 3)
  index = index_lib.build_index(codes, num_bits=num_bits)
  search = lambda index, queries: index_lib.bucket_search(
    index, queries, num_wanted=5, max_radius=2, max_results=8
  )
  _search._device_chunks.cache_clear()
  traced = jax.jit(search)(index, pack(queries))
  eager = search(index, pack(queries))
  for a, b in zip(traced, eager):
    np.testing.assert_array_equal(a, b)
  assert_matches(
    eager,
    expected_results(
      codes[:, None], np.ones((num_items, 1), bool), np.arange(num_items), queries, 5, 2, 8
    ),
    8,
  )


@pytest.mark.parametrize("num_bits,radius", [(10, 3), (64, 2), (40, 1)])
def test_flip_masks_enumerate_each_pattern_once_in_increasing_order(num_bits, radius):
  masks = index_lib.flip_masks(num_bits, radius)
  assert masks.shape == (math.comb(num_bits, radius), -(-num_bits // 32))
  values = as_int(unpack(masks, num_bits)).tolist()
  assert values == sorted(set(values))
  counts = np.asarray(jax.lax.population_count(masks)).sum(-1)
  assert (counts == radius).all()


# Substring tables (multi-index hashing) --------------------------------------------------


def crop_codes_database(rng, num_items, max_codes, num_bits, num_flips=3):
  """MCH-like multi-codes in {-1,+1} [n, m, K] and mask [n, m]: a random whole-image code
  per item (slot 0, always kept) and crop codes, each the whole code with 0 to
  ``num_flips`` bits flipped (0: an item with several codes in one bucket)."""
  whole = np.where(rng.random((num_items, num_bits)) < 0.5, -1, 1).astype(np.int8)
  codes = np.repeat(whole[:, None], max_codes, axis=1)
  for i in range(num_items):
    for c in range(1, max_codes):
      codes[i, c, rng.choice(num_bits, size=rng.integers(0, num_flips + 1), replace=False)] *= -1
  mask = rng.random((num_items, max_codes)) < 0.6
  mask[:, 0] = True
  return codes, mask


def near_codes(rng, codes, mask, num_queries, most_flips=2):
  """Database codes with 0 to ``most_flips`` bits flipped."""
  pool = codes[mask]
  q = pool[rng.integers(0, len(pool), size=num_queries)].copy()
  for row in q:
    row[rng.choice(q.shape[1], size=rng.integers(0, most_flips + 1), replace=False)] *= -1
  return q


@functools.partial(jax.jit, static_argnames=("plan", "max_radius"))
def _most_hits(index, queries, plan, max_radius):
  from jhash.index import _substrings  # pylint: disable=import-outside-toplevel

  live = jnp.ones((queries.shape[0],), bool)
  return jnp.max(_substrings.find_hits(index, queries, live, plan, max_radius)[3])


def substring_hits_most(index, queries, max_radius):
  """White-box: the most buckets within reach a query finds through the tables
  (which branch of the substring search runs). One jitted program (op by op, its
  compiles cost more than the search tests themselves)."""
  from jhash.index import _substrings  # pylint: disable=import-outside-toplevel

  plan = _substrings.substring_plan(index, max_radius, True)
  return plan, int(_most_hits(index, jnp.asarray(queries), plan, max_radius))


def test_substring_tables_list_every_bucket_by_substring(rng):
  codes, mask = crop_codes_database(rng, 150, 3, 45)
  index = index_lib.build_index(codes, num_bits=45, mask=mask, num_substrings=3)
  layout = index_lib.substring_layout(45, 3)
  assert [length for _, length in layout] == [15, 15, 15] and index.num_substrings == 3
  keys = as_int(unpack(index.keys, 45))
  offsets = np.asarray(index.substring_offsets)
  buckets = np.asarray(index.substring_buckets)
  base = 0
  for j, (first, length) in enumerate(layout):
    values = np.array([(k >> first) & ((1 << length) - 1) for k in keys])
    table = offsets[base : base + (1 << length) + 1] - j * index.num_buckets
    for v in np.unique(values).tolist() + [int(values.max()) + 1]:
      if v < 1 << length:
        np.testing.assert_array_equal(
          buckets[j, table[v] : table[v + 1]], np.flatnonzero(values == v)
        )
    assert table[-1] == index.num_buckets
    base += (1 << length) + 1
  assert offsets.size == base
  assert index_lib.build_index(codes, num_bits=45, mask=mask).num_substrings == 0  # opt-in
  suggested = index_lib.build_index(codes, num_bits=45, mask=mask, num_substrings=None)
  assert suggested.num_substrings == index_lib.suggested_num_substrings(index.num_buckets, 45) == 5
  assert index_lib.suggested_num_substrings(850_000, 64) == 3
  assert index_lib.suggested_num_substrings(850_000, 32) == 0
  assert index_lib.suggested_num_substrings(300, 64) == 7


@pytest.mark.parametrize("num_bits,num_substrings", [(64, 3), (40, 2)])
def test_substring_search_equals_brute_force(rng, num_bits, num_substrings):
  codes, mask = crop_codes_database(rng, 120, 4, num_bits)
  codes[7, 1], mask[7, 1] = codes[7, 0], True  # an item with two codes in one bucket
  codes[8, 0] = codes[9, 0]  # two items in one bucket
  for i in range(11, 15):  # five items within radius 1 of item 10
    codes[i, 0] = codes[10, 0]
    codes[i, 0, rng.integers(num_bits)] *= -1
  queries = np.concatenate([codes[[7, 8, 10]][:, 0], near_codes(rng, codes, mask, 13)])
  index = index_lib.build_index(codes, num_bits=num_bits, mask=mask, num_substrings=num_substrings)
  ids = np.arange(120)
  slots = 3  # fewer than some queries find: results are cut, and num_found still counts
  for max_radius, num_wanted in ((3, 10**6), (3, 2), (1, 1)):
    plan, most = substring_hits_most(index, pack(queries), max_radius)
    assert plan is not None and most <= 8  # the usual branch: no fall-back
    res = index_lib.bucket_search(
      index,
      pack(queries),
      num_wanted=num_wanted,
      max_radius=max_radius,
      max_results=slots,
      use_substrings=True,
    )
    expected = expected_results(codes, mask, ids, queries, num_wanted, max_radius, slots)
    assert max(e["found"] for e in expected) > slots or num_wanted <= slots
    assert_matches(res, expected, slots)  # as flip masks would (brute force, visit order)
    if num_bits == 64 and max_radius == 3 and num_wanted == 2:  # inside jit: one program
      # Only num_wanted traced (the index traced too: the next test).
      closed_over = jax.jit(
        lambda n: index_lib.bucket_search(
          index, pack(queries), num_wanted=n, max_radius=max_radius, max_results=slots
        )
      )
      for x, y in zip(closed_over(jnp.int32(num_wanted)), res):
        np.testing.assert_array_equal(x, y)
  found = np.asarray(index_lib.radius_search(index, pack(queries[:2]), 0).item_ids)
  assert list(found[0, :2]) == [7, -1] and list(found[1, :3]) == [8, 9, -1]  # each item once


@pytest.mark.parametrize("path", ["default", "array code"])
@pytest.mark.parametrize("cluster,branch", [(20, "many"), (90, "flip masks")])
def test_substring_search_with_many_buckets_in_reach(rng, cluster, branch, path, monkeypatch):
  # One query has `cluster` buckets within radius 2: more than the usual 8 (all 64
  # slots are ordered) or more than 64 (that block probes flip masks instead). The
  # array code (GPUs, TPUs) tries few slots, then more, then flip masks, eagerly.
  if path == "array code":
    from jhash import native

    monkeypatch.setattr(native, "enabled", lambda: False)
  num_bits = 64
  codes, mask = crop_codes_database(rng, 200, 2, num_bits, num_flips=1)
  centre = codes[0, 0].copy()
  for i in range(1, cluster + 1):
    codes[i, 0] = centre
    codes[i, 0, rng.choice(num_bits, size=1 + i % 2, replace=False)] *= -1
  queries = np.concatenate([centre[None], near_codes(rng, codes, mask, 5)])
  index = index_lib.build_index(codes, num_bits=num_bits, mask=mask, num_substrings=3)
  _, most = substring_hits_most(index, pack(queries), 2)
  assert (8 < most <= 64) if branch == "many" else most > 64
  search = functools.partial(
    index_lib.bucket_search, num_wanted=10**6, max_radius=2, max_results=128, use_substrings=True
  )
  res = search(index, pack(queries))
  assert_matches(res, expected_results(codes, mask, np.arange(200), queries, 10**6, 2, 128), 128)
  traced = jax.jit(search)(index, pack(queries))  # one program: falls back inside
  for x, y in zip(traced, res):
    np.testing.assert_array_equal(x, y)


# FAISS export -----------------------------------------------------------------------------


@pytest.mark.parametrize("num_bits", [20, 32, 64])
def test_faiss_flat_distances_equal_hamming(rng, num_bits):
  faiss = pytest.importorskip("faiss")
  db = pack(np.where(rng.random((200, num_bits)) < 0.5, -1, 1))
  queries = pack(np.where(rng.random((7, num_bits)) < 0.5, -1, 1))
  flat = index_lib.to_faiss_flat(db, num_bits)
  assert isinstance(flat, faiss.IndexBinaryFlat) and flat.d == 8 * -(-num_bits // 8)
  dist, ids = flat.search(codes_lib.to_bytes(queries)[:, : flat.d // 8], 200)
  ours = np.asarray(hamming_distance(queries, db))
  np.testing.assert_array_equal(dist, np.take_along_axis(ours, ids, axis=1))
  np.testing.assert_array_equal(dist, np.sort(ours, axis=1))


@pytest.mark.parametrize("num_bits", [32, 64])
def test_faiss_hash_range_search_r_plus_one_is_the_ball(num_bits):
  faiss = pytest.importorskip("faiss")
  codes, queries, ours, _ = searched_case(num_bits)
  radius = CASES[num_bits][1]
  hashed = index_lib.to_faiss_hash(pack(codes), num_bits)
  assert isinstance(hashed, faiss.IndexBinaryHash) and hashed.b == num_bits
  lims, _, ids = index_lib.faiss_range_search(hashed, pack(queries), num_bits, radius)
  on_boundary = 0
  for i in range(len(queries)):
    got = ours.item_ids[i]
    np.testing.assert_array_equal(np.sort(ids[lims[i] : lims[i + 1]]), np.sort(got[got >= 0]))
    on_boundary += int(np.sum(ours.radii[i] == radius))
  strict = hashed.range_search(codes_lib.to_bytes(pack(queries)), radius)[0]  # nflip stays r
  assert on_boundary > 0 and strict[-1] == lims[-1] - on_boundary  # radius r alone is "< r"


def test_faiss_missing_says_how_to_install(monkeypatch):
  monkeypatch.setitem(sys.modules, "faiss", None)
  with pytest.raises(ImportError, match="pip install faiss-cpu"):
    index_lib.to_faiss_flat(np.zeros((2, 1), np.uint32), 8)


def test_no_queries_give_empty_results():
  codes = np.where(np.random.default_rng(0).random((30, 12)) < 0.5, -1, 1).astype(np.int8)
  index = index_lib.build_index(codes, num_bits=12)
  q0 = np.zeros((0, 1), np.uint32)
  start, count = index_lib.lookup(index, q0)
  assert start.shape == count.shape == (0,)
  res = index_lib.bucket_search(index, q0, num_wanted=3, max_radius=2, max_results=4)
  assert res.item_ids.shape == res.radii.shape == (0, 4) and res.num_found.shape == (0,)
  assert index_lib.radius_search(index, q0, 1).num_found.shape == (0,)
  flat = index_lib.to_faiss_flat(pack(codes), 12)
  lims, _, ids = index_lib.faiss_range_search(flat, q0, 12, 1)
  assert lims.tolist() == [0] and ids.shape == (0,)
  assert index_lib.to_faiss_flat(np.zeros((0, 1), np.uint32), 12).ntotal == 0


@pytest.mark.parametrize("num_bits", [1, 4])
def test_every_code_of_a_few_bits_is_its_own_bucket(num_bits):
  # More buckets than the code has bits to spare: the directory uses all K bits, no more.
  values = np.arange(2**num_bits)
  codes = np.where((values[:, None] >> np.arange(num_bits)) & 1, 1, -1).astype(np.int8)
  codes = np.concatenate([codes, codes[::-1]])  # two items per bucket
  index = index_lib.build_index(codes, num_bits=num_bits)
  assert index.num_buckets == 2**num_bits
  start, count = index_lib.lookup(index, pack(codes[: 2**num_bits]))
  np.testing.assert_array_equal(start, 2 * values)
  np.testing.assert_array_equal(count, np.full(2**num_bits, 2))
  num_items = codes.shape[0]
  res = index_lib.radius_search(index, pack(codes), 1)
  assert_matches(
    res,
    expected_results(
      codes[:, None],
      np.ones((num_items, 1), bool),
      np.arange(num_items),
      codes,
      num_items + 1,
      1,
      res.item_ids.shape[1],
    ),
    res.item_ids.shape[1],
  )


def test_radius_search_widens_past_64_found_to_128_slots(rng):
  # 100 items share the query's bucket: more than the first 64 slots, fewer than 128.
  codes = np.where(rng.random((110, 12)) < 0.5, -1, 1).astype(np.int8)
  codes[:100] = codes[0]
  index = index_lib.build_index(codes, num_bits=12)
  res = index_lib.radius_search(index, pack(codes[:1]), 0)
  assert res.item_ids.shape == (1, 128) and int(res.num_found[0]) == 100
  np.testing.assert_array_equal(res.item_ids[0], list(range(100)) + [-1] * 28)


def test_radius_num_bits_with_one_bit_substrings_finds_every_item(rng):
  # The largest radius (num_bits) and the most substring tables (num_bits, 1 bit each).
  num_bits, num_items = 6, 40
  codes = np.where(rng.random((num_items, num_bits)) < 0.5, -1, 1).astype(np.int8)
  queries = np.where(rng.random((3, num_bits)) < 0.5, -1, 1).astype(np.int8)
  index = index_lib.build_index(codes, num_bits=num_bits, num_substrings=num_bits)
  assert index.num_substrings == num_bits
  expected = expected_results(
    codes[:, None],
    np.ones((num_items, 1), bool),
    np.arange(num_items),
    queries,
    num_items + 1,
    num_bits,
    64,
  )
  assert all(e["found"] == num_items and e["visited"] == 64 for e in expected)
  for use_substrings in (True, False):
    res = index_lib.bucket_search(
      index,
      pack(queries),
      num_wanted=num_items + 1,
      max_radius=num_bits,
      max_results=64,
      use_substrings=use_substrings,
    )
    assert_matches(res, expected, 64)
  assert_matches(index_lib.radius_search(index, pack(queries), num_bits), expected, 64)


def test_suggested_num_substrings_at_its_bounds():
  # At least log2(B) bits per substring: 2 tables at exactly twice (20 bits, 1,000
  # buckets), none below; at most 24 bits: 2**30 buckets of 64 bits need 3, not 2.
  assert index_lib.suggested_num_substrings(1000, 20) == 2
  assert index_lib.suggested_num_substrings(1000, 19) == 0
  assert index_lib.suggested_num_substrings(2**30, 64) == 3


# Bad input ------------------------------------------------------------------------------


def test_bad_input_errors_name_the_argument():
  codes = np.ones((4, 16), np.int8)
  index = index_lib.build_index(codes, num_bits=16)
  q = pack(codes)
  search = dict(num_wanted=1, max_radius=1, max_results=4)
  cases = [
    (lambda: index_lib.build_index(np.ones((4, 65)), num_bits=65), r"num_bits.*<= 64"),
    (lambda: index_lib.build_index(np.zeros((4, 16)), num_bits=16), r"codes_or_packed.*-1"),
    (lambda: index_lib.build_index(codes, num_bits=12), r"codes_or_packed.*12 columns"),
    (lambda: index_lib.build_index(codes[:0], num_bits=16), r"codes_or_packed must hold at "),
    (
      lambda: index_lib.build_index(np.zeros((4, 2), np.uint32), num_bits=16),
      r"codes_or_packed.*1 words",
    ),
    (
      lambda: index_lib.build_index(np.full((4, 1), 1 << 20, np.uint32), num_bits=16),
      r"codes_or_packed sets bits past num_bits",
    ),
    (lambda: index_lib.build_index(codes, num_bits=16, item_ids=np.arange(3)), r"item_ids"),
    (
      lambda: index_lib.build_index(codes, num_bits=16, item_ids=np.array([0, -1, 2, 3])),
      r"item_ids must lie in \[0, 2\*\*31 - 1\]",
    ),
    (
      lambda: index_lib.build_index(codes, num_bits=16, item_ids=np.arange(4) + 2**31 - 3),
      r"item_ids must lie in \[0, 2\*\*31 - 1\]",
    ),
    (
      lambda: index_lib.build_index(codes[:, None], num_bits=16, mask=np.ones((4, 2), bool)),
      r"mask",
    ),
    (
      lambda: index_lib.build_index(codes[:, None], num_bits=16, mask=np.zeros((4, 1), bool)),
      r"mask must keep at least one code",
    ),
    (
      lambda: index_lib.bucket_search(index, np.zeros((2, 2), np.uint32), **search),
      r"query_packed must have 1 words",
    ),
    (
      lambda: index_lib.bucket_search(index, np.asarray(q, np.int32), **search),
      r"query_packed.*uint32",
    ),
    (
      lambda: index_lib.lookup(index, np.full((2, 1), 1 << 17, np.uint32)),
      r"query_packed sets bits past",
    ),
    (
      lambda: index_lib.bucket_search(index, q, num_wanted=0, max_radius=1, max_results=4),
      r"num_wanted must be >= 1",
    ),
    (
      lambda: index_lib.bucket_search(index, q, num_wanted=1, max_radius=-1, max_results=4),
      r"max_radius",
    ),
    (
      lambda: index_lib.bucket_search(index, q, num_wanted=1, max_radius=17, max_results=4),
      r"max_radius must be <= num_bits",
    ),
    (
      lambda: index_lib.bucket_search(index, q, num_wanted=1, max_radius=1, max_results=0),
      r"max_results",
    ),
    (lambda: index_lib.radius_search(index, q, -1), r"radius must be >= 0"),
    (lambda: index_lib.to_faiss_hash(q, 16, b=17), r"\bb must be <="),
    (lambda: index_lib.build_index(codes, num_bits=16, num_substrings=1), r"num_substrings"),
    (lambda: index_lib.build_index(codes, num_bits=16, num_substrings=17), r"num_substrings"),
    (
      lambda: index_lib.build_index(np.ones((4, 50), np.int8), num_bits=50, num_substrings=2),
      r"num_substrings must be 0 .* from 3 to 50",
    ),  # 25-bit substrings: too long
    (lambda: index_lib.bucket_search(index, q, use_substrings=1, **search), r"use_substrings"),
    (
      lambda: index_lib.to_faiss_flat(np.zeros((2, 2), np.uint32), 12),
      r"packed must have 1 words per code",
    ),
    (
      lambda: index_lib.to_faiss_flat(np.full((2, 1), 1 << 12, np.uint32), 12),
      r"packed sets bits past num_bits=12",
    ),
    (
      lambda: index_lib.faiss_range_search(None, np.full((2, 1), 1 << 13, np.uint32), 12, 1),
      r"query_packed sets bits past num_bits=12",
    ),
  ]
  for call, message in cases:
    with pytest.raises(ValueError, match=message):
      call()


def test_substring_plan_weighs_the_code_that_will_run():
  # 1,000,000 buckets of 32 bits, radius 2 (528 flip masks). Three tables of 10-11
  # bits find ~1,950 entries in 3 lookups: cheaper than the probes for the native
  # kernel (entries read in order, about 1/8 of a probe each: measured 6 vs 14 ms),
  # not for the array code (slots and windows); four tables of 8 bits find ~15,600
  # entries: flip masks for both (measured 38 vs 13 ms).
  from jhash.index import _substrings  # pylint: disable=import-outside-toplevel

  def plan(s, native_kernel):
    return _substrings._plan(32, s, 1_000_000, 2, None, native_kernel)

  assert plan(3, True) is not None and plan(3, True).flips == 0
  assert plan(3, False) is None
  assert plan(4, True) is None and plan(4, False) is None
  assert _substrings._plan(32, 3, 1_000_000, 2, False, True) is None  # never when told


# The prepared searcher ---------------------------------------------------------------------


@pytest.mark.parametrize("path", ["native", "array code"])
def test_searcher_equals_brute_force_and_bucket_search(rng, path, monkeypatch):
  if path == "array code":
    from jhash import native  # pylint: disable=import-outside-toplevel

    monkeypatch.setattr(native, "enabled", lambda: False)
  num_bits, num_items = 64, 150
  codes, mask = crop_codes_database(rng, num_items, 3, num_bits)
  for i in range(11, 15):  # a few items within radius 1 of item 10
    codes[i, 0] = codes[10, 0]
    codes[i, 0, rng.integers(num_bits)] *= -1
  queries = np.concatenate([codes[[10]][:, 0], near_codes(rng, codes, mask, 11)])
  ids = np.arange(num_items)
  fields = index_lib.SearchResults._fields
  for num_substrings, max_radius, num_wanted, slots in (
    (0, 0, None, 4),
    (3, 2, 2, 3),
    (0, 2, None, 8),
  ):
    index = index_lib.build_index(
      codes, num_bits=num_bits, mask=mask, num_substrings=num_substrings
    )
    prepared = index_lib.searcher(
      index, max_radius=max_radius, max_results=slots, num_wanted=num_wanted, outputs=fields
    )
    wanted = num_items + 1 if num_wanted is None else num_wanted
    got = index_lib.SearchResults(*prepared.search(pack(queries)))
    expected = expected_results(codes, mask, ids, queries, wanted, max_radius, slots)
    assert_matches(got, expected, slots)
    direct = index_lib.bucket_search(
      index, pack(queries), num_wanted=wanted, max_radius=max_radius, max_results=slots
    )
    for x, y in zip(got, direct):
      np.testing.assert_array_equal(x, y)
    # Fewer outputs, in the order asked; inside jit; another query count.
    few = index_lib.searcher(index, max_radius=max_radius, max_results=slots, num_wanted=num_wanted)
    assert few.outputs == ("item_ids", "num_found")
    ids_out, found = jax.jit(few.search)(pack(queries))
    np.testing.assert_array_equal(ids_out, got.item_ids)
    np.testing.assert_array_equal(found, got.num_found)
    (radius,) = index_lib.searcher(
      index,
      max_radius=max_radius,
      max_results=slots,
      num_wanted=num_wanted,
      outputs=["radius_reached"],
    ).search(pack(queries[:5]))
    np.testing.assert_array_equal(radius, got.radius_reached[:5])
    # NumPy queries on the CPU take the host path (no JAX dispatch) where the kernels are.
    assert isinstance(got.item_ids, np.ndarray) == (path == "native"), type(got.item_ids)


@pytest.mark.parametrize(
  "num_bits, max_radius, num_substrings", [(32, 0, 0), (20, 2, 2), (64, 1, 0)]
)
def test_searchers_host_path_equals_its_compiled_program_over_many_threads(
  rng, num_bits, max_radius, num_substrings
):
  # 1,000 queries: 16 tasks of 64 for OpenMP's threads (the test above has one task);
  # half the queries are stored codes, some buckets hold several items.
  from jhash import native  # pylint: disable=import-outside-toplevel

  if not native.enabled():
    pytest.skip("the native kernels are off")
  codes = np.where(rng.random((3000, num_bits)) < 0.5, 1, -1).astype(np.int8)
  codes[1000:1500] = codes[:500]  # buckets of two
  queries = np.concatenate(
    [codes[rng.integers(0, 3000, 500)], np.where(rng.random((500, num_bits)) < 0.5, 1, -1)]
  )
  index = index_lib.build_index(codes, num_bits=num_bits, num_substrings=num_substrings)
  fields = index_lib.SearchResults._fields
  prepared = index_lib.searcher(
    index, max_radius=max_radius, max_results=3, num_wanted=2, outputs=fields
  )
  host = prepared.search(pack(queries))
  compiled = jax.jit(prepared.search)(pack(queries))
  assert all(isinstance(x, np.ndarray) for x in host)
  assert int(np.sum(host[2] >= 2)) > 100  # buckets of two (and more, past radius 0) found
  for name, x, y in zip(fields, host, compiled):
    np.testing.assert_array_equal(x, y, err_msg=name)
  few = slice(0, 1000, 25)  # against brute force: 40 queries over every task
  expected = expected_results(
    codes[:, None], np.ones((3000, 1), bool), np.arange(3000), queries[few], 2, max_radius, 3
  )
  assert_matches(index_lib.SearchResults(*(x[few] for x in host)), expected, 3)


def test_searcher_bad_input_names_the_argument():
  codes = np.ones((4, 12), np.int8)
  index = index_lib.build_index(codes, num_bits=12)
  made = dict(max_radius=1, max_results=4)
  cases = [
    (lambda: index_lib.searcher(codes, **made), r"index must be a BucketIndex"),
    (lambda: index_lib.searcher(index, max_radius=13, max_results=4), r"max_radius must be <= "),
    (lambda: index_lib.searcher(index, max_radius=1, max_results=0), r"max_results"),
    (lambda: index_lib.searcher(index, **made, num_wanted=0), r"num_wanted must be >= 1"),
    (lambda: index_lib.searcher(index, **made, outputs=("ids",)), r"outputs must name .*'ids'"),
    (lambda: index_lib.searcher(index, **made, outputs="item_ids"), r"outputs must be a sequence"),
    (lambda: index_lib.searcher(index, **made, outputs=()), r"outputs must name one or more"),
    (
      lambda: index_lib.searcher(index, **made, outputs=("radii", "radii")),
      r"outputs must name .* each once",
    ),
    (lambda: index_lib.searcher(index, **made).search(pack(codes)[:, [0, 0]]), r"1 words per code"),
    (
      lambda: index_lib.searcher(index, **made).search(pack(codes).astype(np.int32)),
      r"query_packed must be packed codes of dtype uint32",
    ),
    (
      lambda: index_lib.searcher(index, **made).search(pack(codes) | np.uint32(1 << 20)),
      r"query_packed sets bits past num_bits=12",
    ),
  ]
  for call, message in cases:
    with pytest.raises(ValueError, match=message):
      call()


def test_padding_bits_of_traced_queries_are_ignored_not_read(rng):
  """Inside jit a query's padding bits cannot be checked: they are cleared, so the result
  is the clean query's (the native kernel once read past its directory on them)."""
  codes = np.where(rng.random((300, 12)) < 0.5, 1, -1).astype(np.int8)
  index = index_lib.build_index(codes, num_bits=12)
  clean = pack(codes[:8])
  dirty = clean | np.uint32(1 << 20)
  search = index_lib.searcher(index, max_radius=2, max_results=4, outputs=("item_ids", "num_found"))
  want = search.search(clean)
  for got in (
    jax.jit(search.search)(dirty),
    jax.jit(
      lambda q: tuple(
        index_lib.bucket_search(index, q, num_wanted=301, max_radius=2, max_results=4)[i]
        for i in (0, 2)
      )
    )(dirty),
  ):
    for x, y in zip(got, want):
      np.testing.assert_array_equal(x, y)
  looked = jax.jit(lambda q: index_lib.lookup(index, q))(dirty)
  for x, y in zip(looked, index_lib.lookup(index, clean)):
    np.testing.assert_array_equal(x, y)
  assert int(np.asarray(want[1]).min()) >= 1  # every query finds itself
