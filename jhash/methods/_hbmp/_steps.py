"""Step sizes of the pursuit, and the residual norm, from small cached quantities.

All fits are on the off-diagonal entries (mask ``M``, zero diagonal), where
``||M .* v v^T||_F^2 = n^2 - n``. With ``R0 = M .* R`` and made codes ``v_1..v_t``:

* ``constant``: ``alpha_t = 1`` (plain Hamming distances; cannot fit every ``R``);
* ``line``: ``alpha_t = v_t^T Q v_t / (n^2 - n)``, the exact minimiser of
  ``||Q - alpha M .* v_t v_t^T||_F`` (Theorem 2: the residual never grows);
* ``regress``: refit every ``alpha_1..alpha_t`` by least squares (Eq. 9-10),

      alpha = argmin ||R0 - sum_k alpha_k M .* v_k v_k^T||_F^2 = G^+ c,
      G_kl = <M .* v_k v_k^T, M .* v_l v_l^T> = (v_k^T v_l)^2 - n,
      c_k  = <R0, v_k v_k^T> = v_k^T R0 v_k.

  The paper forms the ``(n^2 - n) x t`` matrix of ``vec(M .* v_k v_k^T)`` and solves it
  in ``O(t^2 n^2)``. Here ``c_t`` costs one product with ``R0`` (``O(n^2)``) and the new
  row of ``G`` ``O(t n)`` when bit ``t`` is made. ``regress_alphas`` solves from scratch
  (a Cholesky solve, ``O(t^3)``); the pursuit (``new_alphas``) keeps the inverse
  Cholesky factor and borders it with each bit (``extend_factor``, ``O(t^2)``), so its
  whole refit is ``O(n^2 + t n + t^2)`` per bit. ``G^+``, the pseudo-inverse, takes over
  when ``G`` is singular or nearly so (duplicate directions, or more bits than the
  ``(n^2 - n) / 2`` free entries) and gives the minimum-norm least-squares solution, as
  ``np.linalg.lstsq`` does; when the bits span every free entry (the fit is exact) the
  same solution comes from a smaller solve (``pair_alphas``).

The residual norm needs no residual either:
``||Q||_F^2 = ||R0||_F^2 - 2 alpha^T c + alpha^T G alpha``.

Buffers are full size (``b`` bits); entries of bits not yet made are zero and masked.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

#: HBMP's step-size rules (``step_size=``), in the order of their index in a state.
STEP_SIZES = ("constant", "line", "regress")


def masked_size(n: int) -> int:
  """``||M .* v v^T||_F^2 = n^2 - n``, the number of off-diagonal entries."""
  return n * n - n


def gram_row(codes: jax.Array, code: jax.Array, made: jax.Array) -> jax.Array:
  """Row of ``G`` for a new code: ``(v_k^T v)^2 - n`` for made bits, 0 elsewhere.

  Args:
    codes: float32 [n, b], the made codes (zero columns for bits not made).
    code: float32 [n] in {-1, +1}.
    made: bool [b].
  Returns:
    float32 [b].
  """
  n = codes.shape[0]
  overlap = jnp.dot(code, codes, precision=lax.Precision.HIGHEST)  # exact integers
  return jnp.where(made, overlap * overlap - n, 0.0)


def regress_alphas(gram: jax.Array, corr: jax.Array, made: jax.Array, n: int) -> jax.Array:
  """Least-squares step sizes of all made bits, ``alpha = G^+ c`` (Eq. 10).

  ``G`` and ``c`` are divided by ``n^2 - n`` (so ``G``'s diagonal is 1), the bits not
  made are given an identity block and a zero right-hand side (so their alphas are 0),
  and the symmetric pseudo-inverse drops eigenvalues below ``10 b eps`` of the largest.

  Args:
    gram: float32 [b, b], ``G`` on made bits.
    corr: float32 [b], ``c`` on made bits.
    made: bool [b].
    n: number of items.
  Returns:
    float32 [b], zero for bits not made.
  """
  scale = float(masked_size(n))
  both = made[:, None] & made[None, :]
  eye = jnp.eye(gram.shape[0], dtype=jnp.float32)
  g = jnp.where(both, gram / scale, eye)
  c = jnp.where(made, corr / scale, 0.0)
  return jnp.where(made, _psd_solve(g, c), 0.0)


# Cholesky pivots (squared) below this, with G's unit diagonal, send the solve to the
# pseudo-inverse: G is then singular or close to it.
_PIVOT_FLOOR = 1e-3


def _psd_solve(g: jax.Array, c: jax.Array) -> jax.Array:
  """``G^+ c`` for a symmetric PSD ``G`` with unit diagonal: float32 [b].

  A Cholesky solve (``O(b^3 / 3)``, a few microseconds) when every pivot is well above
  zero; otherwise (a singular or nearly singular ``G``) the symmetric pseudo-inverse,
  dropping eigenvalues below ``10 b eps`` of the largest. Only the branch taken runs.
  """
  hi = lax.Precision.HIGHEST
  chol = jnp.linalg.cholesky(g)
  pivots = jnp.diagonal(chol)
  ok = jnp.all(jnp.isfinite(chol)) & (jnp.min(pivots * pivots) > _PIVOT_FLOOR)

  def by_cholesky():
    y = jax.scipy.linalg.solve_triangular(chol, c, lower=True)
    return jax.scipy.linalg.solve_triangular(chol.T, y, lower=False)

  def by_pinv():
    return jnp.dot(jnp.linalg.pinv(g, hermitian=True), c, precision=hi)

  return lax.cond(ok, by_cholesky, by_pinv)


def extend_factor(
  inv_chol: jax.Array, row: jax.Array, bit: jax.Array, made_before: jax.Array, n: int
) -> tuple[jax.Array, jax.Array]:
  """Border the inverse Cholesky factor of ``G / (n^2 - n)`` with a new bit: ``O(b^2)``.

  ``L^-1`` is kept instead of refactoring ``G`` at every bit: with ``G``'s new row ``g``
  (unit diagonal after scaling), ``l = L^-1 g`` and ``d^2 = 1 - l^T l``, the factor gains
  the row ``(l^T, d)`` and its inverse the row ``(-l^T L^-1 / d, 1 / d)``. Matrix-vector
  products only: at 10 items a refactorisation and two triangular solves per bit were
  most of the cost of ``regress``.

  Args:
    inv_chol: float32 [b, b], ``L^-1`` on the made bits, the identity elsewhere.
    row: float32 [b], ``G``'s row of the new bit (any value at ``bit`` and on bits not made).
    bit: int32 [], the new bit's index (bits are made in order).
    made_before: bool [b], the bits made before it.
    n: number of items.
  Returns:
    ``(inv_chol, d2)``: the bordered ``L^-1`` [b, b] and the squared pivot ``d^2``
    (float32 []; at or below ``_PIVOT_FLOOR`` ``G`` is singular or nearly so).
  """
  hi = lax.Precision.HIGHEST
  g = jnp.where(made_before, row / float(masked_size(n)), 0.0)
  l = jnp.dot(inv_chol, g, precision=hi)
  d2 = 1.0 - jnp.dot(l, l, precision=hi)
  d = jnp.sqrt(jnp.maximum(d2, jnp.finfo(jnp.float32).tiny))
  unit = (jnp.arange(inv_chol.shape[0]) == bit).astype(jnp.float32)
  return inv_chol.at[bit].set((unit - jnp.dot(l, inv_chol, precision=hi)) / d), d2


def factored_alphas(inv_chol: jax.Array, corr: jax.Array, made: jax.Array, n: int) -> jax.Array:
  """``alpha = G^-1 c = L^-T L^-1 c`` from ``extend_factor``'s ``L^-1``: float32 [b]."""
  hi = lax.Precision.HIGHEST
  c = jnp.where(made, corr / float(masked_size(n)), 0.0)
  return jnp.dot(jnp.dot(inv_chol, c, precision=hi), inv_chol, precision=hi)


def pair_alphas(codes: jax.Array, affinity: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Minimum-norm least-squares alphas when the fit has as many bits as free entries.

  With ``Phi`` [m, b] the made codes' products ``v_ki v_kj`` on the ``m = n(n-1)/2``
  pairs ``i < j`` and ``r`` [m] the affinity there, ``G = 2 Phi^T Phi`` and
  ``c = 2 Phi^T r``. When ``Phi`` has full row rank (``b >= m`` bits that span every
  off-diagonal pattern: the fit is exact), the minimum-norm solution of ``G alpha = c``
  is ``Phi^T (Phi Phi^T)^-1 r``, ``G^+ c`` without the ``b x b`` eigendecomposition of the
  pseudo-inverse (a Cholesky factor of ``m x m`` instead).

  Args:
    codes: float32 [n, b], zero columns for bits not made.
    affinity: float32 [n, n].
  Returns:
    ``(alphas, ok)``: float32 [b] and whether ``Phi Phi^T`` was safely positive definite
    (every squared pivot, over its diagonal, above ``_PIVOT_FLOOR``).
  """
  hi = lax.Precision.HIGHEST
  rows, cols = np.triu_indices(codes.shape[0], 1)
  phi = codes[rows] * codes[cols]  # [m, b]
  k = jnp.dot(phi, phi.T, precision=hi)
  size = jnp.maximum(jnp.diagonal(k), 1.0)
  chol = jnp.linalg.cholesky(k / jnp.sqrt(size[:, None] * size[None, :]))
  ok = jnp.all(jnp.isfinite(chol)) & (jnp.min(jnp.diagonal(chol) ** 2) > _PIVOT_FLOOR)
  scaled = jax.scipy.linalg.cho_solve((chol, True), affinity[rows, cols] / jnp.sqrt(size))
  return jnp.dot(scaled / jnp.sqrt(size), phi, precision=hi), ok


def line_alpha(objective: jax.Array, n: int) -> jax.Array:
  """``alpha_t = v^T Q v / (n^2 - n)``, the exact line search along ``M .* v v^T``."""
  return objective / float(masked_size(n))


def residual_norm(
  affinity_norm: jax.Array, alphas: jax.Array, corr: jax.Array, gram: jax.Array
) -> jax.Array:
  """``||M .* (R - sum_k alpha_k v_k v_k^T)||_F`` from the cached ``G`` and ``c``.

  Args:
    affinity_norm: float32 [], ``||R0||_F``.
    alphas, corr: float32 [b] (zero for bits not made).
    gram: float32 [b, b] (zero for bits not made).
  Returns:
    float32 [] (rounding below zero clipped to 0).
  """
  fit = jnp.dot(alphas, jnp.dot(gram, alphas, precision=lax.Precision.HIGHEST))
  sq = affinity_norm**2 - 2.0 * jnp.dot(alphas, corr) + fit
  return jnp.sqrt(jnp.maximum(sq, 0.0))


class RegressFactor(NamedTuple):
  """What ``regress`` keeps between bits: the inverse Cholesky factor of ``G``."""

  inv_chol: jax.Array  # float32 [b, b], L^-1 of G / (n^2 - n) on made bits (``extend_factor``)
  factored: jax.Array  # bool [], every pivot so far above the floor (else G^+ from now on)


def new_factor(num_bits: int) -> RegressFactor:
  """The factor before any bit: the identity, no pivot failed."""
  return RegressFactor(jnp.eye(num_bits, dtype=jnp.float32), jnp.bool_(True))


def new_alphas(
  rule: jax.Array,
  alphas: jax.Array,
  bit: jax.Array,
  objective: jax.Array,
  gram: jax.Array,
  corr: jax.Array,
  made: jax.Array,
  n: int,
  factor: RegressFactor,
  codes: jax.Array,
  affinity: jax.Array,
) -> tuple[jax.Array, RegressFactor]:
  """Step sizes after bit ``bit`` was made.

  The rule is data (an index), so one compiled step serves all three rules; only the
  chosen branch runs. ``regress`` borders its factor (``extend_factor``) and solves with
  it while ``G`` stays positive definite; once a pivot fails (a singular ``G``: more bits
  than the ``n(n-1)/2`` free entries, or a repeated direction) it takes ``pair_alphas``
  where that applies (``n(n-1)/2 <= b``, a static choice) and ``G^+ c`` otherwise, the same
  minimum-norm solution as ``regress_alphas``.

  Args:
    rule: int32 [], index into ``STEP_SIZES`` ("constant", "line", "regress").
    alphas: float32 [b], before the step.
    bit: int32 [], the index of the new bit.
    objective: float32 [], ``v^T Q v`` of the new code on the residual before the step.
    gram, corr, made: ``G`` [b, b], ``c`` [b] and the made mask [b], the new bit included.
    n: number of items.
    factor: ``RegressFactor`` before the step (``new_factor`` at the start).
    codes: float32 [n, b], the made codes with the new one (zero columns for bits not made).
    affinity: float32 [n, n].
  Returns:
    ``(alphas float32 [b], factor)``.
  """

  def regress():
    inv_chol, d2 = extend_factor(factor.inv_chol, gram[bit], bit, made.at[bit].set(False), n)
    factored = factor.factored & (d2 > _PIVOT_FLOOR)  # NaN pivots fail too

    def singular():
      if n * (n - 1) // 2 > gram.shape[0]:
        return regress_alphas(gram, corr, made, n)
      by_pairs, ok = pair_alphas(codes, affinity)
      return lax.cond(ok, lambda: by_pairs, lambda: regress_alphas(gram, corr, made, n))

    new = lax.cond(factored, lambda: factored_alphas(inv_chol, corr, made, n), singular)
    # Once abandoned, the factor is never read again; keep the last good one rather than
    # one bordered by pivots of ~0 (it overflows to inf, a state fit refuses).
    kept = jnp.where(factored, inv_chol, factor.inv_chol)
    return new, RegressFactor(kept, factored)

  branches = (
    lambda: (alphas.at[bit].set(1.0), factor),
    lambda: (alphas.at[bit].set(line_alpha(objective, n)), factor),
    regress,
  )
  return lax.switch(rule, branches)


def rule_index(step_size: str) -> int:
  """Index of a step-size rule in ``STEP_SIZES``, or a ValueError naming ``step_size``."""
  if step_size not in STEP_SIZES:
    raise ValueError(
      f"step_size must be one of {', '.join(map(repr, STEP_SIZES))}; got {step_size!r}."
    )
  return STEP_SIZES.index(step_size)
