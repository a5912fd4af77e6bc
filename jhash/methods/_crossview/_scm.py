"""Semantic correlation maximisation, sequential (SCM-seq): supervised bits one at a time.

Zhang and Li, "Large-scale supervised multimodal hashing with semantic
correlation maximization", AAAI 2014. Labels give the semantic similarity of
items through their normalised label vectors ``l_i / ||l_i||`` (rows of ``L^``):

    S = 2 L^ L^^T - 1 1^T,    S_ij = 2 cos(l_i, l_j) - 1 in [-1, 1],

(class ids: ``+1`` for the same class, ``-1`` otherwise; an item without any
label is dissimilar, ``-1``, to every item). With centred features ``X_v``
[n, d_v] and ``K`` bits, SCM-seq learns bit ``t`` from the residual
``R_{t-1} = K S - sum_{k < t} b_x^k b_y^{kT}``, ``b_v^k = sign(X_v w_v^k)``:

    max_{w_x, w_y} w_x^T X^T R_{t-1} Y w_y   s.t.   w_v^T (X_v^T X_v / n + r_v I) w_v = 1,

the relaxation of ``min ||sign(X w_x) sign(Y w_y)^T - R_{t-1}||_F^2`` (the paper's
sequential problem; with the constraints ``||X w_x w_y^T Y^T||_F`` is constant).
Its solution is the top generalised eigenvector of

    [0, C_xy; C_yx, 0] w = lambda blockdiag(C_xx + r_x I, C_yy + r_y I) w,
    C_xy = X^T R_{t-1} Y / n,

a closed form per bit. The ``n x n`` matrix ``S`` is never formed (the paper's
trick): ``X^T S Y = 2 (X^T L^)(L^^T Y) - (X^T 1)(1^T Y)`` needs only the
``[d, C]`` products with the labels (for class ids, per-class feature sums), and
the residual is kept as its ``[d_x, d_y]`` cross products, updated by
``X^T R_t Y = X^T R_{t-1} Y - (X^T b_x^t)(b_y^{tT} Y)``.

Views: for ``V > 2`` the same problem over every pair of views,
``max sum_{v != u} w_v^T X_v^T R_{t-1} X_u w_u`` with the constraint summed
over views (one generalised eigenproblem, as CVH); for two views it is the
paper's. The ridge ``r_v = reg * tr(C_vv) / d_v`` keeps ``C_vv`` invertible
(value ours). Each ``w_v`` is scaled to unit variance on the training items
(the paper's constraint ``w_v^T X_v^T X_v w_v = n``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jhash import _checks
from jhash import _api
from jhash.methods._crossview import _common


class SCMState(NamedTuple):
  """SCM's per-view means and whiteners, the cross-view matrix and the bits learned so far."""

  means: tuple[jax.Array, ...]  # per view float32 [d_v], training means m_v
  whiteners: tuple[jax.Array, ...]  # per view float32 [d_v, d_v], (C_vv + r_v I)^{-1/2}
  cross: jax.Array  # float32 [D, D], X^T R_t X / n on cross-view blocks, 0 on
  #   same-view blocks (D = sum d_v)
  projections: tuple[jax.Array, ...]  # per view float32 [d_v, K], w_v^k; columns >= step are 0
  eigenvalues: jax.Array  # float32 [K], lambda of each learned bit (0 until learned)
  step: jax.Array  # int32 [], bits learned so far
  trained: _api.Trained | None = None  # what it was trained on (set by jhash.init / fit)


def normalized_labels(labels) -> jax.Array:
  """``L^``, each row ``l_i / ||l_i||`` (zero for an item with no label): float32 [n, C]."""
  lab = jnp.asarray(labels, jnp.float32)
  norm = jnp.sqrt(jnp.sum(lab * lab, axis=1))
  return lab / jnp.where(norm > 0, norm, 1.0)[:, None]


def semantic_gram(xcat: jax.Array, labels) -> jax.Array:
  """``X^T S X`` for ``S = 2 L^ L^^T - 1 1^T`` without an ``n x n`` matrix: float32 [D, D].

  With multi-hot labels this costs ``O(n D C + C D^2)``. With class ids the
  number of classes is not known under ``jit``, so the per-class sums are
  formed in ``n`` segments (most of them empty) and the cost is ``O(n D^2)``;
  pass one-hot bool labels ``[n, C]`` instead for the cheaper form (same ``S``).

  Args:
    xcat: float32 [n, D], the features (all views side by side).
    labels: int class ids [n] or multi-hot bool [n, C].
  """
  n = xcat.shape[0]
  total = jnp.sum(xcat, axis=0)
  if jnp.ndim(labels) == 1:
    # L^ is one-hot: the rows of L^^T X are the per-class sums of the features
    # ([n, D]; the rows past the number of classes are 0).
    _, cls = jnp.unique(jnp.asarray(labels), return_inverse=True, size=n)
    per_class = jax.ops.segment_sum(xcat, cls.reshape(n), num_segments=n)
  else:
    per_class = normalized_labels(labels).T @ xcat  # [C, D]
  return 2.0 * per_class.T @ per_class - total[:, None] * total[None, :]


def _read_labels(batch: dict):
  labels = batch.get("labels")
  if labels is None:
    raise ValueError(
      "labels are required to train SCM (class ids int [n] or multi-hot bool "
      "[n, C]); batch['labels'] is missing or None."
    )
  _checks.label_array(labels, "labels", num_items=_checks.batch(batch))
  _checks.labelled_rows(labels)
  return labels


