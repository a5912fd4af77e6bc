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

**Tiny problems, the same iterates in closed form.** With ``Q = U diag(lambda) U^T``,
the ``j``-th iterate of power iteration on ``Q - s I`` from ``x0`` is
``U (c .* (lambda - s)^j) / ||.||`` with ``c = U^T x0``. ``dense_top_eigenvector``
takes one ``eigh`` of ``Q`` and evaluates every iterate of both runs this way at once,
stopping rule and shift included: the same vector, Rayleigh quotient, shift and count
of products as ``top_eigenvector`` up to float32 rounding, and no loop. A degenerate
top eigenvalue is no exception: the iterates (both ways) tend to the start's
projection onto its eigenspace, and an unconverged run (close eigenvalues, few
iterations) stops at the same mixture. Where the two disagree is where rounding
decides: a component of the vector within rounding of 0 (its sign), or a change of
the iterate within rounding of ``tol`` (one more or one fewer product). ``eigh`` costs
``O(n^3)``, so this pays only for small ``n`` (``_pursuit`` chooses by size); there it
replaces two ``while`` loops of ``O(n^2)`` products, whose per-iteration overhead is
the whole cost when ``n`` is 10.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

MatVec = Callable[[jax.Array], jax.Array]


class PowerResult(NamedTuple):
  """A unit vector and its Rayleigh quotient (batched: a leading [num_restarts] axis)."""

  vector: jax.Array  # float32 [n], unit norm
  rayleigh: jax.Array  # float32 [], vector^T Q vector
  shift: jax.Array  # float32 [], shift of the second run (0 when none was needed)
  iterations: jax.Array  # int32 [], matrix-vector products over both runs


class LocalSearchResult(NamedTuple):
  """A binary vector after single-bit flips, with its cached product."""

  code: jax.Array  # float32 [n] in {-1, +1}
  q_code: jax.Array  # float32 [n], Q code (kept up to date by rank-one corrections)
  objective: jax.Array  # float32 [], code^T Q code
  flips: jax.Array  # int32 [], flips made


def _normalize(x: jax.Array) -> jax.Array:
  return x / jnp.maximum(jnp.linalg.norm(x), jnp.finfo(jnp.float32).tiny)


def power_iteration(
  matvec: MatVec, x0: jax.Array, shift: jax.Array, num_iters: int, tol: float
) -> tuple[jax.Array, jax.Array, jax.Array]:
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


def shifted_power_iteration(
  matvec: MatVec, x0: jax.Array, num_iters: int, tol: float
) -> PowerResult:
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


def top_eigenvector(
  matvec: MatVec, starts: jax.Array, num_iters: int, tol: float
) -> tuple[PowerResult, PowerResult]:
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


