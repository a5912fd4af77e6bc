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
  row of ``G`` ``O(t n)`` when bit ``t`` is made, and the solve ``O(t^3)``: the whole
  refit is ``O(n^2 + t n + t^3)`` per bit (a Cholesky solve; ``G^+``, the
  pseudo-inverse, when ``G`` is near singular). ``G^+`` gives the
  minimum-norm least-squares solution when ``G`` is singular (duplicate directions, or
  more bits than the ``(n^2 - n) / 2`` free entries), as ``np.linalg.lstsq`` does.

The residual norm needs no residual either:
``||Q||_F^2 = ||R0||_F^2 - 2 alpha^T c + alpha^T G alpha``.

Buffers are full size (``b`` bits); entries of bits not yet made are zero and masked.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

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
  overlap = jnp.dot(code, codes, precision=lax.Precision.HIGHEST)   # exact integers
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


def line_alpha(objective: jax.Array, n: int) -> jax.Array:
  """``alpha_t = v^T Q v / (n^2 - n)``, the exact line search along ``M .* v v^T``."""
  return objective / float(masked_size(n))


def residual_norm(affinity_norm: jax.Array, alphas: jax.Array, corr: jax.Array,
                  gram: jax.Array) -> jax.Array:
  """``||M .* (R - sum_k alpha_k v_k v_k^T)||_F`` from the cached ``G`` and ``c``.

  Args:
    affinity_norm: float32 [], ``||R0||_F``.
    alphas, corr: float32 [b] (zero for bits not made).
    gram: float32 [b, b] (zero for bits not made).
  Returns:
    float32 [] (rounding below zero clipped to 0).
  """
  fit = jnp.dot(alphas, jnp.dot(gram, alphas, precision=lax.Precision.HIGHEST))
  sq = affinity_norm ** 2 - 2.0 * jnp.dot(alphas, corr) + fit
  return jnp.sqrt(jnp.maximum(sq, 0.0))


def new_alphas(rule: jax.Array, alphas: jax.Array, bit: jax.Array, objective: jax.Array,
               gram: jax.Array, corr: jax.Array, made: jax.Array, n: int) -> jax.Array:
  """Step sizes after bit ``bit`` was made.

  The rule is data (an index), so one compiled step serves all three rules; only the
  chosen branch runs.

  Args:
    rule: int32 [], index into ``STEP_SIZES`` ("constant", "line", "regress").
    alphas: float32 [b], before the step.
    bit: int32 [], the index of the new bit.
    objective: float32 [], ``v^T Q v`` of the new code on the residual before the step.
    gram, corr, made: ``G`` [b, b], ``c`` [b] and the made mask [b], the new bit included.
    n: number of items.
  Returns:
    float32 [b].
  """
  branches = (lambda: alphas.at[bit].set(1.0),
              lambda: alphas.at[bit].set(line_alpha(objective, n)),
              lambda: regress_alphas(gram, corr, made, n))
  return lax.switch(rule, branches)


def rule_index(step_size: str) -> int:
  """Index of a step-size rule in ``STEP_SIZES``, or a ValueError naming ``step_size``."""
  if step_size not in STEP_SIZES:
    raise ValueError(f"step_size must be one of {', '.join(map(repr, STEP_SIZES))}; "
                     f"got {step_size!r}.")
  return STEP_SIZES.index(step_size)
