"""MCH: a base hashing model, then a crop agent that gives an image several codes.

Li, Jiang and Li, "Multiple Code Hashing for Efficient Image Retrieval" (its Section 3). ``mch(base)`` trains ``base`` (a network method, whose ``extras`` are
``jhash.methods.NetworkExtras``: ``jhash.methods.pairwise`` and the five base models)
with its own schedule, then the agent on minibatches with the base frozen
(``_agent``). Encoding: ``encode`` is the base model's whole-image code;
``encode_multi`` gives ``[n, 6, K]`` codes, the whole image's, then the five fixed crops'
(``_crops.five_crops``, side ratio ``sigma``), with the mask of those kept: the whole
image always, a crop when ``pi(keep | h) > xi`` and its code is not one already kept for
the item (a repeated code adds no bucket; so ``sigma = 1``, whose crops are the image,
gives exactly the base model's single code).

Choices where the paper is silent:

* Training crops: side ratio uniform in ``crop_range`` (default ``sigma +- 0.2`` within
  [0.1, 1]) so the agent sees crops like those it judges at encoding; positions uniform.
* The reward's other items ``j``: the minibatch's other items and a memory of every
  training item's whole-image code seen so far (the base is frozen, so the memory is
  exact after one epoch), with balanced pair weights (HashNet's), as the base losses use.
* The pair loss on codes: the loss the base trains with, evaluated on its binary codes
  (``jhash.losses.code_loss_table``: a loss that squashes by ``tanh`` inside reads
  ``jhash.losses.saturated`` codes, so its relaxed codes are the codes; ADSH's table uses
  the targets 1 and ``-r`` it trains with). MMHH's table is not monotone for dissimilar
  pairs: its authors' margin factors weight those inside the Hamming ball by 0.8 and
  those outside by 1, so pulling a dissimilar item from distance 3 to 2 lowers the loss.
* The baseline and scale of REINFORCE: running mean and RMS of the rewards (``_agent``).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jhash import _api
from jhash import _checks
from jhash import models
from jhash.methods import _memory
from jhash.methods import _pairwise
from jhash.methods._mch import _agent
from jhash.methods._mch import _controls
from jhash.methods import _crops


class MCHState(NamedTuple):
  """The base model's state, the crop agent's and the memory of training codes."""

  base: Any  # the base method's state
  agent: _agent.AgentState  # policy network and running reward statistics
  memory: _memory.Memory  # [n, K] whole-image codes of the training items, labels
  trained: _api.Trained | None = None  # what it was trained on (set by jhash.init / fit)


class MCHExtras(NamedTuple):
  """Further pure functions of ``mch``."""

  # keep_probabilities(state, batch) -> float32 [n, 5]: pi(keep | h) of the five crops.
  keep_probabilities: Callable[[MCHState, dict], jax.Array]
  # crops(batch) -> float32 [n, 5, H, W, C]: the five crops, resized to the image.
  crops: Callable[[dict], jax.Array]
  base: _api.HashingMethod  # the base model (its state is ``MCHState.base``)
  # crop_codes(state, batch) -> (whole int8 [n, K], crops int8 [n, 5, K], keep float32
  # [n, 5]): the images' codes, their crops' codes and pi(keep), from one pass of the
  # base network (``encode_multi`` keeps the crops with keep > xi; controls other ones).
  crop_codes: Callable[[MCHState, dict], tuple[jax.Array, jax.Array, jax.Array]] | None = None
  # crop_states(state, batch) -> float32 [n, 5, D]: the policy's states ``h`` of the five
  # crops (what ``keep_probabilities`` reads), for probes of what the state tells.
  crop_states: Callable[[MCHState, dict], jax.Array] | None = None


def _check_state(state: Any, name: str) -> None:
  """An MCH state (not the base's ``state.base``, not None), or a TypeError."""
  if not isinstance(state, MCHState):
    hint = " (the base's state, state.base? pass the whole MCHState)" if state is not None else ""
    raise TypeError(
      f"state must be {name}'s trained MCHState (from jhash.fit or jhash.init); got "
      f"{type(state).__name__}{hint}."
    )


def _checked_extra(method, fn, state, batch):
  """``fn(state, batch)`` for the extras ``keep_probabilities``, ``crop_codes`` and
  ``crop_states``, with the state and batch checked as ``jhash.encode_multi`` checks them
  (the state's kind and finiteness, the batch's views and their training dtypes: concrete
  values only, not under jit); an empty batch gives empty results."""
  _check_state(state, method.name)
  leaves = jax.tree.leaves((state, batch))
  if any(isinstance(x, jax.core.Tracer) for x in leaves):
    _checks.batch(batch)
    return fn(state, batch)
  n = _api.check_encoding(method, state, batch)
  if n == 0:
    one = jax.tree.map(
      lambda v: jax.ShapeDtypeStruct((1,) + tuple(np.shape(v))[1:], np.asarray(v).dtype),
      dict(batch),
    )
    shapes = jax.eval_shape(fn, state, one)
    return jax.tree.map(lambda s: jnp.zeros((0,) + s.shape[1:], s.dtype), shapes)
  return fn(state, batch)


def _check_base(base: Any) -> _api.HashingMethod:
  if not isinstance(base, _api.HashingMethod) or not isinstance(
    base.extras, _pairwise.NetworkExtras
  ):
    got = getattr(base, "name", type(base).__name__)
    raise ValueError(
      "base must be a network method (a HashingMethod whose extras are "
      "jhash.methods.NetworkExtras: its coder and its pair loss on codes), as "
      f"jhash.methods.pairwise, ksh, hashnet, adsh, dch and mmhh are; got {got!r}."
    )
  return base


def _crop_range(crop_range, sigma: float) -> tuple[float, float]:
  if crop_range is None:
    return max(0.1, sigma - 0.2), min(1.0, sigma + 0.2)
  try:
    low, high = (float(v) for v in crop_range)
  except (TypeError, ValueError):
    raise ValueError(
      f"crop_range must be (low, high) with 0 < low <= high <= 1; got {crop_range!r}."
    ) from None
  if not 0.0 < low <= high <= 1.0:
    raise ValueError(
      f"crop_range must be (low, high) with 0 < low <= high <= 1; got {crop_range!r}."
    )
  return low, high


def _lift(phase: _api.Phase) -> _api.Phase:
  """A base phase acting on ``MCHState.base``."""

  def update(state, batch, key):
    base, metrics = phase.update(state.base, batch, key)
    return state._replace(base=base), metrics

  return phase._replace(update=update)


def mch(
  base: _api.HashingMethod,
  *,
  sigma: float = 0.5,
  xi: float = 0.5,
  crop_range: tuple[float, float] | None = None,
  agent_epochs: int = 5,
  agent_batch_size: int = 64,
  hidden: tuple[int, ...] = (512, 256, 128, 64),
  optimizer: optax.GradientTransformation | None = None,
  learning_rate: float = 1e-3,
  momentum: float = 0.9,
  memory: bool = True,
  encode_chunk: int = 256,
  name: str | None = None,
) -> _api.HashingMethod:
  """Multiple Code Hashing over a base model: codes of an image and of the crops worth keeping.

  Args:
    base: the base method (``jhash.methods.dch(32)``, say), trained first.
    sigma: the fixed crops' side over the image's side, in (0, 1].
    xi: the keep threshold on ``pi(keep | h)``, in (0, 1].
    crop_range: (low, high), the training crops' side ratio range (default: ``sigma``
      +- 0.2 within [0.1, 1]).
    agent_epochs: epochs of the agent over the training set.
    agent_batch_size: items per agent step.
    hidden: the policy's hidden widths (default four: five dense layers in all).
    optimizer: the policy's optax optimiser (default Adam at ``learning_rate``).
    learning_rate: Adam's step size when no optimizer is given.
    momentum: of the running reward mean and scale.
    memory: reward against a memory of the training items' codes too (else the
      minibatch only).
    encode_chunk: images per chunk in ``encode_multi`` (each with its five crops).
    name: default ``"mch-" + base.name``.
  Returns:
    A ``HashingMethod`` whose phases are the base's, then "agent"; the agent's steps
    report ``agent_loss``, ``reward`` (mean over the minibatch of the reward taken),
    ``kept`` (fraction of crops kept) and ``keep_probability``.

  Example:
    >>> import jax, numpy as np, jhash
    >>> rng = np.random.default_rng(0)
    >>> images = rng.uniform(size=(64, 28, 28)).astype(np.float32)
    >>> batch = {"views": (images,), "labels": rng.integers(0, 2, 64)}
    >>> base = jhash.methods.dch(8, batch_size=32, num_epochs=1)
    >>> method = jhash.methods.mch(base, agent_epochs=1, agent_batch_size=32)
    >>> state, _ = jhash.fit(method, jax.random.key(0), batch, progress=False)
    >>> codes, mask = jhash.encode_multi(method, state, batch)
    >>> codes.shape, bool(mask[:, 0].all())
    ((64, 6, 8), True)
  """
  base = _check_base(base)
  sigma = _crops.check_ratio(sigma, "sigma")
  xi = _crops.check_ratio(xi, "xi")
  train_range = _crop_range(crop_range, sigma)
  agent_epochs = _checks.nonneg_int(agent_epochs, "agent_epochs")
  agent_batch_size = _checks.positive_int(agent_batch_size, "agent_batch_size")
  encode_chunk = _checks.positive_int(encode_chunk, "encode_chunk")
  memory = _checks.flag(memory, "memory")
  if name is not None and not isinstance(name, str):
    raise ValueError(f"name must be a str or None; got {_checks.describe(name)}.")
  if optimizer is None and not callable(learning_rate):
    _checks.scalar(learning_rate, "learning_rate", low=0, strict=True)
  _checks.scalar(momentum, "momentum", low=0)
  if not float(momentum) < 1.0:
    raise ValueError(f"momentum must be in [0, 1); got {momentum!r}.")
  if (
    not isinstance(hidden, (tuple, list))
    or not hidden
    or any(isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1 for h in hidden)
  ):
    raise ValueError(
      f"hidden must be a non-empty tuple of positive ints (the policy's widths); got {hidden!r}."
    )
  optimizer = optax.adam(learning_rate) if optimizer is None else optimizer
  policy = _agent.policy_coder(
    models.model(models.PolicyMLP(tuple(int(h) for h in hidden))), optimizer, name or "mch"
  )
  net, code_loss = base.extras.coder, base.extras.code_loss
  read = net.read
  name = name or f"mch-{base.name}"

  def images(batch):
    x = read(batch)
    if x.ndim != 4:
      raise ValueError(
        f"{name} crops images: the batch's view must hold images [n, H, W] "
        f"or [n, H, W, C]; got {x.shape}."
      )
    for ratio, what in ((sigma, "sigma"), (train_range[0], "crop_range")):
      _crops.check_ratio(ratio, what, min(x.shape[1:3]))
    return x

  def init(key, batch):
    x = images(batch)
    base_state = base.init(jax.random.fold_in(key, 0), batch)
    whole = net.outputs(base_state.coder, x[:1])
    h, _, _ = _agent.agent_inputs(whole, whole)
    train = policy.init(jax.random.fold_in(key, 1), {"views": (h,)})
    n = _api.num_items(batch)
    bank = _memory.empty_memory(n if memory else 0, base.num_bits, jnp.asarray(batch["labels"]))
    return MCHState(base_state, _agent.empty_agent(train), bank)

  def agent_step(state, batch, key):
    x = images(batch)
    k_crop, k_act = jax.random.split(key)
    crops, _ = _crops.random_crops(k_crop, x, train_range)
    whole = net.outputs(state.base.coder, x)
    crop = net.outputs(state.base.coder, crops)
    h, codes, crop_codes = _agent.agent_inputs(whole, crop)
    labels, index = batch["labels"], batch["index"]
    bank = state.memory if memory else None
    rewards = _agent.minibatch_rewards(
      codes, crop_codes, labels, index, bank, code_loss(state.base)
    )
    agent, metrics = _agent.policy_step(policy, state.agent, h, rewards, k_act, momentum)
    if memory:
      bank = _memory.write_memory(bank, index, codes, labels)
    return state._replace(agent=agent, memory=state.memory if bank is None else bank), metrics

  def crops_of(batch):
    return _crops.five_crops(images(batch), sigma)

  def fixed_crop_states(state, b):
    # The policy's states of the five fixed crops of each image: [n * 5, D], then codes.
    x = images(b)
    n = x.shape[0]
    cut = _crops.five_crops(x, sigma).reshape((n * _crops.NUM_FIXED,) + x.shape[1:])
    whole = net.outputs(state.base.coder, x)
    crop = net.outputs(state.base.coder, cut)
    rep = jax.tree.map(lambda a: jnp.repeat(a, _crops.NUM_FIXED, axis=0), whole)
    return _agent.agent_inputs(rep, crop)

  def keep_probabilities(state, batch):
    def one_chunk(b):
      h, codes, crop_codes = fixed_crop_states(state, b)
      n = h.shape[0] // _crops.NUM_FIXED
      keep = _agent.keep_probability(policy, state.agent.policy, h)
      k = crop_codes.shape[-1]
      return (
        keep.reshape(n, _crops.NUM_FIXED),
        codes[:: _crops.NUM_FIXED],
        crop_codes.reshape(n, _crops.NUM_FIXED, k),
      )

    return _api.map_in_chunks(one_chunk, batch, encode_chunk)

  def encode(state, batch):
    return base.encode(state.base, batch)

  def encode_multi(state, batch):
    # One pass of the base network over the images and their crops: the whole-image
    # codes come from the same outputs the policy reads (the base's encode, per item).
    keep, whole, crop_codes = keep_probabilities(state, batch)
    return _controls.kept_codes(whole, crop_codes, keep > xi)

  def crop_codes(state, batch):
    keep, whole, crops = keep_probabilities(state, batch)
    return whole.astype(jnp.int8), crops.astype(jnp.int8), keep

  def crop_states(state, batch):
    def one_chunk(b):
      h = fixed_crop_states(state, b)[0]
      return h.reshape((-1, _crops.NUM_FIXED, h.shape[-1]))

    return _api.map_in_chunks(one_chunk, batch, encode_chunk)

  def check_batch(batch):
    n = base.check_batch(batch) if base.check_batch is not None else _checks.batch(batch)
    jax.eval_shape(images, batch)
    return n

  def check_encode(state, batch):
    _check_state(state, name)
    if base.check_encode is not None:
      base.check_encode(state.base, batch)

  def bind(batch):
    if base.bind is None:
      return None
    return mch(
      _api.bound(base, batch),
      sigma=sigma,
      xi=xi,
      crop_range=train_range,
      agent_epochs=agent_epochs,
      agent_batch_size=agent_batch_size,
      hidden=hidden,
      optimizer=optimizer,
      momentum=momentum,
      memory=memory,
      encode_chunk=encode_chunk,
      name=name,
    )

  phases = tuple(_lift(p) for p in base.phases) + (
    _api.Phase("agent", agent_step, agent_batch_size, num_epochs=agent_epochs),
  )
  this = None  # the method, set below: the extras check state and batch as encode_multi

  def at_door(fn):
    def checked(state, batch):
      return _checked_extra(this, fn, state, batch)

    return checked

  this = _api.HashingMethod(
    init,
    encode,
    base.num_bits,
    name,
    phases,
    check_batch,
    extras=MCHExtras(
      at_door(lambda s, b: keep_probabilities(s, b)[0]),
      crops_of,
      base,
      at_door(crop_codes),
      at_door(crop_states),
    ),
    encode_multi=encode_multi,
    bind=bind if base.bind is not None else None,
    check_encode=check_encode,
  )
  return this
