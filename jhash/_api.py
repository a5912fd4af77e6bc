"""The method API every hashing method follows, and the batch it reads.

A method is a factory ``jhash.methods.NAME(num_bits, **hyperparameters)`` that
returns a ``HashingMethod``: a NamedTuple of pure functions closed over the
hyperparameters, with states that are NamedTuples of arrays (as optax's
``GradientTransformation``):

* ``init(key, batch) -> state``: sees the whole training set, or, when training
  streams from an iterable, one minibatch carrying ``batch["num_items"]`` (a Python
  int, the training set's size; read it with ``num_items(batch)``).
* ``encode(state, batch) -> codes``: int8 [n, num_bits] in {-1, +1}.
* ``phases``: the schedule, stated once, a tuple of ``Phase(name, update, batch_size,
  num_steps, num_epochs)`` run in order on one state (a method of one stage has one
  phase; ``one_phase`` builds it). Each ``update(state, batch, key) -> (state,
  metrics)`` is one step: an iteration, a sweep or a bit over the whole training set in
  a full-batch phase (``batch_size=None``, ``num_steps`` steps), one optimiser step on a
  minibatch in a minibatch phase (``num_epochs`` epochs). A minibatch carries
  ``batch["index"]``, int32 [b], the positions of its items in the training set (memory
  banks read them). ``update`` returns the same state type and shapes and a dict of
  scalar (or fixed-size) metrics, so it jits once and runs inside ``lax.fori_loop``.
  ``method.update``, ``.batch_size``, ``.num_steps`` and ``.num_epochs`` read the phases.

Optional fields: ``check_batch(batch) -> n``, the method's complete check of a
training batch (values included, so it runs outside jit; ``jhash.fit`` calls
it); ``extras``, a NamedTuple of further pure functions a method offers (CDH's
objective, say); ``encode_multi(state, batch) -> (codes int8 [n, m, K], mask bool
[n, m])`` for methods that give an item several codes (MCH); ``jhash.encode_multi``
gives every other method ``m = 1``; ``bind(batch) -> method | None``, the method with
sizes read from the training data made static (``jhash.init`` and ``jhash.fit`` call it
outside jit before tracing ``init``); ``check_encode(state, batch)``, run by
``jhash.encode`` outside jit, refuses views that do not match the training views the
state records (``view_widths``, ``check_views``); ``closed_form``, True for a method
whose steps have no learning rate or step size (ITQ's rotation, an eigenproblem), so a
divergence is blamed on its inputs, not on a learning rate (``divergence_remedy``).

States that have a ``trained`` field get a ``Trained`` record from ``jhash.init`` and
``jhash.fit`` (the method's name, bit length and the training views' dtypes):
``jhash.encode`` refuses a state trained by another method, at another length or on
views of another dtype.

A ``batch`` is a dict: ``"views"`` a tuple of arrays ([n, d_v] features or
[n, H, W(, C)] images; ``None`` for a view not observed) and ``"labels"`` int [n]
class ids or bool [n, C] multi-hot (absent for unsupervised methods).

This module sits below both the methods and the runner (``jhash.fit``): methods
never import the runner.
"""

from __future__ import annotations

import math

from collections.abc import Mapping
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jhash import _checks

Batch = dict
State = Any


class Phase(NamedTuple):
  """One stage of a method's schedule: its own step function, batch size and length.

  A method of several phases (HBMP: the pursuit over the whole set, then hash
  functions on minibatches; MCH: the base model, then the crop agent) lists them in
  ``HashingMethod.phases``; ``jhash.fit`` runs them in order on one state. A
  full-batch phase (``batch_size=None``) runs ``num_steps`` steps; a minibatch phase
  runs ``num_epochs`` epochs (or ``num_steps`` when given); on a training set smaller
  than its ``batch_size`` each of its steps reads the whole set (in a new order).
  """

  name: str
  update: Callable[[State, Batch, jax.Array], tuple[State, dict]]
  batch_size: int | None = None
  num_steps: int | None = None
  num_epochs: int | None = None


