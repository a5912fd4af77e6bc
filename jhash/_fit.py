"""Running a method's schedule: ``fit`` and ``encode``.

``fit`` jits ``method.update`` once (the state donated, so large buffers are
reused in place) and calls it for each step with the key
``fold_in(key, step + 1)``; ``init`` gets ``fold_in(key, 0)``. Keys depend only on
the step number, so a run resumed from a saved state at step ``s`` is identical
to an uninterrupted one.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import numpy as np

from jhash import _checks
from jhash.methods import _api


@functools.lru_cache(maxsize=64)
def _jit_update(update: Callable, donate: bool):
  return jax.jit(update, donate_argnums=(0,) if donate else ())


@functools.lru_cache(maxsize=64)
def _jit_encode(encode: Callable):
  return jax.jit(encode)


@functools.lru_cache(maxsize=64)
def _jit_init(init_fn: Callable):
  return jax.jit(init_fn)


def _check_key(key) -> None:
  if not isinstance(key, jax.Array) or not (
      jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) or key.shape == (2,)):
    raise ValueError(f"key must be a JAX PRNG key (jax.random.PRNGKey(seed) or "
                     f"jax.random.key(seed)); got {getattr(key, 'shape', type(key))}.")


def _check_training_batch(method: _api.HashingMethod, batch: dict) -> None:
  _checks.batch(batch)
  if method.check_batch is not None:
    method.check_batch(batch)


def init(method: _api.HashingMethod, key: jax.Array, batch: dict):
  """``method.init`` with the batch checked and the key of step 0."""
  _check_training_batch(method, batch)
  _check_key(key)
  return _jit_init(method.init)(jax.random.fold_in(key, 0), batch)


def fit(method: _api.HashingMethod, key: jax.Array, batch: dict, num_steps: int | None = None,
        *, state=None, start_step: int = 0, progress: bool = True, donate: bool = True,
        on_step: Callable | None = None):
  """Run a method's schedule on a batch.

  Args:
    method: a ``HashingMethod``.
    key: PRNG key; step ``s`` uses ``fold_in(key, s + 1)``, init ``fold_in(key, 0)``.
    batch: ``{"views": (...), "labels": ...}``, checked at the door.
    num_steps: schedule length (default ``method.num_steps``).
    state: resume from this state (default: ``init``).
    start_step: the step the given ``state`` is at (for resuming).
    progress: show a progress bar.
    donate: donate the state to each step (the state passed in is consumed).
    on_step: ``on_step(step, state, metrics)`` after every step (e.g. checkpointing);
      ``step`` counts completed steps.
  Returns:
    (state, history): the final state and a dict of metric name -> numpy array
    [num_steps - start_step] (one entry per step run).
  """
  _check_training_batch(method, batch)
  _check_key(key)
  total = method.num_steps if num_steps is None else _checks.nonneg_int(num_steps, "num_steps")
  start = _checks.nonneg_int(start_step, "start_step")
  if state is None:
    state = _jit_init(method.init)(jax.random.fold_in(key, 0), batch)
  step_fn = _jit_update(method.update, donate)
  history: dict[str, list] = {}
  steps = range(start, total)
  if progress and len(steps) > 1:
    from tqdm.auto import tqdm  # imported here: `import jhash` stays light
    steps = tqdm(steps, desc=f"{method.name} ({method.num_bits} bits)", leave=False)
  for step in steps:
    state, metrics = step_fn(state, batch, jax.random.fold_in(key, step + 1))
    for name, value in metrics.items():
      history.setdefault(name, []).append(np.asarray(value))
    if on_step is not None:
      on_step(step + 1, state, metrics)
  return state, {name: np.stack(values) for name, values in history.items()}


def encode(method: _api.HashingMethod, state, batch: dict) -> jax.Array:
  """``method.encode`` with the batch checked, jitted: int8 [n, num_bits] in {-1,+1}."""
  _checks.batch(batch)
  return _jit_encode(method.encode)(state, batch)
