"""HBMP stage (ii): hash functions fitted to the inferred target codes (Cakir et al., Sec. 3.3).

Each bit is a thresholded score, ``f_t(x) = sign(psi_t(x))`` (Eq. 11), and the functions
are fitted so that the codes of the training instances match their target codes ``u``
(the code of each instance's class, label set, or of the instance itself). The Hamming
loss is bounded above by the hinge loss (Eq. 12, ``jhash.losses.hinge_loss``),
minimised by minibatch Adam(W). ``psi`` is a ``jhash.models`` network, linear (an MLP
without hidden layers) or an MLP on standardised features, or the small CNN on images.

``hash_functions(kind, num_bits, ...)`` is a network coder (``jhash.coder.Coder``) of
that family; ``hinge_step`` is one minibatch of the hinge bound on it. ``hbmp`` runs the
steps as its second phase; ``fit_to_targets`` is stage (ii) alone, a method of one phase
that fits the functions to target codes carried by the training batch (``"targets"``),
run by ``jhash.fit`` like every other method.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jhash import _api
from jhash import _checks
from jhash import coder as coder_lib
from jhash import losses
from jhash import models

KINDS = ("linear", "mlp", "cnn")
IMAGE_KINDS = ("cnn",)
DEFAULT_LEARNING_RATES = {"linear": 1e-2, "mlp": 1e-3, "cnn": 1e-3}
DEFAULT_BATCH_SIZE = 128
DEFAULT_EPOCHS = 20


def check_kind(kind, name: str = "kind") -> str:
  if kind not in KINDS:
    raise ValueError(f"{name} must be one of {', '.join(map(repr, KINDS))}; got {kind!r}.")
  return kind


def network(
  kind: str,
  num_bits: int,
  input_shape: Sequence[int],
  *,
  hidden: Sequence[int] = (512,),
  channels: Sequence[int] = (16, 32),
  dense: int = 128,
) -> models.Model:
  """The scoring network of a hash-function family for items of ``input_shape``.

  "linear": ``W x + c`` (``jhash.models.MLP`` with no hidden layer); "mlp": ``hidden``
  ReLU layers; "cnn": ``jhash.models.SmallCNN`` (3 x 3 stride-2 convolutions, a dense
  ReLU layer), on images of any size.
  """
  check_kind(kind)
  if kind == "cnn":
    module = models.SmallCNN(num_bits, tuple(int(c) for c in channels), int(dense))
  else:
    module = models.MLP(num_bits, () if kind == "linear" else tuple(int(h) for h in hidden))
  return models.model(module, tuple(input_shape))


def hash_functions(
  kind: str,
  num_bits: int,
  *,
  view: int | None = None,
  learning_rate: float | None = None,
  weight_decay: float = 0.0,
  hidden: Sequence[int] = (512,),
  channels: Sequence[int] = (16, 32),
  dense: int = 128,
  encode_chunk: int = 2048,
  model: models.Model | str | None = None,
  init_variables: Any = None,
  trainable: str = "all",
) -> coder_lib.Coder:
  """Hash functions ``f(x) = sign(psi(x))`` as a network coder (Eq. 11).

  Args:
    kind: "linear" (``W x + c`` on standardised features), "mlp" (on standardised
      features) or "cnn" (on images standardised by one mean and scale).
    num_bits: b.
    view: the view to read (None: all observed views side by side for features, images
      flattened; the one image view for "cnn").
    learning_rate: Adam's step size (default: 1e-2 linear, 1e-3 mlp / cnn).
    weight_decay: decoupled weight decay (AdamW); 0 is plain Adam.
    hidden: the MLP's hidden widths.
    channels, dense: the CNN's convolution widths and dense width.
    encode_chunk: instances per chunk when scoring (bounds the activations' memory).
    model: a ``jhash.models.Model`` with ``num_bits`` outputs to use instead of the
      network of ``kind``, or an architecture's name ("resnet18", "resnet50", "alexnet",
      "vgg16": ``jhash.models.backbone``); ``kind`` still says how inputs are read: "cnn"
      reads images.
    init_variables: where the network starts (``jhash.coder.coder``'s): None, fresh; a
      Flax variables tree, a network method's state, a ``.npz`` of ``save_weights`` or a
      torchvision weights file (``.safetensors``, ``.pth``) for a ``model`` of that
      architecture. The paper fine-tunes a network pretrained on ImageNet.
    trainable: "all", or "head": the backbone frozen, only the hash layer trains.
  Returns:
    A ``jhash.coder.Coder``; train it with ``hinge_step`` (``hbmp``, ``fit_to_targets``).
  """
  check_kind(kind)
  num_bits = _api.check_num_bits(num_bits)
  encode_chunk = _checks.positive_int(encode_chunk, "encode_chunk")
  rate = DEFAULT_LEARNING_RATES[kind] if learning_rate is None else learning_rate
  if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate < math.inf:
    raise ValueError(f"learning_rate must be a positive float; got {learning_rate!r}.")
  if (
    isinstance(weight_decay, bool)
    or not isinstance(weight_decay, (int, float))
    or not 0 <= weight_decay < math.inf
  ):
    raise ValueError(f"weight_decay must be a finite float >= 0; got {weight_decay!r}.")
  args = (
    kind,
    num_bits,
    view,
    float(rate),
    float(weight_decay),
    _checks.widths(hidden, "hidden"),
    _checks.widths(channels, "channels"),
    _checks.positive_int(dense, "dense"),
    encode_chunk,
    model,
    init_variables,
    trainable,
  )
  try:
    hash(args)
  except TypeError:
    return _hash_functions.__wrapped__(*args)
  return _hash_functions(*args)


# One coder per setting: jit caches are keyed on the functions, so hash functions (and
# HBMP methods) built with the same settings share their compiled steps.
@functools.lru_cache(maxsize=64)
def _hash_functions(
  kind,
  num_bits,
  view,
  rate,
  weight_decay,
  hidden,
  channels,
  dense,
  encode_chunk,
  model,
  init_variables,
  trainable,
) -> coder_lib.Coder:
  def net(item_shape):
    return network(kind, num_bits, item_shape, hidden=hidden, channels=channels, dense=dense)

  return coder_lib.coder(
    num_bits,
    network=net if model is None else model,
    view=view,
    images=kind in IMAGE_KINDS,
    optimizer=optax.adamw(rate, weight_decay=weight_decay),
    encode_chunk=encode_chunk,
    init_variables=init_variables,
    trainable=trainable,
    name=f"the {kind} hash functions",
  )


def _hinge(outputs, targets):
  return losses.mean_hinge(outputs.logits, targets), {
    "bit_error": losses.mean_bit_error(outputs.logits, targets)
  }


def hinge_step(
  functions: coder_lib.Coder, state: coder_lib.CoderState, batch: dict, targets: jax.Array
):
  """One minibatch of the hinge bound (Eq. 12): the functions' state and metrics.

  Args:
    functions: from ``hash_functions``.
    state: its ``CoderState``.
    batch: a minibatch.
    targets: int8 [b, num_bits] in {-1, +1}, the minibatch's target codes.
  Returns:
    (state, metrics): ``hinge_loss`` (the bound per instance) and ``bit_error`` (fraction
    of mismatched bits), measured before the update.
  """
  new, loss, aux, _ = functions.step(
    state, functions.read(batch), _hinge, targets.astype(jnp.float32)
  )
  return new, {"hinge_loss": loss, "bit_error": aux["bit_error"]}


# ----------------------------------------------------------------------------- standalone


class TargetFitState(NamedTuple):
  """Hash functions fitted to target codes (``fit_to_targets``)."""

  coder: coder_lib.CoderState  # the functions' network and input statistics
  widths: jax.Array  # int32 [V], the training views' widths
  trained: _api.Trained | None = None  # what it was trained on (set by jhash.init / fit)


def fit_to_targets(
  functions: coder_lib.Coder,
  *,
  batch_size: int = DEFAULT_BATCH_SIZE,
  num_epochs: int = DEFAULT_EPOCHS,
) -> _api.HashingMethod:
  """Stage (ii) alone: hash functions fitted to given target codes, as a method.

  The training batch carries ``"targets"``, int8 [n, num_bits] in {-1, +1}, the target
  code of each instance, beside its views; ``jhash.fit`` draws minibatches of both.

  Args:
    functions: from ``hash_functions``.
    batch_size: instances per minibatch.
    num_epochs: the default schedule, in epochs.
  Returns:
    A minibatch ``HashingMethod`` named "hash_functions" (``hinge_loss``, ``bit_error``).

  Example:
    >>> import jax, numpy as np, jhash
    >>> from jhash.methods import hbmp_parts as hb
    >>> x = np.random.default_rng(0).normal(size=(200, 5)).astype(np.float32)
    >>> targets = np.where(x[:, :2] > 0, 1, -1).astype(np.int8)
    >>> method = hb.fit_to_targets(hb.hash_functions("linear", 2), batch_size=50,
    ...                            num_epochs=30)
    >>> state, _ = jhash.fit(method, jax.random.key(0), {"views": (x,), "targets": targets},
    ...                      progress=False)
    >>> float(np.mean(np.asarray(jhash.encode(method, state, {"views": (x,)})) == targets)) > 0.97
    True
  """
  if not isinstance(functions, coder_lib.Coder):
    raise TypeError(
      f"functions must be hash functions (jhash.methods.hash_functions(...)); got "
      f"{_checks.describe(functions)}."
    )
  batch_size = _checks.positive_int(batch_size, "batch_size")
  num_epochs = _checks.nonneg_int(num_epochs, "num_epochs")

  def init(key, batch):
    return TargetFitState(functions.init(key, batch), _api.view_widths(batch))

  def update(state, batch, key):
    del key
    coder, metrics = hinge_step(functions, state.coder, batch, batch["targets"])
    return state._replace(coder=coder), metrics

  def check_batch(batch):
    n = functions.check_batch(batch)
    _checks.signed_codes(batch.get("targets"), "batch['targets']", functions.num_bits)
    if np.shape(batch["targets"])[0] != n:
      raise ValueError(
        f"batch['targets'] must hold one code per training instance ({n}); "
        f"got {_checks.describe(batch['targets'])}."
      )
    return n

  def check_encode(state, batch):
    _api.check_views(state.widths, batch, functions.view, "hash_functions")

  return _api.HashingMethod(
    init,
    lambda s, b: functions.encode(s.coder, b),
    functions.num_bits,
    "hash_functions",
    _api.one_phase("hash_functions", update, batch_size=batch_size, num_epochs=num_epochs),
    check_batch,
    check_encode=check_encode,
  )
