"""CDH as a ``HashingMethod``: ``init``, ``update`` (one sweep), ``encode``, ``objective``.

"Coordinate Discrete Optimization for Efficient Cross-View Image Retrieval",
IJCAI 2016 (the paper's Algorithm 1). Maximises

    J = (1/n^2) sum_ij l(x_i, x_j) + (gamma/n) sum_i sum_k sum_v phi_k^v(b_ik, x_i^v)

over the codes ``B`` in {-1, +1}^{n x K} and the logistic view models
``w_{k,v}``, alternating a B-step (``_bstep``: all ``K`` bits in turn) and a
W-step (``_wstep``). Codes of new items come from any non-empty subset of their
views by the generative rule (``_encode``).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jhash import _checks
from jhash import codes as codes_lib
from jhash import _api
from jhash.methods._cdh import _bstep
from jhash.methods._cdh import _chunks
from jhash.methods._cdh import _encode
from jhash.methods._cdh import _objective
from jhash.methods._cdh import _supervision as sv
from jhash.methods._cdh import _wstep

SUPERVISIONS = ("labels", "pairs")


class CDHState(NamedTuple):
  """CDH's codes of the training items, view models, bit priors and gamma.

  ``semantic`` and ``generative_sum`` are ``J``'s two terms as of the last ``init`` or
  ``update`` (``J = semantic + gamma * generative_sum / n``): the next sweep's "before"
  is read from them, not recomputed. ``gamma`` is kept out of ``generative_sum``, so
  ``state._replace(gamma=...)`` (a grid over gamma) leaves both valid; a state with
  other codes or weights needs its terms recomputed (``extras.terms``).
  """

  codes: jax.Array  # int8 [n, K], the learned codes B of the training items
  weights: tuple[jax.Array, ...]  # per view float32 [K, d_v + 1]; last column the bias
  log_prior_odds: jax.Array  # float32 [K], log P_k(+1) - log P_k(-1) (clipped)
  gamma: jax.Array  # float32 [], weight of the generative term
  semantic: jax.Array  # float32 [], the semantic term of ``codes``
  generative_sum: jax.Array  # float32 [], sum_ik (V/2 + b_ik Z_ik) of ``codes`` and
  #   ``weights`` (the generative term without gamma / n)
  trained: _api.Trained | None = None  # what it was trained on (set by jhash.init / fit)


class CDHExtras(NamedTuple):
  """CDH's pure functions beyond the method API (``HashingMethod.extras``).

  * ``objective(state, batch) -> float32 []``: the full ``J`` (both terms).
  * ``terms(state, batch) -> (semantic, generative)``: its two terms.
  * ``supervision(batch) -> Supervision``: how ``Y`` is read from a batch.
  * ``check_state(state)``: outside jit, the state's settings (``gamma >= 0``), which a
    state edited by hand (``state._replace(gamma=...)``, ``grid_search``) could break;
    ``jhash.fit`` calls it on a state it is given.
  """

  objective: Callable
  terms: Callable
  supervision: Callable
  check_state: Callable | None = None


class _Settings(NamedTuple):
  """``cdh``'s arguments, checked by ``_checked`` (ints as ints); see ``cdh``."""

  num_bits: int
  gamma: Any
  merit: str
  supervision: str
  w_objective: str
  max_inner: int
  init_scale: float | None
  w_learning_rate: float
  w_iters: int
  w_batch_size: int
  w_l2: float
  prior_eps: float
  num_sweeps: int
  block_rows: int
  chunk_size: int | None
  chunk_split: str
  chunk_seed: int
  mesh: Mesh | None


def _one_of(value: str, allowed: tuple[str, ...], name: str) -> None:
  if value not in allowed:
    raise ValueError(f"{name} must be one of {allowed}; got {value!r}.")


