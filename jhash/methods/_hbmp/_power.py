"""The pursuit's direction: a top eigenvector by shifted power iteration, then a BQP polish.

Each HBMP step solves the binary quadratic program (Cakir et al., Eq. 6)

    v_t = argmax_{v in {-1,+1}^n} v^T Q v,

``Q`` the masked residual (symmetric, zero diagonal), by its spectral relaxation (Eq. 7):
the eigenvector ``v*`` of the *algebraically largest* eigenvalue, binarised as
``v = sign(v*)`` (0 -> +1), optionally followed by a single-flip local search.

Power iteration converges to the eigenvalue of largest *magnitude* ``lambda_m``. When
its Rayleigh quotient is negative, a second run on ``Q - lambda_m I`` (eigenvalues
``lambda_i - lambda_m >= 0``, the top one ``lambda_max - lambda_m``) finds the
algebraically largest. ``lambda_m`` is the smallest shift that makes the spectrum
non-negative; a looser bound (Gershgorin's, say) would push the ratio of the top two
eigenvalues towards 1 and stall the iteration.

Matrices are never passed in: ``matvec(x) = Q x`` for one vector and
``column(i) = Q[:, i]`` are functions, so a residual ``R - sum_k alpha_k v_k v_k^T``
can stay implicit (``_pursuit``). Kernels take one start; ``top_eigenvector`` vmaps
them over random starts (under vmap the matrix-vector products become one matrix
product per iteration).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

MatVec = Callable[[jax.Array], jax.Array]


class PowerResult(NamedTuple):
  """A unit vector and its Rayleigh quotient (batched: a leading [num_restarts] axis)."""
  vector: jax.Array      # float32 [n], unit norm
  rayleigh: jax.Array    # float32 [], vector^T Q vector
  shift: jax.Array       # float32 [], shift of the second run (0 when none was needed)
  iterations: jax.Array  # int32 [], matrix-vector products over both runs


class LocalSearchResult(NamedTuple):
  """A binary vector after single-bit flips, with its cached product."""
  code: jax.Array        # float32 [n] in {-1, +1}
  q_code: jax.Array      # float32 [n], Q code (kept up to date by rank-one corrections)
  objective: jax.Array   # float32 [], code^T Q code
  flips: jax.Array       # int32 [], flips made


def _normalize(x: jax.Array) -> jax.Array:
  return x / jnp.maximum(jnp.linalg.norm(x), jnp.finfo(jnp.float32).tiny)


def power_iteration(matvec: MatVec, x0: jax.Array, shift: jax.Array, num_iters: int,
                    tol: float) -> tuple[jax.Array, jax.Array, jax.Array]:
  """Power iteration on ``Q - shift I`` from one start.

  ``x <- (Q - shift I) x / ||.||`` until ``||x_new -+ x|| < tol`` (the sign taken so a
  negative dominant eigenvalue, whose iterates alternate in sign, also converges) or
  ``num_iters`` updates.

  Args:
    matvec: ``x -> Q x`` for float32 [n].
    x0: float32 [n], any non-zero start.
    shift: float32 [].
    num_iters: the most updates (static or traced int).
    tol: stopping tolerance on the change of the unit vector.
  Returns:
    ``(x, q_x, num_matvecs)``: the last unit iterate ``x`` [n], ``Q x`` [n] (unshifted,
    so ``x . q_x`` is the Rayleigh quotient of ``Q``), and int32 [] products computed.
  """
  x = _normalize(x0)

  def cond(carry):
    _, _, it, delta = carry
    return (it <= num_iters) & (delta > tol)

  def body(carry):
    x, qx, it, _ = carry
    y = qx - shift * x
    norm = jnp.linalg.norm(y)
    x_new = jnp.where(norm > 0, y / jnp.where(norm > 0, norm, 1.0), x)
    sign = jnp.where(jnp.dot(x_new, x) >= 0, 1.0, -1.0)
    delta = jnp.where(norm > 0, jnp.linalg.norm(x_new - sign * x), 0.0)
    return x_new, matvec(x_new), it + 1, delta

  init = (x, matvec(x), jnp.int32(1), jnp.float32(jnp.inf))
  x, qx, it, _ = lax.while_loop(cond, body, init)
  return x, qx, it


def shifted_power_iteration(matvec: MatVec, x0: jax.Array, num_iters: int,
                            tol: float) -> PowerResult:
  """Eigenvector of the algebraically largest eigenvalue of symmetric ``Q``, one start.

  First plain power iteration (the largest-magnitude eigenvalue ``lambda_m``); when its
  Rayleigh quotient is negative, power iteration on ``Q - lambda_m I`` from the same
  start; otherwise the second run continues from the first one's vector with no shift.

  Args:
    matvec: ``x -> Q x`` for float32 [n]; ``Q`` symmetric.
    x0: float32 [n] start.
    num_iters: the most updates per run.
    tol: stopping tolerance (see ``power_iteration``).
  Returns:
    PowerResult of this start.
  """
  x1, qx1, it1 = power_iteration(matvec, x0, jnp.float32(0.0), num_iters, tol)
  lambda_m = jnp.dot(x1, qx1)
  shift = jnp.minimum(lambda_m, 0.0)
  start = jnp.where(lambda_m < 0, x0, x1)
  x2, qx2, it2 = power_iteration(matvec, start, shift, num_iters, tol)
  return PowerResult(x2, jnp.dot(x2, qx2), shift, it1 + it2)


def random_starts(key: jax.Array, num_restarts: int, n: int) -> jax.Array:
  """Gaussian starts: float32 [num_restarts, n]."""
  return jax.random.normal(key, (num_restarts, n), jnp.float32)


def top_eigenvector(matvec: MatVec, starts: jax.Array, num_iters: int,
                    tol: float) -> tuple[PowerResult, PowerResult]:
  """Shifted power iteration from several starts (vmapped), keeping the best.

  Args:
    matvec: ``x -> Q x`` for float32 [n]; ``Q`` symmetric.
    starts: float32 [num_restarts, n] (``random_starts``).
    num_iters: the most updates per run and start.
    tol: stopping tolerance.
  Returns:
    ``(best, every)``: the start with the largest Rayleigh quotient, and the results of
    all starts (fields with a leading [num_restarts] axis).
  """
  every = jax.vmap(lambda x0: shifted_power_iteration(matvec, x0, num_iters, tol))(starts)
  best = jnp.argmax(every.rayleigh)
  return jax.tree.map(lambda a: a[best], every), every


def binarize(x: jax.Array) -> jax.Array:
  """``sign(x)`` with 0 -> +1, as float32 in {-1, +1}."""
  return jnp.where(x >= 0, 1.0, -1.0).astype(jnp.float32)


def flip_gains(code: jax.Array, q_code: jax.Array) -> jax.Array:
  """Change of ``v^T Q v`` when bit i of ``v`` flips (``Q`` with zero diagonal).

  ``(v - 2 v_i e_i)^T Q (v - 2 v_i e_i) - v^T Q v = -4 v_i (Q v)_i``: float32 [n].
  """
  return -4.0 * code * q_code


def local_search(column: Callable[[jax.Array], jax.Array], code: jax.Array, q_code: jax.Array,
                 max_flips: int | jax.Array, rtol: float = 1e-5) -> LocalSearchResult:
  """Greedy single-bit flips while one raises ``v^T Q v`` (a BQP polish of Eq. 6).

  Each round flips the bit with the largest gain ``-4 v_i (Q v)_i`` and corrects the
  cached ``Q v`` by the rank-one update ``Q v <- Q v - 2 v_i Q[:, i]`` (``O(n)`` plus the
  cost of ``column``), until no gain exceeds ``rtol * max_i |(Q v)_i|`` (a float32 guard
  against flipping on rounding noise) or ``max_flips`` flips. The objective never
  decreases, and at the end no single flip raises it by more than the guard.

  Args:
    column: ``i -> Q[:, i]``, float32 [n], with ``Q[i, i] = 0``.
    code: float32 [n] in {-1, +1}.
    q_code: float32 [n], ``Q code``.
    max_flips: the most flips.
    rtol: relative gain threshold.
  Returns:
    LocalSearchResult.
  """
  def best_flip(v, qv):
    gains = flip_gains(v, qv)
    i = jnp.argmax(gains)
    return i, gains[i] > rtol * jnp.max(jnp.abs(qv))

  def cond(carry):
    _, _, flips, _, improving = carry
    return improving & (flips < max_flips)

  def body(carry):
    v, qv, flips, i, _ = carry
    qv = qv - 2.0 * v[i] * column(i)
    v = v.at[i].multiply(-1.0)
    return (v, qv, flips + 1, *best_flip(v, qv))

  init = (code, q_code, jnp.int32(0), *best_flip(code, q_code))
  code, q_code, flips, _, _ = lax.while_loop(cond, body, init)
  return LocalSearchResult(code, q_code, jnp.dot(code, q_code), flips)


def dense_operator(q: jax.Array) -> tuple[MatVec, Callable[[jax.Array], jax.Array]]:
  """``(matvec, column)`` of a dense symmetric ``q`` with its diagonal masked to zero.

  Args:
    q: float32 [n, n], symmetric.
  Returns:
    ``x -> M .* q x`` and ``i -> (M .* q)[:, i]`` with ``M`` zero on the diagonal.
  """
  q = jnp.asarray(q, jnp.float32)
  diag = jnp.diagonal(q)

  def matvec(x):
    return jnp.dot(q, x, precision=lax.Precision.HIGHEST) - diag * x

  def column(i):
    return q[i].at[i].set(0.0)

  return matvec, column
