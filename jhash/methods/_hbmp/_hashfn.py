"""HBMP stage (ii): hash functions fitted to the inferred target codes (Cakir et al., Sec. 3.3).

Each bit is a thresholded score, ``f_t(x) = sign(psi_t(x))`` (Eq. 11), and the functions
are fitted so that the codes of the training instances match their target codes ``u``
(the code of each instance's class, label set, or of the instance itself). The Hamming
loss is bounded above by the hinge loss (Eq. 12, ``jhash.losses.hinge_loss``),
minimised by minibatch Adam on the shared train step (``jhash.training``). ``psi`` is
a ``jhash.models`` network: linear (an MLP without hidden layers) or an MLP on
standardised features, or the small CNN on images.

``hash_functions(kind, num_bits, ...)`` returns ``HashFunctions``, pure functions over a
``HashFnState`` (the network's ``TrainState`` and the input standardisation):

* ``init(key, inputs)``: input statistics and the network's parameters;
* ``step(state, inputs, targets)``: one minibatch step (``hbmp`` runs it as its
  minibatch phase);
* ``epoch(state, inputs, targets, key)``: one pass over the training set in minibatches
  (a ``lax.scan`` of ``step`` over a permutation drawn from ``key``), for
  ``fit_hash_functions``;
* ``scores`` / ``encode``: ``psi(x)`` and ``sign(psi(x))``, in chunks (``lax.map``), so
  a large database is encoded in bounded memory;
* ``inputs(batch)``: the array of a batch the network reads (features [n, d], or images
  [n, H, W, C] for the CNN).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from jhash import _api
from jhash import _checks
from jhash import codes as codes_lib
from jhash import losses
from jhash import models
from jhash import training

KINDS = ("linear", "mlp", "cnn")
IMAGE_KINDS = ("cnn",)
DEFAULT_LEARNING_RATES = {"linear": 1e-2, "mlp": 1e-3, "cnn": 1e-3}


class HashFnState(NamedTuple):
  """The hash functions' network state and input standardisation."""
  train: training.TrainState  # parameters, (batch statistics,) optimiser state, step
  mean: jax.Array             # float32 [d] (features) or [] (images): subtracted
  scale: jax.Array            # float32, the shape of ``mean``: multiplies the centred inputs

  @property
  def params(self) -> Any:
    """The network's parameters."""
    return self.train.params

  @property
  def step(self) -> jax.Array:
    """int32 [], minibatch steps taken."""
    return self.train.step


class HashFunctions(NamedTuple):
  """Pure functions of one family of hash functions (``hash_functions``)."""
  init: Callable[[jax.Array, jax.Array], HashFnState]
  epoch: Callable[[HashFnState, jax.Array, jax.Array, jax.Array], tuple[HashFnState, dict]]
  scores: Callable[[HashFnState, jax.Array], jax.Array]   # float32 [n, b], psi(x)
  encode: Callable[[HashFnState, jax.Array], jax.Array]   # int8 [n, b], sign(psi(x))
  inputs: Callable[[dict], jax.Array]                     # batch -> what psi reads
  check_batch: Callable[[dict], int]                      # outside jit: the views fit
  num_bits: int
  num_epochs: int
  kind: str
  step: Callable[[HashFnState, jax.Array, jax.Array], tuple[HashFnState, dict]]
  batch_size: int
  model: models.Model | None                              # None: chosen by the input
  view: int | None = None                                 # the view read (None: all / the image)


def network(kind: str, num_bits: int, input_shape: Sequence[int], *,
            hidden: Sequence[int] = (512,), channels: Sequence[int] = (16, 32),
            dense: int = 128) -> models.Model:
  """The scoring network of a hash-function family for items of ``input_shape``.

  "linear": ``W x + c`` (``jhash.models.MLP`` with no hidden layer); "mlp": ``hidden``
  ReLU layers; "cnn": ``jhash.models.SmallCNN`` (3 x 3 stride-2 convolutions, a dense
  ReLU layer), on images of any size.
  """
  if kind not in KINDS:
    raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}; got {kind!r}.")
  if kind == "cnn":
    module = models.SmallCNN(num_bits, tuple(int(c) for c in channels), int(dense))
  else:
    module = models.MLP(num_bits, () if kind == "linear" else tuple(int(h) for h in hidden))
  return models.model(module, tuple(input_shape))


# ----------------------------------------------------------------------------- inputs


