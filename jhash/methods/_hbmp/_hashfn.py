"""HBMP stage (ii): hash functions fitted to the inferred target codes (Cakir et al., Sec. 3.3).

Each bit is a thresholded score, ``f_t(x) = sign(psi_t(x))`` (Eq. 11), and the functions
are fitted so that the codes of the training instances match their target codes ``u``
(the code of each instance's class, label set, or of the instance itself). The Hamming
loss is bounded above by the hinge loss (Eq. 12 with ``l`` the hinge):

    sum_i d_h(Phi(x_i), u_i) = sum_i sum_t [f_t(x_i) != u_it]
                            <= sum_i sum_t max(0, 1 - u_it psi_t(x_i)),

minimised here by minibatch Adam (optax), averaged over the instances of a minibatch.
``psi`` is a Flax module (``_networks``): linear on standardised features, an MLP on
features, or a small CNN on images.

``hash_functions(kind, num_bits, ...)`` returns ``HashFunctions``, pure functions over a
``HashFnState`` (a NamedTuple of arrays: the parameters and the optimiser's state are
pytrees of arrays):

* ``init(key, inputs)``: input statistics (standardisation) and the network's
  parameters;
* ``epoch(state, inputs, targets, key)``: one pass over the training set in minibatches
  (a ``lax.scan``; the order is a permutation drawn from ``key``);
* ``scores`` / ``encode``: ``psi(x)`` and ``sign(psi(x))``, in chunks (``lax.map``), so
  a large database is encoded in bounded memory;
* ``inputs(batch)``: the array of a batch the network reads (features [n, d], or images
  [n, H, W, C] for the CNN).

``fit_hash_functions`` runs ``init`` and the epochs for targets of one's own;
``hbmp(..., hash_function=...)`` appends the epochs to the pursuit in one compiled
``update``.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from jhash import _checks
from jhash import codes as codes_lib
from jhash import losses
from jhash import _api
from jhash.methods._hbmp import _networks

DEFAULT_LEARNING_RATES = {"linear": 1e-2, "mlp": 1e-3, "cnn": 1e-3}


class HashFnState(NamedTuple):
  """The hash functions' parameters, optimiser state and input standardisation."""
  params: Any          # pytree of float32 arrays: the network's parameters
  opt_state: Any       # pytree of arrays: optax's state (Adam moments, step count)
  mean: jax.Array      # float32 [d] (features) or [] (images): subtracted from the inputs
  scale: jax.Array     # float32, the shape of ``mean``: multiplies the centred inputs
  step: jax.Array      # int32 [], minibatch steps taken


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


# ----------------------------------------------------------------------------- inputs


def input_statistics(x: jax.Array, per_feature: bool) -> tuple[jax.Array, jax.Array]:
  """Mean and scale that standardise the training inputs: ``(x - mean) * scale``.

  Features (``per_feature``): per column, ``scale = 1 / max(std, 0.01 rms(std))`` (a
  column constant in training, such as a border pixel, is centred and not blown up).
  Images: one mean and scale over all pixels.

  Args:
    x: float32 [n, d] features or [n, H, W, C] images.
    per_feature: whether to standardise each column.
  Returns:
    (mean, scale): float32 [d] each, or [] each.
  """
  x = jnp.asarray(x, jnp.float32)
  if per_feature:
    mean = jnp.mean(x, axis=0)
    std = jnp.std(x, axis=0)
    floor = 0.01 * jnp.sqrt(jnp.mean(std * std)) + 1e-12
    return mean, 1.0 / jnp.maximum(std, floor)
  mean, std = jnp.mean(x), jnp.std(x)
  return mean, 1.0 / jnp.maximum(std, 1e-12)


