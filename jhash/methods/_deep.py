"""The five deep base models of MCH: KSH, HashNet, DCH, MMHH (pairwise) and ADSH (asymmetric).

KSH, HashNet, DCH and MMHH are ``pairwise`` methods with their paper's loss
(``jhash.losses``) and its defaults: one network, the pairs of each minibatch (and, with
``memory=True``, a memory of every training item's latest outputs), one optax step per
minibatch on the shared train step. HashNet's continuation ``tanh(beta z)`` scales the
head's outputs by ``beta(step)`` before its loss applies the ``tanh``.

ADSH (Jiang and Li, "Asymmetric Deep Supervised Hashing", AAAI 2018) learns the network
for query points and the database codes ``V`` in {-1, +1} [n, K] of the training set
directly. The paper alternates, for ``T`` outer iterations, a few epochs of the network
on ``m`` sampled items with ``V`` fixed and a discrete update of ``V``, column by column
in closed form. Here each outer iteration is two phases: ``steps_per_round`` minibatch
steps of the network (``adsh_loss``: each minibatch against all of ``V``), writing the
minibatch's ``U = tanh(F(x))`` to a memory; then one full-batch step that draws ``m``
items among those written (``num_samples``) and updates ``V`` by
``jhash.losses.adsh_update_codes`` with their ``U`` (so the ``[m, n]`` similarity fits in
memory: 4 m n bytes). Encoding new items is ``sign(F(x))``; the training items' learned
codes are ``state.codes``. The targets ``S~`` are 1 for similar pairs and ``-r`` for
dissimilar ones, ``r`` the ratio of similar to dissimilar pairs (``adsh_targets``), as in
the authors' code.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jhash import _api
from jhash import _checks
from jhash import codes as codes_lib
from jhash import losses
from jhash import models
from jhash import coder as coder_lib
from jhash.methods import _memory
from jhash.methods import _pairwise


# pairwise's arguments a pairwise method sets itself (the rest are its **options).
_PAIRWISE_FIXED = ("num_bits", "loss")


def dch(
  num_bits: int, *, gamma: float = 20.0, quantization: float = 0.1, **options
) -> _api.HashingMethod:
  """Deep Cauchy Hashing (Cao et al., CVPR 2018): ``jhash.losses.dch_loss`` on minibatch pairs.

  Args:
    num_bits: K.
    gamma: the Cauchy scale (the authors' 20).
    quantization: lambda, the weight of the Cauchy quantisation term.
    **options: ``jhash.methods.pairwise``'s (backbone, optimizer, batch_size, num_epochs,
      memory, ...).
  Returns:
    A minibatch ``HashingMethod`` named "dch".

  Example:
    >>> import jax, numpy as np, jhash
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(128, 8)).astype(np.float32)
    >>> batch = {"views": (x,), "labels": (x[:, 0] > 0).astype(np.int32)}
    >>> method = jhash.methods.dch(16, batch_size=32, num_epochs=1)
    >>> state, history = jhash.fit(method, jax.random.key(0), batch, progress=False)
    >>> jhash.encode(method, state, batch).shape
    (128, 16)
  """
  _checks.scalar(gamma, "gamma", low=0, strict=True)
  _checks.scalar(quantization, "quantization", low=0)
  loss = functools.partial(losses.dch_loss, gamma=gamma, quantization=quantization)
  _checks.keywords(options, _pairwise.pairwise, "dch", _PAIRWISE_FIXED)
  return _pairwise.pairwise(
    num_bits, loss, **{"name": "dch", "code_inputs": losses.saturated, **options}
  )


def mmhh(
  num_bits: int,
  *,
  gamma: float = 10.0,
  margin: float = 2.0,
  similar_inside: float = 0.5,
  dissimilar_inside: float = 0.8,
  similar_outside: float = 1.0,
  dissimilar_outside: float = 1.0,
  quantization: float = 0.001,
  **options,
) -> _api.HashingMethod:
  """Maximum-margin Hamming hashing (Kang et al., ICCV 2019): ``jhash.losses.mmhh_loss``.

  Args:
    num_bits: K.
    gamma, margin, quantization: ``jhash.losses.mmhh_loss``'s (the paper's defaults).
    similar_inside, dissimilar_inside, similar_outside, dissimilar_outside: the same.
    **options: ``jhash.methods.pairwise``'s.
  Returns:
    A minibatch ``HashingMethod`` named "mmhh".

  Example:
    >>> import jax, numpy as np, jhash
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(128, 8)).astype(np.float32)
    >>> batch = {"views": (x,), "labels": (x[:, 0] > 0).astype(np.int32)}
    >>> method = jhash.methods.mmhh(16, batch_size=64, num_epochs=1)
    >>> state, history = jhash.fit(method, jax.random.key(0), batch, progress=False)
    >>> history["loss"].shape
    (2,)
  """
  _checks.scalar(gamma, "gamma", low=0, strict=True)
  weights = dict(
    margin=margin,
    similar_inside=similar_inside,
    dissimilar_inside=dissimilar_inside,
    similar_outside=similar_outside,
    dissimilar_outside=dissimilar_outside,
    quantization=quantization,
  )
  for key, value in weights.items():
    _checks.scalar(value, key, low=0)
  loss = functools.partial(losses.mmhh_loss, gamma=gamma, **weights)
  _checks.keywords(options, _pairwise.pairwise, "mmhh", _PAIRWISE_FIXED)
  return _pairwise.pairwise(
    num_bits, loss, **{"name": "mmhh", "code_inputs": losses.saturated, **options}
  )


def ksh(num_bits: int, **options) -> _api.HashingMethod:
  """Supervised hashing with kernels (Liu et al., CVPR 2012), its relaxed loss on a network.

  ``jhash.losses.ksh_loss``: ``||(1/K) H H^T - S~||^2`` with ``H = 2 sigmoid(u) - 1``, as
  MCH trains KSH as a base model end to end. (KSH's original fit, kernel features over
  anchors and a greedy bit-by-bit fit on the residual, is ``jhash.losses.ksh_greedy_fit``.)

  Args:
    num_bits: K.
    **options: ``jhash.methods.pairwise``'s.
  Returns:
    A minibatch ``HashingMethod`` named "ksh".

  Example:
    >>> import jax, numpy as np, jhash
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(128, 8)).astype(np.float32)
    >>> batch = {"views": (x,), "labels": (x[:, 0] > 0).astype(np.int32)}
    >>> method = jhash.methods.ksh(16, batch_size=64, num_epochs=1)
    >>> state, history = jhash.fit(method, jax.random.key(0), batch, progress=False)
    >>> jhash.encode(method, state, batch).shape
    (128, 16)
  """
  _checks.keywords(options, _pairwise.pairwise, "ksh", _PAIRWISE_FIXED)
  return _pairwise.pairwise(
    num_bits, losses.ksh_loss, **{"name": "ksh", "code_inputs": losses.saturated, **options}
  )


def hashnet(
  num_bits: int,
  *,
  alpha: float | None = None,
  period: int = 200,
  rate: float = 0.005,
  power: float = 0.5,
  **options,
) -> _api.HashingMethod:
  """HashNet (Cao et al., ICCV 2017): weighted pairwise likelihood on ``tanh(beta z)``.

  Args:
    num_bits: K.
    alpha: the inner products' scale (None: 10 / K, the authors' code).
    period, rate, power: the continuation ``beta = (1 + rate * period * (step //
      period)) ** power`` (``jhash.losses.hashnet_beta``; the authors' schedule).
    **options: ``jhash.methods.pairwise``'s.
  Returns:
    A minibatch ``HashingMethod`` named "hashnet".

  Example:
    >>> import jax, numpy as np, jhash
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(128, 8)).astype(np.float32)
    >>> batch = {"views": (x,), "labels": (x[:, 0] > 0).astype(np.int32)}
    >>> method = jhash.methods.hashnet(16, batch_size=64, num_epochs=1)
    >>> state, history = jhash.fit(method, jax.random.key(0), batch, progress=False)
    >>> sorted(history)
    ['bit_balance', 'loss']
  """
  if alpha is not None:
    _checks.scalar(alpha, "alpha", low=0, strict=True)
  period = _checks.positive_int(period, "period")
  _checks.scalar(rate, "rate", low=0)
  # power > 0: beta grows, and tanh(beta z) nears sign(z) (power <= 0 runs it backwards).
  _checks.scalar(power, "power", low=0, strict=True)
  beta = functools.partial(losses.hashnet_beta, period=period, rate=rate, power=power)

  def activation(logits, step):
    return beta(step) * logits  # the loss applies tanh: tanh(beta z)

  loss = functools.partial(losses.hashnet_loss, beta=1.0, alpha=alpha)
  _checks.keywords(options, _pairwise.pairwise, "hashnet", _PAIRWISE_FIXED)
  return _pairwise.pairwise(
    num_bits,
    loss,
    activation=activation,
    **{"name": "hashnet", "code_inputs": losses.saturated, **options},
  )


# ----------------------------------------------------------------------------- ADSH


class ADSHState(NamedTuple):
  """The network, the database codes of the training set and the latest outputs."""

  coder: coder_lib.CoderState  # the network's variables, optimiser state, statistics
  codes: jax.Array  # float32 [n, K] in {-1, +1}: V, the training items' codes
  memory: _memory.Memory  # U = tanh(F(x)) [n, K] when each item was last seen, labels
  widths: jax.Array  # int32 [V], the training views' widths
  trained: _api.Trained | None = None  # what it was trained on (set by jhash.init / fit)


def adsh_targets(similarity: jax.Array) -> jax.Array:
  """ADSH's targets ``S~``: 1 for similar pairs, ``-r`` for dissimilar ones.

  ``r = |S_1| / |S_0|``, the ratio of similar to dissimilar pairs of the matrix, as the
  authors' code computes ``S~`` (``S (1 + r) - r``): with plain {-1, +1} targets and ten
  classes, nine pairs in ten ask ``u . v = -K``, which every code pair meets when all
  outputs share one direction and the codes take the opposite one.

  Args:
    similarity: float [b, n] in {0, 1}.
  Returns:
    float32 [b, n].
  """
  r = _similar_ratio(similarity)
  return similarity * (1.0 + r) - r


def _similar_ratio(similarity: jax.Array) -> jax.Array:
  similar = jnp.sum(similarity)
  return similar / jnp.maximum(similarity.size - similar, 1.0)


#: Items whose pairs with the whole training set give ADSH's reward table its ratio ``r``.
ADSH_RATIO_ROWS = 1024


def adsh_code_loss(num_bits: int, ratio: jax.Array | float) -> jax.Array:
  """ADSH's pair loss on codes by similarity and Hamming distance, float32 [2, K + 1]:
  ``(b_i^T b_j - K S~_ij)^2 / K`` with ``b_i^T b_j = K - 2 d`` and the targets ADSH trains
  with (``adsh_targets``): ``S~ = 1`` for similar pairs, ``-r`` for dissimilar ones
  (``r = ratio``; ``/ K`` only sets the scale). MCH's reward reads it. With ``r < 1`` the
  dissimilar row falls until ``d = K (1 + r) / 2`` and rises after it: ADSH asks
  dissimilar codes for the inner product ``-r K``, not for opposite codes."""
  inner = num_bits - 2.0 * jnp.arange(num_bits + 1, dtype=jnp.float32)
  target = num_bits * jnp.stack([-jnp.asarray(ratio, jnp.float32), jnp.float32(1.0)])[:, None]
  return (inner[None, :] - target) ** 2 / num_bits


def adsh_ratio(labels: jax.Array) -> jax.Array:
  """float32 []: ``r = |S_1| / |S_0|`` over the pairs of the first ``ADSH_RATIO_ROWS``
  items of ``labels`` (class ids [n] or multi-hot [n, C]) with all ``n`` of them: the
  training set's ratio, estimated as ADSH's minibatches (rows against the whole set) do."""
  return _similar_ratio(losses.label_similarity(labels[:ADSH_RATIO_ROWS], labels))


def adsh(
  num_bits: int,
  *,
  gamma: float = 200.0,
  rounds: int = 10,
  steps_per_round: int = 50,
  num_samples: int = 2000,
  backbone: models.Model | None = None,
  view: int | None = None,
  optimizer: optax.GradientTransformation | None = None,
  learning_rate: float = 1e-3,
  init_variables: Any = None,
  trainable: str = "all",
  standardize: bool = True,
  batch_size: int = 64,
  encode_chunk: int = 256,
  name: str = "adsh",
) -> _api.HashingMethod:
  """Asymmetric Deep Supervised Hashing: the network and the database codes, alternately.

  Args:
    num_bits: K.
    gamma: the weight of ``||V[idx] - U||^2`` (the paper: 200).
    rounds: outer iterations ``T`` (each a network phase, then a code phase).
    steps_per_round: minibatch steps of the network per round.
    num_samples: ``m``, the items whose outputs update ``V`` in each code phase.
    backbone, view, optimizer, learning_rate, init_variables, trainable, standardize: as
      in ``jhash.methods.pairwise``.
    batch_size, encode_chunk, name: as in ``jhash.methods.pairwise``.
  Returns:
    A ``HashingMethod`` of ``2 * rounds`` phases; the network steps report ``loss``, the
    code steps ``objective`` (the paper's ``J`` over the drawn items, after the update)
    and ``changed`` (the fraction of code bits flipped). The training set must be in
    memory (``init`` reads every label).

  Known failure: ``V`` starts as random signs (the authors' code starts it at 0 and trains
  with SGD), so the first network phase fits codes that carry no information; the least
  squares answer is outputs near 0, and Adam's full-size steps can drive every ReLU of a
  backbone's last hidden layer to 0 on every item within ~100 steps, after which all items
  share one code. Seen on the ``scenes`` protocol from a pretrained backbone at 16 bits
  (every seed) and 64 bits (one seed of three), and 32 bits survived; the loss then stays at
  its no-information level (``K^2 (p + (1 - p) r^2)``). Watch the first round's loss; SGD
  or a learning rate of 1e-4 kept the units alive there.

  Example:
    >>> import jax, numpy as np, jhash
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(128, 8)).astype(np.float32)
    >>> batch = {"views": (x,), "labels": (x[:, 0] > 0).astype(np.int32)}
    >>> method = jhash.methods.adsh(16, rounds=2, steps_per_round=2, num_samples=64)
    >>> state, history = jhash.fit(method, jax.random.key(0), batch, progress=False)
    >>> [p.name for p in method.phases], state.codes.shape
    (['network', 'codes', 'network', 'codes'], (128, 16))
  """
  _checks.scalar(gamma, "gamma", low=0)
  rounds = _checks.positive_int(rounds, "rounds")
  steps_per_round = _checks.positive_int(steps_per_round, "steps_per_round")
  num_samples = _checks.positive_int(num_samples, "num_samples")
  batch_size = _checks.positive_int(batch_size, "batch_size")
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
    n, labels = _api.num_items(batch), jnp.asarray(batch["labels"])
    codes = codes_lib.sign(jax.random.normal(jax.random.fold_in(key, 1), (n, num_bits)))
    return ADSHState(
      net.init(jax.random.fold_in(key, 0), batch),
      codes.astype(jnp.float32),
      _memory.empty_memory(n, num_bits, labels)._replace(labels=labels),
      _api.view_widths(batch),
    )

  def loss_fn(outputs, context):
    s_tilde, codes, own = context
    # adsh_loss reads targets as 2 s - 1: hand it the s that gives S~.
    value = losses.adsh_loss(
      outputs.logits,
      codes,
      (s_tilde + 1.0) / 2.0,
      jnp.ones_like(s_tilde),
      gamma=gamma,
      own_codes=own,
    )
    return value, {}

  def network_step(state, batch, key):
    index, labels = batch["index"], batch["labels"]
    s_tilde = adsh_targets(losses.label_similarity(labels, state.memory.labels))
    coder, value, _, outputs = net.step(
      state.coder,
      net.read(batch),
      loss_fn,
      (s_tilde, state.codes, state.codes[index]),
      key=key,
    )
    memory = _memory.write_memory(state.memory, index, jnp.tanh(outputs.logits), labels)
    return state._replace(coder=coder, memory=memory), {"loss": value}

  def code_step(state, batch, key):
    del batch
    codes, objective, changed = update_database_codes(state, key, num_samples, gamma)
    return state._replace(codes=codes), {"objective": objective, "changed": changed}

  def check_batch(batch):
    n = net.check_batch(batch)
    _pairwise.check_supervised(batch, name)
    return n

  def check_encode(state, batch):
    _api.check_views(state.widths, batch, view, name)

  phases = ()
  for _ in range(rounds):
    phases += (
      _api.Phase("network", network_step, batch_size, num_steps=steps_per_round),
      _api.Phase("codes", code_step, None, num_steps=1),
    )
  return _api.HashingMethod(
    init,
    lambda s, b: net.encode(s.coder, b),
    net.num_bits,
    name,
    phases,
    check_batch,
    extras=_pairwise.NetworkExtras(
      net, lambda state: adsh_code_loss(num_bits, adsh_ratio(state.memory.labels))
    ),
    check_encode=check_encode,
  )


def update_database_codes(state: ADSHState, key: jax.Array, num_samples: int, gamma: float):
  """ADSH's code phase: ``V`` updated from the outputs ``U`` of ``m`` drawn items.

  The ``m`` items are distinct and drawn among those seen (unseen ones only when too few
  were seen). Returns (codes float32 [n, K], the objective ``J`` over the drawn items after
  the update, the fraction of code bits flipped).
  """
  memory, n = state.memory, state.codes.shape[0]
  priority = jax.random.uniform(key, (n,)) + memory.filled.astype(jnp.float32)
  drawn = jax.lax.top_k(priority, min(num_samples, n))[1]
  u = memory.outputs[drawn]
  s_tilde = adsh_targets(losses.label_similarity(memory.labels[drawn], memory.labels))
  codes = losses.adsh_update_codes(state.codes, u, s_tilde, drawn, gamma)
  changed = jnp.mean((codes != state.codes).astype(jnp.float32))
  return codes, losses.adsh_objective(codes, u, s_tilde, drawn, gamma), changed