def input_statistics(x: jax.Array, per_feature: bool) -> tuple[jax.Array, jax.Array]:
  """Mean and scale that standardise the training inputs (``jhash.training``): per
  column for features [n, d] (``per_feature``), one of each over images' pixels."""
  x = jnp.asarray(x, jnp.float32)
  if per_feature != (x.ndim == 2):
    raise ValueError(f"per_feature={per_feature} needs {'features [n, d]' if per_feature else 'images [n, H, W, C]'}; "
                     f"got {_checks._describe(x)}.")
  return training.input_statistics(x)


def _image_view(batch: dict, view: int | None):
  views = batch["views"]
  if view is None:
    images = [i for i, v in enumerate(views) if v is not None and np.ndim(v) >= 3]
    if len(images) != 1:
      raise ValueError(f"the CNN hash functions read one image view [n, H, W(, C)]; the "
                       f"batch has {len(images)} observed image views (views of ranks "
                       f"{[None if v is None else np.ndim(v) for v in views]}): pass view=.")
    view = images[0]
  if not -len(views) <= view < len(views) or views[view] is None:
    raise ValueError(f"view {view} must be an observed view of the batch; the batch has "
                     f"{len(views)} views.")
  x = views[view]
  if np.ndim(x) not in (3, 4):
    raise ValueError(f"views[{view}] must hold images [n, H, W] or [n, H, W, C] for the CNN "
                     f"hash functions; got {_checks._describe(x)}.")
  return x


def _batch_reader(images: bool, view: int | None) -> Callable[[dict], jax.Array]:
  def inputs(batch):
    if not images:
      return _api.view_features(batch, view)
    x = jnp.asarray(_image_view(batch, view), jnp.float32)
    return x[..., None] if x.ndim == 3 else x
  return inputs


# ----------------------------------------------------------------------------- the family


def hash_functions(kind: str, num_bits: int, *, view: int | None = None,
                   learning_rate: float | None = None, weight_decay: float = 0.0,
                   batch_size: int = 128, num_epochs: int = 20,
                   hidden: Sequence[int] = (512,), channels: Sequence[int] = (16, 32),
                   dense: int = 128, encode_chunk: int = 2048,
                   model: models.Model | None = None) -> HashFunctions:
  """Hash functions ``f(x) = sign(psi(x))`` trained on the hinge bound (Eq. 11-12).

  Args:
    kind: "linear" (``W x + c`` on standardised features), "mlp" (on standardised
      features) or "cnn" (on images standardised by one mean and scale).
    num_bits: b.
    view: the view to read (None: all observed views side by side for features; the one
      image view for "cnn").
    learning_rate: Adam's step size (default: 1e-2 linear, 1e-3 mlp / cnn).
    weight_decay: decoupled weight decay (AdamW); 0 is plain Adam.
    batch_size: instances per minibatch; an epoch is ``n // batch_size`` minibatches of
      a random permutation.
    num_epochs: epochs in the default schedule (``fit_hash_functions``, and ``hbmp``'s
      minibatch phase).
    hidden: the MLP's hidden widths.
    channels, dense: the CNN's convolution widths and dense width.
    encode_chunk: instances per chunk when scoring (bounds the activations' memory).
    model: a ``jhash.models.Model`` with ``num_bits`` outputs to use instead of the
      network of ``kind`` (``kind`` still says how inputs are read: "cnn" reads images).
  Returns:
    HashFunctions. ``step`` and ``epoch`` report ``hinge_loss`` (the bound per instance)
    and ``bit_error`` (fraction of mismatched bits), measured before the update
    (``epoch``: averaged over its minibatches).
  """
  if kind not in KINDS:
    raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}; got {kind!r}.")
  num_bits = _api.check_num_bits(num_bits)
  batch_size = _checks.positive_int(batch_size, "batch_size")
  num_epochs = _checks.nonneg_int(num_epochs, "num_epochs")
  encode_chunk = _checks.positive_int(encode_chunk, "encode_chunk")
  rate = DEFAULT_LEARNING_RATES[kind] if learning_rate is None else learning_rate
  if not isinstance(rate, (int, float)) or not rate > 0:
    raise ValueError(f"learning_rate must be a positive float; got {learning_rate!r}.")
  if not isinstance(weight_decay, (int, float)) or weight_decay < 0:
    raise ValueError(f"weight_decay must be a float >= 0; got {weight_decay!r}.")
  args = (kind, num_bits, view, rate, weight_decay, batch_size, num_epochs, hidden, channels,
          dense, encode_chunk, model)
  try:
    hash(args)
  except TypeError:   # e.g. widths given as lists: built afresh
    return _hash_functions(*args)
  return _cached_hash_functions(*args)