def _standardize(x: jax.Array, mean: jax.Array, scale: jax.Array) -> jax.Array:
  lead = (1,) * (x.ndim - mean.ndim)
  return (x.astype(jnp.float32) - mean.reshape(lead + mean.shape)) * scale.reshape(
      lead + scale.shape)


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
                   module: nn.Module | None = None) -> HashFunctions:
  """Hash functions ``f(x) = sign(psi(x))`` trained on the hinge bound (Eq. 11-12).

  Args:
    kind: "linear" (``W x + c`` on standardised features), "mlp" (on standardised
      features) or "cnn" (on images standardised by one mean and scale).
    num_bits: b.
    view: the view to read (None: all observed views side by side for features; the one
      image view for "cnn").
    learning_rate: Adam's step size (default: 1e-2 linear, 1e-3 mlp / cnn).
    weight_decay: decoupled weight decay (AdamW); 0 is plain Adam.
    batch_size: instances per minibatch (the whole set when it is smaller); an epoch
      is ``n // batch_size`` minibatches of a random permutation.
    num_epochs: epochs in the default schedule (``fit_hash_functions``, and the steps
      ``hbmp`` adds after the pursuit).
    hidden: the MLP's hidden widths.
    channels, dense: the CNN's convolution widths and dense width.
    encode_chunk: instances per chunk when scoring (bounds the activations' memory).
    module: a Flax module ``[n, ...] -> [n, num_bits]`` to use instead of the built-in
      network of ``kind`` (``kind`` still says how inputs are read: "cnn" reads images).
  Returns:
    HashFunctions. ``epoch`` reports ``hinge_loss`` (the bound per instance) and
    ``bit_error`` (fraction of mismatched bits), both averaged over the epoch's
    minibatches, each measured before that minibatch's update.
  """
  if kind not in _networks.KINDS:
    raise ValueError(f"kind must be one of {', '.join(map(repr, _networks.KINDS))}; "
                     f"got {kind!r}.")
  num_bits = _api.check_num_bits(num_bits)
  batch_size = _checks.positive_int(batch_size, "batch_size")
  num_epochs = _checks.nonneg_int(num_epochs, "num_epochs")
  encode_chunk = _checks.positive_int(encode_chunk, "encode_chunk")
  rate = DEFAULT_LEARNING_RATES[kind] if learning_rate is None else learning_rate
  if not isinstance(rate, (int, float)) or not rate > 0:
    raise ValueError(f"learning_rate must be a positive float; got {learning_rate!r}.")
  if not isinstance(weight_decay, (int, float)) or weight_decay < 0:
    raise ValueError(f"weight_decay must be a float >= 0; got {weight_decay!r}.")
  net = module if module is not None else _networks.network(
      kind, num_bits, hidden=hidden, channels=channels, dense=dense)
  images = kind in _networks.IMAGE_KINDS
  optimizer = optax.adamw(float(rate), weight_decay=float(weight_decay))
  read = _batch_reader(images, view)

  def apply(params, x):
    return net.apply({"params": params}, x)

  def init(key, inputs):
    mean, scale = input_statistics(inputs, per_feature=not images)
    params = net.init(key, _standardize(inputs[:1], mean, scale))["params"]
    return HashFnState(params, optimizer.init(params), mean, scale, jnp.int32(0))

  def loss_and_scores(params, x, targets):
    scores = apply(params, x)
    return losses.mean_hinge(scores, targets), scores

  def minibatch(state, x, targets):
    (loss, scores), grads = jax.value_and_grad(loss_and_scores, has_aux=True)(
        state.params, _standardize(x, state.mean, state.scale), targets)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    new = HashFnState(optax.apply_updates(state.params, updates), opt_state, state.mean,
                      state.scale, state.step + 1)
    return new, (loss, losses.mean_bit_error(scores, targets))

  def epoch(state, inputs, targets, key):
    n = inputs.shape[0]
    size = min(batch_size, n)
    steps = n // size
    order = jax.random.permutation(key, n)[: steps * size].reshape(steps, size)
    targets = targets.astype(jnp.float32)
    state, (loss, error) = lax.scan(
        lambda st, idx: minibatch(st, inputs[idx], targets[idx]), state, order)
    return state, {"hinge_loss": jnp.mean(loss), "bit_error": jnp.mean(error)}

  def scores(state, inputs):
    n = inputs.shape[0]
    chunk = min(encode_chunk, n)
    pad = (-n) % chunk
    if pad:
      inputs = jnp.concatenate([inputs, jnp.zeros((pad,) + inputs.shape[1:], inputs.dtype)])
    chunks = inputs.reshape((-1, chunk) + inputs.shape[1:])
    out = lax.map(lambda c: apply(state.params, _standardize(c, state.mean, state.scale)),
                  chunks)
    return out.reshape(-1, out.shape[-1])[:n].astype(jnp.float32)

  def encode(state, inputs):
    return codes_lib.sign(scores(state, inputs))

  def check_batch(batch):
    n = _checks.batch(batch)
    if images:
      _image_view(batch, view)
    else:
      _api.view_features(batch, view)
    return n

  return HashFunctions(init, epoch, scores, encode, read, check_batch, num_bits, num_epochs,
                       kind)


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
