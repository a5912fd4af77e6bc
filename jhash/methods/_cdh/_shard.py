"""The B-step's ``n x n`` work split by rows over the devices of a 1-D mesh.

A bit update (``_bstep``) keeps every ``O(n)`` vector replicated: each device
holds the whole bit, ``A b``, ``Z``, the active set and Algorithm 2's gains, and
makes the same decisions. Only the Gram ``G = B B^T`` (``n^2`` bytes) and the
``O(n^2)`` passes over it are split: device ``d`` of ``D`` holds rows
``[d r, (d + 1) r)``, ``r = ceil(n / D)`` (rows past ``n`` on the last device repeat
row ``n - 1`` and are dropped). Two exchanges:

* ``A b`` (one pass over ``G`` per bit): each device forms its rows,
  then ``all_gather``.
* rows of ``G`` that the replicated work needs (the row of each item
  Algorithm 2 adds, restricted to the active set; the rows of the flipped items
  for ``A d``): the owner contributes the row and every other device zeros,
  then ``psum``. One non-zero term per entry, so the sum is exact (int8).

Every floating-point reduction is thus done on one device, on the operands and
in the order a single device uses (a row's product with ``b`` over the full row;
``A d`` from the same gathered rows), so the codes are bitwise those of one
device. With ``axis=None`` (no mesh) every function here is the identity of the
one-device case.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class RowShard(NamedTuple):
  """How the Gram's rows are split (static)."""

  axis: str | None = None  # the mesh axis the rows are split over; None: one device
  num_shards: int = 1  # devices along it

  def rows(self, num_items: int) -> int:
    """Rows of ``G`` held by each device: ``ceil(n / D)``."""
    return -(-num_items // self.num_shards)


def row_offset(shard: RowShard, num_items: int) -> jax.Array | int:
  """Global index of this device's first row (0 without a mesh)."""
  if shard.axis is None:
    return 0
  return jax.lax.axis_index(shard.axis) * shard.rows(num_items)


def local_rows(shard: RowShard, num_items: int) -> jax.Array:
  """Global indices of this device's rows, int32 ``[r]`` (padding rows clipped to ``n - 1``)."""
  index = row_offset(shard, num_items) + jnp.arange(shard.rows(num_items), dtype=jnp.int32)
  return jnp.minimum(index, num_items - 1)


def gather_rows(local: jax.Array, shard: RowShard, num_items: int) -> jax.Array:
  """Per-row values ``[r, ...]`` of every device, in row order: ``[n, ...]``."""
  if shard.axis is None:
    return local
  return jax.lax.all_gather(local, shard.axis, tiled=True)[:num_items]


def gram_rows(gram_local: jax.Array, items: jax.Array, shard: RowShard) -> jax.Array:
  """Full rows ``G[items, :]`` on every device (``gram_local``: this device's rows).

  Args:
    gram_local: int [r, n], this device's rows of ``G``.
    items: int32 [m], global item indices.
  Returns:
    int [m, n], the same on every device.
  """
  if shard.axis is None:
    return gram_local[items]
  local, owned = _owned(gram_local, items, shard)
  part = jnp.where(owned[:, None], gram_local[local], jnp.zeros((), gram_local.dtype))
  return jax.lax.psum(part, shard.axis)


def gram_row_entries(
  gram_local: jax.Array, item: jax.Array, cols: jax.Array, shard: RowShard
) -> jax.Array:
  """``G[item, cols]`` on every device: int [S] (``item`` int [], ``cols`` int32 [S])."""
  if shard.axis is None:
    return gram_local[item][cols]
  local, owned = _owned(gram_local, item, shard)
  part = jnp.where(owned, gram_local[local][cols], jnp.zeros((), gram_local.dtype))
  return jax.lax.psum(part, shard.axis)


def _owned(gram_local: jax.Array, items: jax.Array, shard: RowShard):
  """(local row index clipped to this device's rows, whether this device holds the item)."""
  rows = gram_local.shape[0]
  local = items - row_offset(shard, gram_local.shape[1])
  return jnp.clip(local, 0, rows - 1), (local >= 0) & (local < rows)
