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

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jhash import _api
from jhash import _checks
from jhash import coder as coder_lib
from jhash import losses
from jhash import models
from jhash.methods import _crops
from jhash.methods import _memory

PairLoss = Callable[[jax.Array, jax.Array, jax.Array, jax.Array], jax.Array]


class PairwiseState(NamedTuple):
  """The network (its train state and input standardisation) and the memory bank."""

  coder: coder_lib.CoderState  # the network's variables, optimiser state, statistics
  memory: _memory.Memory | None  # with ``memory=True``: [n, K] outputs of the training set
  widths: jax.Array  # int32 [V], the training views' widths
  trained: _api.Trained | None = None  # what it was trained on (set by jhash.init / fit)


class NetworkExtras(NamedTuple):
  """What a network method offers beside its codes (MCH builds on it).

  ``coder`` is the method's ``jhash.coder.Coder``; its functions take ``state.coder``.
  """

  coder: coder_lib.Coder
  # code_loss(state) -> float32 [2, K + 1]: the pair loss on codes, by similarity and
  # Hamming distance (``jhash.losses.code_loss_table``), MCH's reward.
  code_loss: Callable[[Any], jax.Array]

  def scores(self, state, batch) -> jax.Array:
    """float32 [n, K]: the head's outputs on a batch."""
    return self.coder.scores(state.coder, batch)


def check_supervised(batch: dict, name: str) -> None:
  """A supervised network method's labels: present, and no multi-hot row empty."""
  if batch.get("labels") is None:
    raise ValueError(
      f"{name} is supervised: the batch needs 'labels' (class ids [n] or multi-hot bool [n, C])."
    )
  _checks.labelled_rows(batch["labels"])


def _check_loss(loss) -> PairLoss:
  if not callable(loss):
    raise ValueError(
      f"loss must be a function loss(u, v, similarity, weights) -> float "
      f"[]; got {_checks.describe(loss)}."
    )
  return loss


def _augmentation(crop_augment, probability):
  """``augment(x, key) -> x``: random crops of images (``crop_augment``), or the identity."""
  _checks.scalar(probability, "crop_probability", low=0)
  if not float(probability) <= 1.0:
    raise ValueError(f"crop_probability must be in [0, 1]; got {probability!r}.")
  if crop_augment is None:
    return lambda x, key: x
  try:
    low, high = (float(v) for v in crop_augment)
    ok = 0.0 < low <= high <= 1.0
  except (TypeError, ValueError):
    ok = False
  if not ok:
    raise ValueError(
      f"crop_augment must be None or (low, high) with 0 < low <= high <= 1; got {crop_augment!r}."
    )

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


