"""The compiled programs ``fit`` and ``make_train`` run: ``init`` with the training record,
and a phase's loop of steps (``lax.fori_loop`` over minibatches gathered on the device,
optionally split over a mesh's ``"data"`` axis); each traceable, and jitted once per
method function and shape by ``fit``."""

from __future__ import annotations

import concurrent.futures
import functools
from typing import Callable

import jax
import numpy as np
import jax.numpy as jnp
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P

from jhash import _api
from jhash import _order

DATA_AXIS = "data"
epoch_permutation = _order.epoch_permutation


def _jit_init(method: _api.HashingMethod, num_items: int | None):
  """``method.init`` jitted, the training record (``jhash.Trained``) set in its state."""
  return _jit_init_of(method.init, method.name, method.num_bits, num_items)


def init_of(init: Callable, name: str, num_bits: int, num_items: int | None = None) -> Callable:
  """``(key, batch) -> state``: a method's ``init`` with the training record
  (``jhash.Trained``) set in its state. Traceable."""

  def fn(key, batch):
    if num_items is not None:
      batch = {**batch, "num_items": num_items}
    return _api.record_training(name, num_bits, init(key, batch), batch)

  return fn


@functools.lru_cache(maxsize=64)
def _jit_init_of(init: Callable, name: str, num_bits: int, num_items: int | None):
  return jax.jit(init_of(init, name, num_bits, num_items))


@functools.lru_cache(maxsize=64)
def _jit_step(update: Callable, donate: bool, num_items: int | None):
  if num_items is None:  # jit the method's own function: its compile cache is shared
    return jax.jit(update, donate_argnums=(0,) if donate else ())

  def step(state, batch, key):
    if num_items is not None:
      batch = {**batch, "num_items": num_items}
    return update(state, batch, key)

  return jax.jit(step, donate_argnums=(0,) if donate else ())


def _replicated(mesh):
  return None if mesh is None else NamedSharding(mesh, P())


def _split(mesh):
  return None if mesh is None else NamedSharding(mesh, P(DATA_AXIS))


@functools.lru_cache(maxsize=64)
def _jit_loop(update: Callable, batch_size: int | None, length: int, donate: bool, mesh):
  """``phase_loop`` jitted (the state donated; with a mesh, minibatches split over its
  ``"data"`` axis and the results replicated)."""
  loop = phase_loop(update, batch_size, length, _split(mesh))
  kwargs = {}
  if mesh is not None:
    kwargs = {"out_shardings": (_replicated(mesh), _replicated(mesh))}
  return jax.jit(loop, donate_argnums=(0,) if donate else (), **kwargs)


def _layout(tree):
  return jax.tree.structure(tree), [
    (jnp.shape(x), jnp.result_type(x)) for x in jax.tree.leaves(tree)
  ]


def check_update_output(update: Callable, state, out):
  """``out`` (an ``update``'s output shapes) must be ``(state, metrics)``: a state of the
  type, shapes and dtypes of ``state`` and a dict of metrics; returns the metrics' shapes.
  Runs once per trace, on shapes only."""
  name = getattr(getattr(update, "__wrapped__", update), "__name__", "update")
  if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict)):
    raise ValueError(
      f"a phase's update ({name}) must return (state, metrics), metrics a dict; got "
      f"{type(out).__name__} (the state alone? return (state, {{}}) for no metrics)."
    )
  if _layout(out[0]) != _layout(state):
    raise ValueError(
      f"a phase's update ({name}) must return a state of the type, shapes and dtypes it "
      f"got (it runs in a loop); got {jax.tree.structure(out[0])} with "
      f"{_layout(out[0])[1]}, for {jax.tree.structure(state)} with {_layout(state)[1]}."
    )
  return out[1]


def phase_loop(update: Callable, batch_size: int | None, length: int, split=None) -> Callable:
  """A loop of up to ``length`` steps of one phase: ``(state, data, key, start, count,
  offset, phase) -> (state, metrics [length, ...])``; ``start`` counts within the
  phase, ``offset`` is the phase's first global step, ``phase`` its index (traced, so a
  phase repeated in a schedule compiles once); metrics past ``count`` are zeros.
  Traceable: ``fit`` jits it, ``make_train`` runs it inside the user's program."""
  # Jitted so that the shape probe below and the loop's body share one trace of update.
  update = jax.jit(update)

  def minibatch(data, perm, step, per_epoch):
    if batch_size is None:
      return data
    at = (step % per_epoch) * batch_size
    index = lax.dynamic_slice_in_dim(perm, at, batch_size)
    mb = _api.take(data, index)
    if split is not None:
      mb = jax.tree.map(lambda x: lax.with_sharding_constraint(x, split), mb)
    return mb

  def loop(state, data, key, start, count, offset, phase):
    n = _api.batch_size_of(data)
    per_epoch = 1 if batch_size is None else n // batch_size
    perm = (
      jnp.zeros((0,), jnp.int32)
      if batch_size is None
      else epoch_permutation(key, start // per_epoch, n, phase)
    )
    probe = minibatch(data, perm, start, per_epoch)
    shapes = check_update_output(update, state, jax.eval_shape(update, state, probe, key))
    buffers = jax.tree.map(lambda s: jnp.zeros((length,) + s.shape, s.dtype), shapes)

    def body(i, carry):
      state, perm, buffers = carry
      step = start + i
      if batch_size is not None:
        new_epoch = (step % per_epoch == 0) & (i > 0)
        perm = lax.cond(
          new_epoch, lambda: epoch_permutation(key, step // per_epoch, n, phase), lambda: perm
        )
      state, metrics = update(
        state, minibatch(data, perm, step, per_epoch), _order.step_key(key, offset + step)
      )
      buffers = jax.tree.map(lambda b, v: b.at[i].set(v), buffers, metrics)
      return state, perm, buffers

    state, _, buffers = lax.fori_loop(0, count, body, (state, perm, buffers))
    return state, buffers

  return loop


_HOST = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jhash-fit-host")


def to_host(tree):
  """``tree`` as NumPy arrays, waited for on a helper thread: the main thread waits on a
  lock, which a signal interrupts, so Ctrl-C stops a run inside a long step at once
  (NumPy's own wait for a device array holds the main thread until the step ends)."""
  return _HOST.submit(jax.tree.map, np.asarray, tree).result()
