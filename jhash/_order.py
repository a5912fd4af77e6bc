"""The order in which minibatch training reads its items: one definition for every path.

Epoch ``e`` of minibatch phase ``p`` reads the training items in the order
``permutation(fold_in(fold_in(sample_key(key), e), p), n)``, ``n // batch_size``
minibatches of it (the remainder dropped; a ``batch_size`` over ``n`` reads the whole
set each step). The device-side sampling of ``jhash.fit``, ``jhash.minibatches`` and the
streams of ``jhash.data`` all use these functions, so every path trains on the same
sequence.
"""

from __future__ import annotations

from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np

_SAMPLE_FOLD = 0xFFFFFFFF  # sample_key(key) = fold_in(key, _SAMPLE_FOLD): apart from steps
_PROCESS_FOLD = 0xFFFFFFFE  # process_key: apart from steps and the sample key


def sample_key(key: jax.Array) -> jax.Array:
  """The key of the minibatch order (step keys are ``fold_in(key, s + 1)``)."""
  return jax.random.fold_in(key, _SAMPLE_FOLD)


def process_key(key: jax.Array, process: int, count: int) -> jax.Array:
  """The key of the order in which process ``process`` of ``count`` draws its own rows
  (``jhash.local_minibatches``): ``key`` itself with one process (the
  in-memory order), else ``fold_in(fold_in(key, 0xFFFFFFFE), process)``."""
  if count == 1:
    return key
  return jax.random.fold_in(jax.random.fold_in(key, _PROCESS_FOLD), process)


def init_key(key: jax.Array) -> jax.Array:
  """The key of a method's ``init``: ``fold_in(key, 0)``."""
  return jax.random.fold_in(key, 0)


def step_key(key: jax.Array, step) -> jax.Array:
  """The key of (global, 0-based) step ``step``: ``fold_in(key, step + 1)``. Jittable."""
  return jax.random.fold_in(key, step + 1)


def epoch_permutation(key: jax.Array, epoch, num_items: int, phase=0) -> jax.Array:
  """int32 [num_items]: the order of the training items in ``epoch`` (0-based) of the
  minibatch phase ``phase`` (0 for a method of one phase):
  ``permutation(fold_in(fold_in(sample_key(key), epoch), phase))``. Jittable."""
  epoch_key = jax.random.fold_in(jax.random.fold_in(sample_key(key), epoch), phase)
  return jax.random.permutation(epoch_key, num_items).astype(jnp.int32)


def steps_per_epoch(num_items: int, batch_size: int) -> int:
  """Minibatches in one epoch: ``num_items // batch_size`` (the remainder is dropped;
  a ``batch_size`` over ``num_items`` reads the whole set each step)."""
  return num_items // min(batch_size, num_items)


def minibatch_order(
  key: jax.Array,
  num_items: int,
  batch_size: int,
  num_steps: int,
  start_step: int = 0,
  phase: int = 0,
) -> Iterator[np.ndarray]:
  """Yield, on the host, int32 [b] per step ``start_step .. start_step + num_steps - 1``:
  the items of each minibatch, ``b = min(batch_size, num_items)``."""
  batch_size = min(batch_size, num_items)
  per_epoch = steps_per_epoch(num_items, batch_size)
  perm, epoch = None, None
  for step in range(start_step, start_step + num_steps):
    if step // per_epoch != epoch:
      epoch = step // per_epoch
      perm = np.asarray(epoch_permutation(key, epoch, num_items, phase))
    at = (step % per_epoch) * batch_size
    yield perm[at : at + batch_size]
