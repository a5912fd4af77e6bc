"""The B-step over data chunks, for large ``n`` (the paper's Sec. 4: "we randomly split
the data into several chunks, each of which contains 10,000 images. The active set
scheme is separately conducted on each data chunk").

A sweep splits the ``n`` items into ``m = ceil(n / chunk_size)`` disjoint chunks of
nearly equal size (``n // m`` or ``n // m + 1`` items) along a random permutation
(``chunk_order``: drawn for each sweep, or one fixed split for all), and runs the bit-by-bit B-step (``_bstep.sweep``) on each chunk
alone: ``Y``, ``A`` and the Gram among the chunk's items, its rows of ``Z``, the
objective ``J`` of the chunk. Pairs of items in different chunks play no part in that
sweep (a new permutation each sweep pairs them differently; a fixed split never does,
and each chunk is then a CDH problem of its own). Memory is that of one
chunk, ``O(chunk^2)``; chunks run one after the other (``lax.map``), each one's
``n x n`` work optionally split over the devices of a mesh.

With ``m = 1`` (``n <= chunk_size``) the sweep is ``_bstep.sweep`` on the items in
their own order: no permutation, the same codes. ``chunk_size=None`` is one chunk of
all the items, whatever ``n`` (the exact objective; the method runs it matrix-free,
``_bstep``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jhash.methods._cdh import _bstep
from jhash.methods._cdh import _supervision as sv


SPLITS = ("per_sweep", "fixed")


def chunk_order(
  key: jax.Array,
  num_items: int,
  chunk_size: int | None,
  split: str = "per_sweep",
  seed: int = 0,
) -> jax.Array | None:
  """The permutation a sweep cuts its chunks from: int32 [n], or None for one chunk.

  Args:
    key: the sweep's key; ``"per_sweep"`` draws from ``fold_in(key, 1)``.
    num_items: n.
    chunk_size: items per chunk at most (None: one chunk).
    split: ``"per_sweep"`` or ``"fixed"`` (from ``jax.random.key(seed)``, the same every sweep).
    seed: the fixed split's seed.
  """
  if num_chunks(num_items, chunk_size) == 1:
    return None
  split_key = jax.random.key(seed) if split == "fixed" else jax.random.fold_in(key, 1)
  return jax.random.permutation(split_key, num_items).astype(jnp.int32)


def num_chunks(num_items: int, chunk_size: int | None) -> int:
  """``m = ceil(n / chunk_size)`` (at least 1; 1 for ``chunk_size=None``)."""
  if chunk_size is None:
    return 1
  return max(1, -(-num_items // chunk_size))


def chunk_groups(order: jax.Array, num: int) -> list[jax.Array]:
  """Split a permutation into ``num`` chunks of nearly equal size.

  Args:
    order: int32 [n], a permutation of the items.
    num: m, the number of chunks.
  Returns:
    One or two int32 arrays ``[c, s]`` (``c`` chunks of ``s`` items): first the
    ``n mod m`` chunks of ``n // m + 1`` items, then those of ``n // m``, covering
    ``order`` in order.
  """
  n = order.shape[0]
  size, extra = divmod(n, num)
  groups = []
  if extra:
    groups.append(order[: extra * (size + 1)].reshape(extra, size + 1))
  groups.append(order[extra * (size + 1) :].reshape(num - extra, size))
  return groups


def _merge(stats: _bstep.BitStats) -> _bstep.BitStats:
  """Per-chunk stats ``[m, K]`` to per-bit ``[K]``: counts summed, steps max,
  converged in every chunk, objectives the mean of the chunks' ``J_k``."""
  return _bstep.BitStats(
    active=jnp.sum(stats.active, axis=0),
    flipped=jnp.sum(stats.flipped, axis=0),
    inner_steps=jnp.max(stats.inner_steps, axis=0),
    converged=jnp.all(stats.converged, axis=0),
    objective_before=jnp.mean(stats.objective_before, axis=0),
    objective=jnp.mean(stats.objective, axis=0),
  )


def sweep(
  codes: jax.Array,
  z: jax.Array,
  sup: sv.Supervision,
  gamma: jax.Array,
  uniforms: jax.Array,
  order: jax.Array | None,
  *,
  merit: str = "exponential",
  block_rows: int = 32,
  mesh=None,
  matrix_free: bool = False,
) -> tuple[jax.Array, _bstep.BitStats]:
  """One B-step sweep, chunk by chunk.

  Args:
    codes: int8 [n, K] in {-1, +1}.
    z: float32 [n, K], the generative linear terms.
    sup: ``Supervision`` of the ``n`` items.
    gamma: float32 [].
    uniforms: float32 [m, K, max_inner] in [0, 1): the random starts of each chunk's
      inner updates (``m`` = the number of chunks).
    order: int32 [n], the permutation the chunks are cut from (ignored, and may be
      None, when ``m = 1``).
    merit, block_rows, mesh, matrix_free: as ``_bstep.sweep``.
  Returns:
    (codes int8 [n, K], ``BitStats`` of ``[K]`` merged over chunks: ``active`` and
    ``flipped`` summed, ``inner_steps`` the largest, ``converged`` in every chunk,
    the objectives the mean of the chunks' ``J_k``).
  """
  num = uniforms.shape[0]
  run = lambda c, zz, s, u: _bstep.sweep(
    c, zz, s, gamma, u, merit=merit, block_rows=block_rows, mesh=mesh, matrix_free=matrix_free
  )
  if num == 1:
    return run(codes, z, sup, uniforms[0])

  def one_chunk(args):
    index, u = args
    return run(codes[index], z[index], sv.take_items(sup, index), u)

  new_codes, all_stats, offset = codes, [], 0
  for index in chunk_groups(order, num):
    count = index.shape[0]
    chunk_codes, stats = jax.lax.map(one_chunk, (index, uniforms[offset : offset + count]))
    new_codes = new_codes.at[index.reshape(-1)].set(chunk_codes.reshape(-1, codes.shape[1]))
    all_stats.append(stats)
    offset += count
  stats = jax.tree_util.tree_map(lambda *a: jnp.concatenate(a, axis=0), *all_stats)
  return new_codes, _merge(stats)
