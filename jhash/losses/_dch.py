"""DCH: the Cauchy cross-entropy on a relaxed Hamming distance, and its quantisation term.

Cao, Long, Liu and Wang, "Deep Cauchy Hashing for Hamming Space Retrieval", CVPR 2018.
For continuous codes ``h = tanh(z)`` the Hamming distance of their signs is relaxed by the
normalised cosine distance ``d(h_i, h_j) = (K/2) (1 - cos(h_i, h_j))`` (0 for equal
directions, ``K`` for opposite ones; equal to the Hamming distance on codes in {-1, +1}).
A pair is similar with the Cauchy probability ``gamma / (gamma + d)``, which falls much
faster than a sigmoid of the inner product once ``d`` passes a few bits, so that similar
pairs are drawn into a small Hamming ball. The negative log-likelihood of the labels is

    -s log(gamma / (gamma + d)) - (1 - s) log(d / (gamma + d))
        = s log(d / gamma) + log(1 + gamma / d),

computed here as ``s log(1 + d / gamma) + (1 - s) log(1 + gamma / d)`` (the same value,
finite at ``d = 0`` for similar pairs). A second Cauchy term draws ``|h|`` toward the
all-ones direction, so that ``h`` is near a vertex of the hypercube:
``log(1 + d(|h_i|, 1) / gamma)``.

Defaults: ``gamma = 20`` is the authors' code's (``thulab/DeepHash``, ``examples/dch``);
``lambda = 0.1`` is the value the public PyTorch reproductions of DCH use (the paper
selects it by cross-validation).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jhash import _checks


def cosine_hamming_distance(u: jax.Array, v: jax.Array) -> jax.Array:
  """``d_ij = (K/2) (1 - cos(u_i, v_j))``: the Hamming distance of codes, relaxed.

  Computed as ``K (n_ij - <u_i, v_j>) / (2 n_ij)`` with ``n_ij = sqrt(|u_i|^2 |v_j|^2)``, so
  that on codes in {-1, +1} every step is exact in floating point (``n = K``) and ``d`` is
  the integer Hamming distance: a margin test ``d <= H`` (MMHH) is then decided right.

  Args:
    u: float [b, K].
    v: float [m, K].
  Returns:
    float32 [b, m] in [0, K] (clipped at 0 against rounding).
  """
  inner = u @ v.T
  # + tiny: differentiable at a zero row, where the cosine is undefined anyway.
  norms = jnp.sqrt(jnp.sum(u * u, axis=1)[:, None] * jnp.sum(v * v, axis=1)[None, :] + 1e-12)
  return u.shape[1] * jnp.maximum(norms - inner, 0.0) / (2.0 * norms)


def dch_loss(
  u: jax.Array,
  v: jax.Array,
  similarity: jax.Array,
  weights: jax.Array,
  *,
  gamma: float = 20.0,
  quantization: float = 0.1,
  epsilon: float = 1e-6,
) -> jax.Array:
  """DCH's Cauchy cross-entropy over pairs plus its Cauchy quantisation term::

      h_i = tanh(u_i),   h'_j = tanh(v_j),   d_ij = (K/2) (1 - cos(h_i, h'_j)),
      L = sum_ij w_ij (s_ij log(1 + d_ij / gamma) + (1 - s_ij) log(1 + gamma / (d_ij + eps)))
          / sum_ij w_ij
          + lambda mean_i log(1 + d(|h_i|, 1) / gamma),

  ``d(|h|, 1) = (K/2) (1 - sum_k |h_k| / (||h|| sqrt(K)))``. ``eps`` keeps a dissimilar pair at
  distance 0 finite. The paper sums both terms; here the pair term is the weighted mean
  over pairs and the quantisation the mean over items, as in ``pairwise_likelihood``.

  Args:
    u: float [b, K], the minibatch's raw outputs.
    v: float [m, K], the other side's raw outputs (``u`` itself for in-batch pairs).
    similarity: float [b, m] in {0, 1}.
    weights: float [b, m], pair weights (0 for pairs that do not count).
    gamma: the Cauchy scale, in bits (20, the authors' code).
    quantization: ``lambda``, the weight of the quantisation term.
    epsilon: added to ``d`` in the dissimilar term.
  Returns:
    float32 [].
  """
  for name, a in (("u", u), ("v", v), ("similarity", similarity), ("weights", weights)):
    _checks.rank(a, 2, name)
  h = jnp.tanh(u)
  d = cosine_hamming_distance(h, jnp.tanh(v))
  nll = similarity * jnp.log1p(d / gamma) + (1.0 - similarity) * jnp.log1p(gamma / (d + epsilon))
  pair_term = jnp.sum(weights * nll) / jnp.maximum(jnp.sum(weights), 1e-12)
  to_vertex = cosine_hamming_distance(jnp.abs(h), jnp.ones((1, h.shape[1]), h.dtype))[:, 0]
  return pair_term + quantization * jnp.mean(jnp.log1p(to_vertex / gamma))
