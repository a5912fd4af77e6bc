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
import numpy as np

from jhash import _checks
from jhash import codes as codes_lib


def _check_models(weights, views, name: str = "views") -> None:
  """One weight ``[K, d_v + 1]`` per view ``[n, d_v]`` (None: an unobserved view), all of one
  ``K`` and ``n`` (a ValueError naming the argument; ``zip`` would drop a view)."""
  if not isinstance(weights, (tuple, list)) or not isinstance(views, (tuple, list)):
    raise ValueError(
      f"weights and {name} must be sequences, one entry per view; got "
      f"{_checks.describe(weights)} and {_checks.describe(views)}."
    )
  if len(weights) != len(views) or not weights:
    raise ValueError(
      f"{name} must hold one entry per trained view ({len(weights)} weights); got {len(views)}."
    )
  num_bits, n = None, None
  for v, (w, x) in enumerate(zip(weights, views)):
    _checks.rank(w, 2, f"weights[{v}]", "with shape [K, d + 1]")
    if num_bits is not None and np.shape(w)[0] != num_bits:
      raise ValueError(
        f"weights[{v}] must have K = {num_bits} rows, as weights[0]; got {_checks.describe(w)}."
      )
    num_bits = np.shape(w)[0]
    if x is None:
      continue
    _checks.rank(x, 2, f"{name}[{v}]", "(features [n, d])")
    d = np.shape(w)[1] - 1
    if np.shape(x)[1] != d:
      raise ValueError(
        f"{name}[{v}] must have {d} features, the width its model was trained on "
        f"(weights[{v}] {list(np.shape(w))}); got {_checks.describe(x)}."
      )
    if n is not None and np.shape(x)[0] != n:
      raise ValueError(
        f"{name} must all have the same number of rows; {name}[{v}] has {np.shape(x)[0]}, not {n}."
      )
    n = np.shape(x)[0]


def with_bias(x: jax.Array) -> jax.Array:
  """``[x, 1]``: float32 [n, d + 1]."""
  x = jnp.asarray(x, jnp.float32)
  return jnp.concatenate([x, jnp.ones((x.shape[0], 1), jnp.float32)], axis=1)


def view_scores(weight: jax.Array, x: jax.Array) -> jax.Array:
  """``t_ik = w_k^T [x_i, 1]`` for one view: float32 [n, K] (weight [K, d + 1])."""
  return jnp.dot(with_bias(x), weight.T)


def generative_terms(weights: Sequence[jax.Array], views: Sequence[jax.Array]) -> jax.Array:
  """``Z_ik = sum_v (sigmoid(w_kv^T [x_i^v, 1]) - 1/2)``: float32 [n, K].

  Raises:
    ValueError: not one view ``[n, d_v]`` per weight ``[K, d_v + 1]`` (every view observed).
  """
  _check_models(weights, views)
  if any(x is None for x in views):
    raise ValueError("views must all be observed for generative_terms; some are None.")
  return sum(jax.nn.sigmoid(view_scores(w, x)) - 0.5 for w, x in zip(weights, views))


def log_prior_odds(codes: jax.Array, eps: float) -> jax.Array:
  """``log(P_k(+1) / P_k(-1))`` with ``P_k(+1)`` clipped to ``[eps, 1 - eps]``: float32 [K].

  Raises:
    ValueError: ``codes`` not [n, K] (signs, checked where concrete), or ``eps`` not a real
      scalar in (0, 0.5) (checked where concrete: ``eps >= 0.5`` would invert the clip).
  """
  _checks.signed_codes(codes, "codes")
  _checks.scalar(eps, "eps")
  if _checks.is_concrete(eps) and not 0.0 < float(eps) < 0.5:
    raise ValueError(f"eps must be in (0, 0.5); got {float(eps)!r}.")
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
  Raises:
    ValueError: not one view per weight, a view of another width than its model's,
      ``prior_odds`` not [K].
  """
  _check_models(weights, views)
  num_bits = np.shape(weights[0])[0]
  if tuple(np.shape(prior_odds)) != (num_bits,):
    raise ValueError(
      f"prior_odds must be [K] = [{num_bits}] (log_prior_odds); got {_checks.describe(prior_odds)}."
    )
  observed = [(w, x) for w, x in zip(weights, views) if x is not None]
  if not observed:
    raise ValueError(
      f"views must hold at least one observed view to encode from; all "
      f"{len(views)} entries are None."
    )
  score = sum(view_scores(w, x) for w, x in observed)
  return codes_lib.sign(score + prior_odds[None, :])
