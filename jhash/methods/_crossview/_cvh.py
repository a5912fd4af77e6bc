"""Cross-view hashing (CVH): per-view projections that agree across views, from one eigenproblem.

Kumar and Udupa, "Learning hash functions for cross-view similarity search",
IJCAI 2011. Item ``i`` has views ``x_i^v``; bit codes ``y_i^v = sign(A_v^T x_i^v)``
(centred features). CVH minimises the similarity-weighted Hamming distance
between the codes of items and of their views,

    sum_ij W_ij [ sum_v d(y_i^v, y_j^v) + sum_{v < u} d(y_i^v, y_j^u) ],

under balance and bit-decorrelation constraints, relaxed to the real
projections ``A_v^T x^v``. Implemented here: the paper's form for aligned views
without further similarity, ``W = I`` (an item is similar to itself only: its
views must get the same code), so the within-view terms vanish and the relaxed
problem is

    min sum_i sum_{v < u} ||A_v^T x_i^v - A_u^T x_i^u||^2
    s.t. sum_v A_v^T (C_vv + r_v I) A_v = I,

``C_vu = X_v^T X_u / n``. With the constraint the objective is a constant minus
``sum_{v != u} tr(A_v^T C_vu A_u)``, so the columns of ``A = [A_1; ...; A_V]``
are the top-``K`` solutions of the generalised eigenproblem

    [C_vu]_{v != u} a = lambda blockdiag(C_vv + r_v I) a.

For two views this is canonical correlation analysis (``lambda`` the canonical
correlations), regularised by the ridge ``r_v = reg * tr(C_vv) / d_v`` (ours,
for the well-posedness of ``C_vv^{-1}``; ``reg = 0`` is the paper's problem).
The constraint summed over views is the relaxation under which the problem is
one eigenproblem; for two views its solutions also meet each view's constraint.
Labels are not used (the supervised ``W`` is not implemented).

The solution is closed form: ``init`` computes it and ``update`` is a no-op
(``num_steps = 0``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jhash import _api
from jhash import _checks
from jhash.methods._crossview import _common


class CVHState(NamedTuple):
  """CVH's per-view training means and projections, and each bit's eigenvalue."""

  means: tuple[jax.Array, ...]  # per view float32 [d_v], training means m_v
  projections: tuple[jax.Array, ...]  # per view float32 [d_v, K], A_v, unit-variance columns
  eigenvalues: jax.Array  # float32 [K], lambda of each bit, descending
  trained: _api.Trained | None = None  # what it was trained on (set by jhash.init / fit)


def cvh_projections(views, num_bits: int, reg: float):
  """CVH's closed form on training views (float32 ``[n, d_v]`` each).

  Returns:
    ``(means, projections, eigenvalues)`` as in ``CVHState``.
  """
  centred, means = _common.centre(views)
  dims = [int(x.shape[1]) for x in centred]
  xcat = jnp.concatenate(centred, axis=1)
  cov = xcat.T @ xcat / xcat.shape[0]
  cross = jnp.where(jnp.asarray(_common.cross_view_mask(dims)), cov, 0.0)
  z, lambdas = _common.top_generalized(cross, _common.whiteners(centred, reg), num_bits)
  projections = _common.unit_variance(_common.split(z, dims), centred)
  return means, projections, lambdas


def cvh(num_bits: int, *, reg: float = 1e-4) -> _api.HashingMethod:
  """Cross-view hashing (Kumar and Udupa, IJCAI 2011) with ``W = I`` (module docstring).

  Args:
    num_bits: K; at most the smallest view dimension (one canonical pair per bit).
    reg: relative ridge ``r_v = reg * tr(C_vv) / d_v`` on each view's covariance.
  Returns:
    HashingMethod named ``"cvh"``. ``init(key, batch)`` solves the eigenproblem
    (the key is unused; the result is deterministic); ``update`` returns the state
    unchanged and no metrics; ``num_steps`` is 0. ``batch["views"]``: two or more
    aligned views, all observed, float ``[n, d_v]``. ``encode`` hashes from the
    observed views (one: its own ``sign(A_v^T (x - m_v))``; several: the sign of
    the mean of their projections; ``None`` marks an unobserved view).

  Example: two views of one hidden signal; each view alone gives nearly the same codes.
    >>> import jax, numpy as np, jhash
    >>> rng = np.random.default_rng(0)
    >>> hidden = rng.normal(size=(300, 4))
    >>> a, b = (hidden @ rng.normal(size=(4, d)) + 0.1 * rng.normal(size=(300, d)) for d in (10, 6))
    >>> method = jhash.methods.cvh(4)
    >>> state = jhash.init(method, jax.random.key(0), {"views": (a, b)})
    >>> from_a = jhash.encode(method, state, {"views": (a, None)})
    >>> from_b = jhash.encode(method, state, {"views": (None, b)})
    >>> from_a.shape, bool(np.mean(np.asarray(from_a) == np.asarray(from_b)) > 0.9)
    ((300, 4), True)
  """
  num_bits = _api.check_num_bits(num_bits)
  _checks.scalar(reg, "reg", low=0)
  reg = _common.check_nonneg_float(reg, "reg")

  def init(key, batch):
    del key
    views = _common.training_views(batch, "CVH")
    _common.check_num_bits_per_view(num_bits, views, "CVH")
    return CVHState(*cvh_projections(views, num_bits, reg))

  def update(state, batch, key):
    del batch, key
    return state, {}

  def encode(state, batch):
    return _common.encode(state.means, state.projections, batch, "CVH")

  def check_batch(batch):
    views = _common.training_views(batch, "CVH")
    _common.check_num_bits_per_view(num_bits, views, "CVH")
    return int(views[0].shape[0])

  return _api.HashingMethod(
    init,
    encode,
    num_bits,
    "cvh",
    _api.one_phase("cvh", update, num_steps=0),
    check_batch=check_batch,
    closed_form=True,
  )
