"""Hash-bucket search with a widening Hamming radius (MCH's Algorithm 1).

For ``r = 0, 1, 2, ...`` up to ``max_radius``, every bucket at Hamming distance
exactly ``r`` from the query is probed: the query XOR each of the ``C(K, r)``
flip masks of ``r`` set bits. The items of the buckets that exist are
collected; the search stops after the first radius at which at least
``num_wanted`` distinct items have been found ("Multiple Code Hashing for
Efficient Image Retrieval" (MCH), Algorithm 1, the general hash-bucket search
procedure that paper cites). Radius 0 reads the query's own bucket directly.

Order of the results: by radius; inside radius ``r``, in the order the buckets
are visited, which is increasing flip mask read as an integer (equivalently,
increasing ``query XOR bucket key``; for ``r = 1`` this is bit 0, bit 1, ...);
inside a bucket, by increasing item id.

Items with several codes are returned once, at the first visit of any of their
codes' buckets: that is at radius ``d_min``, their nearest code's distance, and
in the bucket with the smallest ``query XOR code`` among the codes at ``d_min``.
Each candidate (item, bucket) is tested against the item's own codes, so no
per-query "seen" table over the database is needed.

Vectorisation: the flip masks of radii 1..max_radius are cut into chunks of
``_CHUNK`` masks, each chunk inside one radius (the last chunk of a radius is
padded with masks marked invalid). A block of queries probes a whole chunk at
once with one batched directory search (``_probe.find_buckets``); the buckets'
items are written into fixed-size result rows by rank (a batched
``searchsorted`` over the per-query running counts), a window of ranks at a
time, so the work follows the number of hits; nothing is sorted. One
``lax.while_loop`` runs over the chunks: it ends after the last chunk or once
every query of the block has enough. A query's stop is checked only after the
last chunk of a radius, so a query that is done takes nothing from later radii.
One loop body serves every radius, so the compiled program does not grow with
``max_radius``. Blocks of queries run one after the other (``lax.map``) so the
working arrays stay in cache (``default_probes_per_block()`` probes per chunk and
block). Both tuning knobs, the block size and the ``searchsorted`` method, are
keyword arguments of ``bucket_search``: they change the speed, never the results.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jhash import _checks
from jhash.index import _build
from jhash.index import _probe

# Probes per block of queries and chunk of masks. Measured with 1,000 queries x
# 2,081 probes (64 bits, radius <= 2) on 2 shared CPU cores: blocks of 17 k / 83 k /
# 416 k / 2.1 M probes took 0.15 / 0.11 / 0.25 / 0.54 s (cache effects).
_PROBES_PER_BLOCK = {"cpu": 1 << 16}
# Elsewhere (GPU, TPU) one block should fill the device; not measured yet (run
# ``python benchmarks/bench_index.py --sweep`` there to choose).
_PROBES_PER_BLOCK_ACCELERATOR = 1 << 22
# Flip masks per chunk (radii >= 1). Padding wastes at most one partial chunk per radius.
_CHUNK = 128
# Candidates (ranks) examined per step of the result fill. Hits are usually sparse
# (about one per 2,000 probes on random 64-bit codes), so a step wider than that
# mostly does wasted work: on 1M random codes, radius 2, 256 slots, windows of
# 16 ran about 2x faster than 128; on dense clustered codes (200 found per query)
# 16 and 32 were best.
_WINDOW = 16
# First guess of result slots in radius_search.
_RADIUS_SLOTS = 64
# jnp.searchsorted's methods, any of which bucket_search accepts.
SEARCHSORTED_METHODS = ("scan", "scan_unrolled", "sort", "compare_all")


class SearchResults(NamedTuple):
  """Results of ``bucket_search`` / ``radius_search`` for ``q`` queries.

  ``max_results`` slots per query; found items past the last slot are counted
  in ``num_found`` but not returned.
  """
  item_ids: jax.Array          # int32 [q, max_results]: item ids, -1 in empty slots.
  radii: jax.Array             # int32 [q, max_results]: radius each was found at, -1 if empty.
  num_found: jax.Array         # int32 [q]: distinct items within radius_reached.
  buckets_visited: jax.Array   # int32 [q]: buckets probed, sum_{i <= radius_reached} C(K, i).
  buckets_nonempty: jax.Array  # int32 [q]: probed buckets that exist in the index.
  radius_reached: jax.Array    # int32 [q]: the last radius searched.


@functools.lru_cache(maxsize=32)
def flip_masks(num_bits: int, radius: int) -> np.ndarray:
  """All packed codes with exactly ``radius`` of ``num_bits`` bits set, increasing.

  Returns:
    uint32 [C(num_bits, radius), W], sorted by value as integers (which is the
    co-lexicographic order of the set bit positions).
  """
  w = -(-num_bits // 32)
  if radius == 0:
    return np.zeros((1, w), np.uint32)
  combos = np.fromiter(itertools.chain.from_iterable(
      itertools.combinations(range(num_bits), radius)), np.int64).reshape(-1, radius)
  value = np.bitwise_or.reduce(np.uint64(1) << combos.astype(np.uint64), axis=1)
  value = np.sort(value)
  words = [(value & np.uint64(0xFFFFFFFF)).astype(np.uint32)]
  if w == 2:
    words.append((value >> np.uint64(32)).astype(np.uint32))
  masks = np.stack(words, axis=1)
  masks.setflags(write=False)
  return masks


def default_searchsorted_method() -> str:
  """Default ``jnp.searchsorted`` method for the rank-to-probe step of the result fill.

  Each query looks up a few ranks in the running counts of one chunk (128
  probes). On the CPU, over 1,000,000 codes at radius 2, ``"scan"`` was as fast
  as ``"compare_all"`` with 16 result slots and 3x faster with 256, and
  ``"sort"`` was 2-5x slower (``python benchmarks/bench_index.py --sweep``).
  Accelerators were not measured yet; ``"scan"`` is used there too.
  """
  return "scan"


def default_probes_per_block() -> int:
  """Default probes (queries x masks) handled at once, by backend: small on the CPU so
  the working arrays stay in cache, large on accelerators so one step fills the chip."""
  return _PROBES_PER_BLOCK.get(jax.default_backend(), _PROBES_PER_BLOCK_ACCELERATOR)


@functools.lru_cache(maxsize=32)
def _device_chunks(num_bits: int, max_radius: int, chunk: int):
  return tuple(jnp.asarray(a) for a in mask_chunks(num_bits, max_radius, chunk))


def _batched_searchsorted(sorted_rows, values, method):
  """Per row ``searchsorted(side='right')``: [Q, C], [Q, R] -> int32 [Q, R]."""
  return jax.vmap(lambda a, v: jnp.searchsorted(a, v, side="right", method=method))(
      sorted_rows, values).astype(jnp.int32)


@functools.lru_cache(maxsize=32)
def mask_chunks(num_bits: int, max_radius: int, chunk: int):
  """Flip masks of radii 1..max_radius in visit order, cut into chunks of one radius.

  Returns NumPy arrays: masks uint32 [n, chunk, W], valid bool [n, chunk],
  radius int32 [n], ends_radius bool [n] (the chunk is its radius's last).
  """
  masks, valid, radius, ends = [], [], [], []
  for r in range(1, max_radius + 1):
    m = flip_masks(num_bits, r)
    count = -(-m.shape[0] // chunk)
    padded = np.zeros((count * chunk, m.shape[1]), np.uint32)
    padded[:m.shape[0]] = m
    masks.append(padded.reshape(count, chunk, -1))
    valid.append((np.arange(count * chunk) < m.shape[0]).reshape(count, chunk))
    radius.append(np.full((count,), r, np.int32))
    ends.append(np.arange(count) == count - 1)
  w = -(-num_bits // 32)
  if not masks:
    return (np.zeros((0, chunk, w), np.uint32), np.zeros((0, chunk), bool),
            np.zeros((0,), np.int32), np.zeros((0,), bool))
  return (np.concatenate(masks), np.concatenate(valid), np.concatenate(radius),
          np.concatenate(ends))


class _State(NamedTuple):
  items: jax.Array      # int32 [Q, R] item numbers, -1 empty.
  radii: jax.Array      # int32 [Q, R].
  found: jax.Array      # int32 [Q] distinct items found so far.
  visited: jax.Array    # int32 [Q] buckets probed.
  nonempty: jax.Array   # int32 [Q] probed buckets that exist.
  radius: jax.Array     # int32 [Q] last radius searched.
  active: jax.Array     # bool [Q] still searching.


def _entries(index, start, count, cum, ranks, method):
  """Stored-code positions of the candidates ranked ``ranks`` within a chunk.

  ``cum`` [Q, C] is the running total of the probes' bucket sizes in visit order;
  rank ``t`` falls in probe ``p`` (first with ``cum > t``) at offset
  ``t - (cum[p] - count[p])`` of its bucket. Returns (probe [Q, N], entry [Q, N]).
  """
  num_probes = cum.shape[1]
  probe = jnp.minimum(_batched_searchsorted(cum, ranks, method), num_probes - 1)
  take = functools.partial(jnp.take_along_axis, indices=probe, axis=1)
  entry = take(start) + ranks - (take(cum) - take(count))
  entry = jnp.clip(entry, 0, index.bucket_items.shape[0] - 1)
  return probe, entry


def _first_visit(index, queries, items, masks_of_probe, radius):
  """True where (item, bucket) is the item's first visit: no code of the item has a
  smaller (distance, query XOR code) than this bucket's (radius, flip mask)."""
  codes = index.item_codes[items]                       # [Q, N, m, W]
  valid = index.item_code_mask[items]                   # [Q, N, m]
  diff = codes ^ queries[:, None, None, :]
  dist = jnp.sum(lax.population_count(diff).astype(jnp.int32), axis=-1)
  earlier = (dist < radius) | ((dist == radius)
                               & _probe.key_less(diff, masks_of_probe[:, :, None, :]))
  return ~jnp.any(valid & earlier, axis=-1)


def _fill(index, state, queries, masks, start, count, cum, radius, window, method):
  """Write the chunk's new items at each query's next free slots; return the counts.

  One code per item: every candidate is new, only the first ``R - found`` are
  read, and the count is the buckets' total. Several codes: every candidate is
  tested (``_first_visit``) so the count of distinct items stays exact.
  """
  num_q, num_slots = state.items.shape
  multi = index.max_codes_per_item > 1
  total = jnp.where(state.active, cum[:, -1], 0)
  limit = total if multi else jnp.minimum(total, jnp.maximum(num_slots - state.found, 0))
  rows = jnp.arange(num_q)[:, None]

  def step(carry):
    offset, items, radii, kept_total = carry
    ranks = jnp.broadcast_to(offset + jnp.arange(window, dtype=jnp.int32), (num_q, window))
    kept = ranks < limit[:, None]
    probe, entry = _entries(index, start, count, cum, ranks, method)
    item = index.bucket_items[entry]
    if multi:
      kept &= _first_visit(index, queries, item, masks[probe], radius)
    slot = (state.found + kept_total)[:, None] + jnp.cumsum(kept, axis=1, dtype=jnp.int32) - 1
    slot = jnp.where(kept & (slot < num_slots), slot, num_slots)  # num_slots: dropped
    items = items.at[rows, slot].set(item, mode="drop")
    radii = radii.at[rows, slot].set(radius, mode="drop")
    return offset + window, items, radii, kept_total + jnp.sum(kept, axis=1, dtype=jnp.int32)

  carry = (jnp.int32(0), state.items, state.radii, jnp.zeros((num_q,), jnp.int32))
  _, items, radii, kept_total = lax.while_loop(lambda c: c[0] < jnp.max(limit), step, carry)
  return items, radii, kept_total if multi else total


def _probe_chunk(index, queries, num_wanted, window, method, state, masks, valid, radius,
                 ends_radius):
  """Probe one chunk of flip masks (all of one radius) for a block of queries."""
  probes = queries[:, None, :] ^ masks[None, :, :]
  start, count, exists = _probe.bucket_ranges(index, probes)
  exists &= valid[None, :]
  count = jnp.where(exists, count, 0)
  cum = jnp.cumsum(count, axis=1, dtype=jnp.int32)
  items, radii, new = _fill(index, state, queries, masks, start, count, cum, radius, window,
                            method)
  act = state.active
  found = state.found + jnp.where(act, new, 0)
  return _State(
      items=items, radii=radii, found=found,
      visited=state.visited + jnp.where(act, jnp.sum(valid, dtype=jnp.int32), 0),
      nonempty=state.nonempty + jnp.where(act, jnp.sum(exists, axis=1, dtype=jnp.int32), 0),
      radius=jnp.where(act, radius, state.radius),
      active=act & ~(ends_radius & (found >= num_wanted)))


def _probe_own_bucket(index, queries, num_wanted, state):
  """Radius 0: the query's own bucket, whose items are all first visits (distance 0,
  and an item is stored once per bucket), read straight from its range."""
  start, count, exists = _probe.bucket_ranges(index, queries)
  num_slots = state.items.shape[1]
  ranks = jnp.arange(num_slots, dtype=jnp.int32)[None, :]
  take = state.active[:, None] & (ranks < count[:, None])
  entry = jnp.minimum(start[:, None] + ranks, index.bucket_items.shape[0] - 1)
  act = state.active
  found = jnp.where(act, count, 0)
  return _State(
      items=jnp.where(take, index.bucket_items[entry], state.items),
      radii=jnp.where(take, 0, state.radii), found=found,
      visited=jnp.where(act, 1, 0), nonempty=jnp.where(act, exists.astype(jnp.int32), 0),
      radius=jnp.zeros_like(state.radius), active=act & (found < num_wanted))


def _search_block(index, chunks, num_wanted, window, method, num_slots, block):
  queries, live = block
  num_q, num_words = queries.shape
  empty = jnp.full((num_q, num_slots), -1, jnp.int32)
  zeros = jnp.zeros((num_q,), jnp.int32)
  state = _State(empty, empty, zeros, zeros, zeros, zeros, live)
  state = _probe_own_bucket(index, queries, num_wanted, state)
  probe = functools.partial(_probe_chunk, index, queries, num_wanted, window, method)
  masks, valid, radius, ends = chunks
  num_chunks = masks.shape[0]

  def more(carry):
    i, state = carry
    return (i < num_chunks) & jnp.any(state.active)

  def step(carry):
    i, state = carry
    return i + 1, probe(state, masks[i], valid[i], radius[i], ends[i])

  if num_chunks:
    _, state = lax.while_loop(more, step, (jnp.int32(0), state))
  return state


@functools.partial(jax.jit, static_argnames=("max_results", "block_size", "window", "method"))
def _bucket_search(index, query_packed, chunks, num_wanted, *, max_results, block_size, window,
                   method):
  num_q, num_words = query_packed.shape
  num_blocks = -(-num_q // block_size)
  pad = num_blocks * block_size - num_q
  queries = jnp.concatenate([query_packed, jnp.zeros((pad, num_words), jnp.uint32)])
  live = jnp.arange(num_blocks * block_size) < num_q
  blocks = (queries.reshape(num_blocks, block_size, num_words),
            live.reshape(num_blocks, block_size))
  run = functools.partial(_search_block, index, chunks, num_wanted, window, method,
                          max_results)
  state = lax.map(run, blocks)
  state = jax.tree.map(lambda a: a.reshape(num_blocks * block_size, *a.shape[2:])[:num_q], state)
  ids = jnp.where(state.items >= 0, index.item_ids[jnp.maximum(state.items, 0)], -1)
  return SearchResults(item_ids=ids, radii=state.radii, num_found=state.found,
                       buckets_visited=state.visited, buckets_nonempty=state.nonempty,
                       radius_reached=state.radius)


def _check_search_args(index, query_packed, max_radius, max_results):
  if not isinstance(index, _build.BucketIndex):
    raise ValueError(f"index must be a BucketIndex from build_index; got {type(index).__name__}.")
  _probe.check_queries(index, query_packed)
  max_radius = _checks.nonneg_int(max_radius, "max_radius")
  if max_radius > index.num_bits:
    raise ValueError(f"max_radius must be <= num_bits={index.num_bits}; got {max_radius}.")
  return max_radius, _checks.positive_int(max_results, "max_results")


def _check_num_wanted(num_wanted: Any) -> jax.Array:
  if isinstance(num_wanted, (bool, np.bool_)) or np.ndim(num_wanted) != 0 or (
      np.dtype(getattr(num_wanted, "dtype", type(num_wanted))).kind not in "iu"):
    raise ValueError(f"num_wanted must be an integer >= 1; got {_checks._describe(num_wanted)}.")
  if _checks.is_concrete(num_wanted):
    value = int(np.asarray(num_wanted))
    if value < 1:
      raise ValueError(f"num_wanted must be >= 1; got {value}.")
    num_wanted = min(value, np.iinfo(np.int32).max)  # more than any index holds
  return jnp.asarray(num_wanted, jnp.int32)


def _check_tuning(probes_per_block: Any, searchsorted_method: Any) -> tuple[int, str]:
  """The tuning knobs, checked, or the backend's defaults where ``None``."""
  if probes_per_block is None:
    probes_per_block = default_probes_per_block()
  probes_per_block = _checks.positive_int(probes_per_block, "probes_per_block")
  if searchsorted_method is None:
    searchsorted_method = default_searchsorted_method()
  if searchsorted_method not in SEARCHSORTED_METHODS:
    raise ValueError(f"searchsorted_method must be one of {SEARCHSORTED_METHODS}; "
                     f"got {searchsorted_method!r}.")
  return probes_per_block, searchsorted_method


def bucket_search(index: _build.BucketIndex, query_packed: jax.Array, *, num_wanted: Any,
                  max_radius: int, max_results: int, probes_per_block: int | None = None,
                  searchsorted_method: str | None = None) -> SearchResults:
  """Hash-bucket search with a widening radius (MCH, Algorithm 1), batched and jitted.

  For ``r = 0, 1, ..., max_radius`` every bucket at Hamming distance exactly
  ``r`` from the query is probed (``C(K, r)`` of them); a query stops after the
  first radius at which it has found at least ``num_wanted`` distinct items.
  Items are returned once, at their first visit, in radius order, then bucket
  visit order (increasing ``query XOR key``), then increasing item id.

  Cost: ``sum_{r <= max_radius} C(K, r)`` probes per query in the worst case
  (2,081 at K = 64, radius 2; 43,745 at radius 3).

  Args:
    index: a ``BucketIndex``.
    query_packed: uint32 [q, W] packed query codes.
    num_wanted: int >= 1 (may be a traced scalar): stop once this many are found.
    max_radius: largest radius searched, 0 to K (Python int; sets shapes).
    max_results: result slots per query (Python int >= 1).
    probes_per_block: tuning only (the results do not change): probes (queries x
      flip masks) handled at once, which sets how many queries form a block. Default
      ``default_probes_per_block()``: 65,536 on the CPU (the working arrays stay in
      cache), 4,194,304 on accelerators.
    searchsorted_method: tuning only: ``jnp.searchsorted``'s method for finding the
      probe of each result rank, one of ``SEARCHSORTED_METHODS``. Default
      ``default_searchsorted_method()`` (``"scan"``). Both knobs are swept by
      ``python benchmarks/bench_index.py --sweep``.
  Returns:
    ``SearchResults``: item ids and radii [q, max_results] (-1 padded), number
    found [q] (all distinct items within the final radius, even past
    ``max_results``), buckets visited [q] (every probed bucket, present or not:
    ``sum_{i <= radius_reached} C(K, i)``), non-empty buckets visited [q], and the
    final radius reached [q].
  """
  max_radius, max_results = _check_search_args(index, query_packed, max_radius, max_results)
  num_wanted = _check_num_wanted(num_wanted)
  probes, method = _check_tuning(probes_per_block, searchsorted_method)
  k = index.num_bits
  chunk = min(_CHUNK, max([math.comb(k, r) for r in range(1, max_radius + 1)], default=1))
  chunks = _device_chunks(k, max_radius, chunk)
  multi = index.max_codes_per_item > 1
  window = _WINDOW if multi else min(_WINDOW, 1 << (max_results - 1).bit_length())
  per_query = max(chunk, window * index.max_codes_per_item if multi else window)
  block = max(1, min(query_packed.shape[0], probes // per_query))
  return _bucket_search(index, jnp.asarray(query_packed), chunks, num_wanted,
                        max_results=max_results, block_size=block, window=window,
                        method=method)


def radius_search(index: _build.BucketIndex, query_packed: jax.Array,
                  radius: int) -> SearchResults:
  """Every item within Hamming distance ``radius`` of each query, each once.

  The bucket search without early stop, with ``_RADIUS_SLOTS`` (64) result
  slots; when some query finds more, it runs again with the next power of two
  at or above the largest count, so nothing is cut off. For evaluation
  (precision / recall within radius r). Host-level (not jittable: the result
  width depends on the data).

  Args:
    index: a ``BucketIndex``.
    query_packed: uint32 [q, W].
    radius: Python int >= 0.
  Returns:
    ``SearchResults`` whose ``item_ids`` row ``i`` holds all ``num_found[i]``
    items within ``radius`` (then -1), in the order of ``bucket_search``.
  """
  radius = _checks.nonneg_int(radius, "radius")
  never = index.num_items + 1
  res = bucket_search(index, query_packed, num_wanted=never, max_radius=radius,
                      max_results=_RADIUS_SLOTS)
  most = int(jnp.max(res.num_found)) if res.num_found.size else 0
  if most <= _RADIUS_SLOTS:
    return res
  return bucket_search(index, query_packed, num_wanted=never, max_radius=radius,
                       max_results=1 << (most - 1).bit_length())