def eigenbasis_power_iteration(
  eigenvalues: jax.Array, coef: jax.Array, shift: jax.Array, num_iters: int, tol: float
) -> tuple[jax.Array, jax.Array]:
  """``power_iteration`` in the eigenbasis of ``Q``, every iterate in closed form.

  The iterate after ``j`` updates is ``x_j = c .* d^j / ||c .* d^j||``, with
  ``c = x0 / ||x0||`` in the eigenbasis and ``d = (lambda - shift) / max |lambda - shift|``
  (so no power overflows). All ``num_iters`` iterates are formed at once; the result is
  the first whose change ``||x_j -+ x_{j-1}||`` is at most ``tol``, or the last, as
  ``power_iteration`` stops.

  Args:
    eigenvalues: float32 [n], ``lambda``.
    coef: float32 [n], the start ``U^T x0`` (any non-zero vector).
    shift: float32 [].
    num_iters: the most updates (static int).
    tol: stopping tolerance on the change of the unit vector.
  Returns:
    ``(x, num_matvecs)``: the last unit iterate in the eigenbasis, float32 [n], and the
    int32 [] products ``power_iteration`` computes for it.
  """
  gap = eigenvalues - shift
  ratio = gap / jnp.maximum(jnp.max(jnp.abs(gap)), jnp.finfo(jnp.float32).tiny)
  x0 = _normalize(coef)

  # Every power at once, ``|d|^j`` with the sign of ``d^j``: one fused kernel, where a
  # loop of products paid a few microseconds of overhead per update at 10 items.
  j = jnp.arange(1, num_iters + 1)[:, None]
  negative = (j % 2 == 1) & (ratio[None, :] < 0)
  magnitude = jnp.exp(j.astype(jnp.float32) * jnp.log(jnp.abs(ratio))[None, :])
  ys = x0[None, :] * jnp.where(negative, -magnitude, magnitude)  # [num_iters, n], updates 1..
  norms = jnp.linalg.norm(ys, axis=1)
  xs = ys / jnp.where(norms > 0, norms, 1.0)[:, None]
  previous = jnp.concatenate([x0[None, :], xs[:-1]])
  sign = jnp.where(jnp.sum(xs * previous, axis=1) >= 0, 1.0, -1.0)
  delta = jnp.where(norms > 0, jnp.linalg.norm(xs - sign[:, None] * previous, axis=1), 0.0)
  stops = delta <= tol
  last = jnp.where(jnp.any(stops), jnp.argmax(stops), num_iters - 1)
  x = jnp.where(norms[last] > 0, xs[last], previous[last])  # Q x = shift x: x is kept
  return x, (last + 2).astype(jnp.int32)


def eigenbasis_shifted_power_iteration(
  eigenvalues: jax.Array, coef: jax.Array, num_iters: int, tol: float
) -> PowerResult:
  """``shifted_power_iteration`` in the eigenbasis of ``Q`` (one start, no loop).

  Args:
    eigenvalues: float32 [n], ``lambda``.
    coef: float32 [n], the start ``U^T x0``.
    num_iters: the most updates per run (static int).
    tol: stopping tolerance.
  Returns:
    PowerResult of this start, its ``vector`` in the eigenbasis (``U^T x``).
  """
  x1, it1 = eigenbasis_power_iteration(eigenvalues, coef, jnp.float32(0.0), num_iters, tol)
  lambda_m = jnp.dot(x1 * x1, eigenvalues)
  shift = jnp.minimum(lambda_m, 0.0)
  start = jnp.where(lambda_m < 0, coef, x1)
  x2, it2 = eigenbasis_power_iteration(eigenvalues, start, shift, num_iters, tol)
  return PowerResult(x2, jnp.dot(x2 * x2, eigenvalues), shift, it1 + it2)


def dense_top_eigenvector(
  q: jax.Array, starts: jax.Array, num_iters: int, tol: float
) -> tuple[PowerResult, PowerResult]:
  """``top_eigenvector`` of a dense ``Q`` by one ``eigh``: the same results, no loop.

  Both runs of every start are evaluated in the eigenbasis
  (``eigenbasis_shifted_power_iteration``, vmapped over starts); see the module
  docstring for where the results can differ from ``top_eigenvector``'s.

  Args:
    q: float32 [n, n], symmetric (its diagonal is used as given).
    starts: float32 [num_restarts, n] (``random_starts``).
    num_iters: the most updates per run and start (static int).
    tol: stopping tolerance.
  Returns:
    ``(best, every)`` as ``top_eigenvector`` gives them.
  """
  eigenvalues, basis = jnp.linalg.eigh(q)
  hi = lax.Precision.HIGHEST
  coefs = jnp.dot(starts, basis, precision=hi)  # [r, n], U^T x0
  every = jax.vmap(lambda c: eigenbasis_shifted_power_iteration(eigenvalues, c, num_iters, tol))(
    coefs
  )
  every = every._replace(vector=jnp.dot(every.vector, basis.T, precision=hi))
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


def local_search(
  column: Callable[[jax.Array], jax.Array],
  code: jax.Array,
  q_code: jax.Array,
  max_flips: int | jax.Array,
  rtol: float = 1e-5,
) -> LocalSearchResult:
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
