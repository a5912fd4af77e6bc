"""Running a method's schedule: ``init``, ``fit``, ``encode`` and ``encode_multi``.

Keys: ``init`` gets ``fold_in(key, 0)`` and step ``s`` (counted from 0) gets
``fold_in(key, s + 1)``. A minibatch method trained on an in-memory set reads, at step
``s`` of epoch ``e = s // steps_per_epoch``, the slice ``s % steps_per_epoch`` of the
permutation ``permutation(fold_in(sample_key(key), e), n)``; an epoch is ``n //
batch_size`` minibatches (the last partial one is dropped). Keys and minibatches depend
only on the step number, so a run resumed from a saved state at step ``s`` is identical
to an uninterrupted one, and ``minibatches`` gives the same sequence on the host (the
iterable path then trains exactly as the in-memory one).

Work per call: an in-memory run is a jitted loop (``lax.fori_loop``) over ``log_every``
steps at a time, with the minibatches gathered on the device and the state donated;
metrics come to the host once per loop, every step's value kept. An iterable of
minibatches (data that does not fit in memory) runs one jitted step per minibatch.
With a ``mesh``, each minibatch is split over the mesh's ``"data"`` axis and the state
is replicated (data parallel); XLA inserts the reductions.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Mapping
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jhash import _api
from jhash import _checks

DATA_AXIS = "data"
_SAMPLE_FOLD = 0xFFFFFFFF   # sample_key(key) = fold_in(key, _SAMPLE_FOLD): apart from steps


def sample_key(key: jax.Array) -> jax.Array:
  """The key of the minibatch order; epoch ``e`` shuffles with ``fold_in(sample_key, e)``."""
  return jax.random.fold_in(key, _SAMPLE_FOLD)


def epoch_permutation(key: jax.Array, epoch, num_items: int) -> jax.Array:
  """int32 [num_items]: the order of the training items in ``epoch`` (0-based)."""
  return jax.random.permutation(jax.random.fold_in(sample_key(key), epoch),
                                num_items).astype(jnp.int32)


def steps_per_epoch(num_items: int, batch_size: int) -> int:
  """Minibatches in one epoch: ``num_items // batch_size`` (the remainder is dropped)."""
  if batch_size > num_items:
    raise ValueError(f"batch_size ({batch_size}) must be at most the number of training "
                     f"items ({num_items}).")
  return num_items // batch_size


def minibatches(batch: dict, batch_size: int, key: jax.Array, num_steps: int,
                start_step: int = 0):
  """Yield the minibatches ``jhash.fit`` draws on the device, in order, on the host.

  The same sequence as an in-memory ``fit`` of a method with this ``batch_size``:
  feeding it to ``fit`` as an iterable trains identically. Each minibatch carries
  ``"index"``, int32 [batch_size], its items' positions in ``batch``.
  """
  n = _api.batch_size_of(batch)
  per_epoch = steps_per_epoch(n, batch_size)
  host = jax.tree.map(np.asarray, batch)
  perm, epoch = None, None
  for step in range(start_step, start_step + num_steps):
    if step // per_epoch != epoch:
      epoch = step // per_epoch
      perm = np.asarray(epoch_permutation(key, epoch, n))
    at = (step % per_epoch) * batch_size
    yield _api.take(host, perm[at:at + batch_size])


# ----------------------------------------------------------------------------- checks


def _check_key(key) -> None:
  if not isinstance(key, jax.Array) or not (
      jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) or key.shape == (2,)):
    raise ValueError(f"key must be a JAX PRNG key (jax.random.key(seed)); got "
                     f"{getattr(key, 'shape', type(key))}.")


def _check_training_batch(method: _api.HashingMethod, batch: Mapping) -> int:
  n = _checks.batch(batch)
  if method.check_batch is not None:
    method.check_batch(batch)
  return n


