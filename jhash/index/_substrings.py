"""Bucket search through the substring tables (multi-index hashing).

The tables are described in ``_build``'s docstring. When the index has them and
they are cheaper (``substring_plan``; ``bucket_search``'s knob ``use_substrings``),
radii 0..max_radius are searched this way, with the same results as probing flip
masks: each query's substrings are looked up (with ``floor(max_radius / s)`` flips
each); the entries found are examined a window at a time, each bucket once (from
the first table it agrees with), and the buckets within ``max_radius`` are kept in
``H`` slots (``FEW_HITS`` = 8, then ``HITS`` = 64: ``find_hits``). They are put in
visit order, (distance, query XOR key), by pairwise counting (no sort), and their
items visited in one pass with each item's first-visit test; the widening-radius
stop is applied afterwards from per-radius counts (``visit_hits``). If some query of
a block has more than H buckets within reach, an eager call runs again with 64
slots, then by flip masks (compiling those programs only then); a call inside
``jit`` holds all three in one program (``search_by_substrings``).

On 1,000,000 64-bit codes (3 tables of 21-22 bits) radius 2 takes 3 lookups and
about 5 entries per query instead of 2,081 probes; on the multi-code benchmark that
ran 10-40x faster than the flip masks (``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax import lax

from jhash.index import _build
from jhash.index import _probe
from jhash.index import _visit

# Buckets within reach ordered per query in the usual case (measured: 1.3 within
# radius 2 on average, 5 at most, on the multi-code benchmark's 64-bit codes), and in a
# second try; where a query has more, flip masks. Lookup entries or items examined per
# loop step, at least and at most.
FEW_HITS = 8
HITS = 64
WINDOW = 8
WINDOW_MAX = 128


class SubstringPlan(NamedTuple):
  """Static description of a search through the substring tables (hashable)."""

  layout: tuple[tuple[int, int], ...]  # (first bit, length) of each substring.
  flips: int  # flips per substring: floor(max_radius / s).
  hits: int  # H: buckets within max_radius kept per query.
  window: int  # lookup entries examined per loop step.


@functools.lru_cache(maxsize=64)
def _lookups(layout, flips):
  """Per lookup of the tables: table number, xor mask and offset of its table (NumPy)."""
  tables, xors, bases, base = [], [], [], 0
  for j, (_, length) in enumerate(layout):
    for r in range(flips + 1):
      mask = _probe.flip_masks(length, r)[:, 0].astype(np.int64)
      tables += [j] * mask.size
      xors += mask.tolist()
      bases += [base] * mask.size
    base += (1 << length) + 1
  return (np.asarray(tables, np.int32), np.asarray(xors, np.int32), np.asarray(bases, np.int32))


# The native kernel's costs, relative to one flip-mask probe (a directory read and a
# search of its run of keys, two dependent cache misses): a substring lookup about
# one, an entry found and checked against the full key about 1/8 (entries are read in
# order). Measured with 1,000,000 codes of 32 bits, 1,000 queries, on 2 CPU cores:
# 17-27 ns per probe, 2.4-3.2 ns per entry (2 to 4 tables, radius 2 and 3).
_NATIVE_ENTRY_COST = 1 / 8


@functools.lru_cache(maxsize=64)
def _plan(num_bits, num_substrings, num_buckets, max_radius, use_substrings, native_kernel):
  if num_substrings == 0 or use_substrings is False:
    return None
  layout = _build.substring_layout(num_bits, num_substrings)
  flips = max_radius // num_substrings
  lookups = _lookups(layout, flips)[0].size
  # Entries the lookups find on uniform codes, each examined against the full code.
  expected = sum(
    num_buckets / 2**length * sum(math.comb(length, r) for r in range(flips + 1))
    for _, length in layout
  )
  probes = sum(math.comb(num_bits, r) for r in range(1, max_radius + 1))
  if native_kernel:
    cost = lookups + _NATIVE_ENTRY_COST * expected
  else:  # the array code: result slots and windows of entries, a second run past FEW_HITS
    cost = 2 * (lookups + expected) + FEW_HITS
  if use_substrings is None and cost > probes:
    return None
  window = min(WINDOW_MAX, max(WINDOW, 1 << int(expected / 2).bit_length()))
  return SubstringPlan(layout, flips, HITS, window)


def substring_plan(
  index: _build.BucketIndex,
  max_radius: int,
  use_substrings: bool | None = None,
  native_kernel: bool = False,
) -> SubstringPlan | None:
  """How ``bucket_search`` uses the substring tables for radii 0..``max_radius``, or None.

  With ``s`` tables each query's substrings are looked up with up to
  ``floor(max_radius / s)`` flips each, and every bucket found is checked
  against the full code. The default (``use_substrings=None``) uses them when
  they cost less than the flip-mask probes they replace
  (``sum_{1 <= r <= max_radius} C(K, r)``); never at radius 0. The cost counts the
  lookups and the buckets they find on uniform codes: for the array code, doubled,
  plus the ``FEW_HITS`` slots; for the native kernel (``native_kernel``, the CPU),
  each bucket found at ``_NATIVE_ENTRY_COST`` of a probe.
  """
  if max_radius == 0:
    return None
  return _plan(
    index.num_bits,
    index.num_substrings,
    index.num_buckets,
    max_radius,
    use_substrings,
    native_kernel,
  )


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


def find_hits(index, queries, live, plan, max_radius):
  """Buckets within ``max_radius`` of each query, found through the substring tables.

  The lookups' entries are examined ``plan.window`` at a time (a loop, so any
  number fits; ``WINDOW`` to ``WINDOW_MAX``, by the number expected); a bucket
  counts once, from the first table in which it agrees with the query to within
  ``plan.flips`` bits, and only if its full distance is at most ``max_radius``.
  Returns bucket int32 [Q, H] (0 past the count), query
  XOR key uint32 [Q, H, W], distance int32 [Q, H] (``max_radius + 1`` past the
  count), H = ``plan.hits``, and the count of each query [Q] (may exceed H; 0 for
  queries not live).
  """
  table, xor, base = (jnp.asarray(a) for a in _lookups(plan.layout, plan.flips))
  num_q, num_words = queries.shape
  position = base[None, :] + (_substring_values(queries, plan.layout)[:, table] ^ xor[None, :])
  ends = index.substring_offsets[_probe.pairs(position)]  # [Q, P, 2]
  start, count = ends[..., 0], ends[..., 1] - ends[..., 0]
  cum = _visit.prefix_sum(count)
  total = jnp.where(live, cum[:, -1], 0)
  flat = index.substring_buckets.reshape(-1)
  masks = jnp.asarray(_substring_masks(plan.layout, num_words))
  rows = jnp.arange(num_q)[:, None]
  window = plan.window

  def step(carry):
    offset, bucket, diff, dist, num = carry
    ranks = jnp.broadcast_to(offset + jnp.arange(window, dtype=jnp.int32), (num_q, window))
    found = ranks < total[:, None]
    probe, entry = _visit.entries(flat.shape[0], start, count, cum, ranks, None)
    b = jnp.where(found, flat[jnp.where(found, entry, 0)], 0)  # dead slots read one line
    x = index.keys[b] ^ queries[:, None, :]  # [Q, window, W]
    d = jnp.sum(lax.population_count(x).astype(jnp.int32), axis=-1)
    sub = jnp.sum(
      lax.population_count(x[:, :, None, :] & masks[None, None]).astype(jnp.int32), axis=-1
    )
    first = jnp.argmax(sub <= plan.flips, axis=-1)
    hit = found & (first == table[probe]) & (d <= max_radius)
    slot = num[:, None] + _visit.prefix_sum(hit.astype(jnp.int32)) - 1
    slot = jnp.where(hit & (slot < plan.hits), slot, plan.hits)  # plan.hits: dropped
    return (
      offset + window,
      bucket.at[rows, slot].set(b, mode="drop"),
      diff.at[rows, slot].set(x, mode="drop"),
      dist.at[rows, slot].set(d, mode="drop"),
      num + jnp.sum(hit, axis=1, dtype=jnp.int32),
    )

  carry = (
    jnp.int32(0),
    jnp.zeros((num_q, plan.hits), jnp.int32),
    jnp.zeros((num_q, plan.hits, num_words), jnp.uint32),
    jnp.full((num_q, plan.hits), max_radius + 1, jnp.int32),
    jnp.zeros((num_q,), jnp.int32),
  )
  _, bucket, diff, dist, num = lax.while_loop(lambda c: c[0] < jnp.max(total), step, carry)
  return bucket, diff, dist, jnp.where(live, num, 0)


def _rank_rows(keys):
  """Position of each entry of each row when sorted by ``keys`` (a list of [Q, C]
  arrays, most significant first), ties by position: int32 [Q, C]. Pairwise
  counting, no sort (XLA's CPU sort is slow; C is small)."""
  num_slots = keys[0].shape[1]
  index = jnp.arange(num_slots)
  less = (index[None, :] < index[:, None])[None]  # [1, i, j]: j before i on ties
  for key in reversed(keys):
    a, b = key[:, None, :], key[:, :, None]  # a: entry j, b: entry i
    less = (a < b) | ((a == b) & less)
  return jnp.sum(less, axis=2, dtype=jnp.int32)


def _in_visit_order(bucket, diff, dist):
  """The buckets [Q, H] (with their query XOR key and distance) sorted by
  (distance, query XOR key as an integer): the order of the flip-mask search."""
  rank = _rank_rows([dist] + [diff[..., w] for w in reversed(range(diff.shape[-1]))])
  rows = jnp.arange(bucket.shape[0])[:, None]
  return tuple(jnp.zeros_like(a).at[rows, rank].set(a) for a in (bucket, diff, dist))


def _fill_in_order(index, queries, max_radius, num_slots, window, bucket, diff, dist):
  """Write the items of the ordered buckets within reach into the result slots, each
  item at its first visit. Returns items and radii [Q, R] and ``found_at`` [Q,
  max_radius + 1], the distinct items first visited at each radius (all of them,
  also past the slots)."""
  num_q = bucket.shape[0]
  ends = index.offsets[_probe.pairs(bucket)]
  start = ends[..., 0]
  size = jnp.where(dist <= max_radius, ends[..., 1] - start, 0)
  cum = _visit.prefix_sum(size)
  radii = jnp.arange(max_radius + 1)
  multi = index.max_codes_per_item > 1
  limit = cum[:, -1] if multi else jnp.minimum(cum[:, -1], num_slots)
  rows = jnp.arange(num_q)[:, None]

  def step(carry):
    offset, items, item_radii, written, found_at = carry
    ranks = jnp.broadcast_to(offset + jnp.arange(window, dtype=jnp.int32), (num_q, window))
    kept = ranks < limit[:, None]
    probe, entry = _visit.entries(index.bucket_items.shape[0], start, size, cum, ranks, None)
    item = index.bucket_items[jnp.where(kept, entry, 0)]
    radius = jnp.take_along_axis(dist, probe, axis=1)
    if multi:
      mask = jnp.take_along_axis(diff, probe[..., None], axis=1)
      kept &= _visit.first_visit(index, queries, item, mask, radius[..., None])
      found_at += jnp.sum(
        kept[:, :, None] & (radius[:, :, None] == radii[None, None]), axis=1, dtype=jnp.int32
      )
    slot = written[:, None] + _visit.prefix_sum(kept.astype(jnp.int32)) - 1
    slot = jnp.where(kept & (slot < num_slots), slot, num_slots)  # num_slots: dropped
    return (
      offset + window,
      items.at[rows, slot].set(item, mode="drop"),
      item_radii.at[rows, slot].set(radius, mode="drop"),
      written + jnp.sum(kept, axis=1, dtype=jnp.int32),
      found_at,
    )

  empty = jnp.full((num_q, num_slots), -1, jnp.int32)
  found_at = jnp.zeros((num_q, max_radius + 1), jnp.int32)
  if not multi:  # every item of a bucket is new: count them from the bucket sizes
    found_at = jnp.sum(
      jnp.where(dist[:, :, None] == radii[None, None], size[:, :, None], 0), axis=1, dtype=jnp.int32
    )
  carry = (jnp.int32(0), empty, empty, jnp.zeros((num_q,), jnp.int32), found_at)
  _, items, item_radii, _, found_at = lax.while_loop(lambda c: c[0] < jnp.max(limit), step, carry)
  return items, item_radii, found_at


def _stop_at_enough(num_bits, num_wanted, max_radius, items, item_radii, found_at, dist):
  """Each query's result at the first radius where it has ``num_wanted`` items (or
  ``max_radius``): the slots past the items found by then are emptied."""
  num_q, num_slots = items.shape
  found_within = _visit.prefix_sum(found_at)  # [Q, max_radius + 1]
  enough = found_within >= num_wanted
  reached = jnp.where(jnp.any(enough, axis=1), jnp.argmax(enough, axis=1), max_radius)
  found = jnp.take_along_axis(found_within, reached[:, None], axis=1)[:, 0]
  shown = jnp.arange(num_slots)[None, :] < found[:, None]
  visited = np.cumsum([math.comb(num_bits, r) for r in range(max_radius + 1)])
  visited = jnp.asarray(np.minimum(visited, np.iinfo(np.int32).max), jnp.int32)
  return _visit.State(
    items=jnp.where(shown, items, -1),
    radii=jnp.where(shown, item_radii, -1),
    found=found,
    visited=visited[reached],
    nonempty=jnp.sum(dist <= reached[:, None], axis=1, dtype=jnp.int32),
    radius=reached.astype(jnp.int32),
    active=jnp.zeros((num_q,), bool),
  )


def visit_hits(index, queries, num_wanted, max_radius, num_slots, window, bucket, diff, dist):
  """Visit the buckets within reach in order (distance, then query XOR key) in one pass,
  then cut each query at the first radius where it has ``num_wanted`` items: the
  flip-mask search's results, in the same order. Items are written in visit order,
  so the items within the radius reached are the first ``num_found`` slots."""
  bucket, diff, dist = _in_visit_order(bucket, diff, dist)
  items, item_radii, found_at = _fill_in_order(
    index, queries, max_radius, num_slots, window, bucket, diff, dist
  )
  return _stop_at_enough(index.num_bits, num_wanted, max_radius, items, item_radii, found_at, dist)


def search_by_substrings(index, num_wanted, num_slots, max_radius, plan, by_flip_masks, block):
  """Radii 0..max_radius through the substring tables. Returns the state and each
  query's count of buckets within reach [Q].

  Without ``by_flip_masks`` (eager calls) a block where some query has more than
  ``plan.hits`` such buckets returns an empty state, and ``bucket_search`` runs
  again with more slots or by flip masks: only the usual case is compiled. With it
  (traced calls, all in one program) the first ``FEW_HITS`` are ordered when no
  query of the block has more, all ``plan.hits`` otherwise, and
  ``by_flip_masks(block)`` runs where some query has more still.
  """
  queries, live = block
  bucket, diff, dist, count = find_hits(index, queries, live, plan, max_radius)
  most = jnp.max(count)
  visit = functools.partial(visit_hits, index, queries, num_wanted, max_radius, num_slots, WINDOW)
  if by_flip_masks is None:
    empty = _visit.empty_state(queries.shape[0], num_slots, live)
    return lax.cond(most > plan.hits, lambda: empty, lambda: visit(bucket, diff, dist)), count
  few = min(FEW_HITS, plan.hits)
  branches = [
    lambda: visit(bucket[:, :few], diff[:, :few], dist[:, :few]),
    lambda: visit(bucket, diff, dist),
    lambda: by_flip_masks(block),
  ]
  return lax.switch((most > few).astype(jnp.int32) + (most > plan.hits), branches), count
