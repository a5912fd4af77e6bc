"""Where CDH's B-step reads the leave-one-out code products ``K p^{-k} = B' B'^T`` (``B'``
= ``B`` with column ``k`` zero): rows of the exact Gram ``G = B B^T`` less bit ``k``'s
outer product, or recomputed from the codes (``FromCodes``, the matrix-free mode); and the
row-block loop every pass over ``n`` rows uses (``_bstep``'s docstring tells the whole)."""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from jhash import _checks
from jhash.methods._cdh import _shard
from jhash.methods._cdh._shard import RowShard

ONE_DEVICE = RowShard()


def gram_dtype(num_bits: int):
  return jnp.int8 if num_bits <= 127 else jnp.int16


class FromCodes(NamedTuple):
  """The matrix-free mode's source of ``K p^{-k}``: recomputed from the codes, not read
  from a Gram. ``K p^{-k} = B' B'^T`` with ``B'`` = ``B`` with column ``k`` zero."""

  rest: jax.Array  # float32 [n, K], B' (entries -1, 0, +1)


# Where a bit's ``K p^{-k}`` comes from: a device's rows of the Gram ``G`` (with bit ``k``
# as ``b0``), ``FromCodes`` (the matrix-free mode) or None (the linear merit: not needed).
Source = jax.Array | FromCodes | None


def from_codes(codes: jax.Array, k: jax.Array) -> FromCodes:
  """``FromCodes`` of bit ``k`` (int ``[]``) of ``codes`` (int8 ``[n, K]``)."""
  keep = jnp.arange(codes.shape[1]) != k
  return FromCodes(jnp.where(keep[None, :], codes.astype(jnp.float32), jnp.float32(0)))


def loo_rows(
  source: Source, items: jax.Array, b0: jax.Array, shard: RowShard = ONE_DEVICE
) -> jax.Array:
  """Rows ``K p^{-k}[items, :]`` (float32 ``[m, n]``, exact integers), on every device.

  ``FromCodes``: ``B'[items] B'^T``, one ``[m, K] x [K, n]`` product (sums of ``K`` terms
  in {-1, 0, 1}: exact in float32), from the replicated codes. A Gram:
  ``G[items] - b0[items] b0^T``, its rows gathered from their owners (``_shard``).
  """
  if isinstance(source, FromCodes):
    return _inner(source.rest[items], source.rest)
  g = _shard.gram_rows(source, items, shard)
  return g.astype(jnp.float32) - b0[items][:, None] * b0[None, :]


def loo_among(
  source: Source, index: jax.Array, b0: jax.Array, shard: RowShard = ONE_DEVICE
) -> Callable[[jax.Array], jax.Array]:
  """``p -> K p^{-k}[index[p], index]`` (float32 ``[S]``) for ``index`` int32 ``[S]``.

  ``FromCodes``: ``B'[index] B'[index[p]]`` (``O(S K)``); a Gram: a gather of ``S``
  entries of one of its rows (``O(S)``).
  """
  if isinstance(source, FromCodes):
    among = source.rest[index]
    return lambda p: jnp.dot(among, among[p])
  b0i = b0[index]

  def row(p):
    entries = _shard.gram_row_entries(source, index[p], index, shard)
    return entries.astype(jnp.float32) - b0i[p] * b0i

  return row


def _inner(x: jax.Array, y: jax.Array) -> jax.Array:
  """``x y^T`` in float32 (no transposed copy of ``y``)."""
  return jax.lax.dot_general(x, y, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)


def for_row_blocks(num_items: int, block_rows: int, fn: Callable, carry):
  """``carry = fn(start, size, new, carry)`` over blocks of ``size`` rows covering all rows.

  ``size = min(block_rows, n)`` is static. When ``n`` is not a multiple of it, the
  last block is moved back to end at row ``n`` and overlaps the one before;
  ``new`` (bool ``[size]``) marks the rows no earlier block covered. One loop
  body, so one copy of the block's code.
  """
  block_rows = _checks.positive_int(block_rows, "block_rows")
  size = min(block_rows, num_items)

  def body(r, c):
    start = jnp.minimum(r * size, num_items - size)
    return fn(start, size, start + jnp.arange(size) >= r * size, c)

  return jax.lax.fori_loop(0, -(-num_items // size), body, carry)


def gram(codes: jax.Array, block_rows: int = 256, shard: RowShard = ONE_DEVICE) -> jax.Array:
  """``B B^T`` exactly, as int8 (int16 when ``K > 127``), by row blocks.

  Returns:
    ``[n, n]`` on one device; with a ``shard``, this device's rows ``[r, n]``.
  """
  n, k = codes.shape
  bf = codes.astype(jnp.float32)
  mine = _shard.local_rows(shard, n)

  def fill(start, size, new, g):
    rows = bf[jax.lax.dynamic_slice_in_dim(mine, start, size)]
    block = jnp.dot(rows, bf.T).astype(gram_dtype(k))
    return jax.lax.dynamic_update_slice_in_dim(g, block, start, 0)

  r = mine.shape[0]
  return for_row_blocks(r, block_rows, fill, jnp.zeros((r, n), gram_dtype(k)))