def _checked(settings: _Settings) -> _Settings:
  """``settings`` checked (an error naming the argument), counts as Python ints."""
  num_bits = _api.check_num_bits(settings.num_bits)
  _one_of(settings.merit, _bstep.MERITS, "merit")
  _one_of(settings.supervision, SUPERVISIONS, "supervision")
  _one_of(settings.w_objective, _wstep.W_OBJECTIVES, "w_objective")
  _check_gamma(settings.gamma)
  if settings.init_scale is not None:
    _checks.scalar(settings.init_scale, "init_scale", low=0, strict=True)
  _checks.scalar(settings.w_learning_rate, "w_learning_rate", low=0, strict=True)
  _checks.scalar(settings.w_l2, "w_l2", low=0)
  counts = dict(
    max_inner=_checks.positive_int(settings.max_inner, "max_inner"),
    w_iters=_checks.nonneg_int(settings.w_iters, "w_iters"),
    w_batch_size=_checks.positive_int(settings.w_batch_size, "w_batch_size"),
    num_sweeps=_checks.nonneg_int(settings.num_sweeps, "num_sweeps"),
    block_rows=_checks.positive_int(settings.block_rows, "block_rows"),
    chunk_size=_checked_chunk_size(settings.chunk_size),
  )
  _one_of(settings.chunk_split, _chunks.SPLITS, "chunk_split")
  chunk_seed = _checks.nonneg_int(settings.chunk_seed, "chunk_seed")
  if settings.mesh is not None:
    _bstep.row_shard(settings.mesh)  # a 1-D mesh, or a clear error now
  _checks.scalar(settings.prior_eps, "prior_eps")
  if not 0 < settings.prior_eps < 0.5:
    raise ValueError(f"prior_eps must be in (0, 0.5); got {settings.prior_eps!r}.")
  return settings._replace(num_bits=num_bits, chunk_seed=chunk_seed, **counts)


def _checked_chunk_size(chunk_size: Any) -> int | None:
  """None (one matrix-free chunk), or an int of at least 2 items."""
  if chunk_size is None:
    return None
  size = _checks.positive_int(chunk_size, "chunk_size")
  if size < 2:
    raise ValueError(f"chunk_size must be at least 2 items (or None: one chunk); got {size}.")
  return size


def _training_views(batch: dict, name: str = "views") -> tuple[jax.Array, ...]:
  """Every view's features, float [n, d_v]; all must be observed."""
  _checks.batch(batch)
  views = batch["views"]
  missing = [i for i, v in enumerate(views) if v is None]
  if missing:
    raise ValueError(
      f"{name} must all be observed to train CDH (the model of every view is "
      f"learned); views {missing} are None."
    )
  return tuple(_api.view_features(batch, i) for i in range(len(views)))


def _check_gamma(gamma: Any) -> None:
  _checks.scalar(gamma, "gamma", low=0)


def _read_supervision(kind: str, batch: dict) -> sv.Supervision:
  """``Y`` of a training batch: from ``batch["labels"]`` (``kind = "labels"``) or
  ``batch["Y"]`` (``"pairs"``), checked."""
  n = _checks.batch(batch)
  if kind == "labels":
    _checks.labelled_rows(batch.get("labels"))
    return sv.from_labels(batch.get("labels"))
  return sv.from_batch_entry(batch.get("Y"), n)


def _draw(settings: _Settings, key: jax.Array, n: int):
  """A sweep's randomness, from one draw (random number generation is slow to compile
  on the CPU).

  Returns:
    ``starts``: float32 [chunks, K, max_inner], the B-step's random starts per chunk;
    ``order``: int32 [n], the chunks' permutation (``_chunks.chunk_order``; None for
    one chunk); ``batches``: int32 [w_iters, min(w_batch_size, n)], the W-step's
    minibatches.
  """
  m = min(settings.w_batch_size, n)
  chunks = _chunks.num_chunks(n, settings.chunk_size)
  num_starts = chunks * settings.num_bits * settings.max_inner
  u = jax.random.uniform(key, (num_starts + settings.w_iters * m,))
  starts = u[:num_starts].reshape(chunks, settings.num_bits, settings.max_inner)
  batches = _wstep.minibatches(u[num_starts:].reshape(settings.w_iters, m), n)
  order = _chunks.chunk_order(
    key, n, settings.chunk_size, settings.chunk_split, settings.chunk_seed
  )
  return starts, order, batches


def _initial_weights(
  key: jax.Array, widths: Sequence[int], num_bits: int, init_scale: float | None
) -> tuple[jax.Array, ...]:
  """``w_{k,v} ~ N(0, s^2)``, bias 0: per view float32 [K, d_v + 1].

  One draw for every view, cut into per-view blocks; ``s = 1 / sqrt(d_v)`` when
  ``init_scale`` is None.
  """
  normal = jax.random.normal(key, (num_bits, sum(widths)), jnp.float32)
  weights, offset = [], 0
  for d in widths:
    scale = (1.0 / np.sqrt(d)) if init_scale is None else float(init_scale)
    w = normal[:, offset : offset + d] * scale
    weights.append(jnp.concatenate([w, jnp.zeros((num_bits, 1), jnp.float32)], axis=1))
    offset += d
  return tuple(weights)


