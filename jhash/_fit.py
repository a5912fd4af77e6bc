"""Running a method's schedule: ``init`` and ``fit`` (the codes of a state: ``jhash._encode``).

Keys: ``init`` gets ``fold_in(key, 0)`` and step ``s`` (counted from 0) gets
``fold_in(key, s + 1)``. A minibatch method trained on an in-memory set reads, at step
``s`` of epoch ``e = s // steps_per_epoch``, the slice ``s % steps_per_epoch`` of the
permutation ``epoch_permutation(key, e, n, p)`` =
``permutation(fold_in(fold_in(sample_key(key), e), p), n)`` of its minibatch phase ``p``
(0 for a method of one phase; ``jhash._order``); an epoch is ``n //
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

import itertools
from collections.abc import Iterable, Mapping
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jhash import _api
from jhash import _fit_checks
from jhash._fit_checks import check_key
from jhash._fit_checks import check_mesh
from jhash._fit_checks import check_method as check_method
from jhash._fit_checks import check_some_state as check_some_state
from jhash._fit_checks import check_start
from jhash._fit_checks import check_state as check_state
from jhash._fit_checks import check_training_batch
from jhash._fit_checks import check_untraced
from jhash._fit_checks import schedule as schedule
from jhash import _checks
from jhash import _order
from jhash import _shards
from jhash._loops import _jit_init
from jhash._loops import _jit_loop
from jhash._loops import _jit_step
from jhash._loops import _replicated
from jhash._loops import _split
from jhash._loops import to_host
from jhash import _stream_checks

sample_key = _order.sample_key


def epoch_permutation(key: jax.Array, epoch, num_items: int, phase=0) -> jax.Array:
  """int32 [num_items]: the order of the training items in ``epoch`` (0-based) of the
  minibatch phase ``phase`` (0 for a method of one phase):
  ``permutation(fold_in(fold_in(sample_key(key), epoch), phase))``. Jittable: ``epoch``
  and ``phase`` are ints >= 0 or traced integer scalars; ``num_items`` an int >= 0."""
  if not isinstance(key, jax.core.Tracer):
    _checks.prng_key(key)
  _count(epoch, "epoch")
  _count(phase, "phase")
  num_items = _checks.nonneg_int(num_items, "num_items")
  return _order.epoch_permutation(key, epoch, num_items, phase)


def _count(value, name: str) -> None:
  """An int >= 0, or a traced integer scalar (its value is not checked)."""
  if isinstance(value, jax.core.Tracer):
    if not jnp.issubdtype(value.dtype, jnp.integer) or value.ndim:
      raise ValueError(f"{name} must be an integer scalar; got {_checks.describe(value)}.")
    return
  if isinstance(value, jax.Array) and value.ndim == 0 and jnp.issubdtype(value.dtype, jnp.integer):
    value = int(value)
  _checks.nonneg_int(value, name)


steps_per_epoch = _order.steps_per_epoch


def minibatches(
  batch: dict, batch_size: int, key: jax.Array, num_steps: int, start_step: int = 0, phase: int = 0
):
  """Yield the minibatches ``jhash.fit`` draws on the device, in order, on the host.

  The same sequence as an in-memory ``fit`` of a method with this ``batch_size``:
  feeding it to ``fit`` as an iterable trains identically. Each minibatch carries
  ``"index"``, int32 [batch_size], its items' positions in ``batch``. ``start_step``
  and ``phase`` count within one phase of a method of several (``jhash.Phase``).
  """
  n = _checks.batch(batch)
  batch_size = _checks.positive_int(batch_size, "batch_size")
  _checks.prng_key(key)
  num_steps = _checks.nonneg_int(num_steps, "num_steps")
  start_step = _checks.nonneg_int(start_step, "start_step")
  phase = _checks.nonneg_int(phase, "phase")
  if n == 0 and num_steps:
    raise ValueError("batch must hold items to draw minibatches from; its views have 0 rows.")
  host = jax.tree.map(np.asarray, batch)
  for index in _order.minibatch_order(key, n, batch_size, num_steps, start_step, phase):
    yield _api.take(host, index)


# ----------------------------------------------------------------------------- public


def init(method: _api.HashingMethod, key: jax.Array, batch: dict, *, num_items: int | None = None):
  """``method.init`` with the batch checked and the key of step 0.

  ``num_items``: the training set's size when ``batch`` is only a sample of it (the
  first minibatch of a stream); the method reads it with ``jhash.num_items``.
  """
  check_method(method)
  rows = check_training_batch(method, batch)
  check_key(key)
  method = _api.bound(method, batch)
  if num_items is not None:
    num_items = _check_num_items(num_items, rows)
    _check_state_memory(method, key, batch, num_items)
  return _jit_init(method, num_items)(_order.init_key(key), dict(batch))


def _check_num_items(num_items, rows: int) -> int:
  """The training set's size: an int in [the sample's rows, int32's largest] (positions
  in it are int32)."""
  num_items = _checks.positive_int(num_items, "num_items")
  top = np.iinfo(np.int32).max
  if not rows <= num_items <= top:
    raise ValueError(
      f"num_items (the training set's size) must be at least the {rows} items of the batch "
      f"drawn from it and at most {top:,} (positions are int32); got {num_items:,}."
    )
  return num_items


def _check_state_memory(method, key, batch, num_items: int) -> None:
  """A state sized by ``num_items`` (a memory bank) that would not fit in memory is refused
  before it is made (its shapes from ``jax.eval_shape``)."""
  shapes = jax.eval_shape(_jit_init(method, num_items), _order.init_key(key), dict(batch))
  size = sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(shapes))
  _checks.fits_in_memory(
    {"the state": size},
    f"{method.name}'s state for num_items={num_items:,}",
    "lower num_items (the training set's size), or use a method without a memory bank",
  )


def _copy_state(state):
  # The caller keeps a valid state: the run donates (and so deletes) its own copy.
  return jax.tree.map(lambda x: jnp.array(x, copy=True), state)


def _progress_bar(method, start: int, total: int, progress: bool):
  if not progress or total - start <= 1:
    return None
  from tqdm.auto import tqdm  # imported here: `import jhash` stays light
  import sys

  return tqdm(
    total=total,
    initial=start,
    desc=f"{method.name} ({method.num_bits} bits)",
    leave=False,
    disable=None if sys.stderr.isatty() else True,
  )


def fit(
  method: _api.HashingMethod,
  key: jax.Array,
  data,
  num_steps: int | None = None,
  *,
  num_epochs: int | None = None,
  state=None,
  start_step: int = 0,
  progress: bool = True,
  donate: bool = True,
  log_every: int | None = None,
  on_step: Callable | None = None,
  num_items: int | None = None,
  mesh: Mesh | None = None,
):
  """Run a method's schedule (all its phases, in order).

  Args:
    method: a ``HashingMethod``.
    key: PRNG key (``jax.random.key(seed)``); see the module docstring for the schedule.
    data: the training batch ``{"views": (...), "labels": ...}`` (checked at the door;
      minibatch phases draw their minibatches from it on the device), or, for a method
      trained on minibatches only, an iterable of minibatches (each a batch with
      ``"index"``, int32 [b], its items' positions in the training set), e.g. a
      prefetching loader. An iterable is read from its start: to resume, pass it
      positioned at ``start_step``.
    num_steps: the run's total length in steps (the last phase cut or extended; default:
      every phase's own length).
    num_epochs: the length in epochs of a method of one phase (for full-batch methods
      an epoch is a step).
    state: resume from this state (default: ``init``); the caller's arrays stay valid.
    start_step: the (global) step the given ``state`` is at, for resuming: at most the
      schedule's length (at it, a finished run: no step runs).
    progress: True or False: a progress bar (shown only when standard error is a terminal).
    donate: donate the state between steps (buffers reused in place).
    log_every: steps per host round trip: metrics are fetched and ``on_step`` called
      every ``log_every`` steps, at the end of each phase and at the end (default: 1
      for full-batch phases, an epoch up to 100 steps for minibatch ones).
    on_step: ``on_step(step, state, metrics)`` after each round trip; ``step`` counts
      completed steps, ``metrics`` maps names to NumPy arrays with one entry per step
      since the previous call.
    num_items: the training set's size, needed with an iterable ``data`` when a phase's
      length is in epochs (``init`` sees the first minibatch and this number).
    mesh: a ``jax.sharding.Mesh`` with a ``"data"`` axis: minibatches are split over its
      devices, the state replicated. Its devices may span several processes
      (``jhash.distributed``): an in-memory batch is then the whole set on every process;
      an iterable gives each process its own rows of every global minibatch, process
      ``p`` of ``P`` the ``p``-th block of ``batch_size / P`` (as
      ``jhash.data.image_pipeline`` reads them).
  Returns:
    (state, history): the final state and a dict of metric name -> NumPy array, one
    entry per step run of the phases that report it.

  Example:
    >>> import jax, numpy as np, jhash
    >>> x = np.random.default_rng(0).normal(size=(100, 16)).astype(np.float32)
    >>> method = jhash.methods.itq(8, num_iters=5)
    >>> state, history = jhash.fit(method, jax.random.key(0), {"views": (x,)}, progress=False)
    >>> history["quantization_loss"].shape
    (5,)
  """
  check_method(method)
  check_untraced(key, data)
  check_key(key)
  start = _checks.nonneg_int(start_step, "start_step")
  if start > 0 and state is None:
    raise ValueError(
      f"start_step={start} resumes a run: it needs the state that run was at (state=); "
      "to train from the start, leave start_step at 0."
    )
  if on_step is not None and not callable(on_step):
    raise TypeError(
      f"on_step must be a function (step, state, metrics); got {type(on_step).__name__}."
    )
  check_mesh(mesh, None)
  if isinstance(data, Mapping):
    if num_items is not None:
      raise ValueError(
        "num_items is only for an iterable of minibatches; an in-memory batch gives its own size."
      )
    n = check_training_batch(method, data)
    method = _api.bound(method, data)
    if state is not None:
      check_state(method, key, data, state)
    spans = _fit_checks.spans(method, n, num_steps, num_epochs)
    runner = _fit_in_memory
  else:
    if not isinstance(data, Iterable):
      raise ValueError(
        f"data must be a batch dict or an iterable of minibatch dicts; got "
        f"{_checks.describe(data)}."
      )
    if any(p.batch_size is None for p in method.phases):
      raise ValueError(
        f"{method.name} trains on the whole set at every step of a phase: "
        "pass the training batch, not an iterable of minibatches."
      )
    n = None if num_items is None else _checks.positive_int(num_items, "num_items")
    if isinstance(getattr(data, "made_for", None), _stream_checks.RunOf):
      _stream_checks.check_made_for(data.made_for, key, start, n)
    if method.bind is not None:
      raise ValueError(
        f"{method.name} reads sizes from its whole training batch; pass it "
        "in memory, not as an iterable."
      )
    spans = _fit_checks.spans(method, n, num_steps, num_epochs)
    runner = _fit_stream
  check_start(method, start, spans[-1].stop)
  if log_every is not None:
    log_every = _checks.positive_int(log_every, "log_every")
  donate = _checks.flag(donate, "donate")
  progress = _checks.flag(progress, "progress")
  run = _Run(
    method,
    key,
    spans,
    log_every,
    on_step,
    donate,
    mesh,
    n,
    _progress_bar(method, start, spans[-1].stop, progress),
    {},
    data,
  )
  try:
    state = runner(run, data, start, state)
  finally:
    if run.bar is not None:
      run.bar.close()
  _check_state_finite(run, state)
  return state, _stack(run.history)


def _remedy(run) -> str:
  """What to try after a divergence, the inputs' values named (``_api.divergence_remedy``)."""
  batch = run.data if isinstance(run.data, Mapping) else None
  remedy = _api.divergence_remedy(run.method, batch)
  return remedy[0].upper() + remedy[1:] + "."


def _check_state_finite(run, state) -> None:
  """Raise FloatingPointError when the trained state holds NaN that no metric reported (a
  closed-form method's ``init`` on inputs too large for float32, say)."""
  bad = _api.nonfinite_fields(state)
  if bad:
    raise FloatingPointError(
      f"training diverged: {run.method.name}'s trained state holds NaN or inf in "
      f"{', '.join(bad[:3])}. {_remedy(run)}"
    )


class _Run(NamedTuple):
  """What one ``fit`` call carries from phase to phase (``history`` fills as it runs)."""

  method: _api.HashingMethod
  key: jax.Array
  spans: tuple  # Span per phase: its global steps
  log_every: int | None
  on_step: Callable | None
  donate: bool
  mesh: Mesh | None
  n: int | None  # the training set's size (None: a stream of unknown size)
  bar: object  # a progress bar, or None
  history: dict  # metric name -> list of arrays, one per round trip
  data: object  # the training batch, or the iterable of minibatches (for error messages)


def _every(run: _Run, phase: _api.Phase) -> int:
  """Steps per host round trip in ``phase``."""
  if run.log_every is not None:
    return run.log_every
  if phase.batch_size is None:
    return 1
  return min(100, max(1, (run.n or 100) // phase.batch_size))


def _record(run: _Run, phase: _api.Phase, metrics, step: int, state, count: int) -> None:
  """Keep one round trip's metrics (``count`` steps ending at ``step``), call ``on_step``;
  a non-finite metric stops the run (the check costs no extra host sync: the metrics are
  on the host already)."""
  for name, value in metrics.items():
    if not isinstance(value, (np.ndarray, jax.Array)):  # a tuple or dict of a step's values
      raise ValueError(
        f"{run.method.name}: metric {name!r} of phase {phase.name!r} must be an array (a "
        f"number or a fixed-shape array a step); got {type(value).__name__}: return each "
        "part as a metric of its own."
      )
  _check_finite(run, phase, metrics, step, count)
  for name, value in metrics.items():
    value, earlier = np.asarray(value), run.history.get(name)
    if earlier and earlier[0].shape[1:] != value.shape[1:]:
      raise ValueError(
        f"{run.method.name}: metric {name!r} of phase {phase.name!r} has shape "
        f"{value.shape[1:]} a step, its earlier steps {earlier[0].shape[1:]}: a metric keeps "
        "one shape over the run (give a per-item metric a name per phase)."
      )
    run.history.setdefault(name, []).append(value)
  if run.on_step is not None:
    run.on_step(step, state, metrics)
  if run.bar is not None:
    run.bar.update(count)


def _check_finite(run, phase: _api.Phase, metrics, step: int, count: int) -> None:
  """Raise FloatingPointError at the first metric that is NaN or infinite, naming the
  phase, the step and the metric's last finite value."""
  history = run.history
  for name, value in metrics.items():
    rows = np.asarray(value).reshape(count, -1)
    if not np.issubdtype(rows.dtype, np.floating):
      continue
    finite = np.isfinite(rows).all(axis=1)
    if finite.all():
      continue
    at = int(np.argmin(finite))
    earlier = [np.asarray(v).reshape(len(v), -1) for v in history.get(name, [])]
    seen = np.concatenate(earlier + [rows[:at]])
    good = seen[np.isfinite(seen).all(axis=1)]
    last = (
      f"its last finite value was {np.array2string(good[-1].squeeze(), precision=6)}"
      if len(good)
      else "it was never finite"
    )
    raise FloatingPointError(
      f"training diverged: {name} is {np.array2string(rows[at].squeeze(), precision=6)} "
      f"at step {step - count + at} (phase {phase.name!r}); {last}. {_remedy(run)}"
    )


def _start_state(run, state, make):
  if state is None:
    state = make()
  elif run.donate:
    state = _copy_state(state)
  if run.mesh is not None:
    state = jax.device_put(state, _replicated(run.mesh))
  return state


def _fit_in_memory(run, batch, start, state):
  batch = dict(batch)
  if run.mesh is not None:
    batch = jax.device_put(batch, _replicated(run.mesh))
  state = _start_state(
    run, state, lambda: _jit_init(run.method, None)(_order.init_key(run.key), batch)
  )
  n = _api.batch_size_of(batch)
  for span in run.spans:
    step = max(start, span.start)
    every = _every(run, span.phase)
    size = None if span.phase.batch_size is None else min(span.phase.batch_size, n)
    check_mesh(run.mesh, size)
    fn = _jit_loop(span.phase.update, size, every, run.donate, run.mesh)
    while step < span.stop:
      count = min(every, span.stop - step)
      state, buffers = fn(
        state,
        batch,
        run.key,
        jnp.int32(step - span.start),
        jnp.int32(count),
        jnp.int32(span.start),
        jnp.int32(span.index),
      )
      metrics = jax.tree.map(lambda v: v[:count], to_host(buffers))
      step += count
      _record(run, span.phase, metrics, step, state, count)
  return state


def _fit_stream(run, stream, start, state):
  it = iter(stream)
  first = next(it, None)
  if first is None and run.spans[-1].stop > start:
    raise ValueError("data: the iterable of minibatches is empty.")
  if first is not None:
    _checks.batch(first, "minibatch")
    _stream_checks.check_index(first, run.n)
    if run.n is None:
      _stream_checks.check_sized_without_num_items(
        run, {k: v for k, v in first.items() if k != "index"}
      )
    it = itertools.chain([first], it)

  def make():
    if first is None:
      raise ValueError("data: the iterable is empty and no state was given.")
    sample = {k: v for k, v in first.items() if k != "index"}
    if run.mesh is not None:  # every process inits from the whole first minibatch
      sample = _shards.whole_minibatch(sample)
    return init(run.method, run.key, sample, num_items=run.n)

  if state is not None and first is not None:  # as fit checks an in-memory run's
    check_state(run.method, run.key, {k: v for k, v in first.items() if k != "index"}, state, run.n)
  state = _start_state(run, state, make)
  step = start
  for span in run.spans:
    step = max(step, span.start)
    check_mesh(run.mesh, span.phase.batch_size)
    fn = _jit_step(span.phase.update, run.donate, run.n)
    size = span.phase.batch_size  # this process's rows of each: once per phase, not per step
    rows = size if run.mesh is None else _shards.local_rows(_split(run.mesh), size)
    every = _every(run, span.phase)
    pending: list = []
    while step < span.stop:
      minibatch = next(it, None)
      if minibatch is None:
        raise ValueError(
          f"data: the iterable of minibatches ended after {step - start} "
          f"minibatches; the schedule needs {run.spans[-1].stop - start}."
        )
      try:
        _checks.batch(minibatch, "minibatch")
        _stream_checks.check_index(minibatch, run.n)
      except ValueError as e:
        raise ValueError(f"minibatch of step {step}: {e}") from None
      _stream_checks.check_same_views(first, minibatch, step)
      _stream_checks.check_by_method(run.method, minibatch, step)
      if np.shape(minibatch["index"])[0] != rows:
        share = "" if rows == size else f" ({rows} of each global minibatch's {size} here)"
        raise ValueError(
          f"minibatch must hold this process's rows of batch_size = {size} items{share} "
          f"(phase {span.phase.name!r}); got {np.shape(minibatch['index'])[0]}."
        )
      minibatch = dict(minibatch)
      if isinstance(minibatch["index"], np.ndarray):  # NumPy's int64, quietly (checked)
        minibatch["index"] = minibatch["index"].astype(np.int32, copy=False)
      if run.mesh is not None:  # this process's rows of one global minibatch
        _stream_checks.check_rows(minibatch, rows)
        minibatch = _shards.global_minibatch(minibatch, _split(run.mesh), size)
      state, metrics = fn(state, minibatch, _order.step_key(run.key, step))
      pending.append(metrics)
      step += 1
      if len(pending) == every or step == span.stop:
        stacked = jax.tree.map(lambda *v: np.stack(v), *to_host(pending))
        _record(run, span.phase, stacked, step, state, len(pending))
        pending = []
  return state


def _stack(history):
  return {name: np.concatenate(values) for name, values in history.items()}
