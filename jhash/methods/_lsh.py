"""Locality-sensitive hashing by random projections (sign of Gaussian projections).

Charikar, "Similarity estimation techniques from rounding algorithms", STOC 2002:
for ``w ~ N(0, I)``, ``P[sign(w.x) != sign(w.y)] = angle(x, y) / pi``. Features are
centred on the training mean so the hyperplanes pass through the data.
No training: the default schedule has zero steps.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jhash import codes
from jhash import _api
from jhash import _checks


class LSHState(NamedTuple):
  """The hyperplanes, the centring mean and the training views' widths."""

  mean: jax.Array  # float32 [d], training mean (zeros when not centring)
  projection: jax.Array  # float32 [d, K], Gaussian hyperplanes
  widths: jax.Array  # int32 [V], the training views' widths (``_api.view_widths``)
  trained: _api.Trained | None = None  # what it was trained on (set by jhash.init / fit)


def lsh(num_bits: int, *, view: int | None = None, center: bool = True) -> _api.HashingMethod:
  """Random-projection LSH.

  Args:
    num_bits: K, code length, at most ``MAX_NUM_BITS`` (65,536).
    view: which view to hash (None: all observed views side by side).
    center: subtract the training mean before projecting.
  Returns:
    HashingMethod with ``num_steps = 0``.

  Example: a point and a slightly moved copy share most of their 32 bits.
    >>> import jax, numpy as np, jhash
    >>> x = np.random.default_rng(0).normal(size=(100, 16)).astype(np.float32)
    >>> method = jhash.methods.lsh(32)
    >>> state = jhash.init(method, jax.random.key(0), {"views": (x,)})
    >>> codes = np.asarray(jhash.encode(method, state, {"views": (np.stack([x[0], x[0] + 0.01]),)}))
    >>> codes.shape, int(np.sum(codes[0] != codes[1])) <= 2
    ((2, 32), True)
  """
  num_bits = _api.check_num_bits(num_bits)
  _checks.view(view)
  center = _checks.flag(center, "center")

  def init(key, batch):
    x = _api.view_features(batch, view)
    _checks.fits_in_memory(
      {"the hyperplanes": 4 * x.shape[1] * num_bits},
      f"lsh with num_bits={num_bits} on {x.shape[1]} features",
      "use fewer bits, or fewer features",
    )
    mean = jnp.mean(x, axis=0) if center else jnp.zeros(x.shape[1], jnp.float32)
    return LSHState(
      mean, jax.random.normal(key, (x.shape[1], num_bits), jnp.float32), _api.view_widths(batch)
    )

  def update(state, batch, key):
    del batch, key
    return state, {}

  def encode(state, batch):
    x = _api.view_features(batch, view)
    return codes.sign((x - state.mean[None, :]) @ state.projection)

  def check_encode(state, batch):
    _api.check_views(state.widths, batch, view, "lsh")

  return _api.HashingMethod(
    init,
    encode,
    num_bits,
    "lsh",
    _api.one_phase("lsh", update, num_steps=0),
    check_encode=check_encode,
    closed_form=True,
  )
