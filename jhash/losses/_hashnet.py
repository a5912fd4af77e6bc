"""HashNet: the weighted pairwise likelihood on ``tanh(beta z)``, with continuation on beta.

Cao, Long, Wang and Yu, "HashNet: Deep Learning to Hash by Continuation", ICCV 2017.
The codes are relaxed by ``h = tanh(beta z)``, and ``beta`` grows during training so that
``tanh(beta z)`` tends to ``sgn(z)`` (learning by continuation, Algorithm 1). A pair
``(i, j)`` is similar with probability ``sigmoid(alpha <h_i, h_j>)``, and its negative
log-likelihood is weighted to balance similar and dissimilar pairs (Eq. 3):

    L = sum_ij w_ij (log(1 + exp(alpha <h_i, h_j>)) - alpha s_ij <h_i, h_j>) / sum_ij w_ij.

Defaults follow the authors' PyTorch code (``thuml/HashNet``, ``pytorch/src``):
``alpha = 10 / K`` (``sigmoid_param``), and ``beta = (1 + 0.005 t)^0.5`` refreshed every
200 iterations ``t``, i.e. ``sqrt(1 + t // 200)``. The loss takes ``beta`` as an argument
(the training step passes ``hashnet_beta(step)``), so that it stays a pure function.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jhash import _checks


def hashnet_beta(
  step: jax.Array, *, period: int = 200, rate: float = 0.005, power: float = 0.5
) -> jax.Array:
  """HashNet's continuation: ``beta = (1 + rate * period * (step // period)) ** power``.

  The authors' code sets ``beta = (1 + 0.005 t)^0.5`` at every iteration ``t`` that is a
  multiple of 200 and keeps it in between; with the defaults this is
  ``sqrt(1 + step // 200)``: 1 for the first 200 steps, then sqrt(2), sqrt(3), ...

  Args:
    step: int [], the training step (from 0).
    period: steps between increases of beta.
    rate: ``gamma`` of the authors' code (the growth per iteration).
    power: the exponent.
  Returns:
    float32 [].
  """
  stage = jnp.floor_divide(jnp.asarray(step, jnp.int32), period).astype(jnp.float32)
  return jnp.power(1.0 + rate * period * stage, power)


def hashnet_loss(
  z: jax.Array,
  v: jax.Array,
  similarity: jax.Array,
  weights: jax.Array,
  *,
  beta: jax.Array | float = 1.0,
  alpha: float | None = None,
) -> jax.Array:
  """HashNet's weighted negative log-likelihood of the pair labels on ``tanh(beta z)``.

      h_i = tanh(beta z_i),   h'_j = tanh(beta v_j),   theta_ij = alpha <h_i, h'_j>,
      L = sum_ij w_ij (log(1 + exp(theta_ij)) - s_ij theta_ij) / sum_ij w_ij.

  Both sides are pre-activation outputs, so the same ``beta`` relaxes both. Balanced
  weights (``balanced_pair_weights``) are Eq. 3's ``|S| / |S_1|`` and ``|S| / |S_0|`` up to a
  factor that cancels in the ratio. The paper trains without a quantisation term: the
  continuation on ``beta`` does that job.

  Args:
    z: float [b, K], the minibatch's raw outputs.
    v: float [m, K], the other side's raw outputs (``z`` itself for in-batch pairs).
    similarity: float [b, m] in {0, 1}.
    weights: float [b, m], pair weights (0 for pairs that do not count).
    beta: the continuation scale (``hashnet_beta(step)``; 1 without continuation).
    alpha: scale of the inner products (None: ``10 / K``, the authors' code).
  Returns:
    float32 [].
  """
  for name, a in (("z", z), ("v", v), ("similarity", similarity), ("weights", weights)):
    _checks.rank(a, 2, name)
  alpha = 10.0 / z.shape[1] if alpha is None else alpha
  theta = alpha * (jnp.tanh(beta * z) @ jnp.tanh(beta * v).T)
  nll = jax.nn.softplus(theta) - similarity * theta
  return jnp.sum(weights * nll) / jnp.maximum(jnp.sum(weights), 1e-12)