def pairwise(
  num_bits: int,
  loss: PairLoss | None = None,
  *,
  backbone: models.Model | Callable | str | None = None,
  view: int | None = None,
  optimizer: optax.GradientTransformation | None = None,
  learning_rate: float = 1e-3,
  init_variables: Any = None,
  trainable: str = "all",
  standardize: bool = True,
  batch_size: int = 64,
  num_epochs: int = 20,
  activation: Callable[[jax.Array, jax.Array], jax.Array] | None = None,
  code_inputs: Callable[[jax.Array], jax.Array] | None = None,
  memory: bool = False,
  crop_augment: tuple[float, float] | None = None,
  crop_probability: float = 0.5,
  encode_chunk: int = 256,
  name: str = "pairwise",
) -> _api.HashingMethod:
  """Deep supervised hashing with a pairwise loss over the pairs of each minibatch.

  Args:
    num_bits: K, the hash head's outputs.
    loss: ``loss(u, v, similarity, weights) -> float32 []`` with ``u`` [b, K] the
      minibatch's outputs, ``v`` [m, K] the other side of the pairs (here ``u``),
      ``similarity`` float [b, m] in {0, 1} and ``weights`` float [b, m] (0 on the
      diagonal). Default: ``jhash.losses.pairwise_likelihood``.
    backbone, view, optimizer, learning_rate, init_variables, trainable, encode_chunk: the
      network's (``jhash.coder.coder``; ``backbone`` is its ``network``: a Model, a
      function of the item shape, or an architecture's name such as "alexnet"): default
      backbone ``jhash.models.backbone`` of the input's shape, Adam at ``learning_rate``,
      starting weights, "all" or "head" trained.
    standardize: standardise the inputs by the training inputs' statistics (one mean and
      scale for images); False: read them as they come, e.g. images normalised per
      channel by ``jhash.data.image_pipeline`` as a pretrained backbone expects them. A
      jhash state or ``.npz`` as ``init_variables`` brings its own statistics, which win.
    batch_size: items per minibatch.
    num_epochs: the default schedule, in epochs.
    activation: ``activation(logits, step) -> u``, the continuous codes the loss reads
      (HashNet's ``tanh(beta z)``, ``beta`` growing with the optimiser step); default the
      logits. Codes are ``sign(logits)`` (an odd, increasing activation keeps the sign).
    code_inputs: ``code_inputs(codes) -> u``: the loss's inputs at which its relaxed codes
      equal the binary codes, so that ``extras.code_loss`` (MCH's reward table) is the
      trained loss on codes; default the codes themselves (a loss that reads ``u`` as
      codes); ``jhash.losses.saturated`` for a loss that applies ``tanh`` inside.
    memory: pair the minibatch also with a memory of the latest outputs of every training
      item (``jhash.methods.PairwiseState.memory``; ``n * K * 4`` bytes).
    crop_augment: (low, high): each training image is, with ``crop_probability``, replaced
      by a random crop (side ratio uniform in the range, resized back) keeping its labels,
      the toolboxes' random-crop augmentation. None: no augmentation.
    crop_probability: the chance that a training image is cropped.
    name: the method's name (in progress bars, results and errors).
  Returns:
    A minibatch ``HashingMethod``; ``update`` reports ``loss`` and ``bit_balance`` (the
    mean absolute mean of the minibatch's codes per bit; 0 when balanced); ``extras`` is
    ``NetworkExtras`` (the coder and the loss on codes).

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
  loss = losses.pairwise_likelihood if loss is None else _check_loss(loss)
  activation = identity_activation if activation is None else activation
  code_inputs = (lambda codes: codes) if code_inputs is None else code_inputs
  batch_size = _checks.positive_int(batch_size, "batch_size")
  num_epochs = _checks.nonneg_int(num_epochs, "num_epochs")
  memory = _checks.flag(memory, "memory")
  if batch_size < 2 and not memory:
    raise ValueError(
      "batch_size must be >= 2: a minibatch of one item has no pairs to learn from (or "
      "pass memory=True to pair it with the other items' latest outputs)."
    )
  _checks.view(view)
  if not isinstance(name, str):
    raise ValueError(f"name must be a str; got {_checks.describe(name)}.")
  if optimizer is not None and not isinstance(optimizer, optax.GradientTransformation):
    raise ValueError(
      f"optimizer must be an optax.GradientTransformation (e.g. optax.adam(1e-3)); got "
      f"{_checks.describe(optimizer)}."
    )
  if not callable(code_inputs):
    raise ValueError(
      f"code_inputs must be a function codes -> the loss's inputs; got "
      f"{_checks.describe(code_inputs)}."
    )
  if not callable(activation):
    raise ValueError(
      f"activation must be a function (logits, step) -> outputs; got {_checks.describe(activation)}."
    )
  augment = _augmentation(crop_augment, crop_probability)
  net = coder_lib.coder(
    num_bits,
    network=backbone,
    view=view,
    optimizer=optimizer,
    learning_rate=learning_rate,
    init_variables=init_variables,
    trainable=trainable,
    standardize=standardize,
    encode_chunk=encode_chunk,
    name=name,
  )

  def init(key, batch):
    bank = (
      _memory.empty_memory(_api.num_items(batch), num_bits, jnp.asarray(batch["labels"]))
      if memory
      else None
    )
    return PairwiseState(net.init(key, batch), bank, _api.view_widths(batch))

  def loss_fn(outputs, context):
    similarity, weights, bank, step = context
    u = activation(outputs.logits, step)
    v = u if bank is None else jnp.concatenate([u, bank.outputs], axis=0)
    return loss(u, v, similarity, weights), {"u": u}

  def update(state, batch, key):
    labels, index, bank = batch["labels"], batch.get("index"), state.memory
    if bank is not None and index is None:
      raise ValueError(
        f"{name} with memory=True needs minibatches carrying 'index' (their "
        "items' positions in the training set), as jhash.fit gives."
      )
    similarity, weights = _memory.pairs_with_memory(labels, index, bank)
    coder, value, aux, outputs = net.step(
      state.coder,
      augment(net.read(batch), key),
      loss_fn,
      (similarity, weights, bank, state.coder.train.step),
      key=jax.random.fold_in(key, 1),  # dropout's masks; the key itself augments
    )
    if bank is not None:
      bank = _memory.write_memory(bank, index, aux["u"], labels)
    return state._replace(coder=coder, memory=bank), {
      "loss": value,
      "bit_balance": coder_lib.bit_balance(outputs.logits),
    }

  def code_loss(state):
    del state  # the loss on codes does not change as the network trains
    return losses.code_loss_table(loss, net.num_bits, code_inputs)

  def check_batch(batch):
    n = net.check_batch(batch)
    check_supervised(batch, name)
    if crop_augment is not None:
      _crops.check_image_ratio(
        jax.eval_shape(net.read, batch), crop_augment[0], "crop_augment", name
      )
    return n

  def check_encode(state, batch):
    _api.check_views(state.widths, batch, view, name)

  return _api.HashingMethod(
    init,
    lambda s, b: net.encode(s.coder, b),
    net.num_bits,
    name,
    _api.one_phase(name, update, batch_size=batch_size, num_epochs=num_epochs),
    check_batch,
    extras=NetworkExtras(net, code_loss),
    check_encode=check_encode,
  )