def _check_mesh(mesh, batch_size: int | None) -> None:
  if mesh is None:
    return
  if not isinstance(mesh, Mesh) or DATA_AXIS not in mesh.axis_names:
    raise ValueError(f"mesh must be a jax.sharding.Mesh with a '{DATA_AXIS}' axis; got "
                     f"{mesh!r}.")
  size = mesh.shape[DATA_AXIS]
  if batch_size is not None and batch_size % size:
    raise ValueError(f"batch_size ({batch_size}) must be a multiple of the mesh's "
                     f"'{DATA_AXIS}' axis ({size} devices) to split minibatches evenly.")


def _schedule(method, n: int | None, num_steps, num_epochs) -> int:
  """Total steps of the run: ``num_steps``, or ``num_epochs`` epochs, or the default."""
  if num_steps is not None and num_epochs is not None:
    raise ValueError("give num_steps or num_epochs, not both.")
  if num_steps is not None:
    return _checks.nonneg_int(num_steps, "num_steps")
  epochs = num_epochs if num_epochs is not None else method.num_epochs
  if epochs is None:
    return method.num_steps
  epochs = _checks.nonneg_int(epochs, "num_epochs")
  if method.batch_size is None:
    return epochs
  if n is None:
    raise ValueError("num_epochs needs the training set's size: pass num_items= with an "
                     "iterable of minibatches, or give num_steps.")
  return epochs * steps_per_epoch(n, method.batch_size)


# ----------------------------------------------------------------------------- compiled


@functools.lru_cache(maxsize=64)
def _jit_init(init_fn: Callable, num_items: int | None):
  if num_items is None:
    return jax.jit(init_fn)
  return jax.jit(lambda key, batch: init_fn(key, {**batch, "num_items": num_items}))


@functools.lru_cache(maxsize=64)
def _jit_step(update: Callable, donate: bool, num_items: int | None):
  def step(state, batch, key):
    if num_items is not None:
      batch = {**batch, "num_items": num_items}
    return update(state, batch, key)
  return jax.jit(step, donate_argnums=(0,) if donate else ())


@functools.lru_cache(maxsize=64)
def _jit_encode(encode: Callable):
  return jax.jit(encode)


def _replicated(mesh):
  return None if mesh is None else NamedSharding(mesh, P())


def _split(mesh):
  return None if mesh is None else NamedSharding(mesh, P(DATA_AXIS))


