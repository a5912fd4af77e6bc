"""A network coder: one place for a hashing network, its weights, its train step and its codes.

Every method that learns a network (``pairwise`` and the five base models, ADSH, HBMP's
hash functions, MCH's base) owns one ``Coder``, a NamedTuple of pure functions over a
``CoderState``:

* ``init(key, batch) -> CoderState``: the input statistics of the training views, the
  network's variables (fresh, or the ``init_variables`` given: a Flax variables tree, a
  jhash state, torchvision weights) and the optimiser's state;
* ``step(state, x, loss_fn, context, key=None) -> (state, loss, aux, outputs)``: one optax step of
  ``loss_fn(outputs, context)`` on the network's raw inputs ``x`` (``jhash.training``);
* ``outputs(state, x)``: evaluation-mode ``HashOutputs`` (logits and features) of the
  network's raw inputs ``x`` (``read(batch)``); ``apply(state, params, x)`` the same with
  the parameters ``params``, so ``jax.grad`` of a loss of ``apply`` with respect to
  ``state.train.params`` is the gradient of that loss;
* ``scores(state, batch)`` / ``features(state, batch)`` / ``encode(state, batch)``: the
  logits, the penultimate features the head reads, the codes, ``encode_chunk``
  items at a time (``lax.map``), so a large database is coded in bounded memory;
* ``read(batch)``: what the network reads from a batch; ``check_batch(batch)``: the
  complete check of a batch (rank, size, channels, dtype, and the head's width).

``trainable="head"`` trains the hash head (the layer named "projection") over a frozen
backbone: the backbone's parameters get no update and its BatchNorm runs on its running
statistics, as a pretrained feature extractor is used.

Inputs are standardised by the statistics of the training inputs
(``jhash.training.input_statistics``), kept in the state: encoding standardises with
the same numbers, so a database must come in the training views' dtype (``jhash.encode``
refuses integer pixels where training had floats, and the reverse).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import traverse_util

from jhash import _api
from jhash import _checks
from jhash import codes as codes_lib
from jhash import models
from jhash import training
from jhash._coder_weights import HEAD
from jhash._coder_weights import CoderState
from jhash._coder_weights import Weights
from jhash._coder_weights import check_variables
from jhash._coder_weights import given_statistics
from jhash._coder_weights import initial_variables
from jhash._coder_weights import load_weights
from jhash._coder_weights import save_weights

__all__ = [
  "coder",
  "Coder",
  "CoderState",
  "HEAD",
  "TRAINABLE",
  "head_only",
  "bit_balance",
  "default_network",
  "initial_variables",
  "check_variables",
  "check_params",
  "save_weights",
  "load_weights",
  "Weights",
]

#: The values of ``trainable``: every parameter trains, or the hash head only.
TRAINABLE = ("all", "head")
_NO_PARAMS = object()
LossFn = Callable[[models.HashOutputs, Any], tuple[jax.Array, dict]]


class Coder(NamedTuple):
  """Pure functions of one hashing network (module docstring)."""

  init: Callable[[jax.Array, dict], CoderState]
  # step(state, x, loss_fn, context, key=None): ``key`` draws dropout's masks (AlexNet, VGG).
  step: Callable[..., tuple[CoderState, jax.Array, dict, models.HashOutputs]]
  outputs: Callable[[CoderState, jax.Array], models.HashOutputs]
  # apply(state, params, x): ``outputs`` with the parameters ``params`` in place of the
  # state's, to differentiate a loss with respect to them.
  apply: Callable[[CoderState, Any, jax.Array], models.HashOutputs]
  scores: Callable[[CoderState, dict], jax.Array]  # float32 [n, K]
  features: Callable[[CoderState, dict], jax.Array]  # float32 [n, F], what the head reads
  encode: Callable[[CoderState, dict], jax.Array]  # int8 [n, K] in {-1, +1}
  read: Callable[[dict], jax.Array]  # batch -> the network's inputs
  check_batch: Callable[[dict], int]  # outside jit: the batch fits
  network: Callable[[Any], models.Model]  # the Model for inputs like x
  num_bits: int
  view: int | None


def head_only(optimizer: optax.GradientTransformation) -> optax.GradientTransformation:
  """``optimizer`` on the hash head's parameters, no update for every other parameter."""
  _check_optimizer(optimizer)

  def labels(params):
    return {name: "train" if name == HEAD else "frozen" for name in params}

  return optax.multi_transform({"train": optimizer, "frozen": optax.set_to_zero()}, labels)