def _init(settings: _Settings, key: jax.Array, batch: dict) -> CDHState:
  """The paper's start: random view models, ``B_ik = sign(Z_ik)`` and ``J``'s terms."""
  views = _training_views(batch)
  sup = _read_supervision(settings.supervision, batch)  # fails at init, not at a sweep
  weights = _initial_weights(
    key, [x.shape[1] for x in views], settings.num_bits, settings.init_scale
  )
  z = _encode.generative_terms(weights, views)
  codes = codes_lib.sign(z)
  return CDHState(
    codes,
    weights,
    _encode.log_prior_odds(codes, settings.prior_eps),
    jnp.asarray(settings.gamma, jnp.float32),
    _objective.semantic_term(codes, sup, settings.merit),
    _objective.generative_sum(codes, z, len(views)),
  )


def _check_state(state: CDHState, views, num_bits: int) -> None:
  if not isinstance(state, CDHState):
    raise TypeError(
      f"state must be a CDHState (from jhash.init or jhash.fit of this cdh method); got "
      f"{_checks.describe(state)}."
    )
  if state.codes.shape != (views[0].shape[0], num_bits):
    raise ValueError(
      f"batch must hold the {state.codes.shape[0]} training items the state "
      f"was fitted to; got views with {views[0].shape[0]} rows."
    )
  _check_views_match(state, views)


def _terms(settings: _Settings, state: CDHState, batch: dict) -> tuple[jax.Array, jax.Array]:
  """``J``'s semantic and generative terms, recomputed from the state: float32 [] each."""
  views = _training_views(batch)
  _check_state(state, views, settings.num_bits)
  sup = _read_supervision(settings.supervision, batch)
  z = _encode.generative_terms(state.weights, views)
  return (
    _objective.semantic_term(state.codes, sup, settings.merit),
    _objective.generative_term(state.codes, z, state.gamma, len(views)),
  )


def _kept_objective(state: CDHState) -> jax.Array:
  """``J`` of the state from its kept terms: float32 []."""
  n = state.codes.shape[0]
  return state.semantic + _objective.scale_generative(state.generative_sum, state.gamma, n)


def _update(settings: _Settings, state: CDHState, batch: dict, key: jax.Array):
  """One sweep, B-step then W-step: ``(CDHState, metrics)`` (listed in ``cdh``)."""
  views = _training_views(batch)
  _check_state(state, views, settings.num_bits)
  _check_gamma(state.gamma)
  sup = _read_supervision(settings.supervision, batch)
  num_views = len(views)
  z = _encode.generative_terms(state.weights, views)
  starts, order, batches = _draw(settings, key, views[0].shape[0])
  codes, stats = _chunks.sweep(
    state.codes,
    z,
    sup,
    state.gamma,
    starts,
    order,
    merit=settings.merit,
    block_rows=settings.block_rows,
    mesh=settings.mesh,
    matrix_free=settings.chunk_size is None,
  )
  semantic = _objective.semantic_term(codes, sup, settings.merit)
  after_b = semantic + _objective.generative_term(codes, z, state.gamma, num_views)
  weights, w_before, w_after = _wstep.wstep(
    state.weights,
    views,
    codes,
    batches,
    kind=settings.w_objective,
    l2=settings.w_l2,
    learning_rate=settings.w_learning_rate,
  )
  total = _objective.generative_sum(codes, _encode.generative_terms(weights, views), num_views)
  new_state = state._replace(
    codes=codes,
    weights=weights,
    log_prior_odds=_encode.log_prior_odds(codes, settings.prior_eps),
    semantic=semantic,
    generative_sum=total,
  )
  metrics = {
    "objective": _kept_objective(new_state),
    "objective_before": _kept_objective(state),
    "objective_after_bstep": after_b,
    "w_objective_before": w_before,
    "w_objective": w_after,
    **_bit_metrics(stats),
  }
  return new_state, metrics


def _bit_metrics(stats: _bstep.BitStats) -> dict[str, jax.Array]:
  """The sweep's per-bit metrics, each [K]."""
  return {
    "active_set_size": stats.active,
    "flipped": stats.flipped,
    "inner_steps": stats.inner_steps,
    "converged": stats.converged,
    "bit_objective_before": stats.objective_before,
    "bit_objective": stats.objective,
  }


def _encode_codes(state: CDHState, batch: dict) -> jax.Array:
  """Generative codes from the observed views (``None`` for the others): int8 [n, K]."""
  _checks.batch(batch)
  views = batch["views"]
  _check_views_match(state, views)
  feats = [None if x is None else _api.view_features(batch, i) for i, x in enumerate(views)]
  return _encode.encode(state.weights, state.log_prior_odds, feats)


