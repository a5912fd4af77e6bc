"""CDH's logistic view models: the generative linear term and out-of-sample codes.

Each bit ``k`` and view ``v`` has a logistic model (the paper's Eqn. (2))

    phi_k^v(b, x) = sigmoid(b w_{k,v}^T [x, 1]),   b in {-1, +1},

with a bias: ``w_{k,v}`` has ``d_v + 1`` entries, the last one multiplying a
constant feature 1 appended to ``x`` (the paper writes no bias; without one a
bit could only split the data through the origin of each view's features).

Because ``sigmoid(-t) = 1 - sigmoid(t)``, ``phi(b, x) = 1/2 + b (sigmoid(t) - 1/2)``
exactly, so the generative term of the objective is linear in each bit:
``sum_v phi_k^v(b_ik, x_i^v) = V/2 + b_ik Z_ik`` with
``Z_ik = sum_v (sigmoid(w_kv^T [x_i^v, 1]) - 1/2)``.

Out-of-sample codes (Section 3.3): with views independent given the bit,
``b_k = argmax_b log P_k(b) + sum_{v observed} log phi_k^v(b, x^v)``. Since
``log sigmoid(t) - log sigmoid(-t) = t``, this is

    b_k = sign( log(P_k(+1) / P_k(-1)) + sum_{v observed} w_kv^T [x^v, 1] ),

(+1 on a tie). ``P_k(+1)`` is the fraction of +1 in column ``k`` of the learned
codes, clipped to ``[eps, 1 - eps]`` so that a bit that is constant on the
training set still has a finite prior that strong view evidence can overrule.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp

from jhash import codes as codes_lib


def with_bias(x: jax.Array) -> jax.Array:
  """``[x, 1]``: float32 [n, d + 1]."""
  x = jnp.asarray(x, jnp.float32)
  return jnp.concatenate([x, jnp.ones((x.shape[0], 1), jnp.float32)], axis=1)


def view_scores(weight: jax.Array, x: jax.Array) -> jax.Array:
  """``t_ik = w_k^T [x_i, 1]`` for one view: float32 [n, K] (weight [K, d + 1])."""
  return jnp.dot(with_bias(x), weight.T)


def generative_terms(weights: Sequence[jax.Array], views: Sequence[jax.Array]) -> jax.Array:
  """``Z_ik = sum_v (sigmoid(w_kv^T [x_i^v, 1]) - 1/2)``: float32 [n, K]."""
  return sum(jax.nn.sigmoid(view_scores(w, x)) - 0.5 for w, x in zip(weights, views))


def log_prior_odds(codes: jax.Array, eps: float) -> jax.Array:
  """``log(P_k(+1) / P_k(-1))`` with ``P_k(+1)`` clipped to ``[eps, 1 - eps]``: float32 [K]."""
  plus = jnp.clip(jnp.mean(codes > 0, axis=0, dtype=jnp.float32), eps, 1.0 - eps)
  return jnp.log(plus) - jnp.log1p(-plus)


def encode(
  weights: Sequence[jax.Array], prior_odds: jax.Array, views: Sequence[jax.Array | None]
) -> jax.Array:
  """Most probable bits given the observed views (``None`` marks an unobserved view).

  Args:
    weights: per view float32 [K, d_v + 1].
    prior_odds: float32 [K], ``log P_k(+1) - log P_k(-1)``.
    views: per view features [n, d_v] or None; at least one observed.
  Returns:
    int8 [n, K] in {-1, +1}.
  """
  observed = [(w, x) for w, x in zip(weights, views) if x is not None]
  if not observed:
    raise ValueError(
      f"views must hold at least one observed view to encode from; all "
      f"{len(views)} entries are None."
    )
  score = sum(view_scores(w, x) for w, x in observed)
  return codes_lib.sign(score + prior_odds[None, :])
