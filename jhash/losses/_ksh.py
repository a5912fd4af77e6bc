"""Kernel-based supervised hashing (KSH): kernel features, its l2 loss and its greedy fit.

Liu, Wang, Ji, Jiang and Chang, "Supervised Hashing with Kernels", CVPR 2012. A bit is
``h(x) = sgn(a^T k(x))`` on the zero-centred kernel features over ``m`` anchors

    k(x)_j = exp(-||x - x_(j)||^2 / (2 sigma^2)) - mu_j,    j = 1..m,

and the ``K`` bits of ``l`` labelled items fit the pairwise labels ``S~`` in {-1, +1} through
code inner products: ``min || (1/K) H H^T - S~ ||_F^2``. Two ways to fit it here:

* ``ksh_loss``: the objective on the relaxed codes ``H = 2 sigmoid(u) - 1`` (the paper's
  smoothing of ``sgn``) of any network's outputs ``u``, weighted over pairs, for
  ``jhash.methods.pairwise``.
* ``ksh_greedy_fit``: the paper's own solver, one projection ``a_k`` at a time on the
  residual ``R_{k-1} = K S~ - sum_{t<k} h_t h_t^T``: a spectral relaxation started,
  sigmoid-smoothed gradient descent refined.

The greedy fit holds the residual [l, l] and the kernel matrix [l, m]: 2000 labelled items
(the paper's setting) take 16 MB for the residual in float32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy import linalg
import numpy as np

from jhash import _checks


def rbf_anchor_features(
  x: jax.Array, anchors: jax.Array, sigma: jax.Array, mu: jax.Array | None = None
) -> jax.Array:
  """Gaussian kernel features over anchors, centred by their training mean.

      k(x)_j = exp(-||x - x_(j)||^2 / (2 sigma^2)) - mu_j

  Args:
    x: float [n, d].
    anchors: float [m, d], the anchors ``x_(j)`` (the paper samples 300 training items).
    sigma: float [], the kernel width (``rbf_anchor_statistics``).
    mu: float [m], the features' mean over the training set (None: not centred).
  Returns:
    float32 [n, m].
  """
  _checks.rank(x, 2, "x", "[n, d]")
  _checks.rank(anchors, 2, "anchors", "[m, d]")
  sq = _squared_distances(jnp.asarray(x, jnp.float32), jnp.asarray(anchors, jnp.float32))
  phi = jnp.exp(-sq / (2.0 * jnp.square(sigma)))
  return phi if mu is None else phi - mu[None, :]


def rbf_anchor_statistics(x: jax.Array, anchors: jax.Array) -> tuple[jax.Array, jax.Array]:
  """The kernel width and the centring mean of KSH's features, from the training set.

  The width is the authors' code's choice: ``sigma^2`` is the mean squared distance from
  the training items to the anchors, so the kernel is ``exp(-d^2 / (2 mean(d^2)))``.

  Args:
    x: float [n, d], the training items.
    anchors: float [m, d].
  Returns:
    ``(sigma, mu)``: float32 [] and float32 [m], the arguments of ``rbf_anchor_features``.
  """
  _checks.rank(x, 2, "x", "[n, d]")
  _checks.rank(anchors, 2, "anchors", "[m, d]")
  sq = _squared_distances(jnp.asarray(x, jnp.float32), jnp.asarray(anchors, jnp.float32))
  sigma = jnp.sqrt(jnp.mean(sq))
  return sigma, jnp.mean(jnp.exp(-sq / (2.0 * jnp.square(sigma))), axis=0)


def _squared_distances(x: jax.Array, y: jax.Array) -> jax.Array:
  sq = (
    jnp.sum(x * x, axis=1)[:, None]
    + jnp.sum(y * y, axis=1)[None, :]
    - 2.0 * jnp.matmul(x, y.T, precision=lax.Precision.HIGHEST)
  )
  return jnp.maximum(sq, 0.0)


def ksh_loss(u: jax.Array, v: jax.Array, similarity: jax.Array, weights: jax.Array) -> jax.Array:
  """KSH's l2 loss on code inner products, relaxed by ``2 sigmoid(.) - 1``.

      h_i = 2 sigmoid(u_i) - 1,   h'_j = 2 sigmoid(v_j) - 1,   S~_ij = 2 s_ij - 1,
      L = sum_ij w_ij ((1/K) <h_i, h'_j> - S~_ij)^2 / sum_ij w_ij.

  With unit weights over all pairs this is the paper's ``|| (1/K) H H^T - S~ ||_F^2``
  divided by the number of pairs.

  Args:
    u: float [b, K], the minibatch's raw outputs.
    v: float [m, K], the other side's raw outputs (``u`` itself for in-batch pairs).
    similarity: float [b, m] in {0, 1}.
    weights: float [b, m], pair weights (0 for pairs that do not count).
  Returns:
    float32 [].
  """
  for name, a in (("u", u), ("v", v), ("similarity", similarity), ("weights", weights)):
    _checks.rank(a, 2, name)
  h, g = jnp.tanh(u / 2.0), jnp.tanh(v / 2.0)  # 2 sigmoid(x) - 1 = tanh(x / 2)
  error = (h @ g.T) / u.shape[1] - (2.0 * similarity - 1.0)
  return jnp.sum(weights * jnp.square(error)) / jnp.maximum(jnp.sum(weights), 1e-12)


def _smoothed_cost(a, features, residual):
  """The smoothed cost ``-phi(Phi a)^T R phi(Phi a)`` with ``phi(x) = 2 sigmoid(x) - 1``."""
  y = jnp.tanh((features @ a) / 2.0)
  return -(y @ (residual @ y))


def _descend(a, features, residual, num_steps, tol):
  """Gradient descent on the smoothed cost with the authors' step-size rule, from ``a``.

  Each step ``a - grad / beta`` doubles ``beta`` (kept from the previous step) until the
  quadratic upper bound holds, so the smoothed cost never rises; it stops after
  ``num_steps`` or once the cost moves by at most ``tol * l``. The authors' code adds
  Nesterov's momentum to the same rule; plain descent is kept here for a monotone cost.
  """
  gradient = jax.grad(_smoothed_cost)
  l = features.shape[0]

  def step(carry):
    t, a, beta, cost, _ = carry
    grad = gradient(a, features, residual)

    def too_long(c):
      b, z_cost, z = c
      bound = cost + grad @ (z - a) + 0.5 * b * jnp.sum(jnp.square(z - a))
      return (z_cost > bound) & (b < beta * 2.0**50)

    def longer(c):
      b = 2.0 * c[0]
      z = a - grad / b
      return b, _smoothed_cost(z, features, residual), z

    z0 = a - grad / beta
    beta, new_cost, z = lax.while_loop(
      too_long, longer, (beta, _smoothed_cost(z0, features, residual), z0)
    )
    accept = new_cost <= cost
    return (
      t + 1,
      jnp.where(accept, z, a),
      beta,
      jnp.where(accept, new_cost, cost),
      ~accept | (jnp.abs(cost - new_cost) <= tol * l),
    )

  def running(carry):
    return (carry[0] < num_steps) & ~carry[4]

  start = (
    jnp.int32(0),
    a,
    jnp.float32(1.0),
    _smoothed_cost(a, features, residual),
    jnp.bool_(False),
  )
  return lax.while_loop(running, step, start)[1]


def _spectral_projection(features, residual, chol):
  """The spectral relaxation: the top generalised eigenvector of ``(Phi^T R Phi, Phi^T Phi)``.

  Scaled so that ``a^T Phi^T Phi a = l``, as the authors' code does.
  """
  lhs = features.T @ residual @ features
  half = linalg.solve_triangular(chol, lhs, lower=True)
  whitened = linalg.solve_triangular(chol, half.T, lower=True)  # L^-1 lhs L^-T
  _, vectors = jnp.linalg.eigh(0.5 * (whitened + whitened.T))
  a = linalg.solve_triangular(chol.T, vectors[:, -1], lower=False)
  return jnp.sqrt(jnp.float32(features.shape[0])) * a


def _bits(features, a):
  return jnp.where(features @ a >= 0, 1.0, -1.0)


def ksh_greedy_fit(
  kernel_features: jax.Array,
  s_tilde: jax.Array,
  num_bits: int,
  *,
  num_steps: int = 500,
  tol: float = 1e-2,
  ridge: float = 1e-6,
) -> jax.Array:
  """KSH's projections, fitted greedily one bit at a time on the residual.

  For bit ``k`` with residual ``R_{k-1} = K S~ - sum_{t<k} h_t h_t^T`` (``R_0 = K S~``),
  maximise ``h^T R_{k-1} h`` over ``h = sgn(Phi a)``, ``Phi`` the kernel features:

  1. spectral relaxation: drop ``sgn``, ``max_a a^T Phi^T R Phi a`` subject to
     ``a^T Phi^T Phi a = l``, the top generalised eigenvector (``Phi^T Phi`` plus ``ridge`` times
     its mean diagonal, for a positive definite right-hand side);
  2. from it, descend the smoothed cost ``-phi(Phi a)^T R phi(Phi a)`` with
     ``phi = 2 sigmoid - 1``, at most ``num_steps`` steps (the authors' code:
     500, stopping once the cost moves by at most ``tol * l``; see ``_descend``);
  3. keep whichever of the two projections has the larger ``h^T R h`` (as the authors'
     code does), then ``R_k = R_{k-1} - h_k h_k^T``.

  Simplified against the paper's code: plain gradient descent with its step-size rule
  instead of Nesterov's accelerated descent.

  Args:
    kernel_features: float [l, m], ``rbf_anchor_features`` of the labelled items.
    s_tilde: float [l, l], the pairwise labels in {-1, +1} (0 for unknown pairs).
    num_bits: K, a Python int.
    num_steps: most descent steps per bit.
    tol: stop a bit's descent once its cost changes by at most ``tol * l``.
    ridge: relative ridge on ``Phi^T Phi`` in the spectral step.
  Returns:
    float32 [m, K], the projections; the codes are ``sign(kernel_features @ projection)``.
  """
  _checks.rank(kernel_features, 2, "kernel_features", "[l, m]")
  _checks.rank(s_tilde, 2, "s_tilde", "[l, l]")
  l = np.shape(kernel_features)[0]
  if np.shape(s_tilde) != (l, l):
    raise ValueError(
      f"s_tilde must be [l, l] with l = {l} (the rows of kernel_features); "
      f"got {_checks.describe(s_tilde)}."
    )
  num_bits = _checks.positive_int(num_bits, "num_bits")
  num_steps = _checks.positive_int(num_steps, "num_steps")
  features = jnp.asarray(kernel_features, jnp.float32)
  gram = features.T @ features
  gram = gram + ridge * jnp.mean(jnp.diag(gram)) * jnp.eye(gram.shape[0], dtype=gram.dtype)
  chol = jnp.linalg.cholesky(gram)

  def one_bit(residual, _):
    spectral = _spectral_projection(features, residual, chol)
    descended = _descend(spectral, features, residual, num_steps, tol)
    h_spectral, h_descended = _bits(features, spectral), _bits(features, descended)
    better = h_descended @ (residual @ h_descended) > h_spectral @ (residual @ h_spectral)
    a = jnp.where(better, descended, spectral)
    h = jnp.where(better, h_descended, h_spectral)
    return residual - jnp.outer(h, h), a

  residual = num_bits * jnp.asarray(s_tilde, jnp.float32)
  _, projections = lax.scan(one_bit, residual, None, length=num_bits)
  return projections.T
