"""One train step for every deep method: loss, gradients, optax update, batch statistics.

A deep method supplies its loss; this module supplies the rest, as the Flax ImageNet
example's ``train_step`` does:

* ``TrainState``: a network's variables (parameters and, for BatchNorm networks, batch
  statistics) and the optimiser's state, a NamedTuple of pytrees of arrays;
* ``create(model, optimizer, key, x)``: the initial ``TrainState``;
* ``make_step(model, optimizer, loss_fn)``: a pure function ``step(state, x, context)
  -> (state, loss, aux, outputs)`` that computes ``loss_fn(outputs, context)`` on the
  network's training-mode outputs, its gradient with respect to the parameters, the
  optax update and the new batch statistics.

``context`` is any pytree the loss reads (labels, pair similarities, a memory bank,
target codes); ``outputs`` (``jhash.models.HashOutputs``, from the parameters before
the update) let a method refresh a memory of the training set after the step.

Data parallelism needs nothing here: the runner (``jhash.fit(..., mesh=...)``) splits a
minibatch over the ``"data"`` axis of a mesh and replicates the state, and XLA
partitions the step, reducing the gradients (and BatchNorm's batch moments) over the
devices. A step on 8 devices equals the step on one, up to float rounding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jhash import _checks
from jhash import models as models_lib


__all__ = [
  "TrainState",
  "create",
  "from_variables",
  "variables",
  "make_step",
  "input_statistics",
  "standardize",
  "predict",
]


class TrainState(NamedTuple):
  """A network's variables and its optimiser's state."""

  params: Any  # pytree of float32 arrays: the network's parameters
  batch_stats: Any  # pytree of float32 arrays: BatchNorm's running moments ({} if none)
  opt_state: Any  # pytree of arrays: the optax state (e.g. Adam's moments)
  step: jax.Array  # int32 []: optimiser steps taken


def _check_state(state, name: str = "state") -> None:
  if not isinstance(state, TrainState):
    raise TypeError(f"{name} must be a jhash.training.TrainState; got {_checks.describe(state)}.")


def _check_model(model) -> None:
  if not isinstance(model, models_lib.Model):
    raise TypeError(
      f"model must be a jhash.models.Model (jhash.models.model / backbone); got "
      f"{_checks.describe(model)}."
    )


def _check_optimizer(optimizer) -> None:
  if not isinstance(optimizer, optax.GradientTransformation):
    raise TypeError(
      f"optimizer must be an optax GradientTransformation (optax.adam(1e-3), say); got "
      f"{_checks.describe(optimizer)}."
    )


def variables(state: TrainState) -> dict:
  """The Flax variables of a ``TrainState``: ``{"params", ("batch_stats")}``."""
  _check_state(state)
  out = {"params": state.params}
  if state.batch_stats:
    out["batch_stats"] = state.batch_stats
  return out


def create(
  model: models_lib.Model, optimizer: optax.GradientTransformation, key: jax.Array, x: jax.Array
) -> TrainState:
  """Initialise a network's variables on the sample ``x`` [n, ...] and its optimiser."""
  _check_model(model)
  _check_optimizer(optimizer)
  return from_variables(model.init(key, x), optimizer)


def from_variables(variables: dict, optimizer: optax.GradientTransformation) -> TrainState:
  """A ``TrainState`` at step 0 that starts from given Flax ``variables``."""
  _check_optimizer(optimizer)
  if not isinstance(variables, Mapping) or "params" not in variables:
    raise ValueError(
      f"variables must be Flax variables, a dict with 'params' (and 'batch_stats' for "
      f"BatchNorm networks); got {_checks.describe(variables)}"
      f"{' with keys ' + str(list(variables)) if isinstance(variables, Mapping) else ''}."
    )
  params, batch_stats = variables["params"], variables.get("batch_stats", {})
  _check_arrays(params, "variables['params']", allow_empty=False)
  _check_arrays(batch_stats, "variables['batch_stats']", allow_empty=True)
  return TrainState(params, batch_stats, optimizer.init(params), jnp.zeros((), jnp.int32))


def _check_arrays(tree, name: str, allow_empty: bool) -> None:
  """``tree`` is a pytree (a dict, as Flax makes) of arrays, with one at least unless
  ``allow_empty``."""
  leaves = jax.tree.leaves(tree)
  arrays = all(hasattr(x, "shape") and hasattr(x, "dtype") for x in leaves)
  if not arrays or not (leaves or allow_empty):
    raise ValueError(
      f"{name} must be a tree (a dict, as Flax's init gives) of arrays; got "
      f"{_checks.describe(tree)}"
      f"{' with leaves ' + str([_checks.describe(x) for x in leaves[:2]]) if leaves else ''}."
    )


