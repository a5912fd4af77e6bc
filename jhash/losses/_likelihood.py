"""The pairwise likelihood loss of deep supervised hashing (DPSH), a default loss.

Li, Wang and Kang, "Feature Learning based Deep Supervised Hashing with Pairwise
Labels", IJCAI 2016, Eq. 4 and 6: with ``theta_ij = alpha <u_i, v_j>`` / 2 the
probability that a pair is similar is ``sigmoid(theta_ij)``, and

    L = sum_ij w_ij (log(1 + exp(theta_ij)) - s_ij theta_ij) / sum_ij w_ij
        + eta * mean_i ||u_i - sign(u_i)||^2 / K.

``u`` are the network's continuous outputs; the quantisation term pulls them to
+-1. Pairs weigh ``w`` (e.g. ``balanced_pair_weights``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def pairwise_likelihood(
  u: jax.Array,
  v: jax.Array,
  similarity: jax.Array,
  weights: jax.Array,
  *,
  alpha: float = 0.5,
  quantization: float = 0.1,
) -> jax.Array:
  """DPSH's negative log-likelihood of the pair labels plus a quantisation term.

  Args:
    u: float [a, K], the minibatch's continuous outputs.
    v: float [b, K], the other side of each pair (``u`` itself for in-batch pairs).
    similarity: float [a, b] in {0, 1}.
    weights: float [a, b], pair weights (0 for pairs that do not count).
    alpha: scale of the inner products (DPSH uses 1/2).
    quantization: ``eta``, the weight of ``||u - sign(u)||^2 / K``.
  Returns:
    float32 [].
  """
  theta = alpha * (u @ v.T)
  nll = jax.nn.softplus(theta) - similarity * theta
  pair_term = jnp.sum(weights * nll) / jnp.maximum(jnp.sum(weights), 1e-12)
  quant = jnp.mean(jnp.sum((u - jnp.sign(u)) ** 2, axis=1)) / u.shape[1]
  return pair_term + quantization * quant