def _check_batch(settings: _Settings, batch: dict) -> int:
  """Everything about a training batch, values included; its number of items.

  Call it outside jit (``jhash.fit`` jits ``update``, where the values of ``Y`` cannot
  be read).
  """
  views = _training_views(batch)
  _read_supervision(settings.supervision, batch)
  return views[0].shape[0]


def cdh(
  num_bits: int,
  *,
  gamma: float = 0.01,
  merit: str = "exponential",
  supervision: str = "labels",
  w_objective: str = "probability",
  max_inner: int = 16,
  init_scale: float | None = None,
  w_learning_rate: float = 0.05,
  w_iters: int = 300,
  w_batch_size: int = 256,
  w_l2: float = 1e-4,
  prior_eps: float = 1e-3,
  num_sweeps: int = 2,
  block_rows: int = 32,
  chunk_size: int | None = 10_000,
  chunk_split: str = "per_sweep",
  chunk_seed: int = 0,
  mesh: Mesh | None = None,
) -> _api.HashingMethod:
  """Coordinate Discrete Hashing for cross-view retrieval.

  Args:
    num_bits: K.
    gamma: weight of the generative term in ``J`` (the objective's ``gamma``);
      ``gamma = 0`` is the paper's CDH-0. The paper's grid is ``gamma / n`` in
      {0, 1e-2, 1e-1, 1, 5, 10, 20, 50} (pass ``gamma = value * n``). With ``J``
      normalised as above, both terms' gradients per item are ``O(1/n)`` for
      ``gamma`` of order ``1/K`` or less, whatever ``n`` is; ``gamma / n >= 1e-2``
      lets the generative term decide every bit (on mfeat the codes then lose
      half their mAP). The default 0.01 is small enough that the semantic term
      decides most bits; it is not tuned to any data set (the README's sweep on
      mfeat compares values): choose gamma on a validation split
      (``jhash.cdh_select_gamma`` with a score). Held in the
      state as an array (``state._replace(gamma=...)``; vmap over it for a grid).
    merit: ``"exponential"`` (``l = -exp(-Y p)``, the paper's default) or
      ``"linear"`` (``l = Y p``).
    supervision: ``"labels"``: ``Y`` from ``batch["labels"]`` (same class, or at
      least one shared label: +1; else -1); ``"pairs"``: ``batch["Y"]``, a dense
      ``[n, n]`` matrix in {-1, 0, 1} or a ``(rows, cols, values)`` list of
      pairs, every pair not listed being unknown (0). A bool ``Y`` is refused (its
      False would be 0, unknown, not -1): pass ``np.where(Y, 1, -1)``.
    w_objective: ``"probability"`` (the paper's ``sum_i phi``) or
      ``"log_likelihood"`` (``sum_i log phi - w_l2 ||w||^2``).
    max_inner: cap on inner updates (gradient, active set, Algorithm 2, flip)
      per bit and sweep; a bit stops earlier when its active set is empty.
    init_scale: ``s`` of ``w_{k,v} ~ N(0, s^2)`` (bias 0); ``None``:
      ``1 / sqrt(d_v)`` per view, so ``w^T x`` has unit variance on standardised
      features.
    w_learning_rate, w_iters, w_batch_size: Adam steps of the W-step's stochastic
      ascent, per sweep (minibatches drawn from the step's key).
    w_l2: L2 weight of the log-likelihood objective.
    prior_eps: the bit priors ``P_k(+1)`` of the generative codes are clipped to
      ``[prior_eps, 1 - prior_eps]``.
    num_sweeps: default schedule length (the paper stops after two sweeps).
    block_rows: rows per block of the B-step's pass over the Gram (or, with
      ``chunk_size=None``, over the rows of the pairs' code products).
    chunk_size: the B-step runs on chunks of at most this many items (the paper's
      10,000), cut from a random permutation drawn each sweep (``_chunks``);
      memory ``O(chunk_size^2)``. ``n <= chunk_size``: one chunk, the items in order.
      None: one chunk of all ``n`` items (every pair in the B-step: the exact
      objective, no random chunks), matrix-free: no ``n x n`` Gram is stored, the code
      products it needs are recomputed from the codes, so memory is ``O(n)``
      (``O(block_rows n + n K)``; with ``supervision="labels"``: an explicit ``Y`` is
      itself ``n x n``) and time ``O(n^2 K)`` per bit, ``O(n^2 K^2)`` per sweep (each
      bit's pass recomputes all ``n^2`` products of ``K`` bits; a Gram's sweep is
      ``O(n^2 K)``). At n = 10,000, K = 32 a sweep took about twice a Gram's time on
      the CPU. The codes equal those of ``chunk_size >= n``.
    chunk_split: ``"per_sweep"`` (a new random split each sweep, from the sweep's key:
      pairs split apart in one sweep meet in a later one) or ``"fixed"`` (one random
      split from ``chunk_seed`` for every sweep: each chunk is then a CDH problem of its
      own, which converges as the unchunked one does). The paper does not say which.
      On mfeat (1,800 items in chunks of 600, 32 bits) a fixed split converged in two
      sweeps (J changed 0.3%) at a worse point (J -0.731, pix->fou mAP 0.810) than new
      splits each sweep (J -0.679 after two sweeps, -0.673 after three; mAP 0.857).
    chunk_seed: the seed of the ``"fixed"`` split.
    mesh: a 1-D ``jax.sharding.Mesh``: each chunk's ``n x n`` B-step work is split
      by rows over its devices (the codes equal one device's). None: one device.
  Returns:
    A ``HashingMethod`` whose ``extras`` is a ``CDHExtras``. ``update`` is one sweep, B-step then
    W-step; its metrics: ``objective`` (``J`` after the sweep),
    ``objective_before`` (``J`` of the state passed in, from the terms it keeps: the
    previous sweep's ``objective`` to float32 rounding), ``objective_after_bstep``,
    ``w_objective_before``,
    ``w_objective`` (means over ``(k, v)``), and per bit, ``[K]``:
    ``active_set_size`` (``|I|`` at the bit's first inner update), ``flipped``
    (``sum |F|``), ``inner_steps``, ``converged`` (active set ended empty),
    ``bit_objective_before``, ``bit_objective`` (``J_k``). ``encode`` gives the
    generative codes from the observed views (``None`` for the others).

  Example: the first view alone recovers the learned codes and retrieves by class.
    >>> import jax, numpy as np, jhash
    >>> rng = np.random.default_rng(0)
    >>> labels = np.arange(120) % 4
    >>> a, b = ((3 * rng.normal(size=(4, d)))[labels] + rng.normal(size=(120, d)) for d in (8, 5))
    >>> batch = {"views": (a, b), "labels": labels}
    >>> method = jhash.methods.cdh(8, w_iters=50)
    >>> state, history = jhash.fit(method, jax.random.key(0), batch, progress=False)
    >>> history["objective"].shape   # J after each of the two sweeps
    (2,)
    >>> query = jhash.encode(method, state, {"views": (a[:20], None)})
    >>> bool(np.mean(query == state.codes[:20]) > 0.9)
    True
    >>> jhash.metrics.mean_average_precision(query, state.codes, labels[:20], labels) > 0.9
    True
  """
  settings = _checked(
    _Settings(
      num_bits,
      gamma,
      merit,
      supervision,
      w_objective,
      max_inner,
      init_scale,
      w_learning_rate,
      w_iters,
      w_batch_size,
      w_l2,
      prior_eps,
      num_sweeps,
      block_rows,
      chunk_size,
      chunk_split,
      chunk_seed,
      mesh,
    )
  )

  def init(key, batch):
    return _init(settings, key, batch)

  def update(state, batch, key):
    return _update(settings, state, batch, key)

  def terms(state, batch):
    return _terms(settings, state, batch)

  def objective(state, batch):
    semantic, generative = terms(state, batch)
    return semantic + generative

  def read_supervision(batch):
    return _read_supervision(settings.supervision, batch)

  def check_batch(batch):
    return _check_batch(settings, batch)

  return _api.HashingMethod(
    init,
    _encode_codes,
    settings.num_bits,
    "cdh",
    _api.one_phase("cdh", update, num_steps=settings.num_sweeps),
    check_batch=check_batch,
    extras=CDHExtras(objective, terms, read_supervision, lambda state: _check_gamma(state.gamma)),
    check_encode=_check_encode,
  )


def _check_encode(state: CDHState, batch) -> None:
  """``jhash.encode``'s check outside jit: the views fit the training views (the batch's
  shapes, not a chunk's)."""
  if isinstance(state, CDHState) and isinstance(batch, dict) and "views" in batch:
    _check_views_match(state, batch["views"])


def _check_views_match(state: CDHState, views) -> None:
  if len(views) != len(state.weights):
    raise ValueError(
      f"views must hold the {len(state.weights)} views CDH was trained on "
      f"(None for an unobserved one); got {len(views)} entries."
    )
  for i, (x, w) in enumerate(zip(views, state.weights)):
    if x is None:
      continue
    d = int(np.prod(np.shape(x)[1:]))
    if d != w.shape[1] - 1:
      raise ValueError(
        f"views[{i}] must have {w.shape[1] - 1} features per item, as in training; got "
        f"{d} (shape {tuple(np.shape(x))}). Are the views in the training order?"
      )
