"""The full CDH objective ``J``, computed by row blocks (no ``n x n`` array).

    J = (1/n^2) sum_ij l(Y_ij, p_ij) + (gamma/n) sum_i sum_k sum_v phi_k^v(b_ik, x_i^v),

with ``p_ij = <b_i, b_j> / K``, ``l = Y p`` (linear) or ``-exp(-Y p)``
(exponential), over every ordered pair ``(i, j)``, ``i = j`` included (a
constant, as are the unknown pairs: ``l(0, p)`` is 0 or -1). The generative sum
is ``sum_ik (V/2 + b_ik Z_ik)`` (see ``_encode``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jhash import _checks
from jhash.methods._cdh import _bstep
from jhash.methods._cdh import _supervision as sv


def merit(y: jax.Array, p: jax.Array, kind: str) -> jax.Array:
  """``l(Y, p)`` elementwise; ``kind`` ``"linear"`` or ``"exponential"``."""
  _bstep.check_merit(kind, "kind")
  if kind == "linear":
    return y * p
  return -jnp.exp(-y * p)


def semantic_term(
  codes: jax.Array, sup: sv.Supervision, kind: str, block_rows: int = 64
) -> jax.Array:
  """``(1/n^2) sum_ij l(Y_ij, p_ij)``: float32 [].

  Blocks of 64 rows keep each ``[rows, n]`` block in cache: 1.6x faster than 256 rows at
  n = 20,000 on the CPU (0.68 s vs 1.11 s, K = 32).

  Raises:
    ValueError: ``kind`` not ``"linear"`` or ``"exponential"``, ``codes`` not [n, K] (signs,
      checked where concrete), ``sup`` not of the same ``n`` items, ``block_rows`` not an
      int >= 1.
  """
  _bstep.check_merit(kind, "kind")
  _checks.signed_codes(codes, "codes")
  sv.check_supervision(sup, np.shape(codes)[0])
  block_rows = _checks.positive_int(block_rows, "block_rows")
  n, k = codes.shape
  bf = codes.astype(jnp.float32)

  def block(start, size, new, total):
    rows = jax.lax.dynamic_slice_in_dim(bf, start, size, 0)
    p = jnp.dot(rows, bf.T) * (1.0 / k)
    values = jnp.sum(merit(sv.block(sup, start, size), p, kind), axis=1)
    return total + jnp.sum(jnp.where(new, values, 0.0))

  total = _bstep.for_row_blocks(n, block_rows, block, jnp.float32(0))
  return total / (float(n) * float(n))


def generative_sum(codes: jax.Array, z: jax.Array, num_views: int) -> jax.Array:
  """``sum_ik (V/2 + b_ik Z_ik)``: float32 [], the generative sum without ``gamma / n``.

  Args:
    codes: int8 [n, K] in {-1, +1}.
    z: float32 [n, K], the generative linear terms (``_encode.generative_terms``).
    num_views: V.
  """
  return 0.5 * num_views * codes.size + jnp.sum(codes.astype(jnp.float32) * z)


def scale_generative(total: jax.Array, gamma: jax.Array, num_items: int) -> jax.Array:
  """The generative term ``(gamma/n) total`` of a ``generative_sum``: float32 []."""
  return gamma * total / num_items


def generative_term(codes: jax.Array, z: jax.Array, gamma: jax.Array, num_views: int) -> jax.Array:
  """``(gamma/n) sum_ik (V/2 + b_ik Z_ik)``: float32 [].

  Raises:
    ValueError: ``codes`` not [n, K] (signs, checked where concrete), ``z`` not [n, K],
      ``num_views`` not an int >= 1, ``gamma`` not a real scalar >= 0.
  """
  _checks.signed_codes(codes, "codes")
  if np.shape(z) != np.shape(codes):
    raise ValueError(
      f"z must be [n, K] like codes {list(np.shape(codes))} (generative_terms); got "
      f"{_checks.describe(z)}."
    )
  num_views = _checks.positive_int(num_views, "num_views")
  _checks.scalar(gamma, "gamma", low=0)
  return scale_generative(generative_sum(codes, z, num_views), gamma, codes.shape[0])