class HashingMethod(NamedTuple):
  """Pure functions of one hashing method (see module docstring).

  The schedule is stated once, as ``phases``: a method of one stage has one phase.
  ``update``, ``batch_size``, ``num_steps`` and ``num_epochs`` read it.
  """

  init: Callable[[jax.Array, Batch], State]
  encode: Callable[[State, Batch], jax.Array]
  num_bits: int
  name: str
  phases: tuple[Phase, ...]  # the schedule, run in order on one state
  check_batch: Callable[[Batch], int] | None = None
  extras: Any = None
  encode_multi: Callable[[State, Batch], tuple[jax.Array, jax.Array]] | None = None
  bind: Callable[[Batch], "HashingMethod | None"] | None = None  # static sizes from data
  check_encode: Callable[[State, Batch], None] | None = None  # outside jit: views fit
  closed_form: bool = False  # no learning rate: steps solve in closed form (ITQ, CVH)

  @property
  def update(self) -> Callable[[State, Batch, jax.Array], tuple[State, dict]]:
    """The first phase's step function."""
    return self.phases[0].update

  @property
  def batch_size(self) -> int | None:
    """The first phase's minibatch size (None when it reads the whole set each step)."""
    return self.phases[0].batch_size

  @property
  def num_steps(self) -> int:
    """The steps of the phases whose length is in steps (full-batch phases, say)."""
    return sum(p.num_steps or 0 for p in self.phases)

  @property
  def num_epochs(self) -> int | None:
    """The first phase's length in epochs, when it has one."""
    return self.phases[0].num_epochs


def one_phase(
  name: str,
  update: Callable,
  *,
  batch_size: int | None = None,
  num_steps: int | None = None,
  num_epochs: int | None = None,
) -> tuple[Phase]:
  """The schedule of a method of one phase: ``num_steps`` steps (full-batch), or
  ``num_epochs`` epochs of minibatches of ``batch_size``; give exactly one of the two
  lengths (a ValueError otherwise, as for a batch size < 1 or a negative length)."""
  if (num_steps is None) == (num_epochs is None):
    raise ValueError(
      f"one_phase({name!r}) needs exactly one length, num_steps or num_epochs; got "
      f"num_steps={num_steps!r} and num_epochs={num_epochs!r}."
    )
  phase = Phase(name, update, batch_size, num_steps, num_epochs)
  check_phase(phase)
  return (phase,)


def check_phase(phase: Any, where: str = "phase") -> None:
  """A ``Phase``: a name, a callable update, ``batch_size`` None or an int >= 1 and a
  length (``num_steps`` or ``num_epochs``, ints >= 0; at least one given)."""
  if not isinstance(phase, Phase):
    raise TypeError(f"{where} must be a jhash.Phase; got {_checks.describe(phase)}.")
  at = f"{where} {phase.name!r}"
  _checks.function(phase.update, f"{at}: update", "(state, batch, key) -> (state, metrics)")
  if phase.batch_size is not None:
    _checks.positive_int(phase.batch_size, f"{at}: batch_size")
  for value, name in ((phase.num_steps, "num_steps"), (phase.num_epochs, "num_epochs")):
    if value is not None:
      _checks.nonneg_int(value, f"{at}: {name}")
  if phase.num_steps is None and phase.num_epochs is None:
    raise ValueError(f"{at} needs a length: num_steps or num_epochs (both are None).")


def check_phases(method: "HashingMethod") -> None:
  """Every phase of a method's schedule (``check_phase``); at least one."""
  phases = method.phases
  if not isinstance(phases, tuple) or not phases:
    raise ValueError(
      f"{method.name}: phases must be a non-empty tuple of jhash.Phase; got "
      f"{_checks.describe(phases)}."
    )
  for i, phase in enumerate(phases):
    check_phase(phase, f"{method.name}.phases[{i}]")