@functools.lru_cache(maxsize=64)
def _jit_loop(update: Callable, batch_size: int | None, length: int, donate: bool, mesh):
  """A jitted loop of up to ``length`` steps: ``(state, data, key, start, count) ->
  (state, metrics [length, ...])``; entries past ``count`` of the metrics are zeros."""
  split = _split(mesh)

  def minibatch(data, perm, step, per_epoch):
    if batch_size is None:
      return data
    at = (step % per_epoch) * batch_size
    index = lax.dynamic_slice_in_dim(perm, at, batch_size)
    mb = _api.take(data, index)
    if split is not None:
      mb = jax.tree.map(lambda x: lax.with_sharding_constraint(x, split), mb)
    return mb

  def loop(state, data, key, start, count):
    n = _api.batch_size_of(data)
    per_epoch = 1 if batch_size is None else n // batch_size
    perm = (jnp.zeros((0,), jnp.int32) if batch_size is None
            else epoch_permutation(key, start // per_epoch, n))
    probe = minibatch(data, perm, start, per_epoch)
    shapes = jax.eval_shape(update, state, probe, key)[1]
    buffers = jax.tree.map(lambda s: jnp.zeros((length,) + s.shape, s.dtype), shapes)

    def body(i, carry):
      state, perm, buffers = carry
      step = start + i
      if batch_size is not None:
        new_epoch = (step % per_epoch == 0) & (i > 0)
        perm = lax.cond(new_epoch, lambda: epoch_permutation(key, step // per_epoch, n),
                        lambda: perm)
      state, metrics = update(state, minibatch(data, perm, step, per_epoch),
                              jax.random.fold_in(key, step + 1))
      buffers = jax.tree.map(lambda b, v: b.at[i].set(v), buffers, metrics)
      return state, perm, buffers

    state, _, buffers = lax.fori_loop(0, count, body, (state, perm, buffers))
    return state, buffers

  kwargs = {}
  if mesh is not None:
    kwargs = {"out_shardings": (_replicated(mesh), _replicated(mesh))}
  return jax.jit(loop, donate_argnums=(0,) if donate else (), **kwargs)


# ----------------------------------------------------------------------------- public


def init(method: _api.HashingMethod, key: jax.Array, batch: dict, *,
         num_items: int | None = None):
  """``method.init`` with the batch checked and the key of step 0.

  ``num_items``: the training set's size when ``batch`` is only a sample of it (the
  first minibatch of a stream); the method reads it with ``jhash.num_items``.
  """
  _check_training_batch(method, batch)
  _check_key(key)
  if num_items is not None:
    num_items = _checks.positive_int(num_items, "num_items")
  return _jit_init(method.init, num_items)(jax.random.fold_in(key, 0), dict(batch))


def _copy_state(state):
  # The caller keeps a valid state: the run donates (and so deletes) its own copy.
  return jax.tree.map(lambda x: jnp.array(x, copy=True), state)


def _progress_bar(method, start: int, total: int, progress: bool):
  if not progress or total - start <= 1:
    return None
  from tqdm.auto import tqdm  # imported here: `import jhash` stays light
  import sys
  return tqdm(total=total, initial=start, desc=f"{method.name} ({method.num_bits} bits)",
              leave=False, disable=None if sys.stderr.isatty() else True)


def fit(method: _api.HashingMethod, key: jax.Array, data, num_steps: int | None = None, *,
        num_epochs: int | None = None, state=None, start_step: int = 0,
        progress: bool = True, donate: bool = True, log_every: int | None = None,
        on_step: Callable | None = None, num_items: int | None = None,
        mesh: Mesh | None = None):
  """Run a method's schedule.

  Args:
    method: a ``HashingMethod``.
    key: PRNG key (``jax.random.key(seed)``); see the module docstring for the schedule.
    data: the training batch ``{"views": (...), "labels": ...}`` (checked at the door;
      a minibatch method draws its minibatches from it on the device), or, for a
      minibatch method, an iterable of minibatches (each a batch with ``"index"``,
      int32 [b], its items' positions in the training set), e.g. a prefetching loader.
      An iterable is read from the start: to resume, pass it positioned at
      ``start_step``.
    num_steps: the run's length in steps (default: ``num_epochs`` or the method's).
    num_epochs: the run's length in epochs (minibatch methods; for full-batch methods an
      epoch is a step).
    state: resume from this state (default: ``init``); the caller's arrays stay valid.
    start_step: the step the given ``state`` is at (for resuming).
    progress: a progress bar (shown only when standard error is a terminal).
    donate: donate the state between steps (buffers reused in place).
    log_every: steps per host round trip: metrics are fetched and ``on_step`` called
      every ``log_every`` steps and at the end (default: 1 for full-batch methods, an
      epoch up to 100 steps for minibatch methods).
    on_step: ``on_step(step, state, metrics)`` after each round trip; ``step`` counts
      completed steps, ``metrics`` maps names to NumPy arrays with one entry per step
      since the previous call.
    num_items: the training set's size, needed with an iterable ``data`` (``init`` sees
      the first minibatch and this number).
    mesh: a ``jax.sharding.Mesh`` with a ``"data"`` axis: minibatches are split over its
      devices, the state replicated.
  Returns:
    (state, history): the final state and a dict of metric name -> NumPy array
    [num_steps - start_step] (one entry per step run).

  Example:
    >>> import jax, numpy as np, jhash
    >>> x = np.random.default_rng(0).normal(size=(100, 16)).astype(np.float32)
    >>> method = jhash.methods.itq(8, num_iters=5)
    >>> state, history = jhash.fit(method, jax.random.key(0), {"views": (x,)}, progress=False)
    >>> history["quantization_loss"].shape
    (5,)
  """
  _check_key(key)
  start = _checks.nonneg_int(start_step, "start_step")
  _check_mesh(mesh, method.batch_size)
  if isinstance(data, Mapping):
    n = _check_training_batch(method, data)
    if num_items is not None:
      raise ValueError("num_items is only for an iterable of minibatches; an in-memory "
                       "batch gives its own size.")
    total = _schedule(method, n, num_steps, num_epochs)
    if method.batch_size is not None:
      steps_per_epoch(n, method.batch_size)
    runner = _fit_in_memory
  else:
    if not isinstance(data, Iterable):
      raise ValueError(f"data must be a batch dict or an iterable of minibatch dicts; got "
                       f"{_checks._describe(data)}.")
    if method.batch_size is None:
      raise ValueError(f"{method.name} trains on the whole set at every step: pass the "
                       "training batch, not an iterable of minibatches.")
    if num_items is not None:
      num_items = _checks.positive_int(num_items, "num_items")
    if num_steps is None and num_epochs is None and method.num_epochs is not None \
        and num_items is None:
      raise ValueError("with an iterable of minibatches, give num_steps, or num_items so "
                       "that epochs can be counted.")
    total = _schedule(method, num_items, num_steps, num_epochs)
    runner = _fit_stream
  if log_every is None:
    log_every = 1 if method.batch_size is None else min(
        100, max(1, (n if runner is _fit_in_memory else num_items or 100) // method.batch_size))
  log_every = _checks.positive_int(log_every, "log_every")
  return runner(method, key, data, total, start, state, progress, donate, log_every,
                on_step, num_items, mesh)


def _fit_in_memory(method, key, batch, total, start, state, progress, donate, log_every,
                   on_step, num_items, mesh):
  del num_items
  batch = {k: v for k, v in batch.items()}
  if mesh is not None:
    batch = jax.device_put(batch, _replicated(mesh))
  if state is None:
    state = _jit_init(method.init, None)(jax.random.fold_in(key, 0), batch)
  elif donate:
    state = _copy_state(state)
  if mesh is not None:
    state = jax.device_put(state, _replicated(mesh))
  history: dict[str, list] = {}
  bar = _progress_bar(method, start, total, progress)
  step = start
  if log_every == 1 and method.batch_size is None and mesh is None:
    run = _jit_step(method.update, donate, None)
  else:
    run = _jit_loop(method.update, method.batch_size, log_every, donate, mesh)
  while step < total:
    count = min(log_every, total - step)
    if log_every == 1 and method.batch_size is None and mesh is None:
      state, metrics = run(state, batch, jax.random.fold_in(key, step + 1))
      metrics = jax.tree.map(lambda v: np.asarray(v)[None], metrics)
    else:
      state, buffers = run(state, batch, key, jnp.int32(step), jnp.int32(count))
      metrics = jax.tree.map(lambda v: np.asarray(v)[:count], buffers)
    step += count
    _record(history, metrics, on_step, step, state, bar, count)
  if bar is not None:
    bar.close()
  return state, _stack(history)


def _fit_stream(method, key, stream, total, start, state, progress, donate, log_every,
                on_step, num_items, mesh):
  it = iter(stream)
  first = next(it, None)
  if first is None and total > start:
    raise ValueError("data: the iterable of minibatches is empty.")
  if first is not None:
    _checks.batch(first, "minibatch")
    _check_index(first)
    it = itertools.chain([first], it)
  if state is None:
    if first is None:
      raise ValueError("data: the iterable is empty and no state was given.")
    sample = {k: v for k, v in first.items() if k != "index"}
    state = init(method, key, sample, num_items=num_items)
  elif donate:
    state = _copy_state(state)
  if mesh is not None:
    state = jax.device_put(state, _replicated(mesh))
  run = _jit_step(method.update, donate, num_items)
  history: dict[str, list] = {}
  pending: list = []
  bar = _progress_bar(method, start, total, progress)
  step = start
  while step < total:
    minibatch = next(it, None)
    if minibatch is None:
      raise ValueError(f"data: the iterable of minibatches ended after {step - start} "
                       f"minibatches; the schedule needs {total - start}.")
    _checks.batch(minibatch, "minibatch")
    _check_index(minibatch)
    if np.shape(minibatch["index"])[0] != method.batch_size:
      raise ValueError(f"minibatch must hold batch_size = {method.batch_size} items; got "
                       f"{np.shape(minibatch['index'])[0]}.")
    minibatch = dict(minibatch)
    if mesh is not None:
      minibatch = jax.device_put(minibatch, _split(mesh))
    state, metrics = run(state, minibatch, jax.random.fold_in(key, step + 1))
    pending.append(metrics)
    step += 1
    if len(pending) == log_every or step == total:
      stacked = jax.tree.map(lambda *v: np.stack([np.asarray(x) for x in v]), *pending)
      _record(history, stacked, on_step, step, state, bar, len(pending))
      pending = []
  if bar is not None:
    bar.close()
  return state, _stack(history)


def _check_index(minibatch) -> None:
  index = minibatch.get("index")
  if index is None or np.ndim(index) != 1 or not np.issubdtype(np.asarray(index).dtype,
                                                                np.integer):
    raise ValueError("minibatch must carry 'index': int [b], the positions of its items in "
                     f"the training set; got {_checks._describe(index)}.")
  _checks.same_length([index, next(v for v in minibatch["views"] if v is not None)],
                      ["minibatch['index']", "minibatch['views']"])


def _record(history, metrics, on_step, step, state, bar, count) -> None:
  for name, value in metrics.items():
    history.setdefault(name, []).append(np.asarray(value))
  if on_step is not None:
    on_step(step, state, metrics)
  if bar is not None:
    bar.update(count)


def _stack(history):
  return {name: np.concatenate(values) for name, values in history.items()}


@functools.lru_cache(maxsize=64)
def _jit_chunked(fn: Callable, chunk: int):
  return jax.jit(lambda state, batch: _api.map_in_chunks(lambda b: fn(state, b), batch, chunk))


def _encoder(fn, chunk_size):
  if chunk_size is None:
    return _jit_encode(fn)
  return _jit_chunked(fn, _checks.positive_int(chunk_size, "chunk_size"))


def encode(method: _api.HashingMethod, state, batch: dict, *,
           chunk_size: int | None = None) -> jax.Array:
  """``method.encode`` with the batch checked, jitted: int8 [n, num_bits] in {-1,+1}.

  ``chunk_size``: encode ``chunk_size`` items at a time (``lax.map``), bounding the
  memory of a network's activations on a large database.

  Example:
    >>> import jax, numpy as np, jhash
    >>> x = np.random.default_rng(0).normal(size=(50, 16)).astype(np.float32)
    >>> method = jhash.methods.lsh(8)
    >>> state, _ = jhash.fit(method, jax.random.key(0), {"views": (x,)}, progress=False)
    >>> jhash.encode(method, state, {"views": (x[:3],)}).shape
    (3, 8)
  """
  n = _checks.batch(batch)
  if n == 0:
    return jnp.zeros((0, method.num_bits), jnp.int8)
  return _encoder(method.encode, chunk_size)(state, batch)


def encode_multi(method: _api.HashingMethod, state, batch: dict, *,
                 chunk_size: int | None = None):
  """Every code a method gives each item: (codes int8 [n, m, K], mask bool [n, m]).

  ``m = 1`` (and an all-True mask) for single-code methods; multi-code methods (MCH)
  give their kept codes. The result goes straight to ``jhash.search.multi_code_topk``
  (after ``jhash.codes.pack_bits``), the bucket index and the multi-code metrics.
  ``chunk_size`` as in ``encode``.
  """
  n = _checks.batch(batch)
  fn = method.encode_multi or _api.single_code(method.encode)
  if n == 0:
    shapes = jax.eval_shape(fn, state, jax.tree.map(
        lambda v: jax.ShapeDtypeStruct((1,) + tuple(np.shape(v))[1:], np.asarray(v).dtype)
        if v is not None else None, dict(batch)))
    return (jnp.zeros((0,) + shapes[0].shape[1:], jnp.int8),
            jnp.zeros((0,) + shapes[1].shape[1:], bool))
  return _encoder(fn, chunk_size)(state, batch)
