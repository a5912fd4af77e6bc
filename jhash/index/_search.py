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

Substring tables (multi-index hashing, ``_build``'s docstring). When the index has
them and they are cheaper (``_substring_plan``; knob ``use_substrings``), radii
0..max_radius are searched differently, with the same results: each query's
substrings are looked up (with ``floor(max_radius / s)`` flips each), the entries
found are examined a window at a time, each bucket once (from the first table it
agrees with), and the buckets within ``max_radius`` are kept in ``H`` slots
(``_FEW_HITS`` = 8, then ``_HITS`` = 64). They are put in visit order, (distance,
query XOR key), by pairwise counting (no sort), and their items are visited in one
pass with each item's first-visit test; the widening-radius stop is applied
afterwards from per-radius counts (``_visit_hits``). If some query of a block has
more than H buckets within reach, an eager call runs again with 64 slots, then by
flip masks (compiling those programs only then); a call inside ``jit`` holds all
three in one program. On 1,000,000 64-bit codes at radius 2 this is 3 lookups and
about 5 entries per query instead of 2,081 probes.

Per-call costs, which dominate radius 0 (about a millisecond for 1,000 queries): the
index and NumPy queries go to one jitted call as they are, ``num_wanted`` as a NumPy
scalar (creating a device scalar cost more than the search); the binary search is
unrolled with the index's step count read once per index; at radius 0 a directory
run of at most 16 keys is read in one gather (on the CPU each gather from a large
table is one parallel task, a fixed cost), bucket bounds two at a time.
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
# Substring search: buckets within reach ordered per query in the usual case (measured:
# 1.3 within radius 2 on average, 5 at most, on the multi-code benchmark's 64-bit codes),
# and in a second try; where a query has more, flip masks. Lookup entries or items
# examined per loop step, at least and at most.
_FEW_HITS = 8
_HITS = 64
_SUBSTRING_WINDOW = 8
_SUBSTRING_WINDOW_MAX = 128
_INT32_MAX = int(np.iinfo(np.int32).max)
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


def _entries(num_entries, start, count, cum, ranks, method):
  """Positions of the candidates ranked ``ranks`` among a row of ranges.

  ``cum`` [Q, C] is the running total of the ranges' sizes in visit order; rank
  ``t`` falls in range ``p`` (first with ``cum > t``) at offset
  ``t - (cum[p] - count[p])`` of it. Returns (range [Q, N], position [Q, N]), the
  position clipped to ``[0, num_entries)``. ``method`` None counts ``cum <= t``
  directly (one fused comparison, for short rows) instead of ``jnp.searchsorted``,
  whose ``"scan"`` is a loop over the row.
  """
  num_probes = cum.shape[1]
  if method is None:
    probe = jnp.sum(cum[:, None, :] <= ranks[:, :, None], axis=2, dtype=jnp.int32)
  else:
    probe = _batched_searchsorted(cum, ranks, method)
  probe = jnp.minimum(probe, num_probes - 1)
  first = jnp.take_along_axis(start - (cum - count), probe, axis=1)
  return probe, jnp.clip(first + ranks, 0, num_entries - 1)


def _first_visit(index, queries, items, masks_of_probe, radius):
  """True where (item, bucket) is the item's first visit: no code of the item has a
  smaller (distance, query XOR code) than this bucket's (radius, flip mask).
  ``radius`` is a scalar or [Q, N, 1] (one per candidate)."""
  codes = index.item_codes[items]                       # [Q, N, m, W]
  valid = index.item_code_mask[items]                   # [Q, N, m]
  diff = codes ^ queries[:, None, None, :]
  dist = jnp.sum(lax.population_count(diff).astype(jnp.int32), axis=-1)
  earlier = (dist < radius) | ((dist == radius)
                               & _probe.key_less(diff, masks_of_probe[:, :, None, :]))
  return ~jnp.any(valid & earlier, axis=-1)


def _fill(index, state, queries, mask_of_probe, start, count, cum, radius, window, method):
  """Write the probes' new items at each query's next free slots; return the counts.

  ``mask_of_probe(probe [Q, N]) -> [Q, N, W]`` gives each probe's ``query XOR key``.
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
    probe, entry = _entries(index.bucket_items.shape[0], start, count, cum, ranks, method)
    item = index.bucket_items[entry]
    if multi:
      kept &= _first_visit(index, queries, item, mask_of_probe(probe), radius)
    slot = (state.found + kept_total)[:, None] + _prefix_sum(kept.astype(jnp.int32)) - 1
    slot = jnp.where(kept & (slot < num_slots), slot, num_slots)  # num_slots: dropped
    items = items.at[rows, slot].set(item, mode="drop")
    radii = radii.at[rows, slot].set(radius, mode="drop")
    return offset + window, items, radii, kept_total + jnp.sum(kept, axis=1, dtype=jnp.int32)

  carry = (jnp.int32(0), state.items, state.radii, jnp.zeros((num_q,), jnp.int32))
  _, items, radii, kept_total = lax.while_loop(lambda c: c[0] < jnp.max(limit), step, carry)
  return items, radii, kept_total if multi else total


def _visit(index, queries, num_wanted, window, method, state, start, count, exists,
           mask_of_probe, radius, num_probed, ends_radius):
  """Visit a row of probed buckets of one radius, in order, for a block of queries.

  ``start``, ``count`` and ``exists`` [Q, C] give each probe's bucket (``count`` 0
  where it does not exist); ``num_probed`` (scalar) is added to ``visited``.
  """
  cum = _prefix_sum(count)
  items, radii, new = _fill(index, state, queries, mask_of_probe, start, count, cum, radius,
                            window, method)
  act = state.active
  found = state.found + jnp.where(act, new, 0)
  return _State(
      items=items, radii=radii, found=found,
      visited=state.visited + jnp.where(act, num_probed, 0),
      nonempty=state.nonempty + jnp.where(act, jnp.sum(exists, axis=1, dtype=jnp.int32), 0),
      radius=jnp.where(act, radius, state.radius),
      active=act & ~(ends_radius & (found >= num_wanted)))


def _probe_chunk(index, queries, num_wanted, window, method, steps, state, masks, valid, radius,
                 ends_radius):
  """Probe one chunk of flip masks (all of one radius) for a block of queries."""
  probes = queries[:, None, :] ^ masks[None, :, :]
  # The binary search as a loop: unrolled here it ran 1.4x slower (1M codes, radius 2).
  del steps
  start, count, exists = _probe.bucket_ranges(index, probes)
  exists &= valid[None, :]
  return _visit(index, queries, num_wanted, window, method, state, start,
                jnp.where(exists, count, 0), exists, lambda probe: masks[probe], radius,
                jnp.sum(valid, dtype=jnp.int32), ends_radius)


def _probe_own_bucket(index, queries, num_wanted, steps, state):
  """Radius 0: the query's own bucket, whose items are all first visits (distance 0,
  and an item is stored once per bucket), read straight from its range."""
  start, count, exists = _probe.bucket_ranges(index, queries, steps, scan=True)
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


def _probe_flip_masks(index, chunks, num_wanted, window, method, steps, queries, state):
  """Radii 1..max_radius by flip masks: one ``lax.while_loop`` step per chunk."""
  probe = functools.partial(_probe_chunk, index, queries, num_wanted, window, method, steps)
  masks, valid, radius, ends = chunks
  num_chunks = masks.shape[0]

  def more(carry):
    i, state = carry
    return (i < num_chunks) & jnp.any(state.active)

  def step(carry):
    i, state = carry
    return i + 1, probe(state, masks[i], valid[i], radius[i], ends[i])

  return lax.while_loop(more, step, (jnp.int32(0), state))[1]


# Substring tables (multi-index hashing) ---------------------------------------------------


class _SubstringPlan(NamedTuple):
  """Static description of a search through the substring tables (hashable)."""
  layout: tuple[tuple[int, int], ...]  # (first bit, length) of each substring.
  flips: int                           # flips per substring: floor(max_radius / s).
  hits: int                            # H: buckets within max_radius kept per query.
  window: int                          # lookup entries examined per loop step.


@functools.lru_cache(maxsize=64)
def _substring_probes(layout, flips):
  """Per lookup of the tables: table number, xor mask and offset of its table (NumPy)."""
  tables, xors, bases, base = [], [], [], 0
  for j, (_, length) in enumerate(layout):
    for r in range(flips + 1):
      mask = flip_masks(length, r)[:, 0].astype(np.int64)
      tables += [j] * mask.size
      xors += mask.tolist()
      bases += [base] * mask.size
    base += (1 << length) + 1
  return (np.asarray(tables, np.int32), np.asarray(xors, np.int32),
          np.asarray(bases, np.int32))


@functools.lru_cache(maxsize=64)
def _plan_substrings(num_bits, num_substrings, num_buckets, max_radius, use_substrings):
  if num_substrings == 0 or use_substrings is False:
    return None
  layout = _build.substring_layout(num_bits, num_substrings)
  flips = max_radius // num_substrings
  lookups = _substring_probes(layout, flips)[0].size
  # Entries the lookups find on uniform codes, each examined against the full code.
  expected = sum(num_buckets / 2**length * sum(math.comb(length, r) for r in range(flips + 1))
                 for _, length in layout)
  probes = sum(math.comb(num_bits, r) for r in range(1, max_radius + 1))
  if use_substrings is None and 2 * (lookups + expected) + _FEW_HITS > probes:
    return None
  window = min(_SUBSTRING_WINDOW_MAX, max(_SUBSTRING_WINDOW, 1 << int(expected / 2).bit_length()))
  return _SubstringPlan(layout, flips, _HITS, window)


def _substring_plan(index: _build.BucketIndex, max_radius: int,
                    use_substrings: bool | None = None) -> _SubstringPlan | None:
  """How ``bucket_search`` uses the substring tables for radii 0..``max_radius``, or None.

  With ``s`` tables each query's substrings are looked up with up to
  ``floor(max_radius / s)`` flips each, and every bucket found is checked
  against the full code. The default (``use_substrings=None``) uses them when
  the lookups and the buckets they find on uniform codes, doubled, plus the
  ``_FEW_HITS`` slots, are fewer than the flip-mask probes they replace
  (``sum_{1 <= r <= max_radius} C(K, r)``); never at radius 0.
  """
  if max_radius == 0:
    return None
  return _plan_substrings(index.num_bits, index.num_substrings, index.num_buckets, max_radius,
                          use_substrings)


def _substring_values(queries, layout):
  """Each substring of packed keys [Q, W] (W <= 2) as int32 [Q, s]."""
  out = []
  for first, length in layout:
    word, shift = divmod(first, 32)
    value = queries[:, word] >> shift
    if shift + length > 32:
      value |= queries[:, word + 1] << (32 - shift)
    out.append((value & np.uint32((1 << length) - 1)).astype(jnp.int32))
  return jnp.stack(out, axis=1)


def _substring_masks(layout, num_words):
  """uint32 [s, W]: the bits of each substring."""
  masks = np.zeros((len(layout), num_words), np.uint64)
  for j, (first, length) in enumerate(layout):
    bits = ((1 << length) - 1) << first
    masks[j] = [(bits >> (32 * w)) & 0xFFFFFFFF for w in range(num_words)]
  return masks.astype(np.uint32)


def _prefix_sum(x):
  """Inclusive prefix sum along axis 1 by doubling shifts (XLA's CPU cumsum is a
  reduce-window, quadratic in the row length)."""
  shift = 1
  while shift < x.shape[1]:
    x = x + jnp.pad(x[:, :-shift], ((0, 0), (shift, 0)))
    shift *= 2
  return x


def _substring_hits(index, queries, live, plan, max_radius):
  """Buckets within ``max_radius`` of each query, found through the substring tables.

  The lookups' entries are examined ``_SUBSTRING_WINDOW`` at a time (a loop, so
  any number fits); a bucket counts once, from the first table in which it agrees
  with the query to within ``plan.flips`` bits, and only if its full distance is
  at most ``max_radius``. Returns bucket int32 [Q, H] (0 past the count), query
  XOR key uint32 [Q, H, W], distance int32 [Q, H] (``max_radius + 1`` past the
  count), H = ``plan.hits``, and the count of each query [Q] (may exceed H; 0 for
  queries not live).
  """
  table, xor, base = (jnp.asarray(a) for a in _substring_probes(plan.layout, plan.flips))
  num_q, num_words = queries.shape
  position = base[None, :] + (_substring_values(queries, plan.layout)[:, table] ^ xor[None, :])
  ends = index.substring_offsets[_probe.pairs(position)]            # [Q, P, 2]
  start, count = ends[..., 0], ends[..., 1] - ends[..., 0]
  cum = _prefix_sum(count)
  total = jnp.where(live, cum[:, -1], 0)
  flat = index.substring_buckets.reshape(-1)
  masks = jnp.asarray(_substring_masks(plan.layout, num_words))
  rows = jnp.arange(num_q)[:, None]
  window = plan.window

  def step(carry):
    offset, bucket, diff, dist, num = carry
    ranks = jnp.broadcast_to(offset + jnp.arange(window, dtype=jnp.int32), (num_q, window))
    found = ranks < total[:, None]
    probe, entry = _entries(flat.shape[0], start, count, cum, ranks, None)
    b = jnp.where(found, flat[jnp.where(found, entry, 0)], 0)  # dead slots read one line
    x = index.keys[b] ^ queries[:, None, :]                     # [Q, window, W]
    d = jnp.sum(lax.population_count(x).astype(jnp.int32), axis=-1)
    sub = jnp.sum(lax.population_count(x[:, :, None, :] & masks[None, None]).astype(jnp.int32),
                  axis=-1)
    first = jnp.argmax(sub <= plan.flips, axis=-1)
    hit = found & (first == table[probe]) & (d <= max_radius)
    slot = num[:, None] + _prefix_sum(hit.astype(jnp.int32)) - 1
    slot = jnp.where(hit & (slot < plan.hits), slot, plan.hits)   # plan.hits: dropped
    return (offset + window, bucket.at[rows, slot].set(b, mode="drop"),
            diff.at[rows, slot].set(x, mode="drop"), dist.at[rows, slot].set(d, mode="drop"),
            num + jnp.sum(hit, axis=1, dtype=jnp.int32))

  carry = (jnp.int32(0), jnp.zeros((num_q, plan.hits), jnp.int32),
           jnp.zeros((num_q, plan.hits, num_words), jnp.uint32),
           jnp.full((num_q, plan.hits), max_radius + 1, jnp.int32), jnp.zeros((num_q,), jnp.int32))
  _, bucket, diff, dist, num = lax.while_loop(lambda c: c[0] < jnp.max(total), step, carry)
  return bucket, diff, dist, jnp.where(live, num, 0)


def _rank_rows(keys):
  """Position of each entry of each row when sorted by ``keys`` (a list of [Q, C]
  arrays, most significant first), ties by position: int32 [Q, C]. Pairwise
  counting, no sort (XLA's CPU sort is slow; C is small)."""
  num_slots = keys[0].shape[1]
  index = jnp.arange(num_slots)
  less = (index[None, :] < index[:, None])[None]         # [1, i, j]: j before i on ties
  for key in reversed(keys):
    a, b = key[:, None, :], key[:, :, None]              # a: entry j, b: entry i
    less = (a < b) | ((a == b) & less)
  return jnp.sum(less, axis=2, dtype=jnp.int32)


def _visit_hits(index, queries, num_wanted, max_radius, num_slots, window, bucket, diff, dist):
  """Visit the buckets within reach in order (distance, then query XOR key) in one pass,
  then cut each query at the first radius where it has ``num_wanted`` items.

  Items are written in visit order, so the items within the radius reached are
  the first ``num_found`` slots; ``found_at[q, r]`` counts the distinct items
  whose first visit is at radius ``r``.
  """
  num_q = bucket.shape[0]
  rank = _rank_rows([dist] + [diff[..., w] for w in reversed(range(diff.shape[-1]))])
  rows = jnp.arange(num_q)[:, None]
  bucket = jnp.zeros_like(bucket).at[rows, rank].set(bucket)
  dist = jnp.zeros_like(dist).at[rows, rank].set(dist)
  diff = jnp.zeros_like(diff).at[rows, rank].set(diff)
  within = dist <= max_radius
  ends = index.offsets[_probe.pairs(bucket)]
  start = ends[..., 0]
  size = jnp.where(within, ends[..., 1] - start, 0)
  cum = _prefix_sum(size)
  radii = jnp.arange(max_radius + 1)
  multi = index.max_codes_per_item > 1
  limit = cum[:, -1] if multi else jnp.minimum(cum[:, -1], num_slots)

  def step(carry):
    offset, items, item_radii, written, found_at = carry
    ranks = jnp.broadcast_to(offset + jnp.arange(window, dtype=jnp.int32), (num_q, window))
    kept = ranks < limit[:, None]
    probe, entry = _entries(index.bucket_items.shape[0], start, size, cum, ranks, None)
    item = index.bucket_items[jnp.where(kept, entry, 0)]
    radius = jnp.take_along_axis(dist, probe, axis=1)
    if multi:
      mask = jnp.take_along_axis(diff, probe[..., None], axis=1)
      kept &= _first_visit(index, queries, item, mask, radius[..., None])
      found_at += jnp.sum(kept[:, :, None] & (radius[:, :, None] == radii[None, None]), axis=1,
                          dtype=jnp.int32)
    slot = written[:, None] + _prefix_sum(kept.astype(jnp.int32)) - 1
    slot = jnp.where(kept & (slot < num_slots), slot, num_slots)  # num_slots: dropped
    return (offset + window, items.at[rows, slot].set(item, mode="drop"),
            item_radii.at[rows, slot].set(radius, mode="drop"),
            written + jnp.sum(kept, axis=1, dtype=jnp.int32), found_at)

  empty = jnp.full((num_q, num_slots), -1, jnp.int32)
  found_at = jnp.zeros((num_q, max_radius + 1), jnp.int32)
  if not multi:  # every item of a bucket is new: count them from the bucket sizes
    found_at = jnp.sum(jnp.where(dist[:, :, None] == radii[None, None], size[:, :, None], 0),
                       axis=1, dtype=jnp.int32)
  carry = (jnp.int32(0), empty, empty, jnp.zeros((num_q,), jnp.int32), found_at)
  _, items, item_radii, _, found_at = lax.while_loop(lambda c: c[0] < jnp.max(limit), step,
                                                     carry)
  found_within = _prefix_sum(found_at)                        # [Q, max_radius + 1]
  enough = found_within >= num_wanted
  reached = jnp.where(jnp.any(enough, axis=1), jnp.argmax(enough, axis=1), max_radius)
  found = jnp.take_along_axis(found_within, reached[:, None], axis=1)[:, 0]
  shown = jnp.arange(num_slots)[None, :] < found[:, None]
  visited = np.cumsum([math.comb(index.num_bits, r) for r in range(max_radius + 1)])
  visited = jnp.asarray(np.minimum(visited, np.iinfo(np.int32).max), jnp.int32)
  return _State(
      items=jnp.where(shown, items, -1), radii=jnp.where(shown, item_radii, -1), found=found,
      visited=visited[reached],
      nonempty=jnp.sum(dist <= reached[:, None], axis=1, dtype=jnp.int32),
      radius=reached.astype(jnp.int32), active=jnp.zeros((num_q,), bool))


# Blocks of queries ------------------------------------------------------------------------


def _in_blocks(run, queries, live, block_size):
  """``run((queries, live)) -> _State`` over blocks of ``block_size`` queries, one
  block after the other (``lax.map``), so each block's working arrays stay in cache."""
  num_q, num_words = queries.shape
  num_blocks = -(-num_q // block_size)
  if num_blocks == 1:
    return run((queries, live))
  pad = num_blocks * block_size - num_q
  queries = jnp.concatenate([queries, jnp.zeros((pad, num_words), jnp.uint32)])
  live = jnp.concatenate([live, jnp.zeros((pad,), bool)])
  state = lax.map(run, (queries.reshape(num_blocks, block_size, num_words),
                        live.reshape(num_blocks, block_size)))
  return jax.tree.map(lambda a: a.reshape(num_blocks * block_size, *a.shape[2:])[:num_q], state)


def _empty_state(num_q, num_slots, live):
  empty = jnp.full((num_q, num_slots), -1, jnp.int32)
  zeros = jnp.zeros((num_q,), jnp.int32)
  return _State(empty, empty, zeros, zeros, zeros, zeros, live)


def _search_by_flip_masks(index, chunks, num_wanted, window, method, steps, num_slots,
                          max_radius, block):
  """Radius 0 from the query's own bucket, then radii 1..max_radius by flip masks."""
  queries, live = block
  state = _probe_own_bucket(index, queries, num_wanted, steps,
                            _empty_state(queries.shape[0], num_slots, live))
  if max_radius == 0:
    return state
  return _probe_flip_masks(index, chunks, num_wanted, window, method, steps, queries, state)


def _search_by_substrings(index, num_wanted, num_slots, max_radius, plan, by_flip_masks, block):
  """Radii 0..max_radius through the substring tables. Returns the state and each
  query's count of buckets within reach [Q].

  Without ``by_flip_masks`` (eager calls) a block where some query has more than
  ``plan.hits`` such buckets returns an empty state, and ``bucket_search`` runs
  again with more slots or by flip masks: only the usual case is compiled. With it
  (traced calls, all in one program) the first ``_FEW_HITS`` are ordered when no
  query of the block has more, all ``plan.hits`` otherwise, and
  ``by_flip_masks(block)`` runs where some query has more still.
  """
  queries, live = block
  bucket, diff, dist, count = _substring_hits(index, queries, live, plan, max_radius)
  most = jnp.max(count)
  visit = functools.partial(_visit_hits, index, queries, num_wanted, max_radius, num_slots,
                            _SUBSTRING_WINDOW)
  if by_flip_masks is None:
    empty = _empty_state(queries.shape[0], num_slots, live)
    return lax.cond(most > plan.hits, lambda: empty, lambda: visit(bucket, diff, dist)), count
  few = min(_FEW_HITS, plan.hits)
  branches = [lambda: visit(bucket[:, :few], diff[:, :few], dist[:, :few]),
              lambda: visit(bucket, diff, dist), lambda: by_flip_masks(block)]
  return lax.switch((most > few).astype(jnp.int32) + (most > plan.hits), branches), count


@functools.partial(jax.jit, static_argnames=("max_radius", "max_results", "block_size",
                                             "flip_block_size", "window", "method", "steps",
                                             "plan", "fall_back"))
def _bucket_search(index, query_packed, chunks, num_wanted, *, max_radius, max_results,
                   block_size, flip_block_size, window, method, steps, plan, fall_back):
  """The search; also returns the most buckets within reach of one query through the
  substring tables (0 without them), to tell an eager caller to run again."""
  live = jnp.ones((query_packed.shape[0],), bool)
  by_flip_masks = functools.partial(_search_by_flip_masks, index, chunks, num_wanted, window,
                                    method, steps, max_results, max_radius)
  most = jnp.int32(0)
  if plan is None:
    state = _in_blocks(by_flip_masks, query_packed, live, flip_block_size)
  else:
    flips_in_blocks = None
    if fall_back:
      flips_in_blocks = lambda block: _in_blocks(by_flip_masks, *block, flip_block_size)  # noqa: E731
    run = functools.partial(_search_by_substrings, index, num_wanted, max_results, max_radius,
                            plan, flips_in_blocks)
    state, count = _in_blocks(run, query_packed, live, block_size)
    most = jnp.max(count, initial=0)
  ids = jnp.where(state.items >= 0, index.item_ids[jnp.maximum(state.items, 0)], -1)
  return SearchResults(item_ids=ids, radii=state.radii, num_found=state.found,
                       buckets_visited=state.visited, buckets_nonempty=state.nonempty,
                       radius_reached=state.radius), most


def _check_search_args(index, query_packed, max_radius, max_results):
  if not isinstance(index, _build.BucketIndex):
    raise ValueError(f"index must be a BucketIndex from build_index; got {type(index).__name__}.")
  _probe.check_queries(index, query_packed)
  max_radius = _checks.nonneg_int(max_radius, "max_radius")
  if max_radius > index.num_bits:
    raise ValueError(f"max_radius must be <= num_bits={index.num_bits}; got {max_radius}.")
  return max_radius, _checks.positive_int(max_results, "max_results")


def _check_num_wanted(num_wanted: Any) -> jax.Array | np.int32:
  if type(num_wanted) is int and num_wanted >= 1:  # the common case, quickly
    return np.int32(min(num_wanted, _INT32_MAX))
  if isinstance(num_wanted, (bool, np.bool_)) or np.ndim(num_wanted) != 0 or (
      np.dtype(getattr(num_wanted, "dtype", type(num_wanted))).kind not in "iu"):
    raise ValueError(f"num_wanted must be an integer >= 1; got {_checks._describe(num_wanted)}.")
  if _checks.is_concrete(num_wanted):
    value = int(np.asarray(num_wanted))
    if value < 1:
      raise ValueError(f"num_wanted must be >= 1; got {value}.")
    # A NumPy scalar: jit's dispatch takes it far faster than a new device scalar.
    return np.int32(min(value, _INT32_MAX))  # more than any index holds
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


def _check_use_substrings(use_substrings: Any) -> bool | None:
  if use_substrings is not None and not isinstance(use_substrings, (bool, np.bool_)):
    raise ValueError("use_substrings must be None (decide by cost), True or False; got "
                     f"{_checks._describe(use_substrings)}.")
  return None if use_substrings is None else bool(use_substrings)


def bucket_search(index: _build.BucketIndex, query_packed: jax.Array, *, num_wanted: Any,
                  max_radius: int, max_results: int, probes_per_block: int | None = None,
                  searchsorted_method: str | None = None,
                  use_substrings: bool | None = None) -> SearchResults:
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
    use_substrings: tuning only: find the buckets of radii >= 1 through the index's
      substring tables (multi-index hashing; ``build_index(num_substrings=...)``)
      instead of probing every flip mask. Default ``None``: when they are cheaper
      (``_substring_plan``); ``False`` never; ``True`` whenever the index has them.
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
  plan = _substring_plan(index, max_radius, _check_use_substrings(use_substrings))
  if plan is None and index.num_substrings:
    index = index._replace(substring_offsets=None, substring_buckets=None)  # not passed in
  multi = index.max_codes_per_item > 1
  window = _WINDOW if multi else min(_WINDOW, 1 << (max_results - 1).bit_length())
  chunks, per_query = None, 1  # radius 0: one bucket per query, one block
  if max_radius:
    k = index.num_bits
    chunk = min(_CHUNK, max(math.comb(k, r) for r in range(1, max_radius + 1)))
    chunks = _device_chunks(k, max_radius, chunk)
    per_query = max(chunk, window * index.max_codes_per_item if multi else window)
  num_q = query_packed.shape[0]
  # NumPy queries go to jit as they are: its dispatch copies them faster than jnp.asarray.
  search = functools.partial(
      _bucket_search, index, query_packed, chunks, num_wanted, max_radius=max_radius,
      max_results=max_results, flip_block_size=max(1, min(num_q, probes // per_query)),
      window=window, method=method, steps=_probe.static_steps(index))
  if plan is None:
    return search(block_size=1, plan=None, fall_back=False)[0]
  if any(isinstance(x, jax.core.Tracer) for x in (query_packed, index.keys)):
    # Inside jit: one program that falls back on its own.
    hits = (_HITS,)
  else:
    hits = (_FEW_HITS, _HITS)
  for count in hits:
    # Substring search: about ``count`` buckets and a window of entries per query.
    res, most = search(block_size=max(1, min(num_q, probes // count)),
                       plan=plan._replace(hits=count), fall_back=len(hits) == 1)
    if len(hits) == 1 or int(most) <= count:
      return res
  return search(block_size=1, plan=None, fall_back=False)[0]


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
  most = int(np.max(np.asarray(res.num_found), initial=0))
  if most <= _RADIUS_SLOTS:
    return res
  return bucket_search(index, query_packed, num_wanted=never, max_radius=radius,
                       max_results=1 << (most - 1).bit_length())
