"""The hinge bound of the Hamming loss between outputs and target codes.

HBMP's hash functions (Cakir et al., ECCV 2018, Eq. 12) are fitted to target codes
``u`` by bounding the Hamming loss of ``f(x) = sign(psi(x))`` by the hinge:

    sum_i d_h(f(x_i), u_i) = sum_i sum_t [f_t(x_i) != u_it]
                          <= sum_i sum_t max(0, 1 - u_it psi_t(x_i)).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jhash import _checks
from jhash import codes as codes_lib


def instance_hinge(scores: jax.Array, targets: jax.Array) -> jax.Array:
  """Hinge bound of one instance's Hamming loss: ``sum_t max(0, 1 - u_t psi_t)``.

  Args:
    scores: float [b], ``psi(x)``.
    targets: float [b] in {-1, +1}, ``u``.
  Returns:
    float32 [].
  """
  return jnp.sum(jnp.maximum(0.0, 1.0 - targets * scores))


def mean_hinge(scores: jax.Array, targets: jax.Array) -> jax.Array:
  """``hinge_loss`` without input checks (for use inside jit)."""
  return jnp.mean(jax.vmap(instance_hinge)(scores, targets.astype(jnp.float32)))


def mean_bit_error(scores: jax.Array, targets: jax.Array) -> jax.Array:
  """``bit_error`` without input checks (for use inside jit)."""
  return jnp.mean((codes_lib.sign(scores) != targets.astype(jnp.int8)).astype(jnp.float32))


def _check_scores_targets(scores, targets) -> None:
  _checks.rank(scores, 2, "scores", "[n, b]")
  _checks.rank(targets, 2, "targets", "codes [n, b] in {-1,+1}")
  if np.shape(scores) != np.shape(targets):
    raise ValueError(
      f"scores and targets must have the same shape [n, b]; got "
      f"{_checks.describe(scores)} and {_checks.describe(targets)}."
    )


def hinge_loss(scores, targets) -> jax.Array:
  """The hinge upper bound of the Hamming loss, averaged over instances (Eq. 12).

      L = (1/n) sum_i sum_t max(0, 1 - u_it psi_t(x_i))  >=  (1/n) sum_i d_h(f(x_i), u_i)

  Args:
    scores: float [n, b], ``psi(x_i)``.
    targets: [n, b] in {-1, +1} (int8 codes or floats), ``u_i``.
  Returns:
    float32 [].
  """
  _check_scores_targets(scores, targets)
  return mean_hinge(jnp.asarray(scores, jnp.float32), jnp.asarray(targets))


def bit_error(scores, targets) -> jax.Array:
  """Fraction of bits with ``sign(psi) != u`` (``sign(0) = +1``): float32 [] in [0, 1]."""
  _check_scores_targets(scores, targets)
  return mean_bit_error(jnp.asarray(scores, jnp.float32), jnp.asarray(targets))