# What a state records of its training (``Trained.dtypes`` indexes this; floats are one).
DTYPES = (
  "none",
  "bool",
  "uint8",
  "uint16",
  "uint32",
  "uint64",
  "int8",
  "int16",
  "int32",
  "int64",
  "float",
)
NAME_BYTES = 32


class Trained(NamedTuple):
  """What a state was trained on: the method, its bit length and the views' dtypes.

  ``jhash.init`` and ``jhash.fit`` set it in every state that has a ``trained`` field;
  ``jhash.encode`` refuses a state whose record does not match the method and batch.
  """

  name: jax.Array  # uint8 [NAME_BYTES]: the method's name, UTF-8, zero-padded
  num_bits: jax.Array  # int32 []
  dtypes: jax.Array  # int32 [V]: each training view's dtype, an index in DTYPES


def dtype_code(x) -> int:
  """The index in ``DTYPES`` of an array's dtype (0 for a view that is None)."""
  if x is None:
    return 0
  dtype = np.dtype(x.dtype)
  if dtype.kind in "fcV":
    return DTYPES.index("float")
  return DTYPES.index(dtype.name)


def trained_record(name: str, num_bits: int, batch: Batch) -> Trained:
  """The ``Trained`` record of a method of ``name`` and ``num_bits`` trained on batches like
  ``batch``."""
  raw = name.encode()[:NAME_BYTES]
  name = np.zeros(NAME_BYTES, np.uint8)
  name[: len(raw)] = np.frombuffer(raw, np.uint8)
  return Trained(
    jnp.asarray(name),
    jnp.asarray(num_bits, jnp.int32),
    jnp.asarray([dtype_code(v) for v in batch["views"]], jnp.int32),
  )


def record_training(name: str, num_bits: int, state: State, batch: Batch) -> State:
  """``state`` with its ``trained`` field set, when it has one."""
  if not hasattr(state, "_fields") or "trained" not in state._fields:
    return state
  return state._replace(trained=trained_record(name, num_bits, batch))


def check_trained(
  method: "HashingMethod", state: State, batch: Batch, use: str = "Encode with"
) -> None:
  """Raise unless ``state`` was trained by ``method`` (its name and bit length) on views of
  the dtypes of ``batch`` (integer types exactly; any floating type for floats). ``use``
  begins the remedy: "Encode with" (``encode``) or "Resume with" (``fit(state=)``)."""
  record = getattr(state, "trained", None)
  if not isinstance(record, Trained) or not _checks.is_concrete(record.num_bits):
    return
  raw = bytes(np.asarray(record.name, np.uint8)).rstrip(b"\0").decode(errors="replace")
  bits = int(record.num_bits)
  want = method.name.encode()[:NAME_BYTES].decode(errors="replace")
  if raw != want or bits != method.num_bits:
    raise ValueError(
      f"state was trained by {raw} ({bits} bits); the method given is "
      f"{method.name} ({method.num_bits} bits). {use} the method that trained the state"
      f"{', or leave state= out' if use.startswith('Resume') else ''}."
    )
  codes = [int(c) for c in np.asarray(record.dtypes)]
  for i, v in enumerate(batch["views"]):
    if v is None or i >= len(codes) or codes[i] == 0:
      continue
    if dtype_code(v) != codes[i]:
      raise ValueError(
        f"views[{i}] must have the dtype {method.name} was trained on "
        f"({DTYPES[codes[i]]}); got {np.dtype(v.dtype).name}. Inputs are "
        "standardised with the training statistics: convert the batch as "
        "the training views were (e.g. uint8 pixels, not pixels / 255)."
      )


def bound(method: HashingMethod, batch: Batch) -> HashingMethod:
  """The method with the static sizes it reads from its training batch bound (HBMP's
  number of classes, say), so that ``init`` can be traced; itself when it needs none."""
  if method.bind is None:
    return method
  return method.bind(batch) or method


