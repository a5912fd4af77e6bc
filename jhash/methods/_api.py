"""The method API every hashing method follows.

A method is a factory ``jhash.methods.NAME(num_bits, **hyperparameters)`` that
returns a ``HashingMethod``: a NamedTuple of pure functions closed over the
hyperparameters, with states that are NamedTuples of arrays (as optax's
``GradientTransformation``):

* ``init(key, batch) -> state``
* ``update(state, batch, key) -> (state, metrics)``: one step of the method's
  schedule (an iteration, a sweep, a bit); returns the same state type and shapes
  and a dict of scalar metrics, so it jits once and runs under ``lax.scan``.
* ``encode(state, batch) -> codes``: int8 [n, num_bits] in {-1, +1}.

Metrics are scalars or fixed-size arrays (e.g. one entry per bit), so every
step returns the same shapes. Two optional fields: ``check_batch(batch) -> n``,
the method's complete check of a training batch (values included, so it runs
outside jit; ``jhash.fit`` calls it), and ``extras``, a NamedTuple of further
pure functions a method offers (CDH's objective, say).

A ``batch`` is a dict: ``"views"`` a tuple of arrays ([n, d_v] features or
[n, H, W(, C)] images; ``None`` for a view not observed) and ``"labels"`` int [n]
class ids or bool [n, C] multi-hot (absent for unsupervised methods).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jhash import _checks

Batch = dict
State = Any


class HashingMethod(NamedTuple):
  """Pure functions of one hashing method (see module docstring)."""
  init: Callable[[jax.Array, Batch], State]
  update: Callable[[State, Batch, jax.Array], tuple[State, dict]]
  encode: Callable[[State, Batch], jax.Array]
  num_steps: int          # length of the method's default schedule
  num_bits: int
  name: str
  check_batch: Callable[[Batch], int] | None = None
  extras: Any = None


def view_features(batch: Batch, view: int | None) -> jax.Array:
  """Features of one view (or all observed views side by side) as float32 [n, d].

  Images are flattened. ``view=None`` concatenates every observed view.
  """
  views = batch["views"]
  if view is None:
    chosen = [v for v in views if v is not None]
  else:
    if not -len(views) <= view < len(views) or views[view] is None:
      raise ValueError(f"view {view} must be an observed view of the batch; the batch has "
                       f"{len(views)} views, observed: "
                       f"{[i for i, v in enumerate(views) if v is not None]}.")
    chosen = [views[view]]
  flat = [jnp.asarray(v, jnp.float32).reshape(v.shape[0], -1) for v in chosen]
  return flat[0] if len(flat) == 1 else jnp.concatenate(flat, axis=1)


def check_num_bits(num_bits) -> int:
  return _checks.positive_int(num_bits, "num_bits")
