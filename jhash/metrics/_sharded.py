"""Tie-aware mAP with the database split over the devices (and processes) of a 1-D mesh.

Tie-aware AP needs, per query, only how many items and how many relevant items lie at
each Hamming distance 0..K (``_groups.TieGroups``). Those counts add over any split of
the database, so each device counts its own rows, one ``psum`` of integers
[q, K + 1, 2] joins them, and the closed form of ``_ap._tie_aware_sum`` runs on the
totals: the same integers, and so the same AP, as one device. Nothing of size [q, n]
leaves a device; rows past ``num_rows`` (the padding of ``jhash.distributed.global_rows``)
count in no group.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from jhash import _checks
from jhash.metrics import _ap
from jhash.metrics import _groups
from jhash.metrics import _inputs
from jhash.metrics import _radius
from jhash.metrics import _relevance
from jhash.search import _sharded


def _local_groups(queries, query_labels, db, db_labels, *, axis, rows, num_rows, kind, chunk):
  """One device's tie groups: int32 [q, K + 1] sizes and relevant counts, psum-ed."""
  num_bits = queries.shape[1]
  first = lax.axis_index(axis) * rows
  valid = first + jnp.arange(db.shape[0]) < num_rows

  def one_query(args):  # lax.map runs it over query_chunk queries at a time (vmap)
    q, labels = args
    dots = lax.dot_general(db, q, (((1,), (0,)), ((), ())), preferred_element_type=jnp.int32)
    d = jnp.where(valid, (num_bits - dots) // 2, num_bits + 1)  # exact: int8 sums in int32
    rel = _relevance.relevance_matrix(labels[None], db_labels, kind)
    return jax.tree.map(lambda x: x[0], _groups.groups_by_count(d[None], rel, num_bits))

  groups = lax.map(one_query, (queries, query_labels), batch_size=chunk)
  return jax.tree.map(lambda x: lax.psum(x, axis), groups)


def _groups_over_mesh(queries, query_labels, db, db_labels, *, mesh, num_rows, kind, chunk):
  """The tie groups of the whole database, int32 [q, K + 1] (sizes, relevant counts),
  each device counting its rows and one ``psum`` joining them; replicated."""
  axis = mesh.axis_names[0]
  rows = db.shape[0] // mesh.shape[axis]
  label_spec = P(axis) if db_labels.ndim == 1 else P(axis, None)
  explicit = _sharded.explicit_axis(mesh, axis)
  if explicit:  # jax.make_mesh's default: inputs placed as shard_map reads them
    place = functools.partial(_sharded.place, mesh=mesh)
    queries, query_labels = place(queries, P()), place(query_labels, P())
    db, db_labels = place(db, P(axis, None)), place(db_labels, label_spec)
  groups = jax.shard_map(
    functools.partial(
      _local_groups, axis=axis, rows=rows, num_rows=num_rows, kind=kind, chunk=chunk
    ),
    mesh=mesh,
    in_specs=(P(), P(), P(axis, None), label_spec),
    out_specs=P(),
    check_vma=False,
  )(queries, query_labels, db, db_labels)
  if explicit:
    groups = jax.tree.map(lambda x: _sharded.place(x, P(), mesh=mesh), groups)
  return groups


_STATIC = ("mesh", "num_rows", "kind", "chunk")


@functools.partial(jax.jit, static_argnames=_STATIC + ("top_k", "normalizer"))
def _sharded_ap(
  queries, query_labels, db, db_labels, *, mesh, num_rows, kind, chunk, top_k, normalizer
):
  where = dict(mesh=mesh, num_rows=num_rows, kind=kind, chunk=chunk)
  groups = _groups_over_mesh(queries, query_labels, db, db_labels, **where)
  k = num_rows if top_k is None else top_k
  numer = _ap._tie_aware_sum(groups, None if k == num_rows else k)
  total = jnp.sum(groups.hits, axis=-1)
  return _ap._normalized(numer, None, total, k, normalizer)


@functools.partial(jax.jit, static_argnames=_STATIC + ("average", "empty", "no_relevant"))
def _sharded_curve(
  queries, query_labels, db, db_labels, *, mesh, num_rows, kind, chunk, average, empty, no_relevant
):
  where = dict(mesh=mesh, num_rows=num_rows, kind=kind, chunk=chunk)
  groups = _groups_over_mesh(queries, query_labels, db, db_labels, **where)
  found, hits = jnp.cumsum(groups.size, axis=-1), jnp.cumsum(groups.hits, axis=-1)
  total = jnp.sum(groups.hits, axis=-1)
  return _radius._curve(found, hits, total, average, empty, no_relevant)


def _check_mesh(mesh: Any, db_codes: Any) -> Mesh:
  if not isinstance(mesh, Mesh) or len(mesh.axis_names) != 1:
    raise ValueError(f"mesh must be a 1-D jax.sharding.Mesh; got {mesh!r}.")
  shards = mesh.devices.size
  if np.shape(db_codes)[0] % shards:
    raise ValueError(
      f"db_codes must have a multiple of the mesh's {shards} devices in rows (pad them, as "
      f"jhash.distributed.global_rows does, and give num_rows); got {np.shape(db_codes)[0]}."
    )
  return mesh


def _check_shape(codes: Any, name: str, num_bits: int | None) -> None:
  if (
    not hasattr(codes, "dtype")
    or np.ndim(codes) != 2
    or (num_bits is not None and np.shape(codes)[1] != num_bits)
  ):
    bits = "K" if num_bits is None else str(num_bits)
    raise ValueError(
      f"{name} must be an array [n, {bits}] of codes in {{-1, +1}}; got {_checks.describe(codes)}."
    )
  if np.shape(codes)[1] < 1:
    raise ValueError(
      f"{name} must have a last axis of num_bits >= 1; got {_checks.describe(codes)}."
    )


def _check_codes(codes: Any, name: str, num_bits: int | None, num_rows: int | None = None) -> None:
  _check_shape(codes, name, num_bits)
  if isinstance(codes, jax.core.Tracer):
    _checks.signed_codes(codes, name)  # shape and dtype; values are unknown in a trace
  elif not isinstance(codes, jax.Array) or codes.is_fully_addressable:
    # Values read only where this process holds them all; padding rows may hold anything.
    # Rows cut in NumPy: a slice of an array over an Explicit mesh would need a sharding.
    _checks.signed_codes(codes if num_rows is None else np.asarray(codes)[:num_rows], name)


def _local(x: jax.Array) -> jax.Array:
  """A replicated result as this process's copy (every process holds one); a tracer
  as it is."""
  if isinstance(x, jax.core.Tracer) or x.is_fully_addressable:
    return x
  return x.addressable_data(0)


def _prepared(query_codes, db_codes, query_labels, db_labels, mesh, num_rows, relevance, chunk):
  """The checked inputs of a sharded metric: its four arrays and the groups' statics."""
  _check_shape(db_codes, "db_codes", None)  # its rank before its rows are read
  mesh = _check_mesh(mesh, db_codes)
  n = np.shape(db_codes)[0]
  if n == 0:
    raise ValueError(
      f"db_codes must hold at least one database item; got {_checks.describe(db_codes)}."
    )
  num_rows = n if num_rows is None else _checks.positive_int(num_rows, "num_rows")
  if num_rows > n:
    raise ValueError(f"num_rows must be <= db_codes' {n} rows; got {num_rows}.")
  _check_codes(query_codes, "query_codes", None)
  _inputs.require_queries(query_codes)
  _check_codes(db_codes, "db_codes", np.shape(query_codes)[1], num_rows)
  # Labels checked in the real rows only: padding rows may hold anything (-1 included).
  if np.ndim(db_labels) < 1 or np.shape(db_labels)[0] != n:
    raise ValueError(
      f"db_labels must have shape [{n}] (class ids) or [{n}, C] (multi-hot), as db_codes' "
      f"rows; got shape {tuple(np.shape(db_labels))}."
    )
  real = db_labels
  if num_rows < n and (not isinstance(db_labels, jax.Array) or db_labels.is_fully_addressable):
    real = np.asarray(db_labels)[:num_rows]
  _relevance.check_labels(query_labels, real, np.shape(query_codes)[0], np.shape(real)[0])
  kind = _relevance.resolve(relevance, query_labels)
  args = (
    jnp.asarray(query_codes, jnp.int8),
    jnp.asarray(query_labels),
    jnp.asarray(db_codes, jnp.int8) if db_codes.dtype != np.int8 else db_codes,
    db_labels if isinstance(db_labels, jax.Array) else jnp.asarray(db_labels),
  )
  chunk = _checks.positive_int(chunk, "query_chunk")
  return args, dict(mesh=mesh, num_rows=num_rows, kind=kind, chunk=chunk)


def sharded_mean_average_precision(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  *,
  mesh: Mesh,
  num_rows: int | None = None,
  top_k: int | None = None,
  relevance: str = "auto",
  normalizer: str = "relevant",
  no_relevant: str = "zero",
  query_chunk: int = 256,
) -> float:
  """Tie-aware mAP with the database's rows split over a 1-D mesh (devices or processes).

  Equal to ``mean_average_precision(..., ties="aware")`` on the whole database: each
  device counts the items and relevant items at each distance in its rows, and the counts
  are summed over the mesh (module docstring).

  Args:
    query_codes: [q, K] in {-1, +1} (every process passes the same).
    db_codes: [N, K] in {-1, +1}, N a multiple of the mesh's devices, split over them by
      rows: a global array (``jhash.distributed.global_rows``) or one process's array.
    query_labels, db_labels: class ids int [q] / [N], or multi-hot bool [q, C] / [N, C];
      ``db_labels`` split as ``db_codes``.
    mesh: a 1-D ``jax.sharding.Mesh``.
    num_rows: the database's items are its first ``num_rows`` rows (the rest padding);
      default all N.
    top_k, relevance, normalizer, no_relevant: as in ``mean_average_precision``
      (``normalizer`` "relevant" or "min": "retrieved" needs an order of ties).
    query_chunk: queries per step on each device (memory ``query_chunk x N / devices``).
  Returns:
    mAP as a Python float (read on every process); inside jit (traced codes or labels)
    a float32 scalar array, the values of the codes unchecked.
  """
  args, where = _prepared(
    query_codes, db_codes, query_labels, db_labels, mesh, num_rows, relevance, query_chunk
  )
  if normalizer not in ("relevant", "min"):
    raise ValueError(
      f"normalizer must be 'relevant' or 'min' here (tie-aware); got {normalizer!r}."
    )
  _inputs.check_cutoff(top_k, "top_k", where["num_rows"], allow_none=True)
  _inputs.check_choice(no_relevant, "no_relevant", ("zero", "skip"))
  ap, defined = _sharded_ap(*args, **where, top_k=top_k, normalizer=normalizer)
  return _inputs.host_mean(
    _local(ap), _local(defined), no_relevant, "sharded_mean_average_precision"
  )


def sharded_pr_curve_by_radius(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  *,
  mesh: Mesh,
  num_rows: int | None = None,
  relevance: str = "auto",
  average: str = "query",
  empty: str = "zero",
  no_relevant: str = "zero",
  query_chunk: int = 256,
) -> dict:
  """Precision and recall within Hamming radius r = 0..K, the database's rows split over
  a 1-D mesh (devices or processes).

  Equal to ``pr_curve_by_radius`` on the whole database: the items and relevant items
  within each radius are the sums of the same per-distance counts as the sharded mAP's
  (module docstring). At one radius ``r``: the curve's entry ``r``
  (``precision_recall_at_radius``'s values).

  Args:
    query_codes, db_codes, query_labels, db_labels: as in
      ``sharded_mean_average_precision``.
    mesh, num_rows, relevance, query_chunk: as there too.
    average, empty, no_relevant: as in ``pr_curve_by_radius``.
  Returns:
    dict of NumPy arrays ``radius`` int [K + 1], ``precision`` and ``recall`` float
    [K + 1], read on every process (inside jit: JAX arrays, the values of the codes
    unchecked).
  """
  args, where = _prepared(
    query_codes, db_codes, query_labels, db_labels, mesh, num_rows, relevance, query_chunk
  )
  _inputs.check_choice(average, "average", _radius.AVERAGES)
  _inputs.check_choice(empty, "empty", ("zero", "skip"))
  _inputs.check_choice(no_relevant, "no_relevant", ("zero", "skip"))
  rules = dict(average=average, empty=empty, no_relevant=no_relevant)
  precision, recall = (_local(x) for x in _sharded_curve(*args, **where, **rules))
  radius = jnp.arange(np.shape(query_codes)[1] + 1)
  if _inputs.traced(precision, recall):
    return {"radius": radius, "precision": precision, "recall": recall}
  curve = {"radius": np.asarray(radius), "precision": np.asarray(precision)}
  curve["recall"] = np.asarray(recall)
  _radius.warn_nan(curve, "sharded_pr_curve_by_radius", average, at=("radius", curve["radius"]))
  return curve
