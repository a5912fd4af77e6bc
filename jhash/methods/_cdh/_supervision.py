"""Pairwise supervision ``Y`` in {-1, 0, +1} for CDH, read row block by row block.

``Y_ij = +1`` for a similar pair, ``-1`` for a dissimilar one and ``0`` for a pair
whose relation is unknown (it then contributes nothing to the objective). Three
sources, held in a ``Supervision`` (exactly one field is an array):

* class ids ``[n]``: ``Y_ij = +1`` for the same class, else ``-1``;
* multi-hot labels ``[n, C]``: ``+1`` when the items share at least one label;
* an explicit matrix, dense ``int8 [n, n]`` (built from a sparse list of pairs by
  ``from_pairs``, or checked by ``from_matrix``).

With labels the ``n x n`` matrix is never built: ``rows`` / ``block`` /
``submatrix`` compute the rows they are asked for from the labels, as
``Y_ij = 2 [i and j share a label] - 1``. Only the explicit kind stores ``n x n``
entries, one byte each.

Value checks (symmetry, entries in {-1, 0, 1}) run on concrete arrays only,
at the door (``from_pairs``, ``from_matrix``, and CDH's functions called outside
``jit``); shapes are checked always.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jhash import _checks


class Supervision(NamedTuple):
  """Where ``Y`` comes from. Exactly one field is an array; the others are None."""

  class_ids: jax.Array | None = None  # int32 [n]
  multi_hot: jax.Array | None = None  # float32 [n, C], entries 0 / 1
  dense: jax.Array | None = None  # int8 [n, n], symmetric, entries in {-1, 0, 1}


def check_supervision(sup: Any, num_items: int, name: str = "sup") -> None:
  """``sup`` is a ``Supervision`` of ``num_items`` items (a ValueError naming ``name``)."""
  if not isinstance(sup, Supervision) or sum(f is not None for f in sup) != 1:
    raise ValueError(
      f"{name} must be a Supervision holding one array (cdh_parts.supervision_from_labels, "
      f"_from_matrix or _from_pairs); got {_checks.describe(sup)}."
    )
  n = next(int(np.shape(f)[0]) for f in sup if f is not None)
  if n != num_items:
    raise ValueError(
      f"{name} must be the supervision of the same {num_items} items as the codes; it holds "
      f"{n} items."
    )


def num_items(sup: Supervision) -> int:
  for field in sup:
    if field is not None:
      return int(field.shape[0])
  raise ValueError("Supervision holds no array.")


def from_labels(labels: Any) -> Supervision:
  """Supervision from class ids (int ``[n]``) or multi-hot labels (bool ``[n, C]``)."""
  if labels is None:
    raise ValueError(
      "labels are required for CDH with supervision='labels' (class ids int "
      "[n] or multi-hot bool [n, C]); got None. Pass batch['labels'], or use "
      "supervision='pairs' with batch['Y']."
    )
  kind = _checks.label_array(labels, "labels")
  if kind == "class_ids":
    return Supervision(class_ids=jnp.asarray(labels, jnp.int32))
  return Supervision(multi_hot=jnp.asarray(labels, jnp.float32))


# A bool Y is refused: read as numbers, every False would be 0, "unknown", and the
# dissimilar pairs would be dropped without a word.
_BOOL = (
  "{name} must hold -1 (dissimilar), 0 (unknown) and +1 (similar), not bool: a False "
  "would read as 0, unknown, and drop the pair; for a bool similarity pass "
  "np.where(Y, 1, -1) (every pair known); got {got}."
)


def check_matrix(y: Any, num_items: int | None = None, name: str = "Y") -> None:
  """``y`` is square ``[n, n]``; when concrete, symmetric with entries in {-1, 0, 1}."""
  shape = tuple(np.shape(y))
  want = "n" if num_items is None else str(num_items)
  if len(shape) != 2 or shape[0] != shape[1] or (num_items is not None and shape[0] != num_items):
    raise ValueError(
      f"{name} must be a square supervision matrix [{want}, {want}] with entries "
      f"in {{-1, 0, 1}}; got {_checks.describe(y)}."
    )
  if _checks.dtype_of(y) == np.bool_:
    raise ValueError(_BOOL.format(name=name, got=_checks.describe(y)))
  if not _checks.is_concrete(y):
    return
  a = np.asarray(y)
  if not np.issubdtype(a.dtype, np.number):
    raise ValueError(f"{name} must hold numbers in {{-1, 0, 1}}; got {_checks.describe(y)}.")
  bad = ~np.isin(a, (-1, 0, 1))
  if bad.any():
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    raise ValueError(
      f"{name} must hold only -1 (dissimilar), 0 (unknown) and +1 (similar); "
      f"found {int(bad.sum())} other entries, e.g. {a[first].item()!r} at {first}, "
      f"in {_checks.describe(y)}."
    )
  asym = a != a.T
  if asym.any():
    i, j = (int(t) for t in np.argwhere(asym)[0])
    raise ValueError(
      f"{name} must be symmetric (Y[i, j] == Y[j, i]); {int(asym.sum()) // 2} "
      f"pairs differ, e.g. {name}[{i}, {j}] = {a[i, j].item()!r} but "
      f"{name}[{j}, {i}] = {a[j, i].item()!r}."
    )


def from_matrix(y: Any, num_items: int | None = None) -> Supervision:
  """Supervision from a dense ``[n, n]`` matrix in {-1, 0, 1} (checked, stored as int8).

  A bool matrix is refused (a False would read as 0, unknown, not -1, dissimilar): pass
  ``np.where(Y, 1, -1)``."""
  check_matrix(y, num_items)
  return Supervision(dense=jnp.asarray(y).astype(jnp.int8))


def from_pairs(rows: Any, cols: Any, values: Any, num_items: int) -> Supervision:
  """Supervision from a sparse list of pairs; every pair not listed is unknown (0).

  Pair ``(rows[t], cols[t])`` gets ``values[t]`` in {-1, +1} (0 is allowed and
  means unknown; bool values are refused, as a False would read as 0), and so does
  ``(cols[t], rows[t])``. Listing a pair twice, in
  either order, with different values is an asymmetric ``Y`` and raises
  (checked when the arrays are concrete).

  Args:
    rows, cols: int ``[m]`` item indices in ``[0, num_items)``.
    values: ``[m]`` in {-1, 0, +1}.
    num_items: ``n``.
  Returns:
    ``Supervision`` holding the dense int8 ``[n, n]`` matrix.
  """
  n = _checks.positive_int(num_items, "num_items")
  if n > np.iinfo(np.int32).max:
    raise ValueError(f"num_items must fit in int32 (at most {np.iinfo(np.int32).max}); got {n}.")
  _checks.fits_in_memory(
    {"the dense int8 Y": n * n},
    f"supervision_from_pairs of num_items={n}",
    "CDH's explicit Y is dense [n, n]; use fewer items, or labels (supervision='labels')",
  )
  if _checks.dtype_of(values) == np.bool_:
    raise ValueError(_BOOL.format(name="values", got=_checks.describe(values)))
  shapes = [np.shape(rows), np.shape(cols), np.shape(values)]
  if any(len(s) != 1 for s in shapes) or len({s[0] for s in shapes}) != 1:
    raise ValueError(
      f"Y given as pairs must be three 1-D arrays (rows, cols, values) of one "
      f"length; got shapes {shapes}."
    )
  if all(_checks.is_concrete(a) for a in (rows, cols, values)):
    r, c, v = np.asarray(rows), np.asarray(cols), np.asarray(values)
    if r.size and (
      r.dtype.kind not in "iu"
      or c.dtype.kind not in "iu"
      or min(r.min(), c.min()) < 0
      or max(r.max(), c.max()) >= n
    ):
      raise ValueError(
        f"Y given as pairs must index items in [0, {n}) with integer rows and "
        f"cols; got rows {_checks.describe(r)}, cols {_checks.describe(c)}."
      )
    bad = ~np.isin(v, (-1, 0, 1))
    if bad.any():
      raise ValueError(
        f"Y must hold only -1, 0 and +1; the pair list has values {np.unique(v[bad])[:5].tolist()}."
      )
    # Conflicts: the same unordered pair listed with two different values.
    lo, hi = np.minimum(r, c).astype(np.int64), np.maximum(r, c).astype(np.int64)
    order = np.lexsort((v, hi, lo))
    key = lo[order] * n + hi[order]
    same = key[1:] == key[:-1]
    differ = same & (v[order][1:] != v[order][:-1])
    if differ.any():
      t = int(np.argmax(differ))
      i, j = int(lo[order][t]), int(hi[order][t])
      raise ValueError(
        f"Y must be symmetric: the pair ({i}, {j}) is listed with values "
        f"{v[order][t].item()!r} and {v[order][t + 1].item()!r}."
      )
  rows = jnp.asarray(rows, jnp.int32)
  cols = jnp.asarray(cols, jnp.int32)
  values = jnp.asarray(values).astype(jnp.int8)
  dense = jnp.zeros((n, n), jnp.int8).at[rows, cols].set(values).at[cols, rows].set(values)
  return Supervision(dense=dense)


def from_batch_entry(y: Any, num_items: int) -> Supervision:
  """``batch['Y']``: a dense ``[n, n]`` matrix or a ``(rows, cols, values)`` pair list."""
  if y is None:
    raise ValueError(
      "Y is required for CDH with supervision='pairs': pass batch['Y'], a "
      "dense [n, n] matrix in {-1, 0, 1} or a (rows, cols, values) pair list."
    )
  if isinstance(y, (tuple, list)):
    if len(y) != 3:
      raise ValueError(
        f"Y given as a pair list must be (rows, cols, values); got a "
        f"{type(y).__name__} of {len(y)} entries."
      )
    return from_pairs(*y, num_items)
  return from_matrix(y, num_items)


def _share(a: jax.Array, b: jax.Array, multi: bool) -> jax.Array:
  """+1 / -1 for every pair of a row of ``a`` and a row of ``b`` (labels)."""
  if multi:
    same = jnp.dot(a, b.T) > 0.5
  else:
    same = a[:, None] == b[None, :]
  return jnp.where(same, jnp.float32(1), jnp.float32(-1))


def rows(sup: Supervision, index: jax.Array) -> jax.Array:
  """``Y[index, :]`` as float32 ``[len(index), n]`` (index: int ``[m]``)."""
  if sup.class_ids is not None:
    return _share(sup.class_ids[index], sup.class_ids, multi=False)
  if sup.multi_hot is not None:
    return _share(sup.multi_hot[index], sup.multi_hot, multi=True)
  return sup.dense[index].astype(jnp.float32)


def block(sup: Supervision, start: jax.Array, size: int) -> jax.Array:
  """Rows ``start .. start + size - 1`` of ``Y`` as float32 ``[size, n]``."""
  take = lambda a: jax.lax.dynamic_slice_in_dim(a, start, size, axis=0)
  if sup.class_ids is not None:
    return _share(take(sup.class_ids), sup.class_ids, multi=False)
  if sup.multi_hot is not None:
    return _share(take(sup.multi_hot), sup.multi_hot, multi=True)
  return take(sup.dense).astype(jnp.float32)


def submatrix(sup: Supervision, index: jax.Array) -> jax.Array:
  """``Y[index][:, index]`` as float32 ``[m, m]``."""
  if sup.class_ids is not None:
    ids = sup.class_ids[index]
    return _share(ids, ids, multi=False)
  if sup.multi_hot is not None:
    hot = sup.multi_hot[index]
    return _share(hot, hot, multi=True)
  return sup.dense[index][:, index].astype(jnp.float32)


def among(sup: Supervision, index: jax.Array) -> Callable[[jax.Array], jax.Array]:
  """Rows of ``Y`` among the items ``index`` (int ``[m]``): ``p -> Y[index[p], index]``.

  With labels, the ``m`` items' labels are gathered once; each row then costs
  ``O(m)`` (``O(m C)`` multi-hot). With an explicit ``Y``, each row is a gather.
  """
  if sup.dense is not None:
    return lambda p: sup.dense[index[p]][index].astype(jnp.float32)
  sub = take_items(sup, index)
  return lambda p: rows(sub, jnp.reshape(p, (1,)))[0]


def dense(sup: Supervision) -> jax.Array:
  """The whole ``Y`` as float32 ``[n, n]`` (for tests and small problems)."""
  return rows(sup, jnp.arange(num_items(sup)))


def take_items(sup: Supervision, index: jax.Array) -> Supervision:
  """The supervision among a subset of the items (a chunk): ``Y[index][:, index]``."""
  if sup.class_ids is not None:
    return Supervision(class_ids=sup.class_ids[index])
  if sup.multi_hot is not None:
    return Supervision(multi_hot=sup.multi_hot[index])
  return Supervision(dense=sup.dense[index][:, index])