def phase_length(phase: Phase, num_items: int | None) -> int:
  """Steps in a phase for a training set of ``num_items`` (None: unknown)."""
  if phase.num_steps is not None or phase.batch_size is None:
    return int(phase.num_steps if phase.num_steps is not None else phase.num_epochs or 0)
  if num_items is None:
    raise ValueError(
      f"the length of phase {phase.name!r} is in epochs: give num_items "
      "(the training set's size) or num_steps."
    )
  return int(phase.num_epochs) * (num_items // min(phase.batch_size, num_items))


def view_features(batch: Batch, view: int | None) -> jax.Array:
  """Features of one view (or all observed views side by side) as float32 [n, d].

  Images are flattened. ``view=None`` concatenates every observed view.
  """
  _checks.view(view)
  batch_size_of(batch)  # a batch dict with an observed view (not a bare array)
  views = batch["views"]
  if view is None:
    chosen = [v for v in views if v is not None]
  else:
    if not -len(views) <= view < len(views) or views[view] is None:
      raise ValueError(
        f"view {view} must be an observed view of the batch; the batch has "
        f"{len(views)} views, observed: "
        f"{[i for i, v in enumerate(views) if v is not None]}."
      )
    chosen = [views[view]]
  # The item size spelled out: reshape(0, -1) cannot infer it from no items.
  flat = [jnp.asarray(v, jnp.float32).reshape(v.shape[0], math.prod(v.shape[1:])) for v in chosen]
  return flat[0] if len(flat) == 1 else jnp.concatenate(flat, axis=1)


#: The longest code a method makes: ``num_bits`` is an int in [1, MAX_NUM_BITS].
MAX_NUM_BITS = _checks.MAX_NUM_BITS


def check_num_bits(num_bits) -> int:
  """A method's ``num_bits``: a Python int in [1, ``MAX_NUM_BITS``] (65,536)."""
  return _checks.code_length(num_bits, "num_bits")


def batch_size_of(batch: Batch) -> int:
  """The number of items in a batch (rows of its first observed view)."""
  views = batch.get("views") if isinstance(batch, Mapping) else None
  observed = [v for v in views if v is not None] if isinstance(views, (tuple, list)) else []
  if not observed:
    raise ValueError(
      "batch must be a dict whose 'views' is a tuple holding at least one array; got "
      f"{_checks.describe(batch if views is None else views)}."
    )
  return int(np.shape(observed[0])[0])


def num_items(batch: Batch) -> int:
  """The training set's size: ``batch["num_items"]`` when training streams, else the
  batch's own number of items. A Python int (it sets the shapes of memory banks)."""
  size = batch_size_of(batch)
  if batch.get("num_items") is not None:
    return int(batch["num_items"])
  return size


def take(batch: Batch, index) -> Batch:
  """The items ``index`` (int [b]) of a batch: views, labels and any other per-item
  array (other entries, such as tuples, as they are); adds ``"index"`` (int32 [b]) unless the batch carries one (then it is taken
  too). Works on arrays and tracers alike."""
  n = batch_size_of(batch)
  out = {}
  for name, value in batch.items():
    if name == "views":
      out[name] = tuple(None if v is None else v[index] for v in value)
    elif name == "num_items":
      out[name] = value
    elif hasattr(value, "shape") and len(value.shape) >= 1 and value.shape[0] == n:
      out[name] = value[index]  # (a tuple, as CDH's pairs, is whole-set data: kept)
    else:
      out[name] = value
  if "index" not in out:
    out["index"] = jnp.asarray(index, jnp.int32)
  return out


def single_code(encode: Callable[[State, Batch], jax.Array]):
  """``encode_multi`` of a single-code method: codes [n, 1, K] and an all-True mask."""

  def encode_multi(state, batch):
    codes = encode(state, batch)
    return codes[:, None, :], jnp.ones(codes.shape[:1] + (1,), bool)

  return encode_multi


def map_in_chunks(fn: Callable[[Batch], Any], batch: Batch, chunk_size: int):
  """``fn(batch)`` computed ``chunk_size`` items at a time with ``lax.map``.

  The batch's per-item arrays are padded (with copies of the first item) to a multiple
  of ``chunk_size``; the outputs, a pytree of arrays with a leading item axis, are cut
  back to ``n``. Memory is that of one chunk. Runs under jit.
  """
  n = batch_size_of(batch)
  if n == 0:  # no items: fn of the batch as it is gives the empty outputs' shapes
    return fn(batch)
  chunk = min(chunk_size, n)
  pad = (-n) % chunk
  per_item = lambda x: x is not None and np.ndim(x) >= 1 and np.shape(x)[0] == n

  def padded(x):
    x = jnp.asarray(x)
    if pad:
      x = jnp.concatenate([x, jnp.broadcast_to(x[:1], (pad,) + x.shape[1:])])
    return x.reshape((-1, chunk) + x.shape[1:])

  items = {k: v for k, v in batch.items() if k == "views" or per_item(v)}
  rest = {k: v for k, v in batch.items() if k not in items}
  items["views"] = tuple(v for v in items["views"])
  stacked = jax.tree.map(padded, items)
  out = jax.lax.map(lambda b: fn({**rest, **b}), stacked)
  return jax.tree.map(lambda y: y.reshape((-1,) + y.shape[2:])[:n], out)


def network_inputs(batch: Batch, view: int | None) -> jax.Array:
  """What a network reads from a batch: float32 images [n, H, W, C] or features [n, d].

  ``view=None`` takes the only observed view when it holds images ([n, H, W] gets a
  channel axis), else every observed view's features side by side.
  """
  _checks.view(view)
  views = batch["views"]
  observed = [i for i, v in enumerate(views) if v is not None]
  chosen = view if view is not None else (observed[0] if len(observed) == 1 else None)
  if (
    chosen is not None
    and -len(views) <= chosen < len(views)
    and views[chosen] is not None
    and np.ndim(views[chosen]) >= 3
  ):
    x = jnp.asarray(views[chosen], jnp.float32)
    return x[..., None] if x.ndim == 3 else x
  return view_features(batch, view)


def image_view(batch: Batch, view: int | None, name: str) -> jax.Array:
  """The batch's one image view (or view ``view``) as float32 [n, H, W, C]; a ValueError
  naming ``name`` (the network's owner) when it holds no image view or several."""
  _checks.view(view)
  views = batch["views"]
  if view is None:
    found = [i for i, v in enumerate(views) if v is not None and np.ndim(v) >= 3]
    if len(found) != 1:
      raise ValueError(
        f"{name} reads one image view [n, H, W(, C)]; the batch has "
        f"{len(found)} observed image views (views of ranks "
        f"{[None if v is None else np.ndim(v) for v in views]}): pass view=."
      )
    view = found[0]
  if not -len(views) <= view < len(views) or views[view] is None:
    raise ValueError(
      f"view {view} must be an observed view of the batch; the batch has {len(views)} views."
    )
  if np.ndim(views[view]) not in (3, 4):
    raise ValueError(
      f"views[{view}] must hold images [n, H, W] or [n, H, W, C] for {name}; "
      f"got {_checks.describe(views[view])}."
    )
  x = jnp.asarray(views[view], jnp.float32)
  return x[..., None] if x.ndim == 3 else x


def view_widths(batch: Batch) -> jax.Array:
  """int32 [V]: each view's width per item (its size after flattening), -1 where None.

  Methods keep this in their state (it is a constant of the batch's shapes) so that
  ``check_views`` can refuse an encoding batch whose views do not match training.
  """
  return jnp.asarray(
    [-1 if v is None else int(np.prod(np.shape(v)[1:], dtype=np.int64)) for v in batch["views"]],
    jnp.int32,
  )


def check_views(trained, batch: Batch, view: int | None, name: str) -> None:
  """Raise unless the views a method reads have the widths it was trained on.

  Only widths are recorded (``view_widths``), not item shapes: a view of another item
  shape with the same flattened width (images [n, 2, 3] for training views [n, 3, 2])
  passes, and is encoded as its flattened rows.

  Args:
    trained: int32 [V], ``view_widths`` of the training batch (from the state).
    batch: the batch to encode.
    view: the view the method reads (None: every view observed in training).
    name: the method's name, for the message.
  """
  if not _checks.is_concrete(trained):
    return
  trained = [int(w) for w in np.asarray(trained)]
  views = batch["views"]
  got = [-1 if v is None else int(np.prod(np.shape(v)[1:], dtype=np.int64)) for v in views]
  wanted = range(len(trained)) if view is None else [view % len(trained)]
  describe = lambda ws: ", ".join("None" if w < 0 else str(w) for w in ws)
  problem = len(got) != len(trained) and view is None
  for i in wanted:
    if trained[i] < 0:
      continue
    if i >= len(got) or got[i] != trained[i]:
      problem = True
  if problem:
    raise ValueError(
      f"views must match what {name} was trained on: widths per item "
      f"({describe(trained)}) for views {list(wanted)}; got "
      f"({describe(got)}). A view missing, added, swapped or resized "
      "would give wrong codes."
    )


@jax.jit
def _nonfinite_flags(leaves):
  return jnp.stack([jnp.any(~jnp.isfinite(x)) for x in leaves])


def check_encoding(method: "HashingMethod", state: State, batch: Batch) -> int:
  """What ``jhash.encode`` checks of a concrete state and batch: the batch, the views'
  dtypes and widths against the training record, the method's own ``check_encode``, and a
  state free of NaN and inf. Returns the batch's item count."""
  n = _checks.batch(batch)
  check_trained(method, state, batch)
  if method.check_encode is not None:
    method.check_encode(state, batch)
  bad = nonfinite_fields(state)
  if bad:
    raise ValueError(
      f"state must hold no NaN or inf; {method.name}'s state has them in "
      f"{', '.join(bad[:3])}, and would encode wrong codes. Its training diverged: retrain "
      f"({divergence_remedy(method)})."
    )
  return n


def largest_input(batch: Batch | None) -> tuple[float, int] | None:
  """(the largest magnitude, its view) over a concrete batch's views; None without one."""
  views = batch.get("views") if isinstance(batch, Mapping) else None
  found = [
    (float(np.max(np.abs(np.asarray(v, np.float64)))), i)
    for i, v in enumerate(views or ())
    if v is not None and np.size(v) and _checks.is_concrete(v)
  ]
  return max(found) if found else None


def divergence_remedy(method: "HashingMethod", batch: Batch | None = None) -> str:
  """What to do about a training run that gave NaN or inf, for an error message.

  The inputs are named as the cause when their squares summed over the items overflow
  float32 (``n * max|x|^2``, as a covariance or a Gram sums them), or when ``method`` is
  ``closed_form`` (it has no learning rate to lower); else the learning rate comes first.
  """
  largest = largest_input(batch)
  scale = ""
  if largest is not None:
    value, view = largest
    n = batch_size_of(batch)
    scale = f" (views[{view}] holds values up to {value:.3g} in magnitude)"
    if n * value * value > float(np.finfo(np.float32).max):
      return (
        f"rescale the inputs: views[{view}] holds values up to {value:.3g} in magnitude, "
        f"and sums of their squares over {n} items overflow float32"
      )
  if method.closed_form:
    return f"{method.name} has no learning rate: check the inputs' scale{scale}"
  return f"lower the learning rate, or check the inputs' scale{scale}"


def nonfinite_fields(state: State) -> list[str]:
  """The paths of a concrete state's floating arrays that hold NaN or inf (one jitted reduction on
  the device and one fetch; [] under tracing, or when no array is floating)."""
  found = [
    (jax.tree_util.keystr(path), x)
    for path, x in jax.tree_util.tree_leaves_with_path(state)
    if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating) and np.size(x)
  ]
  if not found or any(isinstance(x, jax.core.Tracer) for _, x in found):
    return []
  flags = np.asarray(_nonfinite_flags([jnp.asarray(x) for _, x in found]))
  return [path for (path, _), bad in zip(found, flags) if bad]
