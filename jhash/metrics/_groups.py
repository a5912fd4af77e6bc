"""Tie groups of a ranking, and expectations over the orders of tied items.

A ranking by Hamming distance has ties: every item at the same distance shares a
rank. Metrics here reduce a query's ranking to its *tie groups* in ranking order,
each with its size ``n_g`` and the sum ``p_g`` of a per-item quantity (relevant
count, or gain). Any metric that is a sum over positions of a per-position term
then has an exact expectation over all orders of the tied items.

Integer distances in ``[0, D]`` are grouped by counting (a scatter-add histogram,
O(n) with no sort: distance value ``l`` is group ``l``); distances without a small
bound (weighted Hamming, integers in weight units) are grouped by sorting.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jax import lax

from jhash import _checks


class TieGroups(NamedTuple):
  """Tie groups of a chunk of queries, in ranking order (empty groups allowed).

  size: int32 [q, G], items in each group.
  hits: [q, G], the per-item quantity summed over the group (int32 counts of
    relevant items, or float32 gains).
  """

  size: jax.Array
  hits: jax.Array


def groups_by_count(distances: jax.Array, values: jax.Array, max_distance: int) -> TieGroups:
  """Groups of integer distances by histogram (no sort).

  Args:
    distances: int32 [q, n], 0 or more; those past max_distance (an item holding no
      code: ``multi_code_hamming`` gives it the largest int32) are in no group.
    values: [q, n] bool / int / float per-item quantity.
    max_distance: D; groups are the distance values 0..D.
  Returns:
    TieGroups with G = D + 1.
  """
  q, _ = distances.shape
  # One more bin, for the distances past D, dropped at the end (no index overflows).
  bins = max_distance + 2
  distances = jnp.minimum(distances, max_distance + 1)
  if values.dtype == jnp.bool_:
    # One histogram over (distance, relevant) pairs instead of two scatters.
    pair = (jnp.arange(q, dtype=jnp.int32)[:, None] * bins + distances) * 2 + values
    counts = jnp.zeros((q * bins * 2,), jnp.int32).at[pair.reshape(-1)].add(1, mode="drop")
    counts = counts.reshape(q, bins, 2)[:, :-1]
    return TieGroups(counts[..., 0] + counts[..., 1], counts[..., 1])
  flat = (jnp.arange(q, dtype=jnp.int32)[:, None] * bins + distances).reshape(-1)
  size = jnp.zeros((q * bins,), jnp.int32).at[flat].add(1, mode="drop")
  vdtype = jnp.float32 if jnp.issubdtype(values.dtype, jnp.floating) else jnp.int32
  hits = jnp.zeros((q * bins,), vdtype).at[flat].add(values.reshape(-1).astype(vdtype), mode="drop")
  return TieGroups(size.reshape(q, bins)[:, :-1], hits.reshape(q, bins)[:, :-1])


NO_CODE = np.iinfo(np.int32).max  #: the distance of an item holding no code


def retrieved(distances: jax.Array, max_distance: int | None) -> jax.Array | bool:
  """bool [q, n]: the items a ranking retrieves. Not an item holding no code: integer
  distance past ``max_distance``, or, without one, the largest int32 (``NO_CODE``, as
  ``jhash.search.multi_code_hamming`` gives); True for float distances."""
  if not jnp.issubdtype(distances.dtype, jnp.integer):
    return True
  return distances <= max_distance if max_distance is not None else distances < NO_CODE


def _groups_by_sort_one(distances: jax.Array, values: jax.Array):
  n = distances.shape[0]
  d, v = lax.sort((distances, values), num_keys=1)
  new = jnp.concatenate([jnp.ones((1,), bool), d[1:] != d[:-1]])
  gid = jnp.cumsum(new.astype(jnp.int32)) - 1
  kept = retrieved(d, None)  # items holding no code (sorted last) are in no group
  v = jnp.where(kept, v, jnp.zeros_like(v))
  ones = jnp.broadcast_to(jnp.asarray(kept, jnp.int32), (n,))
  size = jax.ops.segment_sum(ones, gid, num_segments=n)
  hits = jax.ops.segment_sum(v, gid, num_segments=n)
  return size, hits


def groups_by_sort(distances: jax.Array, values: jax.Array) -> TieGroups:
  """Groups of distances without a small bound (equal values tie), by sorting each row.

  Args:
    distances: int or float [q, n].
    values: [q, n] per-item quantity.
  Returns:
    TieGroups with G = n (groups past the number of distinct values are empty).
  """
  vdtype = jnp.float32 if jnp.issubdtype(values.dtype, jnp.floating) else jnp.int32
  size, hits = jax.vmap(_groups_by_sort_one)(distances, values.astype(vdtype))
  return TieGroups(size, hits)


def make_groups(distances: jax.Array, values: jax.Array, max_distance: int | None) -> TieGroups:
  """Counting for integer distances with a known bound, sorting otherwise."""
  if max_distance is not None and jnp.issubdtype(distances.dtype, jnp.integer):
    return groups_by_count(distances, values, max_distance)
  return groups_by_sort(distances, values)


def exclusive_cumsum(x: jax.Array) -> jax.Array:
  return jnp.cumsum(x, axis=-1) - x


def cut_sizes(groups: TieGroups, top_k: int | None) -> tuple[jax.Array, jax.Array]:
  """Items before each group (N_g) and how many of the group fall in the top k (J_g)."""
  before = exclusive_cumsum(groups.size)
  if top_k is None:
    return before, groups.size
  return before, jnp.clip(top_k - before, 0, groups.size)


def _psi_shifted(x: jax.Array) -> jax.Array:
  # Asymptotic digamma terms beyond log, accurate for x >= 7.
  x2 = x * x
  return -0.5 / x - 1.0 / (12.0 * x2) + 1.0 / (120.0 * x2 * x2) - 1.0 / (252.0 * x2 * x2 * x2)


def harmonic_difference(a: jax.Array, b: jax.Array) -> jax.Array:
  """``H(b) - H(a) = sum_{i=a+1..b} 1/i`` for integers ``0 <= a <= b`` (as floats).

  Evaluated as ``psi(b + 1) - psi(a + 1)`` with the difference of the logarithms
  taken by ``log1p`` and each series term differenced separately, so it keeps its
  relative precision in float32 even when ``a`` is large and ``b - a`` small
  (a plain ``digamma`` difference loses it). Concrete ``a`` and ``b`` are checked
  (finite whole numbers, of an integer or floating dtype, ``0 <= a <= b``); traced ones
  are not.
  """
  for name, value in (("a", a), ("b", b)):
    dtype = _checks.dtype_of(value)
    if not (dtype.kind in "iuf" or dtype.name == "bfloat16"):
      raise ValueError(f"{name} must be numbers (counts); got {_checks.describe(value)}.")
  try:
    np.broadcast_shapes(np.shape(a), np.shape(b))
  except ValueError:
    raise ValueError(
      f"a and b must have the same shape (or shapes that broadcast); got a of shape "
      f"{np.shape(a)} and b of shape {np.shape(b)}."
    ) from None
  if _checks.is_concrete(a) and _checks.is_concrete(b):
    lo, hi = np.asarray(a, np.float64), np.asarray(b, np.float64)
    for name, v, given in (("a", lo, a), ("b", hi, b)):
      if not (np.isfinite(v).all() and (v == np.round(v)).all()):
        raise ValueError(f"{name} must be finite whole numbers (counts); got {given!r}.")
    if np.any(lo < 0) or np.any(lo > hi):
      raise ValueError(f"harmonic_difference needs 0 <= a <= b; got a={a!r}, b={b!r}.")
  if _checks.is_concrete(a) and _checks.is_concrete(b):  # the span exactly, in float64
    span = np.asarray(b, np.float64) - np.asarray(a, np.float64)
  else:  # exact for integer counts (int32 arithmetic)
    span = jnp.asarray(b) - jnp.asarray(a)
  return harmonic_span(jnp.asarray(a, jnp.float32), jnp.asarray(span, jnp.float32))


def harmonic_span(a: jax.Array, span: jax.Array) -> jax.Array:
  """``H(a + span) - H(a)`` for counts ``a, span >= 0`` (float32, unchecked).

  The span is given apart from ``a``: past 2**24 float32 cannot tell ``a`` from
  ``a + 1``, but the span of a few items stays exact, and with it the result's relative
  precision (``harmonic_difference``)."""
  shift = 6.0
  x = a + 1.0
  y = x + span
  # psi(z) = psi(z + 6) - sum_{i<6} 1/(z + i); difference the sums term by term.
  small = sum(-span / ((x + i) * (y + i)) for i in range(int(shift)))
  xs, ys = x + shift, y + shift
  big = jnp.log1p(span / xs) + (_psi_shifted(ys) - _psi_shifted(xs))
  return big - small


def discount_table(length: int) -> np.ndarray:
  """``D[p] = sum_{i=1..p} 1 / log2(i + 1)`` for p = 0..length (float64, built once)."""
  pos = np.arange(1, length + 1, dtype=np.float64)
  return np.concatenate([[0.0], np.cumsum(1.0 / np.log2(pos + 1.0))])
