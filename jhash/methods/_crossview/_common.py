"""Pieces the linear cross-view hashing baselines share: checks, centring, eigenproblems, codes.

All three baselines (CVH, SCM, CMFH) hash view ``v`` of an item with a linear
function of its centred features,

    h_v(x) = sign(A_v^T (x - m_v)),    A_v float32 [d_v, K],  m_v the training mean,

and encode an item from the views it has: one observed view gives that view's
hash function; several give the sign of the mean of their real-valued
projections ``(1 / |O|) sum_{v in O} A_v^T (x_v - m_v)``. CVH and SCM scale each
column of ``A_v`` to unit variance on the training items (their papers'
per-view constraints), so no view outweighs another in that mean; CMFH's
projections all estimate the same latent factors, on one scale already.

CVH and SCM solve generalised symmetric eigenproblems over the concatenated
views, ``M z = lambda D z`` with ``M`` the cross-view blocks of a covariance
(diagonal blocks zero) and ``D = blockdiag(C_vv + reg I)``; ``top_generalized``
solves them by whitening each view, ``D^{-1/2} M D^{-1/2} u = lambda u``,
``z = D^{-1/2} u``.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jhash import _checks
from jhash import codes as codes_lib
from jhash import _api


def training_views(batch: dict, method: str) -> tuple[jax.Array, ...]:
  """The views of a training batch as float32 ``[n, d_v]``: at least two, all observed.

  Raises ValueError naming ``views`` (or ``views[i]``) otherwise; ``_checks.batch``
  covers lengths, ranks, dtypes and (on concrete arrays) NaN.
  """
  _checks.batch(batch)
  views = batch["views"]
  if len(views) < 2:
    raise ValueError(
      f"views must hold at least 2 views to train {method} (a cross-view method); got {len(views)}."
    )
  missing = [i for i, v in enumerate(views) if v is None]
  if missing:
    raise ValueError(f"views must all be observed to train {method}; views {missing} are None.")
  return tuple(_api.view_features(batch, i) for i in range(len(views)))


def check_num_bits_per_view(num_bits: int, views: Sequence[jax.Array], method: str) -> None:
  smallest = min(int(x.shape[1]) for x in views)
  if num_bits > smallest:
    raise ValueError(
      f"num_bits must be at most the smallest view dimension for {method} (one "
      f"projection pair per bit); got num_bits={num_bits} and view dimensions "
      f"{[int(x.shape[1]) for x in views]}."
    )


def check_nonneg_float(value, name: str) -> float:
  if isinstance(value, bool) or np.ndim(value) != 0:
    raise ValueError(f"{name} must be a finite scalar >= 0; got {_checks.describe(value)}.")
  v = float(value)
  if not np.isfinite(v) or v < 0:
    raise ValueError(f"{name} must be a finite scalar >= 0; got {v}.")
  return v


def centre(views: Sequence[jax.Array]) -> tuple[tuple[jax.Array, ...], tuple[jax.Array, ...]]:
  """``(centred views, means)``: ``x_v - m_v`` float32 ``[n, d_v]`` and ``m_v`` ``[d_v]``."""
  means = tuple(jnp.mean(x, axis=0) for x in views)
  return tuple(x - m[None, :] for x, m in zip(views, means)), means


def offsets(dims: Sequence[int]) -> list[int]:
  """Start of each view's block in the concatenated features, and the total."""
  return [0] + list(np.cumsum(dims))


def cross_view_mask(dims: Sequence[int]) -> np.ndarray:
  """bool ``[D, D]``: True outside the diagonal (same-view) blocks, ``D = sum d_v``."""
  block = np.repeat(np.arange(len(dims)), dims)
  return block[:, None] != block[None, :]


def split(z: jax.Array, dims: Sequence[int]) -> tuple[jax.Array, ...]:
  """Rows of ``z`` [D, ...] cut into the views' blocks."""
  o = offsets(dims)
  return tuple(z[o[i] : o[i + 1]] for i in range(len(dims)))


