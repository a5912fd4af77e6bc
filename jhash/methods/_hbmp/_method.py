"""HBMP as a ``HashingMethod``: binary matrix pursuit (stage i), then hash functions (ii).

Cakir, He, Bargal, Sclaroff, "Hashing with Binary Matrix Pursuit", ECCV 2018. ``init``
builds the items (classes, label sets or instances) and their affinity ``R`` from the
batch; each step of the first phase adds one bit of the pursuit (``_pursuit``), giving
the target code of every item (its class, its label set, or the instance). Retrieval ranks by the weighted
Hamming distance with the bit weights ``state.weights`` (the pursuit's alphas):
``jhash.metrics.mean_average_precision(..., weights=state.weights)``.

Stage (ii), hash functions ``f(x) = sign(psi(x))`` fitted to the target codes by the
hinge bound (``_hashfn``), runs as a second phase (``jhash.Phase``) on minibatches with
``hash_function="linear"`` (the default), ``"mlp"`` or ``"cnn"`` (or a network coder,
``jhash.coder.Coder``): each step is one minibatch of the hinge bound on the coder, with
the target code of each instance's item (``HBMPState.target_codes``) as its target.
``encode`` maps the batch's features or images to codes with the learned functions (no
labels needed), and ``extras.encode_targets`` keeps the codes by item. With
``hash_function=None`` the method is stage (i) alone: ``encode`` then refuses (it would
read the labels of the batch) and ``extras.encode_targets`` gives the codes by item.

Static sizes: under ``jit`` the number of items must be known before the labels are
seen. ``jhash.init`` and ``jhash.fit`` read it from the training labels (the method's
``bind``); a caller who traces ``method.init`` directly passes ``num_items`` (the number
of classes, or of unique label sets, ``len(unique_label_sets(labels).sets)``).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax

from jhash import _checks
from jhash import _api
from jhash import coder as coder_lib
from jhash.methods._hbmp import _hashfn
from jhash.methods._hbmp import _items
from jhash.methods._hbmp import _pursuit

LEVELS = _items.LEVELS


class HBMPState(NamedTuple):
  """Items, their affinity and the pursuit's buffers."""

  pursuit: _pursuit.PursuitState  # codes int8 [m, b] (targets of the m items), alphas [b], ...
  affinity: jax.Array  # float32 [m, m], R between items
  item_labels: jax.Array  # class: int32 [m] ids; label_sets: bool [m, C];
  # instance: the training labels (int32 [n] zeros if none)
  instance_items: jax.Array  # int32 [n], the item of each training instance
  hashing: coder_lib.CoderState | None = None  # stage ii's network (None: stage i only)
  widths: jax.Array | None = None  # int32 [V], the training views' widths
  trained: _api.Trained | None = None  # what it was trained on (jhash.init / fit)

  @property
  def codes(self) -> jax.Array:
    """int8 [m, b], the items' target codes (bits not made yet are 0)."""
    return self.pursuit.codes

  @property
  def weights(self) -> jax.Array:
    """float32 [b], the bit weights (alphas) for weighted Hamming ranking."""
    return self.pursuit.alphas

  @property
  def target_codes(self) -> jax.Array:
    """int8 [n, b], the target code of each training instance (stage ii's targets)."""
    return self.pursuit.codes[self.instance_items]


def retrieval_weights(state: HBMPState) -> jax.Array:
  """The weights for weighted Hamming ranking, ``sum_k alpha_k [q_k != v_k]``: float32 [b]."""
  return state.pursuit.alphas


def target_codes(state: HBMPState) -> jax.Array:
  """int8 [n, b], the target code of each training instance (stage ii's targets)."""
  return state.target_codes


class HBMPExtras(NamedTuple):
  """Further pure functions of ``hbmp`` (``HashingMethod.extras``)."""

  weights: Callable[[HBMPState], jax.Array]  # float32 [b], the alphas
  target_codes: Callable[[HBMPState], jax.Array]  # int8 [n_train, b]
  items: Callable[[HBMPState, dict], jax.Array]  # int32 [m], the item of each batch row
  pursuit: _pursuit.MatrixPursuit  # init(R) / step(state, R, key)
  encode_targets: Callable[[HBMPState, dict], jax.Array]  # int8 [m, b], codes by item
  scores: Callable[[HBMPState, dict], jax.Array] | None  # float32 [m, b], psi(x)
  hash_functions: coder_lib.Coder | None  # stage ii (None: stage i only)


