"""Which pairs of a minibatch are similar, and how much each pair weighs.

Pairwise hashing losses read a similarity matrix ``s`` (1 for similar pairs, 0 for
dissimilar ones) between the items of a minibatch and a second set (the minibatch
itself, a memory of the training set, or database codes), and weights that stop the
far more numerous dissimilar pairs from swamping the similar ones. Both are jittable.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def label_similarity(labels_a: jax.Array, labels_b: jax.Array) -> jax.Array:
  """1.0 where two items share a label (the same class, or a common label), else 0.0.

  Args:
    labels_a: int [a] class ids or bool [a, C] multi-hot.
    labels_b: the same kind, [b] or [b, C].
  Returns:
    float32 [a, b] in {0, 1}.
  """
  if labels_a.ndim == 1:
    return (labels_a[:, None] == labels_b[None, :]).astype(jnp.float32)
  shared = jnp.einsum("ac,bc->ab", labels_a.astype(jnp.float32), labels_b.astype(jnp.float32))
  return (shared > 0).astype(jnp.float32)


def balanced_pair_weights(similarity: jax.Array, mask: jax.Array | None = None) -> jax.Array:
  """Weights that give similar and dissimilar pairs half of the total weight each.

  With ``P`` counted pairs (``mask``), ``P1`` similar and ``P0`` dissimilar, a similar
  pair weighs ``P / (2 P1)`` and a dissimilar one ``P / (2 P0)``: the weights sum to
  ``P`` (a weighted mean over pairs is then ``sum(w * l) / P``), each kind's weights
  to ``P / 2``. When one kind is absent, the other's pairs weigh 1. This is HashNet's
  re-weighting (Cao et al., ICCV 2017, Eq. 3: ``w = |S| / |S1|`` and ``|S| / |S0|``)
  scaled by one half so that the sum is the number of pairs. Masked pairs weigh 0.

  Args:
    similarity: float [a, b] in {0, 1}.
    mask: bool or float [a, b], the pairs that count (default: all).
  Returns:
    float32 [a, b].
  """
  s = similarity.astype(jnp.float32)
  m = jnp.ones_like(s) if mask is None else mask.astype(jnp.float32)
  total = jnp.sum(m)
  similar = jnp.sum(m * s)
  dissimilar = total - similar
  both = (similar > 0) & (dissimilar > 0)
  w_sim = jnp.where(both, total / (2.0 * jnp.maximum(similar, 1.0)), 1.0)
  w_dis = jnp.where(both, total / (2.0 * jnp.maximum(dissimilar, 1.0)), 1.0)
  return m * (s * w_sim + (1.0 - s) * w_dis)


def off_diagonal(size: int) -> jax.Array:
  """bool [size, size], False on the diagonal: the pairs of distinct minibatch items."""
  return ~jnp.eye(size, dtype=bool)
