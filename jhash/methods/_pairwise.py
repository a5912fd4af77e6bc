"""A deep supervised hashing method made from any pairwise loss, on the shared train step.

``pairwise(num_bits, loss)`` trains a network (a ``jhash.models`` backbone chosen by the
input: an MLP for features, the small CNN for 28 x 28 and 56 x 56 images, ResNet-18 for
larger ones, or one the caller passes) on minibatches: each step reads the minibatch's
outputs ``u`` [b, K], the pair similarities ``s`` (share a label), the pair weights
(``balanced_pair_weights`` over the distinct pairs), and minimises ``loss(u, u, s, w)``
with optax. The code of an item is the sign of its output, ``+1`` where the output is
exactly 0 (``jhash.codes.sign``).

The default loss is DPSH's pairwise likelihood (``jhash.losses.pairwise_likelihood``).
A researcher's new loss is one function of the same signature::

    def my_loss(u, v, similarity, weights):
      return jnp.sum(weights * (similarity - u @ v.T / u.shape[1]) ** 2) / jnp.sum(weights)

    method = jhash.methods.pairwise(32, my_loss)
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

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
from jhash.methods import _crops

PairLoss = Callable[[jax.Array, jax.Array, jax.Array, jax.Array], jax.Array]


class Memory(NamedTuple):
  """The latest outputs of every training item (a memory bank), with their labels."""
  outputs: jax.Array   # float32 [n, K]: the item's output when it was last in a minibatch
  labels: jax.Array    # int32 [n] class ids or bool [n, C] multi-hot
  filled: jax.Array    # bool [n]: the item has been seen (its output is set)


class PairwiseState(NamedTuple):
  """The network's train state, the input standardisation and the memory bank."""
  train: training.TrainState   # parameters, batch statistics, optimiser state, step
  mean: jax.Array              # float32 [d] (features) or [] (images)
  scale: jax.Array             # float32, as ``mean``
  widths: jax.Array | None = None  # int32 [V], the training views' widths
  memory: Memory | None = None # with ``memory=True``: [n, K] outputs of the training set


def empty_memory(num_items: int, num_bits: int, labels: jax.Array) -> Memory:
  """A memory bank of ``num_items`` rows, none filled, labels shaped like ``labels``."""
  shape = (num_items,) + tuple(labels.shape[1:])
  return Memory(jnp.zeros((num_items, num_bits), jnp.float32), jnp.zeros(shape, labels.dtype),
                jnp.zeros((num_items,), bool))


def write_memory(memory: Memory, index: jax.Array, outputs: jax.Array,
                 labels: jax.Array) -> Memory:
  """The memory with rows ``index`` set to a minibatch's outputs (no gradient) and labels."""
  return Memory(memory.outputs.at[index].set(lax.stop_gradient(outputs)),
                memory.labels.at[index].set(labels), memory.filled.at[index].set(True))


def pairs_with_memory(labels: jax.Array, index: jax.Array, memory: Memory | None):
  """Similarities and balanced weights of a minibatch's pairs: in-batch, then memory.

  Returns (similarity float32 [b, b + n], weights float32 [b, b + n]) with the
  minibatch's own rows first (the diagonal left out), then the memory's filled rows
  other than the items themselves; without memory only the [b, b] in-batch block.
  """
  b = labels.shape[0]
  similarity = losses.label_similarity(labels, labels)
  mask = losses.off_diagonal(b)
  if memory is not None:
    n = memory.filled.shape[0]
    own = jnp.zeros((b, n), bool).at[jnp.arange(b), index].set(True)
    similarity = jnp.concatenate([similarity, losses.label_similarity(labels, memory.labels)],
                                 axis=1)
    mask = jnp.concatenate([mask, memory.filled[None, :] & ~own], axis=1)
  return similarity, losses.balanced_pair_weights(similarity, mask)


def _item_shape(x) -> tuple[int, ...]:
  return tuple(int(d) for d in np.shape(x)[1:])


@functools.lru_cache(maxsize=32)
def _default_backbone(item_shape: tuple[int, ...], num_bits: int) -> models.Model:
  return models.backbone(item_shape, num_bits)


def _check_loss(loss) -> PairLoss:
  if not callable(loss):
    raise ValueError(f"loss must be a function loss(u, v, similarity, weights) -> float "
                     f"[]; got {_checks._describe(loss)}.")
  return loss