class _Settings(NamedTuple):
  """``hbmp``'s arguments, checked, with the pursuit and the hash functions they build."""

  num_bits: int
  level: str  # one of LEVELS
  metric: str  # one of _affinity.METRICS (checked by _items)
  num_items: int | None  # classes / label sets (None: read at bind)
  view: int | None  # the features of "euclidean" (None: all)
  pursuit: _pursuit.MatrixPursuit  # stage i, from the pursuit's options
  hashing: "StageTwo | None"  # stage ii (None: stage i only)


# ----------------------------------------------------------------------------- the functions


def _check_batch(s: _Settings, batch: dict) -> int:
  """The complete check of a training batch, values included (outside jit): its rows."""
  n = _checks.batch(batch)
  labels = batch.get("labels")
  if s.metric == "euclidean" or (s.level == "instance" and labels is None):
    _api.view_features(batch, s.view)
  if s.level == "instance":
    if (
      labels is not None
      and s.metric == "shared_count"
      and (_checks.label_array(labels, "labels") != "multi_hot")
    ):
      raise ValueError(
        f"metric='shared_count' needs multi-hot labels; got {_checks.describe(labels)}."
      )
    m = n
  else:
    m = _items.label_items(s.level, _items.labels_of(s.level, batch), s.num_items)[0]
  if m < 2:
    raise ValueError(f"HBMP needs at least 2 items; the batch gives {m} at level={s.level!r}.")
  _pursuit.check_num_bits_for_items(s.num_bits, m)
  if s.hashing is not None:
    s.hashing.functions.check_batch(batch)
  return n


def _init(s: _Settings, key: jax.Array, batch: dict) -> HBMPState:
  """The items, their affinity, an empty pursuit; the hash functions' start from ``key``.

  Every bit draws from its own update key; the key of init starts the networks.
  """
  m, r, item_labels, index = _items.items_and_affinity(
    batch, s.level, s.metric, s.num_bits, s.num_items, s.view
  )
  _pursuit.check_num_bits_for_items(s.num_bits, m)
  state = HBMPState(s.pursuit.init(r), r, item_labels, index, widths=_api.view_widths(batch))
  if s.hashing is None:
    return state
  return state._replace(hashing=s.hashing.functions.init(key, batch))


def _no_encoder(state: HBMPState, batch: dict):
  """``encode`` of ``hbmp(..., hash_function=None)``: there is no function of features."""
  del state, batch
  raise ValueError(
    "hbmp(..., hash_function=None) learns target codes of its training items only "
    "and has no function of the features: encode would read the batch's labels. "
    "Use method.extras.encode_targets(state, batch) for the codes by item, or give "
    "a hash_function ('linear', 'mlp', 'cnn')."
  )


def _bind(s: _Settings, batch: dict) -> _api.HashingMethod | None:
  """The method with the number of classes / label sets read from the training labels.

  That number sets the state's shapes, so it is read before init is traced. The bound
  method is kept per count (``_shared``): fitting this method again reuses its compiled
  functions.
  """
  if s.level == "instance" or s.num_items is not None or batch.get("labels") is None:
    return None
  found = _items.label_items(s.level, batch["labels"], None)[0]
  return _shared(_build, s._replace(num_items=_checks.positive_int(found, "num_items")))


def _check_encode(hashing: "StageTwo | None", state: HBMPState, batch: dict) -> None:
  if hashing is not None and state.widths is not None:
    _api.check_views(state.widths, batch, hashing.functions.view, "hbmp")


def _phases(s: _Settings, pursue: Callable, train: Callable | None) -> tuple[_api.Phase, ...]:
  """The pursuit (one bit per full-batch step), then the hash functions' minibatches."""
  phases = (_api.Phase("pursuit", pursue, None, num_steps=s.num_bits),)
  if s.hashing is None:
    return phases
  return phases + (
    _api.Phase("hash_functions", train, s.hashing.batch_size, num_epochs=s.hashing.num_epochs),
  )


# ----------------------------------------------------------------------------- the method