def _check_optimizer(optimizer: Any) -> None:
  if not isinstance(optimizer, optax.GradientTransformation):
    raise ValueError(
      f"optimizer must be an optax.GradientTransformation (e.g. optax.adam(1e-3)); got "
      f"{_checks.describe(optimizer)}."
    )


def bit_balance(logits: jax.Array) -> jax.Array:
  """float32 []: the mean over bits of ``|mean code|`` of a minibatch (0 when balanced).

  Codes are ``jhash.codes.sign`` of the logits, so NaN logits count as -1 (a diverged
  network reads as all-equal bits, 1.0); ``jhash.fit`` reports the NaN loss itself."""
  codes = codes_lib.sign(logits).astype(jnp.float32)
  return jnp.mean(jnp.abs(jnp.mean(codes, axis=0)))


def _item_shape(x) -> tuple[int, ...]:
  return tuple(int(d) for d in np.shape(x)[1:])


def _check_state(state: Any, name: str) -> None:
  if not isinstance(state, CoderState):
    raise ValueError(
      f"state must be the network's CoderState (jhash.network(method).get(state) gives it "
      f"from a method's state); got {_checks.describe(state)}."
    )


@functools.lru_cache(maxsize=64)
def _param_shapes(model: models.Model, item_shape: tuple[int, ...]) -> dict:
  """{path: shape} of the parameters ``model`` makes for items of ``item_shape``."""
  sample = jax.ShapeDtypeStruct((1,) + item_shape, jnp.float32)
  variables = jax.eval_shape(model.init, jax.random.key(0), sample)
  flat = traverse_util.flatten_dict(dict(variables["params"]))
  return {"/".join(k): tuple(v.shape) for k, v in flat.items()}


def check_params(params: Any, model: models.Model, item_shape: tuple[int, ...], name: str):
  """Raise a ValueError naming ``name`` unless ``params`` are ``model``'s for ``item_shape``.

  The error names the first parameter that is missing or of another shape: a state trained at another code length, or on inputs of another shape
  (another backbone), does not fit.
  """
  want = _param_shapes(model, tuple(item_shape))
  if not isinstance(params, Mapping):
    raise ValueError(
      f"{name}: the network's parameters must be a dict of its layers; got "
      f"{_checks.describe(params)}."
    )
  got = {
    "/".join(k): tuple(np.shape(v)) for k, v in traverse_util.flatten_dict(dict(params)).items()
  }
  for path, shape in want.items():
    if got.get(path) != shape:
      has = "no such parameter" if path not in got else f"shape {got[path]}"
      raise ValueError(
        f"{name}: the network for items of shape {tuple(item_shape)} has parameter "
        f"{path!r} of shape {shape}; the given parameters have {has} (trained at another "
        f"code length, or on inputs of another shape?)."
      )
  extra = sorted(set(got) - set(want))
  if extra:
    raise ValueError(
      f"{name}: the given parameters have {extra[0]!r}, which the network for items of "
      f"shape {tuple(item_shape)} does not have ({len(extra)} such entries)."
    )


@functools.lru_cache(maxsize=32)
def default_network(
  item_shape: tuple[int, ...], num_bits: int, arch: str | None = None
) -> models.Model:
  """``jhash.models.backbone`` for one item's shape (kept, so jit caches are shared);
  ``arch`` names the network ("resnet18", "alexnet", ...), None picks it by the shape."""
  return models.backbone(item_shape, num_bits, **({} if arch is None else {"arch": arch}))


def _check_network(network: Any) -> None:
  archs = (*models.RESNET_ARCHS, *models.CLASSIC_ARCHS)
  if isinstance(network, str) and network not in archs:
    raise ValueError(
      f"network (backbone) named by a string must be one of {', '.join(map(repr, archs))}; "
      f"got {network!r}."
    )
  if network is not None and not (isinstance(network, (models.Model, str)) or callable(network)):
    raise ValueError(
      f"network (backbone) must be a jhash.models.Model, a function item_shape -> Model or "
      f"an architecture's name ({', '.join(archs)}); got {_checks.describe(network)}."
    )