def _augmentation(crop_augment, probability):
  """``augment(x, key) -> x``: random crops of images (``crop_augment``), or the identity."""
  if crop_augment is None:
    return lambda x, key: x
  try:
    low, high = (float(v) for v in crop_augment)
    ok = 0.0 < low <= high <= 1.0
  except (TypeError, ValueError):
    ok = False
  if not ok:
    raise ValueError(f"crop_augment must be None or (low, high) with 0 < low <= high <= 1; "
                     f"got {crop_augment!r}.")
  if not 0.0 <= float(probability) <= 1.0:
    raise ValueError(f"crop_probability must be in [0, 1]; got {probability!r}.")

  def augment(x, key):
    k_crop, k_use = jax.random.split(key)
    crops, _ = _crops.random_crops(k_crop, x, (low, high))
    use = jax.random.bernoulli(k_use, float(probability), (x.shape[0],))
    return jnp.where(use.reshape((-1,) + (1,) * (x.ndim - 1)), crops, x)
  return augment


def identity_activation(logits: jax.Array, step: jax.Array) -> jax.Array:
  """The head's outputs as they are."""
  del step
  return logits


def pairwise(num_bits: int, loss: PairLoss | None = None, *, backbone: models.Model | None = None,
             view: int | None = None, optimizer: optax.GradientTransformation | None = None,
             learning_rate: float = 1e-3, batch_size: int = 64, num_epochs: int = 20,
             activation: Callable[[jax.Array, jax.Array], jax.Array] | None = None,
             memory: bool = False, crop_augment: tuple[float, float] | None = None,
             crop_probability: float = 0.5, encode_chunk: int = 1024,
             name: str = "pairwise") -> _api.HashingMethod:
  """Deep supervised hashing with a pairwise loss over the pairs of each minibatch.

  Args:
    num_bits: K, the hash head's outputs.
    loss: ``loss(u, v, similarity, weights) -> float32 []`` with ``u`` [b, K] the
      minibatch's outputs, ``v`` [m, K] the other side of the pairs (here ``u``),
      ``similarity`` float [b, m] in {0, 1} and ``weights`` float [b, m] (0 on the
      diagonal). Default: ``jhash.losses.pairwise_likelihood``.
    backbone: a ``jhash.models.Model`` whose head has ``num_bits`` outputs (default:
      ``jhash.models.backbone`` of the input's shape).
    view: the view the network reads (None: the only image view, or all features).
    optimizer: an optax optimiser (default: Adam at ``learning_rate``; an optax schedule
      for the learning rate goes in the optimiser).
    learning_rate: Adam's step size when no optimizer is given.
    batch_size: items per minibatch.
    num_epochs: the default schedule, in epochs.
    activation: ``activation(logits, step) -> u``, the continuous codes the loss reads
      (HashNet's ``tanh(beta z)`` with ``beta`` growing with the optimiser step, say);
      default: the logits. Codes are ``sign(logits)`` whatever the activation (an odd,
      increasing activation keeps the sign).
    memory: pair the minibatch also with a memory of the latest outputs of every
      training item (``PairwiseState.memory``; each step writes its minibatch's
      outputs). Its size grows linearly with the training set: ``n * K * 4`` bytes of
      outputs plus the labels (60,000 items at 64 bits: 15 MB).
    crop_augment: (low, high): each training image is, with ``crop_probability``, replaced
      by a random crop (side ratio uniform in the range, resized back to the image's size)
      keeping the image's labels, the random-crop augmentation of the deep hashing
      toolboxes (torchvision's ``RandomCrop`` / ``RandomResizedCrop``), which also teaches
      the network to code crops (MCH's base model). None: no augmentation.
    crop_probability: the chance that a training image is cropped.
    encode_chunk: items per chunk when encoding (bounds the activations' memory).
    name: the method's name (in progress bars and results).
  Returns:
    A minibatch ``HashingMethod``; ``update`` reports ``loss`` and ``bit_balance`` (the
    mean absolute mean of the minibatch's codes per bit; 0 when balanced).

  Example:
    >>> import jax, numpy as np, jhash
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(128, 8)).astype(np.float32)
    >>> y = (x[:, 0] > 0).astype(np.int32)
    >>> method = jhash.methods.pairwise(4, batch_size=32, num_epochs=2)
    >>> state, history = jhash.fit(method, jax.random.key(0), {"views": (x,), "labels": y},
    ...                            progress=False)
    >>> history["loss"].shape
    (8,)
  """
  num_bits = _api.check_num_bits(num_bits)
  loss = losses.pairwise_likelihood if loss is None else _check_loss(loss)
  activation = identity_activation if activation is None else activation
  batch_size = _checks.positive_int(batch_size, "batch_size")
  num_epochs = _checks.nonneg_int(num_epochs, "num_epochs")
  encode_chunk = _checks.positive_int(encode_chunk, "encode_chunk")
  optimizer = optax.adam(learning_rate) if optimizer is None else optimizer
  read = lambda batch: _api.network_inputs(batch, view)
  augment = _augmentation(crop_augment, crop_probability)

  def network(x) -> models.Model:
    return backbone if backbone is not None else _default_backbone(_item_shape(x), num_bits)

  def init(key, batch):
    x = read(batch)
    mean, scale = training.input_statistics(x)
    net = network(x)
    bank = (empty_memory(_api.num_items(batch), num_bits, jnp.asarray(batch["labels"]))
            if memory else None)
    return PairwiseState(training.create(net, optimizer, key, training.standardize(
        x[:1], mean, scale)), mean, scale, _api.view_widths(batch), bank)

  def loss_fn(outputs, context):
    similarity, weights, bank, step = context
    u = activation(outputs.logits, step)
    v = u if bank is None else jnp.concatenate([u, bank.outputs], axis=0)
    return loss(u, v, similarity, weights), {"u": u}

  def update(state, batch, key):
    x = augment(read(batch), key)
    labels = batch["labels"]
    index = batch.get("index")
    if state.memory is not None and index is None:
      raise ValueError(f"{name} with memory=True needs minibatches carrying 'index' (their "
                       "items' positions in the training set), as jhash.fit gives.")
    similarity, weights = pairs_with_memory(labels, index, state.memory)
    step = training.make_step(network(x), optimizer, loss_fn)
    train, value, aux, outputs = step(
        state.train, training.standardize(x, state.mean, state.scale),
        (similarity, weights, state.memory, state.train.step))
    bank = state.memory
    if bank is not None:
      bank = write_memory(bank, index, aux["u"], labels)
    balance = jnp.mean(jnp.abs(jnp.mean(codes_lib.sign(outputs.logits).astype(jnp.float32),
                                        axis=0)))
    return state._replace(train=train, memory=bank), {"loss": value, "bit_balance": balance}

  def outputs(state, x):
    return training.predict(network(x), state.train,
                            training.standardize(x, state.mean, state.scale))

  def scores(state, batch):
    return _api.map_in_chunks(lambda b: outputs(state, read(b)).logits, batch, encode_chunk)

  def code_loss(state):
    return losses.code_loss_table(loss, num_bits,
                                  lambda codes: activation(codes, state.train.step))

  def encode(state, batch):
    return codes_lib.sign(scores(state, batch))

  def check_batch(batch):
    n = _checks.batch(batch)
    if batch.get("labels") is None:
      raise ValueError(f"{name} is supervised: the batch needs 'labels' (class ids [n] or "
                       "multi-hot bool [n, C]).")
    x = jax.eval_shape(read, batch)
    net = network(x)
    models.check_input(net, x, "views")
    if crop_augment is not None:
      if len(x.shape) != 4:
        raise ValueError(f"crop_augment crops images: {name}'s view must hold images [n, H, "
                         f"W] or [n, H, W, C]; got {x.shape}.")
      _crops.check_ratio(crop_augment[0], "crop_augment", min(x.shape[1:3]))
    return n

  def check_encode(state, batch):
    _api.check_views(state.widths, batch, view, name)

  return _api.HashingMethod(init, update, encode, 0, num_bits, name, check_batch,
                            extras=Extras(scores, outputs, code_loss, read), batch_size=batch_size,
                            num_epochs=num_epochs, check_encode=check_encode)


class Extras(NamedTuple):
  """Further pure functions of ``pairwise`` (and ``adsh``), which MCH builds on."""
  scores: Callable[[PairwiseState, dict], jax.Array]   # float32 [n, K], the head's outputs
  # outputs(state, x) -> HashOutputs (logits [n, K], features [n, F]) in evaluation mode,
  # x the network's raw inputs [n, ...] (as ``network_inputs`` reads them).
  outputs: Callable[[PairwiseState, jax.Array], models.HashOutputs] | None = None
  # code_loss(state) -> float32 [2, K + 1]: the pair loss on codes, by similarity and
  # Hamming distance (``jhash.losses.code_loss_table``), MCH's reward.
  code_loss: Callable[[PairwiseState], jax.Array] | None = None
  # network_inputs(batch) -> [n, ...]: what the network reads from a batch.
  network_inputs: Callable[[dict], jax.Array] | None = None
