"""Exact Hamming top-k with the database sharded over devices.

The database is split along a 1-D ``jax.sharding.Mesh``: each device searches
its contiguous slice with ``hamming_topk_unchecked`` (global index = shard
offset + local index), the per-shard lists are gathered, and one exact merge
picks the final ``k``. The merge is a stable ``lax.top_k`` over the lists laid
out shard after shard, each sorted by (distance, index): position order is then
index order among equal distances, so the tie rule (smaller database index
first) is the single-device one and the results are identical.

Padding: the database is padded to a multiple of the device count by repeating
its last row; each shard is told how many of its rows are real (a traced
count, from ``lax.axis_index``), so padded rows get the distance ``K + 1`` and
are never returned. A shard may hold fewer than ``k`` rows; it then returns all
of them (``min(k, rows per shard)`` results), which still leaves at least ``k``
real candidates for the merge.

On a CPU host, ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (set before
JAX is imported) gives N devices. There the single-device search already uses
every core (its native kernel runs on XLA's thread pool, ``jhash.native``), so
sharding the database over host devices is for databases that do not fit one
device, or for testing the sharded path; on accelerators it splits the work.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jhash import _checks
from jhash import codes as codes_lib
from jhash.search import _distance
from jhash.search import _blockmin
from jhash.search import _topk


def default_mesh(axis_name: str = "db") -> Mesh:
  """A 1-D mesh over all devices of the default backend."""
  return Mesh(np.asarray(jax.devices()), (axis_name,))


def _check_mesh(mesh: Mesh | None) -> Mesh:
  """``mesh``, a 1-D ``Mesh`` (None: ``default_mesh()``); a ValueError for anything else."""
  if mesh is None:
    return default_mesh()
  if not isinstance(mesh, Mesh) or len(mesh.axis_names) != 1:
    raise ValueError(f"mesh must be a 1-D jax.sharding.Mesh; got {mesh!r}.")
  return mesh


def explicit_axis(mesh: Mesh, axis: str) -> bool:
  """True when ``axis`` of ``mesh`` is Explicit (``jax.make_mesh``'s default)."""
  types = getattr(mesh, "axis_types", None)
  if types is None:
    return False
  return types[mesh.axis_names.index(axis)] == jax.sharding.AxisType.Explicit


def place(x: jax.Array, spec: P, *, mesh: Mesh) -> jax.Array:
  """``x`` resharded to ``spec`` over ``mesh`` (for a mesh of Explicit axes)."""
  return jax.sharding.reshard(x, NamedSharding(mesh, spec))


def _check_num_rows(num_rows, db_packed) -> int | None:
  """``num_rows``: None, or a Python int in [1, the database's rows] (static)."""
  if num_rows is None:
    return None
  num_rows = _checks.positive_int(num_rows, "num_rows")
  if num_rows > db_packed.shape[0]:
    raise ValueError(
      f"num_rows must be <= the database's {db_packed.shape[0]} rows; got {num_rows}."
    )
  return num_rows


def _shard_and_merge(local, query_packed, db_arrays, k: int, mesh: Mesh, n: int):
  """The sharded search's frame: ``db_arrays`` (each [N, ...], rows the items) padded to a
  multiple of the shards and split over ``mesh``'s axis; ``local(queries, *db_local,
  num_valid=, k=)`` -> (distances, local indices) [q, local k] searches each shard (its
  first ``num_valid`` rows real); one stable merge picks the global top ``k``."""
  axis = mesh.axis_names[0]
  shards = mesh.shape[axis]
  rows = -(-db_arrays[0].shape[0] // shards)  # every row kept; those past n count in no result
  local_k = min(k, rows)
  db = tuple(_blockmin.pad_rows(a, rows * shards) for a in db_arrays)
  specs = tuple(P(axis, *([None] * (a.ndim - 1))) for a in db)
  # A mesh of Explicit axes (jax.make_mesh's default) takes only inputs sharded as
  # shard_map reads them, and keeps its outputs sharded: place both explicitly.
  explicit = explicit_axis(mesh, axis)
  if explicit:
    db = tuple(place(a, s, mesh=mesh) for a, s in zip(db, specs))
    query_packed = place(query_packed, P(), mesh=mesh)

  def per_shard(queries, *db_local):
    offset = lax.axis_index(axis) * rows
    num_valid = jnp.clip(n - offset, 0, rows)
    d, idx = local(queries, *db_local, num_valid=num_valid, k=local_k)
    return d, idx + offset

  # check_vma=False: the per-shard search starts its scan carries from constants
  # (device-invariant values) that become device-varying; the search is purely local.
  d, idx = jax.shard_map(
    per_shard,
    mesh=mesh,
    in_specs=(P(), *specs),
    out_specs=(P(None, axis), P(None, axis)),
    check_vma=False,
  )(query_packed, *db)
  if explicit:
    d, idx = (place(x, P(), mesh=mesh) for x in (d, idx))
  # [q, shards * local_k], shard after shard: a stable selection keeps index order on ties.
  _, pos = lax.top_k(_blockmin.neg_key(d), k)
  return jnp.take_along_axis(d, pos, axis=1), jnp.take_along_axis(idx, pos, axis=1)


def _static_args(
  query_packed, db_packed, k, num_bits, num_rows, mesh, db_rank: int = 2
) -> tuple[Mesh, int]:
  """The unchecked searches' static checks: (the mesh, the database's item count n)."""
  _topk.check_static(query_packed, db_packed, k, num_bits=num_bits, db_rank=db_rank)
  num_rows = _check_num_rows(num_rows, db_packed)
  if num_rows is not None and k > num_rows:
    raise ValueError(f"k must be <= num_rows = {num_rows} (the database's items); got {k}.")
  return _check_mesh(mesh), db_packed.shape[0] if num_rows is None else num_rows


def sharded_hamming_topk_unchecked(
  query_packed: jax.Array,
  db_packed: jax.Array,
  k: int,
  mesh: Mesh | None = None,
  num_bits: int | None = None,
  query_chunk: int = _blockmin.DEFAULT_QUERY_CHUNK,
  db_block: int = _blockmin.DEFAULT_DB_BLOCK,
  method: str = "auto",
  num_rows: int | None = None,
) -> tuple[jax.Array, jax.Array]:
  """``sharded_hamming_topk`` without the checks of values (for use inside jit; sizes
  static); ``mesh`` None is ``default_mesh()``, as there."""
  mesh, n = _static_args(query_packed, db_packed, k, num_bits, num_rows, mesh)

  def local(queries, db_local, *, num_valid, k):
    return _topk.hamming_topk_unchecked(
      queries, db_local, k, num_bits, query_chunk, db_block, method, num_valid=num_valid
    )

  return _shard_and_merge(local, query_packed, (db_packed,), k, mesh, n)


_sharded_jit = jax.jit(
  sharded_hamming_topk_unchecked,
  static_argnames=("k", "mesh", "num_bits", "query_chunk", "db_block", "method", "num_rows"),
)


def sharded_hamming_topk(
  query_packed: jax.Array,
  db_packed: jax.Array,
  k: int,
  *,
  mesh: Mesh | None = None,
  num_bits: int | None = None,
  query_chunk: int = _blockmin.DEFAULT_QUERY_CHUNK,
  db_block: int = _blockmin.DEFAULT_DB_BLOCK,
  method: str = "auto",
  num_rows: int | None = None,
) -> tuple[jax.Array, jax.Array]:
  """``hamming_topk`` with the database sharded along a 1-D device mesh.

  Results are identical to ``hamming_topk`` (same distances, same indices, same
  tie rule).

  Args:
    query_packed: uint32 [q, W] (replicated on every device).
    db_packed: uint32 [n, W] (split into contiguous slices, one per device).
    k: ``1 <= k <= n``.
    mesh: a 1-D ``jax.sharding.Mesh``; defaults to all devices (``default_mesh``).
    num_bits, query_chunk, db_block, method: as in ``hamming_topk`` (the block
      size applies within each shard).
    num_rows: the database's items are its first ``num_rows`` rows; the rest (the
      padding of ``jhash.distributed.global_rows``) are never returned. Default: all.
  Returns:
    distances int32 [q, k] and global indices int32 [q, k], replicated on every device
    (over several processes: ``jhash.distributed.gather`` reads them).
  """
  num_bits = _distance.check_pair(query_packed, db_packed, num_bits)
  num_rows = _check_num_rows(num_rows, db_packed)
  k = _topk.check_topk_args(
    k, db_packed.shape[0] if num_rows is None else num_rows, query_chunk, db_block
  )
  method = _topk.check_method(method)
  mesh = _check_mesh(mesh)
  return _sharded_jit(
    jnp.asarray(query_packed),
    jnp.asarray(db_packed),
    k=k,
    mesh=mesh,
    num_bits=num_bits,
    query_chunk=int(query_chunk),
    db_block=int(db_block),
    method=method,
    num_rows=num_rows,
  )


def sharded_multi_code_topk_unchecked(
  query_packed: jax.Array,
  db_packed: jax.Array,
  db_mask: jax.Array,
  k: int,
  mesh: Mesh | None = None,
  num_bits: int | None = None,
  query_chunk: int = _blockmin.DEFAULT_QUERY_CHUNK,
  db_block: int = _blockmin.DEFAULT_DB_BLOCK,
  num_rows: int | None = None,
) -> tuple[jax.Array, jax.Array]:
  """``sharded_multi_code_topk`` without the checks of values (for use inside jit; sizes
  static)."""
  mesh, n = _static_args(query_packed, db_packed, k, num_bits, num_rows, mesh, db_rank=3)
  bits = codes_lib.WORD_BITS * query_packed.shape[-1] if num_bits is None else num_bits

  def local(queries, db_local, mask_local, *, num_valid, k):
    # Rows past num_valid (padding) hold no code: distance K + 1, after every item.
    real = jnp.arange(mask_local.shape[0]) < num_valid
    return _topk.multi_code_topk_unchecked(
      queries, db_local, mask_local & real[:, None], k, bits, query_chunk, db_block
    )

  return _shard_and_merge(local, query_packed, (db_packed, db_mask), k, mesh, n)


_sharded_multi_jit = jax.jit(
  sharded_multi_code_topk_unchecked,
  static_argnames=("k", "mesh", "num_bits", "query_chunk", "db_block", "num_rows"),
)


def sharded_multi_code_topk(
  query_packed: jax.Array,
  db_packed: jax.Array,
  db_mask: jax.Array,
  k: int,
  *,
  mesh: Mesh | None = None,
  num_bits: int | None = None,
  query_chunk: int = _blockmin.DEFAULT_QUERY_CHUNK,
  db_block: int = _blockmin.DEFAULT_DB_BLOCK,
  num_rows: int | None = None,
) -> tuple[jax.Array, jax.Array]:
  """``multi_code_topk`` with the database's items sharded along a 1-D device mesh.

  Results are identical to ``multi_code_topk`` (an item's distance the minimum over its
  codes; each item once; ties to the smaller item index).

  Args:
    query_packed: uint32 [q, W] (replicated on every device).
    db_packed: uint32 [n, m, W] and db_mask: bool [n, m] (split by items into contiguous
      slices, one per device); every item of the first ``num_rows`` holds a code.
    k: ``1 <= k <= num_rows``.
    mesh: a 1-D ``jax.sharding.Mesh``; defaults to all devices (``default_mesh``).
    num_bits, query_chunk, db_block: as in ``multi_code_topk``.
    num_rows: the database's items are its first ``num_rows`` rows; the rest (the
      padding of ``jhash.distributed.global_rows``) are never returned. Default: all.
  Returns:
    distances int32 [q, k] and global item indices int32 [q, k], replicated on every
    device (over several processes: ``jhash.distributed.gather`` reads them).
  """
  db_packed = _checks.as_array(db_packed, "db_packed")
  db_mask = _checks.as_array(db_mask, "db_mask")
  num_rows = _check_num_rows(num_rows, db_packed)
  items = db_packed.shape[0] if num_rows is None else num_rows
  # multi_code_topk's checks; the padding rows past num_rows may hold no code.
  held = db_mask
  if items < db_packed.shape[0] and _checks.is_concrete(db_mask) and np.ndim(db_mask) == 2:
    held = np.array(db_mask, dtype=_checks.dtype_of(db_mask))
    held[items:] = True
  num_bits = _distance.check_multi(query_packed, db_packed, held, num_bits)
  k = _topk.check_topk_args(k, items, query_chunk, db_block)
  mesh = _check_mesh(mesh)
  return _sharded_multi_jit(
    jnp.asarray(query_packed),
    jnp.asarray(db_packed),
    jnp.asarray(db_mask),
    k=k,
    mesh=mesh,
    num_bits=num_bits,
    query_chunk=int(query_chunk),
    db_block=int(db_block),
    num_rows=num_rows,
  )
