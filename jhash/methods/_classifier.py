"""A classifier on the network coder: the pretraining that hashing methods fine-tune from.

The deep hashing papers start every network from an ImageNet classifier. ``classifier``
trains the same networks (``jhash.coder``; the head "projection" has one output per
class) with softmax cross-entropy on class ids, or a sigmoid cross-entropy per label on
multi-hot labels, so that a pretrained backbone can be made from any labelled set jhash
reads. Its state, or its weights file (``jhash.coder.save_weights``), is then every
network method's ``init_variables``: the backbone and the input statistics are taken,
the classification head is left out (a hash head of another width starts fresh).

It is a ``HashingMethod`` so that ``fit``, ``save``, checkpoints and ``jhash.network``
serve it as they serve the hashing methods. Its codes are the signs of the class logits,
one bit per class: a weak code, not its purpose.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jhash import _api
from jhash import _checks
from jhash import coder as coder_lib
from jhash import models
from jhash.methods import _pairwise


class ClassifierState(NamedTuple):
  """The network of a classifier."""

  coder: coder_lib.CoderState  # variables, optimiser state, input statistics
  widths: jax.Array  # int32 [V], the training views' widths
  trained: _api.Trained | None = None  # what it was trained on (set by jhash.init / fit)


class ClassifierExtras(NamedTuple):
  """``coder``: the classifier's ``jhash.coder.Coder`` (its functions take ``state.coder``);
  ``predict(state, batch)``: int32 [n], the class of the largest logit, the batch and the
  state checked as ``jhash.encode`` checks them (a ValueError naming what differs)."""

  coder: coder_lib.Coder
  predict: Callable[[ClassifierState, dict], jax.Array]


def classification_loss(logits: jax.Array, labels: jax.Array) -> tuple[jax.Array, jax.Array]:
  """The mean cross-entropy of ``logits`` [b, C] and the accuracy, float32 [] each.

  Class ids [b]: softmax cross-entropy, accuracy of the largest logit. Multi-hot [b, C]:
  a sigmoid cross-entropy per label (summed over labels, averaged over items), accuracy
  the fraction of labels whose logit has the label's sign.
  """
  logits = logits.astype(jnp.float32)
  if labels.ndim == 1:
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels.astype(jnp.int32))
    right = jnp.argmax(logits, axis=-1) == labels
  else:
    target = labels.astype(jnp.float32)
    loss = jnp.sum(optax.sigmoid_binary_cross_entropy(logits, target), axis=-1)
    right = (logits > 0) == (target > 0)
  return jnp.mean(loss), jnp.mean(right.astype(jnp.float32))


def classifier(
  num_classes: int,
  *,
  backbone: models.Model | None = None,
  view: int | None = None,
  optimizer: optax.GradientTransformation | None = None,
  learning_rate: float = 1e-3,
  init_variables: Any = None,
  trainable: str = "all",
  standardize: bool = True,
  batch_size: int = 64,
  num_epochs: int = 10,
  encode_chunk: int = 256,
  name: str = "classifier",
) -> _api.HashingMethod:
  """A network trained to classify: the backbone a hashing method starts from.

  Args:
    num_classes: C, the head's outputs; class ids in ``[0, C)``, or multi-hot [n, C];
      at most ``2**31 - 1`` (class ids are int32).
    backbone, view, optimizer, learning_rate, init_variables, trainable, standardize: the
      network's, as in ``jhash.methods.pairwise``.
    batch_size, encode_chunk, name: as in ``jhash.methods.pairwise``.
    num_epochs: the default schedule, in epochs.
  Returns:
    A minibatch ``HashingMethod``; ``update`` reports ``loss`` (cross-entropy) and
    ``accuracy`` on the minibatch; ``extras`` is ``ClassifierExtras``.

  Example: pretrain, then start DCH from the classifier's backbone.
    >>> import jax, numpy as np, jhash
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(128, 8)).astype(np.float32)
    >>> batch = {"views": (x,), "labels": (x[:, 0] > 0).astype(np.int32)}
    >>> pretrain = jhash.methods.classifier(2, batch_size=32, num_epochs=2)
    >>> state, history = jhash.fit(pretrain, jax.random.key(0), batch, progress=False)
    >>> dch = jhash.methods.dch(16, init_variables=state, batch_size=32, num_epochs=1)
    >>> start = jhash.init(dch, jax.random.key(1), batch)
    >>> sorted(state.coder.train.params)  # the backbone's layer, then the head
    ['hidden_0', 'projection']
    >>> bool((start.coder.train.params["hidden_0"]["kernel"]
    ...       == state.coder.train.params["hidden_0"]["kernel"]).all())
    True
  """
  num_classes = _checks.positive_int(num_classes, "num_classes")
  if num_classes > np.iinfo(np.int32).max:
    raise ValueError(
      f"num_classes must fit in int32 (at most {np.iinfo(np.int32).max}: class ids are "
      f"int32); got {num_classes}."
    )
  batch_size = _checks.positive_int(batch_size, "batch_size")
  num_epochs = _checks.nonneg_int(num_epochs, "num_epochs")
  net = coder_lib.coder(
    num_classes,
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
    return ClassifierState(net.init(key, batch), _api.view_widths(batch))

  def loss_fn(outputs, labels):
    loss, accuracy = classification_loss(outputs.logits, labels)
    return loss, {"accuracy": accuracy}

  def update(state, batch, key):
    coder, value, aux, _ = net.step(state.coder, net.read(batch), loss_fn, batch["labels"], key=key)
    return state._replace(coder=coder), {"loss": value, "accuracy": aux["accuracy"]}

  def predict(state, batch):
    if not isinstance(state, ClassifierState):
      raise ValueError(
        f"state must be a ClassifierState (a fit of {name}); got {type(state).__name__}."
      )
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(batch)):
      _checks.batch(batch)  # under jit: the batch's form, ranks and dtypes
    else:  # as jhash.encode: the batch, its views' dtypes and widths, a finite state
      _api.check_encoding(method, state, batch)
    return jnp.argmax(net.scores(state.coder, batch), axis=-1).astype(jnp.int32)

  def check_batch(batch):
    n = net.check_batch(batch)
    _pairwise.check_supervised(batch, name)
    labels = np.asarray(batch["labels"])
    if labels.ndim == 2 and labels.shape[1] != num_classes:
      raise ValueError(
        f"labels: {name} has num_classes={num_classes}; the multi-hot labels have "
        f"{labels.shape[1]} columns."
      )
    if labels.ndim == 1 and labels.size and not 0 <= labels.min() <= labels.max() < num_classes:
      raise ValueError(
        f"labels: {name} has num_classes={num_classes} (class ids 0..{num_classes - 1}); "
        f"the batch has classes {int(labels.min())}..{int(labels.max())}."
      )
    return n

  def check_encode(state, batch):
    _api.check_views(state.widths, batch, view, name)

  method = _api.HashingMethod(
    init,
    lambda s, b: net.encode(s.coder, b),
    net.num_bits,
    name,
    _api.one_phase(name, update, batch_size=batch_size, num_epochs=num_epochs),
    check_batch,
    extras=ClassifierExtras(net, predict),
    check_encode=check_encode,
  )
  return method
