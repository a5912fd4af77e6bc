"""Visiting probed buckets: the search state, the result fill by rank, and the
first-visit test that returns an item with several codes once.

A row of probed buckets (one chunk of flip masks, or the substring search's
buckets within reach) is visited in order for a block of queries: the buckets'
items are written into fixed-size result rows by rank (a batched search over the
per-query running counts), a window of ranks at a time, so the work follows the
number of hits; nothing is sorted. An item with several codes counts at its first
visit only: the candidate (item, bucket) is tested against the item's own codes,
so no per-query "seen" table over the database is needed.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jhash.index import _probe


class State(NamedTuple):
  """Per query of a block: the result slots and the search's progress."""

  items: jax.Array  # int32 [Q, R] item numbers, -1 empty.
  radii: jax.Array  # int32 [Q, R].
  found: jax.Array  # int32 [Q] distinct items found so far.
  visited: jax.Array  # int32 [Q] buckets probed.
  nonempty: jax.Array  # int32 [Q] probed buckets that exist.
  radius: jax.Array  # int32 [Q] last radius searched.
  active: jax.Array  # bool [Q] still searching.


def empty_state(num_q, num_slots, live):
  """Nothing found yet; ``live`` [Q] marks the queries that search (not padding)."""
  empty = jnp.full((num_q, num_slots), -1, jnp.int32)
  zeros = jnp.zeros((num_q,), jnp.int32)
  return State(empty, empty, zeros, zeros, zeros, zeros, live)


def prefix_sum(x):
  """Inclusive prefix sum along axis 1 by doubling shifts (XLA's CPU cumsum is a
  reduce-window, quadratic in the row length)."""
  shift = 1
  while shift < x.shape[1]:
    x = x + jnp.pad(x[:, :-shift], ((0, 0), (shift, 0)))
    shift *= 2
  return x


def batched_searchsorted(sorted_rows, values, method):
  """Per row ``searchsorted(side='right')``: [Q, C], [Q, R] -> int32 [Q, R]."""
  return jax.vmap(lambda a, v: jnp.searchsorted(a, v, side="right", method=method))(
    sorted_rows, values
  ).astype(jnp.int32)


def entries(num_entries, start, count, cum, ranks, method):
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
    probe = batched_searchsorted(cum, ranks, method)
  probe = jnp.minimum(probe, num_probes - 1)
  first = jnp.take_along_axis(start - (cum - count), probe, axis=1)
  return probe, jnp.clip(first + ranks, 0, num_entries - 1)


def first_visit(index, queries, items, masks_of_probe, radius):
  """True where (item, bucket) is the item's first visit: no code of the item has a
  smaller (distance, query XOR code) than this bucket's (radius, flip mask).
  ``radius`` is a scalar or [Q, N, 1] (one per candidate)."""
  codes = index.item_codes[items]  # [Q, N, m, W]
  valid = index.item_code_mask[items]  # [Q, N, m]
  diff = codes ^ queries[:, None, None, :]
  dist = jnp.sum(lax.population_count(diff).astype(jnp.int32), axis=-1)
  earlier = (dist < radius) | (
    (dist == radius) & _probe.key_less(diff, masks_of_probe[:, :, None, :])
  )
  return ~jnp.any(valid & earlier, axis=-1)


def fill(index, state, queries, mask_of_probe, start, count, cum, radius, window, method):
  """Write the probes' new items at each query's next free slots; return the counts.

  ``mask_of_probe(probe [Q, N]) -> [Q, N, W]`` gives each probe's ``query XOR key``.
  One code per item: every candidate is new, only the first ``R - found`` are
  read, and the count is the buckets' total. Several codes: every candidate is
  tested (``first_visit``) so the count of distinct items stays exact.
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
    probe, entry = entries(index.bucket_items.shape[0], start, count, cum, ranks, method)
    item = index.bucket_items[jnp.where(kept, entry, 0)]  # ranks past the end read one line
    if multi:
      kept &= first_visit(index, queries, item, mask_of_probe(probe), radius)
    slot = (state.found + kept_total)[:, None] + prefix_sum(kept.astype(jnp.int32)) - 1
    slot = jnp.where(kept & (slot < num_slots), slot, num_slots)  # num_slots: dropped
    items = items.at[rows, slot].set(item, mode="drop")
    radii = radii.at[rows, slot].set(radius, mode="drop")
    return offset + window, items, radii, kept_total + jnp.sum(kept, axis=1, dtype=jnp.int32)

  carry = (jnp.int32(0), state.items, state.radii, jnp.zeros((num_q,), jnp.int32))
  _, items, radii, kept_total = lax.while_loop(lambda c: c[0] < jnp.max(limit), step, carry)
  return items, radii, kept_total if multi else total


def visit(
  index,
  queries,
  num_wanted,
  window,
  method,
  state,
  start,
  count,
  exists,
  mask_of_probe,
  radius,
  num_probed,
  ends_radius,
):
  """Visit a row of probed buckets of one radius, in order, for a block of queries.

  ``start``, ``count`` and ``exists`` [Q, C] give each probe's bucket (``count`` 0
  where it does not exist); ``num_probed`` (scalar) is added to ``visited``.
  """
  cum = prefix_sum(count)
  items, radii, new = fill(
    index, state, queries, mask_of_probe, start, count, cum, radius, window, method
  )
  act = state.active
  found = state.found + jnp.where(act, new, 0)
  return State(
    items=items,
    radii=radii,
    found=found,
    visited=state.visited + jnp.where(act, num_probed, 0),
    nonempty=state.nonempty + jnp.where(act, jnp.sum(exists, axis=1, dtype=jnp.int32), 0),
    radius=jnp.where(act, radius, state.radius),
    active=act & ~(ends_radius & (found >= num_wanted)),
  )