def scm(num_bits: int, *, reg: float = 1e-4) -> _api.HashingMethod:
  """SCM-seq (Zhang and Li, AAAI 2014): supervised cross-view bits, one per step.

  Args:
    num_bits: K (any number: each bit solves its own eigenproblem on the residual).
    reg: relative ridge ``r_v = reg * tr(C_vv) / d_v`` on each view's covariance.
  Returns:
    HashingMethod named ``"scm"``. ``init(key, batch)`` computes the semantic
    cross-covariance ``X^T (K S) X / n`` (the key is unused: SCM is
    deterministic); ``update`` learns the next bit (closed form) and subtracts
    its codes from the residual; ``num_steps = K`` (updates after the K-th
    leave the state unchanged). Metrics: ``eigenvalue`` (the bit's ``lambda``,
    0 past K), ``cross_norm`` (``||X^T R_t X||_F / n`` over the cross-view
    blocks after the step). ``batch``: two or more aligned views, all
    observed, and ``labels`` (class ids int ``[n]`` or multi-hot bool
    ``[n, C]``). ``encode`` as CVH's: one observed view, its own hash
    function; several, the sign of the mean of their projections.

  Example: image-like queries retrieve text-like items of their class.
    >>> import jax, numpy as np, jhash
    >>> rng = np.random.default_rng(0)
    >>> labels = np.arange(200) % 4
    >>> a, b = ((3 * rng.normal(size=(4, d)))[labels] + rng.normal(size=(200, d)) for d in (8, 5))
    >>> method = jhash.methods.scm(8)
    >>> state, history = jhash.fit(method, jax.random.key(0), {"views": (a, b), "labels": labels},
    ...                            progress=False)
    >>> history["eigenvalue"].shape
    (8,)
    >>> image = jhash.encode(method, state, {"views": (a, None)})
    >>> text = jhash.encode(method, state, {"views": (None, b)})
    >>> jhash.metrics.mean_average_precision(image, text, labels, labels) > 0.9
    True
  """
  num_bits = _api.check_num_bits(num_bits)
  _checks.scalar(reg, "reg", low=0)
  reg = _common.check_nonneg_float(reg, "reg")

  def init(key, batch):
    del key
    views = _common.training_views(batch, "SCM")
    labels = _read_labels(batch)
    centred, means = _common.centre(views)
    dims = [int(x.shape[1]) for x in centred]
    xcat = jnp.concatenate(centred, axis=1)
    mask = jnp.asarray(_common.cross_view_mask(dims))
    cross = jnp.where(mask, num_bits * semantic_gram(xcat, labels) / xcat.shape[0], 0.0)
    return SCMState(
      means,
      _common.whiteners(centred, reg),
      cross,
      tuple(jnp.zeros((d, num_bits), jnp.float32) for d in dims),
      jnp.zeros((num_bits,), jnp.float32),
      jnp.zeros((), jnp.int32),
    )

  def training_centred(state, batch):
    views = _common.training_views(batch, "SCM")
    _check_views_match(state, views)
    return tuple(x - m[None, :] for x, m in zip(views, state.means))

  def update(state, batch, key):
    del key
    centred = training_centred(state, batch)
    dims = [int(x.shape[1]) for x in centred]
    n = centred[0].shape[0]
    z, lam = _common.top_generalized(state.cross, state.whiteners, 1)
    w = _common.unit_variance(_common.split(z, dims), centred)  # per view [d_v, 1]
    codes = [jnp.where(x @ wv >= 0, 1.0, -1.0) for x, wv in zip(centred, w)]
    g = jnp.concatenate([x.T @ b for x, b in zip(centred, codes)], axis=0)  # [D, 1]
    mask = jnp.asarray(_common.cross_view_mask(dims))
    active = state.step < num_bits
    t = jnp.minimum(state.step, num_bits - 1)
    cross = jnp.where(active & mask, state.cross - (g @ g.T) / n, state.cross)
    projections = tuple(
      jnp.where(active, p.at[:, t].set(wv[:, 0]), p) for p, wv in zip(state.projections, w)
    )
    eigenvalue = jnp.where(active, lam[0], 0.0)
    new = state._replace(
      cross=cross,
      projections=projections,
      eigenvalues=jnp.where(active, state.eigenvalues.at[t].set(lam[0]), state.eigenvalues),
      step=state.step + active.astype(jnp.int32),
    )
    return new, {"eigenvalue": eigenvalue, "cross_norm": jnp.sqrt(jnp.sum(cross * cross))}

  def encode(state, batch):
    return _common.encode(state.means, state.projections, batch, "SCM")

  def check_batch(batch):
    views = _common.training_views(batch, "SCM")
    _read_labels(batch)
    return int(views[0].shape[0])

  return _api.HashingMethod(
    init,
    encode,
    num_bits,
    "scm",
    _api.one_phase("scm", update, num_steps=num_bits),
    check_batch=check_batch,
    closed_form=True,
  )


def _check_views_match(state: SCMState, views) -> None:
  dims = [int(m.shape[0]) for m in state.means]
  got = [int(x.shape[1]) for x in views]
  if got != dims:
    raise ValueError(
      f"views must have the feature dimensions SCM was initialised with, {dims}; got {got}."
    )