def make_step(
  model: models_lib.Model,
  optimizer: optax.GradientTransformation,
  loss_fn: Callable[[Any, Any], tuple[jax.Array, dict]],
  *,
  train: bool = True,
):
  """The train step of a network under a loss.

  Args:
    model: a ``jhash.models.Model``.
    optimizer: an optax ``GradientTransformation``.
    loss_fn: ``loss_fn(outputs, context) -> (loss float32 [], aux dict)``, where
      ``outputs`` is the network's ``HashOutputs`` in training mode on the minibatch.
    train: True or False: run the network in training mode (BatchNorm on the minibatch's
      statistics, which it updates); False keeps the running statistics (a frozen backbone).
  Returns:
    ``step(state, x, context, key=None) -> (state, loss, aux, outputs)``: pure,
    un-jitted (the caller's jitted update contains it); ``key``, when given, goes to
    ``model.apply`` (dropout's masks in AlexNet and VGG).
  """
  _check_model(model)
  _check_optimizer(optimizer)
  _checks.function(loss_fn, "loss_fn", "(outputs, context) -> (loss, aux)")
  train = _checks.flag(train, "train")

  def objective(params, batch_stats, x, context, key):
    extra = {} if key is None else {"key": key}  # a Model of the user's may take none
    outputs, new_vars = model.apply(
      variables(TrainState(params, batch_stats, None, None)), x, train=train, **extra
    )
    loss, aux = loss_fn(outputs, context)
    return loss, (aux, outputs, new_vars.get("batch_stats", {}))

  grad_fn = jax.value_and_grad(objective, has_aux=True)

  def step(state: TrainState, x: jax.Array, context: Any, key: jax.Array | None = None):
    (loss, (aux, outputs, batch_stats)), grads = grad_fn(
      state.params, state.batch_stats, x, context, key
    )
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return TrainState(params, batch_stats, opt_state, state.step + 1), loss, aux, outputs

  return step


def input_statistics(x: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Mean and scale that standardise training inputs: ``(x - mean) * scale``.

  Features [n, d]: per column, ``scale = 1 / max(std, 0.01 rms(std))`` (a column
  constant in training, such as a border pixel, is centred, not blown up). Images
  [n, H, W, C]: one mean and scale over all pixels.

  Returns:
    (mean, scale): float32 [d] each, or [] each for images. ``x`` must hold at least
    one item (a ValueError otherwise: no statistics of nothing).
  """
  _checks.rank(x, (2, 3, 4), "x", "(features [n, d] or images [n, H, W(, C)])")
  if np.shape(x)[0] == 0:
    raise ValueError(
      f"x must hold at least one item to take statistics of; got {_checks.describe(x)}."
    )
  x = jnp.asarray(x, jnp.float32)
  if x.ndim == 2:
    mean, std = jnp.mean(x, axis=0), jnp.std(x, axis=0)
    floor = 0.01 * jnp.sqrt(jnp.mean(std * std)) + 1e-12
    scale = 1.0 / jnp.maximum(std, floor)
  else:
    mean, std = jnp.mean(x), jnp.std(x)
    scale = 1.0 / jnp.maximum(std, 1e-12)
  if not isinstance(mean, jax.core.Tracer) and not (
    bool(jnp.all(jnp.isfinite(mean))) and bool(jnp.all(jnp.isfinite(scale) & (scale > 0)))
  ):
    raise ValueError(
      f"x: its mean or spread overflows float32 (values near +-3.4e38, or inf/NaN); got "
      f"{_checks.describe(x)}. Rescale the inputs."
    )
  return mean, scale


def standardize(x: jax.Array, mean: jax.Array, scale: jax.Array) -> jax.Array:
  """``(x - mean) * scale`` with ``mean`` and ``scale`` broadcast over leading axes."""
  for value, name in ((mean, "mean"), (scale, "scale")):
    tail = tuple(np.shape(x))[np.ndim(x) - np.ndim(value) :] if np.ndim(value) else ()
    if np.ndim(value) > np.ndim(x) or tuple(np.shape(value)) != tail:
      raise ValueError(
        f"{name} must have the shape of x's trailing axes, [] or {tuple(np.shape(x))[1:]} "
        f"(from input_statistics); got {_checks.describe(value)} for x {_checks.describe(x)}."
      )
    _checks.finite(value, name)
  if _checks.is_concrete(scale) and np.size(scale) and np.min(np.asarray(scale)) < 0:
    raise ValueError(
      f"scale must be >= 0 (1 / std, from input_statistics); found {np.min(np.asarray(scale))}."
    )
  lead = (1,) * (x.ndim - mean.ndim)
  return (x.astype(jnp.float32) - mean.reshape(lead + mean.shape)) * scale.reshape(
    lead + scale.shape
  )


def predict(model: models_lib.Model, state: TrainState, x: jax.Array):
  """The network's evaluation-mode outputs (``HashOutputs``) on ``x`` [n, ...]."""
  _check_model(model)
  _check_state(state)
  outputs, _ = model.apply(variables(state), x, train=False)
  return outputs