def coder(
  num_bits: int,
  *,
  network: models.Model | Callable | None = None,
  view: int | None = None,
  images: bool | None = None,
  optimizer: optax.GradientTransformation | None = None,
  learning_rate: float = 1e-3,
  init_variables: Any = None,
  trainable: str = "all",
  standardize: bool = True,
  encode_chunk: int = 256,
  name: str = "network",
) -> Coder:
  """A network coder (module docstring).

  Args:
    num_bits: K, the width of the hash head.
    network: a ``jhash.models.Model`` whose head has ``num_bits`` outputs, a function
      ``network(item_shape) -> Model``, or an architecture's name ("resnet18",
      "resnet50", "alexnet", "vgg16": ``jhash.models.backbone(item_shape, num_bits,
      arch=network)``); default ``jhash.models.backbone`` of the input.
    view: the view the network reads (None: the only image view, or all features).
    images: None reads the only image view, or all features (``network_inputs``); True
      reads one image view [n, H, W(, C)] (refusing features); False reads flat features
      [n, d], images flattened.
    optimizer: an optax optimiser (default Adam at ``learning_rate``).
    learning_rate: Adam's step size when no optimizer is given.
    init_variables: where the network starts: None (fresh, from the key); a Flax
      variables tree ``{"params": ..., ("batch_stats": ...)}``, which may leave out the
      hash head; a jhash state of a network method (its variables and input statistics);
      a ``.npz`` file written by ``save_weights`` (the same; the suffix in any case,
      ``.NPZ`` too); a torchvision ResNet-18/50, AlexNet or VGG-16 state dict file
      (``.safetensors``, or ``.pth`` with torch; see ``jhash.models.load_torchvision``)
      for a network of that layout (``backbone(..., arch=...)``); or a function
      ``variables -> variables`` applied to the fresh ones. Shapes are checked against
      the network: a difference names the first layer that differs. A hash head of
      another width (a classifier's) is left out: the network starts with a fresh one.
    trainable: "all", or "head": only the hash head trains, the backbone frozen.
    standardize: standardise the inputs by the training inputs' statistics; False reads
      them as they come (mean 0, scale 1: MCH's policy reads states already scaled). A
      jhash state or ``.npz`` given as ``init_variables`` brings the statistics its
      network was trained with: those standardise the inputs, whatever ``standardize``
      says (torchvision's files bring none).
    encode_chunk: items per chunk when coding.
    name: the owner's name, in errors.
  Returns:
    A ``Coder``.
  """
  num_bits = _api.check_num_bits(num_bits)
  encode_chunk = _checks.positive_int(encode_chunk, "encode_chunk")
  if trainable not in TRAINABLE:
    raise ValueError(
      f"trainable must be one of {', '.join(map(repr, TRAINABLE))}; got {trainable!r}."
    )
  _check_network(network)
  if optimizer is None and not callable(learning_rate):  # an optax schedule is callable
    _checks.scalar(learning_rate, "learning_rate", low=0, strict=True)
  if optimizer is not None:
    _check_optimizer(optimizer)
  standardize = _checks.flag(standardize, "standardize")
  if images is not None:
    images = _checks.flag(images, "images")
  if not isinstance(name, str):
    raise ValueError(f"name must be a str; got {_checks.describe(name)}.")
  optimizer = optax.adam(learning_rate) if optimizer is None else optimizer
  if trainable == "head":
    optimizer = head_only(optimizer)
  train_mode = trainable == "all"  # a frozen backbone's BatchNorm keeps its statistics

  def read(batch):
    if not isinstance(batch, Mapping) or "views" not in batch:
      raise ValueError(
        f"batch must be a dict with keys 'views' and optionally 'labels' (read takes a "
        f"batch, not the network's inputs); got {_checks.describe(batch)}."
      )
    if images is None:
      return _api.network_inputs(batch, view)
    return _api.image_view(batch, view, name) if images else _api.view_features(batch, view)

  def raw_inputs(batch):
    """The views the network reads, as given (``read`` casts them to float32)."""
    views = batch["views"]
    chosen = [views[view]] if view is not None else [v for v in views if v is not None]
    kinds = {jnp.issubdtype(v.dtype, jnp.integer) for v in chosen}
    return chosen[0] if len(kinds) == 1 else None

  def model_for(x) -> models.Model:
    if isinstance(network, models.Model):
      return network
    if network is None or isinstance(network, str):
      return default_network(_item_shape(x), num_bits, network)
    return network(_item_shape(x))

  def init(key, batch):
    x = read(batch)
    if standardize:
      mean, scale = training.input_statistics(x)
    else:
      mean, scale = jnp.zeros((), jnp.float32), jnp.ones((), jnp.float32)
    model = model_for(x)
    sample = training.standardize(x[:1], mean, scale)
    variables = model.init(key, sample)
    variables, stats = initial_variables(init_variables, variables, model, raw_inputs(batch))
    if stats is not None:  # the weights' own input statistics, whatever standardize says
      mean, scale = given_statistics(stats, jnp.zeros(x.shape[1:] if x.ndim == 2 else ()))
    return CoderState(training.from_variables(variables, optimizer), mean, scale)

  def step(state, x, loss_fn, context, key=None):
    train_step = training.make_step(model_for(x), optimizer, loss_fn, train=train_mode)
    new, value, aux, out = train_step(
      state.train, training.standardize(x, state.mean, state.scale), context, key
    )
    return state._replace(train=new), value, aux, out

  def checked_model(state, x, params=_NO_PARAMS):
    """The Model for ``x``, once ``x``, ``state`` (and ``params``) are checked to fit it."""
    if isinstance(x, Mapping):
      raise ValueError(
        "x must be the network's inputs, an array [n, ...]; got a dict "
        "(read(batch) gives the inputs of a batch)."
      )
    if not hasattr(x, "shape"):
      raise ValueError(
        f"x must be the network's inputs, an array [n, ...]; got {_checks.describe(x)}."
      )
    _check_state(state, name)
    if jnp.ndim(state.mean) == 1 and (jnp.ndim(x) != 2 or x.shape[-1] != state.mean.shape[0]):
      raise ValueError(
        f"x: {name} reads features [n, {state.mean.shape[0]}] (its training data's "
        f"width); got {_checks.describe(x)}."
      )
    model = model_for(x)
    models.check_input(model, x, "x")
    check_params(state.train.params, model, _item_shape(x), "state")
    if params is not _NO_PARAMS:
      check_params(params, model, _item_shape(x), "params")
    return model

  def outputs(state, x):
    model = checked_model(state, x)
    return training.predict(model, state.train, training.standardize(x, state.mean, state.scale))

  def apply(state, params, x):
    checked_model(state, x, params)
    return outputs(state._replace(train=state.train._replace(params=params)), x)

  def fits(state, batch):
    """A batch of features of the width the network was trained on (its standardisation's),
    and a CoderState (not the method's whole state)."""
    _checks.batch(batch)
    _check_state(state, name)
    item = jax.eval_shape(read, batch).shape[1:]
    if jnp.ndim(state.mean) == 1 and item != (state.mean.shape[0],):
      views = [v for v in batch["views"] if v is not None] if view is None else []
      if view is not None and view < len(batch["views"]) and batch["views"][view] is not None:
        views = [batch["views"][view]]
      given = tuple(views[0].shape[1:]) if len(views) == 1 else item
      got = f"width {item[0]}" if len(item) == 1 else f"items of shape {tuple(given)}"
      raise ValueError(
        f"views: {name}'s network reads features of width {state.mean.shape[0]} (its "
        f"training data's), items of shape ({state.mean.shape[0]},); the batch's have {got}."
      )
    x = jax.eval_shape(read, batch)
    model = model_for(x)
    models.check_input(model, x, "views")
    check_params(state.train.params, model, _item_shape(x), "state")

  def scores(state, batch):
    fits(state, batch)
    logits = _api.map_in_chunks(lambda b: outputs(state, read(b)).logits, batch, encode_chunk)
    return logits.astype(jnp.float32)

  def features(state, batch):
    fits(state, batch)
    out = _api.map_in_chunks(lambda b: outputs(state, read(b)).features, batch, encode_chunk)
    return out.astype(jnp.float32)

  def encode(state, batch):
    return codes_lib.sign(scores(state, batch))

  checked_inputs: set = set()  # item shapes and dtypes whose network was checked

  def check_batch(batch):
    n = _checks.batch(batch)
    x = jax.eval_shape(read, batch)
    seen = (tuple(x.shape[1:]), str(x.dtype))
    if seen in checked_inputs:  # a stream's later minibatches: no network traced again
      return n
    model = model_for(x)
    models.check_input(model, x, "views")
    width = jax.eval_shape(
      lambda v: model.apply(model.init(jax.random.key(0), v), v)[0],
      jax.ShapeDtypeStruct((1,) + x.shape[1:], jnp.float32),
    ).logits.shape
    if width[-1] != num_bits:
      raise ValueError(
        f"{name}'s network must have a hash head of num_bits = {num_bits} "
        f"outputs; its head has {width[-1]}."
      )
    checked_inputs.add(seen)
    return n

  return Coder(
    init,
    step,
    outputs,
    apply,
    scores,
    features,
    encode,
    read,
    check_batch,
    model_for,
    num_bits,
    view,
  )