def inverse_sqrt(c: jax.Array) -> jax.Array:
  """``C^{-1/2}`` of a symmetric positive definite ``C`` [d, d] (by eigh)."""
  vals, vecs = jnp.linalg.eigh(c)
  return (vecs * jax.lax.rsqrt(jnp.maximum(vals, 1e-12))[None, :]) @ vecs.T


def whiteners(centred: Sequence[jax.Array], reg: float) -> tuple[jax.Array, ...]:
  """``(C_vv + reg * tr(C_vv) / d_v I)^{-1/2}`` per view, ``C_vv = X_v^T X_v / n``.

  The ridge is relative to the view's mean variance, so ``reg`` means the same
  whatever the features' scale.
  """
  out = []
  for x in centred:
    n, d = x.shape
    c = x.T @ x / n
    ridge = reg * jnp.trace(c) / d + 1e-12
    out.append(inverse_sqrt(c + ridge * jnp.eye(d, dtype=c.dtype)))
  return tuple(out)


def top_generalized(
  cross: jax.Array, whiten: Sequence[jax.Array], k: int
) -> tuple[jax.Array, jax.Array]:
  """Top-``k`` solutions of ``M z = lambda D z`` with ``D^{-1/2} = blockdiag(whiten)``.

  Args:
    cross: float32 [D, D] symmetric ``M``.
    whiten: per view float32 [d_v, d_v], ``(C_vv + ridge)^{-1/2}``.
    k: how many, largest ``lambda`` first.
  Returns:
    ``(z, lambdas)``: float32 [D, k] with ``z^T D z = I``, and [k] descending.
  """
  w = jax.scipy.linalg.block_diag(*whiten)
  m = w @ cross @ w
  vals, vecs = jnp.linalg.eigh(0.5 * (m + m.T))
  return w @ vecs[:, ::-1][:, :k], vals[::-1][:k]


def unit_variance(
  projections: Sequence[jax.Array], centred: Sequence[jax.Array]
) -> tuple[jax.Array, ...]:
  """Each column of each ``A_v`` [d_v, K] scaled so ``X_v A_v`` has unit mean square.

  A column that projects every training item to 0 is left as it is.
  """
  out = []
  for a, x in zip(projections, centred):
    scale = jnp.sqrt(jnp.mean(jnp.square(x @ a), axis=0))
    out.append(a / jnp.where(scale > 0, scale, 1.0)[None, :])
  return tuple(out)


def check_encode_views(batch: dict, means: Sequence[jax.Array], method: str) -> list:
  """The batch's views (None kept) after checking them against the trained model."""
  _checks.batch(batch)
  views = batch["views"]
  if len(views) != len(means):
    raise ValueError(
      f"views must hold the {len(means)} views {method} was trained on (None "
      f"for an unobserved one); got {len(views)} entries."
    )
  out = []
  for i, (x, m) in enumerate(zip(views, means)):
    if x is None:
      out.append(None)
      continue
    d = int(np.prod(np.shape(x)[1:]))
    if d != m.shape[0]:
      raise ValueError(
        f"views[{i}] must have {m.shape[0]} features per item, as in training; got "
        f"{d} (shape {tuple(np.shape(x))}). Are the views in the training order?"
      )
    out.append(_api.view_features(batch, i))
  return out


def mean_projection(
  means: Sequence[jax.Array], projections: Sequence[jax.Array], views: Sequence[jax.Array | None]
) -> jax.Array:
  """``(1 / |O|) sum_{v in O} (x_v - m_v) A_v`` over the observed views ``O``: float32 [n, K]."""
  terms = [(x - m[None, :]) @ a for x, m, a in zip(views, means, projections) if x is not None]
  if not terms:
    raise ValueError(
      f"views must hold at least one observed view to encode from; all "
      f"{len(views)} entries are None."
    )
  return sum(terms) / len(terms)


def encode(
  means: Sequence[jax.Array], projections: Sequence[jax.Array], batch: dict, method: str
) -> jax.Array:
  """Codes from the observed views of ``batch``: int8 [n, K] in {-1, +1} (module docstring)."""
  views = check_encode_views(batch, means, method)
  return codes_lib.sign(mean_projection(means, projections, views))
