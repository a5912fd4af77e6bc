"""What ``jhash.fit`` and its siblings check before a run (the method, its state, key,
batch and mesh), and the schedule: each phase's global step range (``schedule``,
``spans``)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh

from collections.abc import Mapping

import jax.numpy as jnp

from jhash import _api
from jhash import _checks
from jhash import _order
from jhash._loops import DATA_AXIS
from jhash._loops import _jit_init


def check_key(key) -> None:
  """One PRNG key: a typed key of shape [] or a raw uint32 [2] key."""
  typed = isinstance(key, jax.Array) and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
  if typed and key.shape == ():
    return
  if isinstance(key, jax.Array) and not typed and key.shape == (2,) and key.dtype == jnp.uint32:
    return
  hint = ""
  if typed or (isinstance(key, jax.Array) and key.ndim == 2 and key.shape[-1] == 2):
    hint = " (several keys, e.g. from jax.random.split: one fit per key, or vmap a make_train)"
  if isinstance(key, np.ndarray) and key.shape == (2,) and key.dtype == np.uint32:
    hint = " (a NumPy array: a raw key must be a JAX array, jnp.asarray(key))"
  raise ValueError(
    f"key must be one JAX PRNG key (jax.random.key(seed)); got {_checks.describe(key)}{hint}."
  )


def check_method(method) -> None:
  """A ``HashingMethod``, not its factory or its name."""
  if not isinstance(method, _api.HashingMethod):
    hint = " (call the factory: jhash.methods.NAME(num_bits, ...))" if callable(method) else ""
    raise TypeError(f"method must be a jhash.HashingMethod{hint}; got {_checks.describe(method)}.")


def check_state(
  method: _api.HashingMethod, key, batch: Mapping, state, num_items: int | None = None
) -> None:
  """``state`` is one ``method`` makes for ``batch`` (a stream's first minibatch, with
  ``num_items``): its type, arrays' shapes and dtypes (the first that differs is named),
  and its training record."""
  make = _jit_init(method, num_items)
  want = jax.eval_shape(lambda k: make(k, dict(batch)), _order.init_key(key))
  if jax.tree.structure(state) != jax.tree.structure(want) or any(
    np.shape(a) != b.shape or getattr(a, "dtype", None) != b.dtype
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(want))
  ):
    got = {jax.tree_util.keystr(p): a for p, a in jax.tree_util.tree_leaves_with_path(state)}
    made = {jax.tree_util.keystr(p): b for p, b in jax.tree_util.tree_leaves_with_path(want)}

    def layout(x):
      return (
        "absent" if x is None else f"{getattr(x, 'dtype', type(x).__name__)} {tuple(np.shape(x))}"
      )

    first = next((p for p in [*made, *got] if layout(got.get(p)) != layout(made.get(p))), None)
    where = (
      f"; its array {first} is {layout(got.get(first))} where {method.name}'s is "
      f"{layout(made.get(first))}"
      if first is not None
      else ""
    )
    raise ValueError(
      f"state must be a state {method.name} makes for this batch ({type(want).__name__}); "
      f"got {type(state).__name__}{where}. Pass the state a fit of this method (same "
      "settings, same training set) returned."
    )
  _api.check_trained(method, state, batch, use="Resume with")
  settings = getattr(method.extras, "check_state", None)
  if callable(settings):  # the state's own settings (e.g. CDH's gamma), on concrete values
    settings(state)


def check_some_state(state) -> None:
  """A method's state: a NamedTuple of arrays (not None, not a dict of other things)."""
  if state is None or not jax.tree.leaves(state) or not hasattr(state, "_fields"):
    raise TypeError(
      f"state must be a trained state (from jhash.fit, jhash.init, make_train or "
      f"jhash.restore); got {_checks.describe(state)}."
    )


def check_untraced(key, data) -> None:
  leaves = jax.tree.leaves(data) if isinstance(data, Mapping) else []
  if any(isinstance(x, jax.core.Tracer) for x in [key, *leaves]):
    raise TypeError(
      "jhash.fit is a host loop (it fetches metrics, shows progress, calls back) and "
      "cannot run under jit or vmap. For one traceable function of the key, use "
      "train = jhash.make_train(method, batch); jax.vmap(train, in_axes=(0, None))(keys, "
      "batch)."
    )