def _hash_functions(kind, num_bits, view, rate, weight_decay, batch_size, num_epochs, hidden,
                    channels, dense, encode_chunk, model) -> HashFunctions:
  """``hash_functions`` with its arguments checked (``rate`` the learning rate)."""
  images = kind in IMAGE_KINDS
  optimizer = optax.adamw(float(rate), weight_decay=float(weight_decay))
  read = _batch_reader(images, view)

  def net(x) -> models.Model:
    if model is not None:
      return model
    return network(kind, num_bits, tuple(x.shape[1:]), hidden=hidden, channels=channels,
                   dense=dense)

  def hinge(outputs, targets):
    return losses.mean_hinge(outputs.logits, targets), {
        "bit_error": losses.mean_bit_error(outputs.logits, targets)}

  def init(key, inputs):
    mean, scale = input_statistics(inputs, per_feature=not images)
    sample = training.standardize(inputs[:1], mean, scale)
    return HashFnState(training.create(net(inputs), optimizer, key, sample), mean, scale)

  def step(state, x, targets):
    train_step = training.make_step(net(x), optimizer, hinge)
    train, loss, aux, _ = train_step(state.train, training.standardize(x, state.mean,
                                                                       state.scale),
                                     targets.astype(jnp.float32))
    return state._replace(train=train), {"hinge_loss": loss, "bit_error": aux["bit_error"]}

  def epoch(state, inputs, targets, key):
    n = inputs.shape[0]
    size = min(batch_size, n)
    steps = n // size
    order = jax.random.permutation(key, n)[: steps * size].reshape(steps, size)
    state, metrics = lax.scan(lambda st, idx: step(st, inputs[idx], targets[idx]), state,
                              order)
    return state, jax.tree.map(jnp.mean, metrics)

  def scores(state, inputs):
    def one_chunk(chunk):
      x = chunk["views"][0]
      return training.predict(net(x), state.train,
                              training.standardize(x, state.mean, state.scale)).logits
    out = _api.map_in_chunks(one_chunk, {"views": (inputs,)}, encode_chunk)
    return out.astype(jnp.float32)

  def encode(state, inputs):
    return codes_lib.sign(scores(state, inputs))

  def check_batch(batch):
    n = _checks.batch(batch)
    x = jax.eval_shape(read, batch)
    if model is not None:
      models.check_input(model, x, "views")
    return n

  return HashFunctions(init, epoch, scores, encode, read, check_batch, num_bits, num_epochs,
                       kind, step, batch_size, model, view)


# One HashFunctions per setting: jit caches are keyed on the functions, so hash functions
# (and HBMP methods) built with the same settings share their compiled steps.
_cached_hash_functions = functools.lru_cache(maxsize=64, typed=True)(_hash_functions)


# ----------------------------------------------------------------------------- standalone


def fit_hash_functions(functions: HashFunctions, key: jax.Array, batch: dict, targets,
                       num_epochs: int | None = None):
  """Fit hash functions to given target codes (stage ii alone).

  ``init`` gets ``fold_in(key, 0)`` and epoch ``e`` the key ``fold_in(key, e + 1)``, as
  ``jhash.fit`` keys its steps. Each epoch is one jitted call.

  Args:
    functions: from ``hash_functions``.
    key: PRNG key.
    batch: the training batch (``{"views": ...}``).
    targets: int8 [n, b] in {-1, +1}, the target code of each training instance.
    num_epochs: default ``functions.num_epochs``.
  Returns:
    (HashFnState, history): history maps ``hinge_loss`` and ``bit_error`` to NumPy
    arrays [num_epochs].
  """
  n = functions.check_batch(batch)
  _checks.signed_codes(targets, "targets", functions.num_bits)
  if np.shape(targets)[0] != n:
    raise ValueError(f"targets must hold one code per training instance ({n}); got "
                     f"{_checks._describe(targets)}.")
  epochs = (functions.num_epochs if num_epochs is None
            else _checks.nonneg_int(num_epochs, "num_epochs"))
  inputs = functions.inputs(batch)
  targets = jnp.asarray(targets, jnp.int8)
  state = jax.jit(functions.init)(jax.random.fold_in(key, 0), inputs)
  step = jax.jit(functions.epoch)
  history: dict[str, list] = {}
  for e in range(epochs):
    state, metrics = step(state, inputs, targets, jax.random.fold_in(key, e + 1))
    for name, value in metrics.items():
      history.setdefault(name, []).append(np.asarray(value))
  return state, {name: np.stack(v) for name, v in history.items()}
