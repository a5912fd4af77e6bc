"""ADSH: the asymmetric loss between network outputs and database codes, and its code step.

Jiang and Li, "Asymmetric Deep Supervised Hashing", AAAI 2018. Only the sampled query
items ``Omega`` go through the network, ``u_i = tanh(F(x_i))``; the database items ``j``
get codes ``v_j`` in {-1, +1} directly, learned by discrete steps. With ``S~`` in {-1, +1}
and ``idx(i)`` the database row of query item ``i`` (the queries are sampled from the
database), the objective is

    J(U, V) = sum_{i in Omega} sum_j (u_i^T v_j - K S~_ij)^2
              + gamma sum_{i in Omega} ||v_idx(i) - u_i||^2.

Training alternates a network step on ``U`` (``adsh_loss``, V fixed) and a discrete step on
``V`` (``adsh_update_codes``, U fixed), which minimises ``J`` over one column of ``V`` at a
time in closed form:

    V_k = -sign(2 V_{-k} U_{-k}^T U_k + Qbar_k),   Qbar = -2 K S~^T U - 2 gamma Ubar,

where ``V_{-k}``, ``U_{-k}`` drop column ``k`` and ``Ubar`` [n, K] holds ``u_i`` at row
``idx(i)`` and 0 elsewhere. ``gamma = 200`` is the paper's (and the authors' code's) value.
The authors' PyTorch code divides ``J`` by the number of pairs; so does ``adsh_loss``.
It also replaces the dissimilar entries of ``S~`` by ``-|S_1| / |S_0|`` (a "soft
constraint" absent from the paper); ``adsh_update_codes`` takes ``S~`` as given, so either
can be passed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np

from jhash import _checks


def adsh_loss(
  u: jax.Array,
  v: jax.Array,
  similarity: jax.Array,
  weights: jax.Array,
  *,
  gamma: float = 200.0,
  own_codes: jax.Array | None = None,
) -> jax.Array:
  """ADSH's objective as a function of the network outputs, the codes held fixed.

      t_i = tanh(u_i),   c_j = sign(v_j) (no gradient),   S~_ij = 2 s_ij - 1,
      L = (sum_ij w_ij (t_i^T c_j - K S~_ij)^2 + gamma sum_i ||o_i - t_i||^2) / sum_ij w_ij,

  with ``o_i`` the database code of item ``i`` (``own_codes``). With unit weights over the
  pairs of ``b`` sampled items and ``n`` database codes this is the paper's ``J`` divided by
  ``b n``, as in the authors' code. ``v`` holds the database codes (in {-1, +1}, which
  ``sign`` leaves unchanged); for in-batch pairs (``jhash.methods.pairwise`` passes the
  minibatch's raw outputs as ``v``) the minibatch's current codes ``sign(u)`` stand in for
  both the database codes and ``own_codes``. Gradients flow through ``u`` only, as in the
  paper's network step.

  Args:
    u: float [b, K], the minibatch's raw outputs ``F(x)``.
    v: float [m, K], the database codes, or raw outputs whose signs are the codes.
    similarity: float [b, m] in {0, 1}.
    weights: float [b, m], pair weights (0 for pairs that do not count).
    gamma: weight of the quantisation term (the paper: 200).
    own_codes: float [b, K] in {-1, +1}, ``V[idx(i)]`` (None: ``sign(u)``).
  Returns:
    float32 [].
  """
  for name, a in (("u", u), ("v", v), ("similarity", similarity), ("weights", weights)):
    _checks.rank(a, 2, name)
  t = jnp.tanh(u)
  codes = lax.stop_gradient(_sign(v))
  own = lax.stop_gradient(_sign(u) if own_codes is None else own_codes.astype(jnp.float32))
  error = t @ codes.T - u.shape[1] * (2.0 * similarity - 1.0)
  quant = jnp.sum(jnp.square(own - t))
  return (jnp.sum(weights * jnp.square(error)) + gamma * quant) / jnp.maximum(
    jnp.sum(weights), 1e-12
  )


def _sign(x):
  return jnp.where(x >= 0, 1.0, -1.0)


def adsh_objective(
  codes: jax.Array,
  outputs: jax.Array,
  s_tilde: jax.Array,
  sampled_index: jax.Array,
  gamma: float = 200.0,
) -> jax.Array:
  """The paper's ``J(U, V) = ||U V^T - K S~||_F^2 + gamma ||V[idx] - U||_F^2`` (a sum, not a mean).

  Args:
    codes: float [n, K] in {-1, +1}, ``V``.
    outputs: float [b, K], ``U = tanh(F(x))`` of the sampled items.
    s_tilde: float [b, n], ``S~`` between the sampled items and the database.
    sampled_index: int [b], the database rows ``idx(i)`` of the sampled items.
    gamma: the quantisation weight.
  Returns:
    float32 [].
  """
  k = codes.shape[1]
  pair = jnp.sum(jnp.square(outputs @ codes.T - k * s_tilde))
  return pair + gamma * jnp.sum(jnp.square(codes[sampled_index] - outputs))


def adsh_update_codes(
  codes: jax.Array,
  outputs: jax.Array,
  s_tilde: jax.Array,
  sampled_index: jax.Array,
  gamma: float = 200.0,
) -> jax.Array:
  """ADSH's discrete step: each column of ``V`` in turn set to its closed-form minimiser.

  With the other columns fixed, ``J`` is linear in column ``k`` (``||V_k||^2 = n`` is
  constant): ``J = V_k^T (2 V_{-k} U_{-k}^T U_k + Qbar_k) + const``, minimised entry by
  entry by ``V_k = -sign(2 V_{-k} U_{-k}^T U_k + Qbar_k)`` (an entry whose coefficient is
  exactly 0 takes +1). ``J`` never rises. ``Ubar`` adds ``u_i`` at row ``idx(i)``: a row
  sampled twice gets both, as the sum over ``i`` in ``J`` asks.

  ``2 V_{-k} U_{-k}^T U_k = 2 (V G_k - V_k G_kk)`` with ``G = U^T U`` [K, K] computed
  once: each column costs one ``[n, K]`` matrix-vector product.

  Args:
    codes: float [n, K] in {-1, +1}, ``V`` before the step.
    outputs: float [b, K], ``U = tanh(F(x))`` of the sampled items.
    s_tilde: float [b, n], ``S~`` between the sampled items and the database.
    sampled_index: int [b], the database rows ``idx(i)`` of the sampled items.
    gamma: the quantisation weight (the paper: 200).
  Returns:
    float32 [n, K] in {-1, +1}, ``V`` after one sweep over the columns.
  """
  _checks.rank(codes, 2, "codes", "[n, K]")
  _checks.rank(outputs, 2, "outputs", "[b, K]")
  _checks.rank(s_tilde, 2, "s_tilde", "[b, n]")
  _checks.rank(sampled_index, 1, "sampled_index", "[b]")
  (n, k), b = np.shape(codes), np.shape(outputs)[0]
  if np.shape(outputs)[1] != k or np.shape(s_tilde) != (b, n) or np.shape(sampled_index) != (b,):
    raise ValueError(
      f"expected codes [n, K], outputs [b, K], s_tilde [b, n] and sampled_index "
      f"[b]; got codes {np.shape(codes)}, outputs {np.shape(outputs)}, s_tilde "
      f"{np.shape(s_tilde)}, sampled_index {np.shape(sampled_index)}."
    )
  v = jnp.asarray(codes, jnp.float32)
  u = jnp.asarray(outputs, jnp.float32)
  # Full float32 products: each code is the sign of a sum, which reduced-precision
  # accelerator matmuls (TF32, bfloat16 passes) could flip near 0.
  dot = lambda a, c: jnp.matmul(a, c, precision=lax.Precision.HIGHEST)
  ubar = jnp.zeros_like(v).at[sampled_index].add(u)
  qbar = -2.0 * k * dot(jnp.asarray(s_tilde, jnp.float32).T, u) - 2.0 * gamma * ubar
  gram = dot(u.T, u)

  def column(j, v):
    coefficient = 2.0 * (dot(v, gram[:, j]) - v[:, j] * gram[j, j]) + qbar[:, j]
    return v.at[:, j].set(jnp.where(coefficient > 0, -1.0, 1.0))

  return lax.fori_loop(0, k, column, v)