def check_training_batch(method: _api.HashingMethod, batch: Mapping) -> int:
  n = _checks.batch(batch)
  if n == 0:
    raise ValueError(f"batch: {method.name} needs training items; the views have 0 rows.")
  if method.check_batch is not None:
    method.check_batch(batch)
  return n


def check_mesh(mesh, batch_size: int | None) -> None:
  if mesh is None:
    return
  if not isinstance(mesh, Mesh) or DATA_AXIS not in mesh.axis_names:
    raise ValueError(f"mesh must be a jax.sharding.Mesh with a '{DATA_AXIS}' axis; got {mesh!r}.")
  types = getattr(mesh, "axis_types", None)
  if types is not None and any(t != jax.sharding.AxisType.Auto for t in types):
    raise ValueError(
      f"mesh must have Auto axes (fit leaves the placement to XLA); its axes are {types} "
      "(jax.make_mesh's default is Explicit): make it with jax.make_mesh(shape, names, "
      "axis_types=(jax.sharding.AxisType.Auto,) * len(names)) or jax.sharding.Mesh(devices, "
      "names)."
    )
  size = mesh.shape[DATA_AXIS]
  if batch_size is not None and batch_size % size:
    raise ValueError(
      f"batch_size ({batch_size}) must be a multiple of the mesh's "
      f"'{DATA_AXIS}' axis ({size} devices) to split minibatches evenly."
    )


def check_start(method: _api.HashingMethod, start: int, total: int) -> None:
  """A resumed run's ``start_step`` lies within the schedule (at its end: a finished run,
  resumed, runs no step)."""
  if start > total:
    raise ValueError(
      f"start_step={start} is past the end of {method.name}'s schedule, {total} steps: "
      "a state at that step has no step left to run. Pass the step the state was saved "
      "at, or num_steps (or num_epochs) for a longer schedule."
    )


class Span(NamedTuple):
  """A phase's place in the run: global steps ``start .. stop - 1``."""

  index: int
  phase: _api.Phase
  start: int
  stop: int


def schedule(
  method: _api.HashingMethod,
  num_items: int | None = None,
  *,
  num_steps: int | None = None,
  num_epochs: int | None = None,
) -> int:
  """The number of steps ``jhash.fit`` runs by default (or with these overrides);
  ``num_items``, the training set's size, is None or an int >= 1."""
  check_method(method)
  if num_items is not None:
    num_items = _checks.positive_int(num_items, "num_items")
  return spans(method, num_items, num_steps, num_epochs)[-1].stop


def spans(method, n: int | None, num_steps, num_epochs) -> list[Span]:
  """Each phase's global step range. ``num_epochs`` replaces the length of a method of
  one phase; ``num_steps`` is the run's total (the last phase cut or extended)."""
  if num_steps is not None and num_epochs is not None:
    raise ValueError("give num_steps or num_epochs, not both.")
  _api.check_phases(method)
  phases = method.phases
  if num_epochs is not None:
    num_epochs = _checks.nonneg_int(num_epochs, "num_epochs")
    if len(phases) > 1:
      raise ValueError(
        f"{method.name} trains in {len(phases)} phases "
        f"({', '.join(p.name for p in phases)}): give num_steps, the total."
      )
    phases = (phases[0]._replace(num_epochs=num_epochs, num_steps=None),)
  if num_steps is not None and len(phases) == 1:
    return [Span(0, phases[0], 0, _checks.nonneg_int(num_steps, "num_steps"))]
  lengths = [_api.phase_length(p, n) for p in phases]
  if num_steps is not None:
    total = _checks.nonneg_int(num_steps, "num_steps")
    lengths[-1] += total - sum(lengths)
    for i in range(len(lengths) - 1, 0, -1):  # cut from the end
      if lengths[i] < 0:
        lengths[i - 1] += lengths[i]
        lengths[i] = 0
    lengths[0] = max(lengths[0], 0)
  spans, at = [], 0
  for i, (phase, length) in enumerate(zip(phases, lengths)):
    spans.append(Span(i, phase, at, at + length))
    at += length
  return spans