def hbmp(
  num_bits: int,
  *,
  level: str = "class",
  metric: str = "share",
  num_items: int | None = None,
  view: int | None = None,
  step_size: str = "regress",
  num_restarts: int = 4,
  num_iters: int = 20,
  tol: float = 1e-4,
  local_search: bool = True,
  max_flips: int | None = None,
  eigensolver: str = "auto",
  hash_function: str | coder_lib.Coder | None = "linear",
  hash_options: dict | None = None,
) -> _api.HashingMethod:
  """HBMP as a method: one pursuit bit per step, then hash functions on minibatches.

  Args:
    num_bits: b.
    level: the items: ``"class"`` (class ids; ``R = b (2I - 1)``), ``"label_sets"`` (the
      unique multi-hot rows) or ``"instance"`` (the training rows).
    metric: the items' affinity: ``"share"`` (same class / share a label, binary),
      ``"shared_count"`` (number of shared labels, graded; multi-hot only) or
      ``"euclidean"`` (Eq. 2 on Euclidean distances of features: of the instances, or of
      each class's / label set's mean feature vector). Instance level without labels
      always uses ``"euclidean"``.
    num_items: the number of classes or unique label sets (needed when ``init`` is
      traced, as by ``jhash.fit``; see the module docstring). Ignored at instance level.
    view: the features for ``metric="euclidean"`` (None: all observed views).
    step_size, num_restarts, num_iters, tol, local_search, max_flips, eigensolver: the
      pursuit's (``matrix_pursuit``; ``eigensolver="auto"`` evaluates the power iterations
      in closed form from one ``eigh`` up to 20 items, the same codes up to rounding).
    hash_function: stage ii: "linear" (default), "mlp" or "cnn" (built by
      ``hash_functions(kind, num_bits, view=view, **hash_options)``), or a network coder
      (``jhash.coder.Coder``) of ``num_bits`` bits; None: stage i only (no ``encode``).
    hash_options: stage ii's schedule, ``batch_size`` (default 128) and ``num_epochs``
      (default 20), and, for a ``hash_function`` given by name, keyword arguments of
      ``hash_functions`` (learning rate, widths, ...).
  Returns:
    HashingMethod; states are ``HBMPState``. ``check_batch`` checks the labels' values
    and the item count (and says which ``num_items`` to pass); ``extras`` is
    ``HBMPExtras`` (``weights``, the alphas for weighted Hamming ranking;
    ``target_codes``; ``items``; the ``pursuit``; ``encode_targets``, the codes by item
    described below; ``scores``, ``psi(x)`` of a batch; ``hash_functions``).

    Phases: "pursuit", ``num_bits`` full-batch steps, each one bit (its metrics:
    ``residual_norm`` per bit is Figure 1(c)); then, with hash functions,
    "hash_functions", ``num_epochs`` epochs of minibatches (``hinge_loss``,
    ``bit_error``). ``encode(state, batch)`` is ``sign(psi(x))`` from the batch's views
    alone. ``extras.encode_targets(state, batch)`` needs ``batch["labels"]``: each row
    gets its class's code (class ids), or the code of its label set (the nearest by
    Hamming distance of the multi-hot rows when the set was not in training); at
    instance level, the batch must be the training set itself.

  Example: four separated classes; the linear hash functions give each class its code.
    >>> import jax, numpy as np, jhash
    >>> rng = np.random.default_rng(0)
    >>> labels = np.arange(160) % 4
    >>> x = (4 * rng.normal(size=(4, 12)))[labels] + rng.normal(size=(160, 12))
    >>> method = jhash.methods.hbmp(8, num_items=4, hash_options={"num_epochs": 20,
    ...                             "batch_size": 40, "learning_rate": 0.05})
    >>> state, history = jhash.fit(method, jax.random.key(0), {"views": (x,), "labels": labels},
    ...                            progress=False)
    >>> history["residual_norm"].shape   # one pursuit step per bit
    (8,)
    >>> codes = jhash.encode(method, state, {"views": (x,)})    # from the features alone
    >>> bool(np.all(codes == state.target_codes))   # the pursuit's code of each item's class
    True
    >>> len({tuple(c) for c in np.asarray(codes)})   # one code for each class
    4
  """
  num_bits = _api.check_num_bits(num_bits)
  _items.check_level_and_metric(level, metric)
  if num_items is not None:
    num_items = _checks.positive_int(num_items, "num_items")
  pursuit = _pursuit.matrix_pursuit(
    num_bits,
    step_size=step_size,
    num_restarts=num_restarts,
    num_iters=num_iters,
    tol=tol,
    local_search=local_search,
    max_flips=max_flips,
    eigensolver=eigensolver,
  )
  hashing = _stage_two(hash_function, hash_options, num_bits, view)
  return _shared(_build, _Settings(num_bits, level, metric, num_items, view, pursuit, hashing))


def _shared(factory, *args):
  """``factory(*args)``, kept per argument tuple when the arguments can be hashed: jit
  caches are keyed on functions, so methods (and phases) built from the same settings
  share their compiled functions."""
  try:
    hash(args)
  except TypeError:
    return factory.__wrapped__(*args)
  return factory(*args)


@functools.lru_cache(maxsize=64)
def _build(s: _Settings) -> _api.HashingMethod:
  """``hbmp`` of checked settings: thin functions over the module's helpers."""
  # The number of bits, the rule and the items are in the state: methods that differ
  # only in them share the pursuit's update (and so its compiled steps).
  pursue = _shared(_pursue_function, s.pursuit.step)
  if s.hashing is None:
    train, encode, scores = None, _no_encoder, None
  else:
    train, encode, scores = _shared(_stage_two_functions, s.hashing)

  def init(key, batch):
    return _init(s, key, batch)

  def check_batch(batch):
    return _check_batch(s, batch)

  def items(state, batch):
    return _items.row_items(s.level, state.item_labels, state.affinity.shape[0], batch)

  def encode_targets(state, batch):
    return state.pursuit.codes[items(state, batch)]

  def bind(batch):
    return _bind(s, batch)

  def check_encode(state, batch):
    _check_encode(s.hashing, state, batch)

  extras = HBMPExtras(
    retrieval_weights,
    target_codes,
    items,
    s.pursuit,
    encode_targets,
    scores,
    None if s.hashing is None else s.hashing.functions,
  )
  return _api.HashingMethod(
    init,
    encode,
    s.num_bits,
    "hbmp",
    _phases(s, pursue, train),
    check_batch=check_batch,
    extras=extras,
    bind=bind,
    check_encode=check_encode,
  )


@functools.lru_cache(maxsize=64)
def _pursue_function(step):
  """The pursuit phase's update: one bit of the pursuit ``step`` per call."""

  def pursue(state, batch, key):
    del batch
    new, metrics = step(state.pursuit, state.affinity, key)
    return state._replace(pursuit=new), metrics

  return pursue


class StageTwo(NamedTuple):
  """HBMP's hash functions and their phase's schedule."""

  functions: coder_lib.Coder
  batch_size: int
  num_epochs: int


@functools.lru_cache(maxsize=64)
def _stage_two_functions(hashing: StageTwo):
  """``(train, encode, scores)`` of ``hbmp`` for its hash functions."""
  functions = hashing.functions

  def train(state, batch, key):
    # One minibatch of stage ii: each instance's target is its item's code.
    del key
    targets = state.target_codes[batch["index"]]
    new, metrics = _hashfn.hinge_step(functions, state.hashing, batch, targets)
    return state._replace(hashing=new), metrics

  def encode(state, batch):
    return functions.encode(state.hashing, batch)

  def scores(state, batch):
    return functions.scores(state.hashing, batch)

  return train, encode, scores


def _stage_two(
  hash_function: Any, hash_options: dict | None, num_bits: int, view: int | None
) -> StageTwo | None:
  """The hash functions of ``hbmp(..., hash_function=, hash_options=)``, checked."""
  if hash_options is not None and not isinstance(hash_options, dict):
    raise ValueError(
      f"hash_options must be a dict of the hash functions' options (e.g. {{'num_epochs': "
      f"20}}); got {_checks.describe(hash_options)}."
    )
  if hash_function is None:
    if hash_options:
      raise ValueError(
        f"hash_options need a hash_function; got hash_options={hash_options!r} "
        "and hash_function=None."
      )
    return None
  options = dict(hash_options or {})
  batch_size = _checks.positive_int(
    options.pop("batch_size", _hashfn.DEFAULT_BATCH_SIZE), "hash_options['batch_size']"
  )
  num_epochs = _checks.nonneg_int(
    options.pop("num_epochs", _hashfn.DEFAULT_EPOCHS), "hash_options['num_epochs']"
  )
  if isinstance(hash_function, coder_lib.Coder):
    if options:
      raise ValueError(
        f"hash_options other than batch_size and num_epochs apply to a "
        f"hash_function given by name; this coder is already built (got "
        f"{sorted(options)})."
      )
    if hash_function.num_bits != num_bits:
      raise ValueError(
        f"hash_function must have num_bits={num_bits} bits; got one of {hash_function.num_bits}."
      )
    return StageTwo(hash_function, batch_size, num_epochs)
  if not isinstance(hash_function, str):
    raise ValueError(
      f"hash_function must be None, a name ('linear', 'mlp', 'cnn') or a "
      f"jhash.coder.Coder; got {_checks.describe(hash_function)}."
    )
  _hashfn.check_kind(hash_function, "hash_function")
  options.setdefault("view", view)
  try:
    functions = _hashfn.hash_functions(hash_function, num_bits, **options)
  except TypeError as error:
    raise ValueError(
      f"hash_options: {error} (the options of hash_functions, with batch_size and num_epochs)."
    ) from None
  return StageTwo(functions, batch_size, num_epochs)
