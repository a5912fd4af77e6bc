"""Choosing a hyperparameter over a grid.

``grid_search`` fits a method once per grid value, each run from the same key (so runs
differ only in the value), and ranks the fitted states by a score: by default the mAP of
a held-out ``validation`` batch against the training items; or any score of the state;
or, asked for by name, the method's training objective (``"objective"``), which is no
guide for a hyperparameter that weighs the objective's own terms (below). The value is
either a field of the state (CDH's ``gamma``: one compiled ``update`` serves the whole
grid) or an argument of the method's factory (a loss weight, a margin, a learning rate:
``method`` is then a function of the value).

For a sweep in one compiled program, build the method inside a traced function of the
value: the deep losses' weights and margins and the learning rate may be arrays, so
``jax.vmap(lambda v: jhash.make_train(jhash.methods.dch(16, quantization=v), batch)(key,
batch))(values)`` trains every value at once.

``cdh_select_gamma`` is CDH's rule (Sec. 4, "Parameter setting"): the paper runs a grid
of ``gamma / n`` in {0, 1e-2, 1e-1, 1, 5, 10, 20, 50} and keeps the value "with the
highest objective value on the training data". A caution on that rule with ``J``
normalised as in ``cdh``: the generative term ``(gamma / n) sum_ik (V/2 + b_ik Z_ik)`` is
never negative, so ``J`` grows with ``gamma`` for codes of any quality and the highest
``J`` is at the largest grid value; a validation score is the better guide.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jhash import _api
from jhash import _checks
from jhash import _encode
from jhash import _fit
from jhash import methods
from jhash import metrics

#: CDH's grid of ``gamma / n`` in the paper: ``cdh_select_gamma`` takes ``n`` times it.
PAPER_GAMMA_OVER_N = (0.0, 1e-2, 1e-1, 1.0, 5.0, 10.0, 20.0, 50.0)


class GridSearch(NamedTuple):
  """The outcome of ``grid_search`` (NumPy arrays over the grid, in its order)."""

  value: float  # the chosen value
  values: np.ndarray  # float64 [g], the grid
  scores: np.ndarray  # float64 [g], the ranking score of each fitted state
  states: tuple  # the fitted state of each grid point


def grid_search(
  method: _api.HashingMethod | Callable[[float], _api.HashingMethod],
  key: jax.Array,
  batch: dict,
  field: str | None,
  values: Sequence[float],
  *,
  score: Callable | str | None = None,
  validation: dict | None = None,
  num_steps: int | None = None,
  progress: bool = False,
) -> GridSearch:
  """Fit ``method`` at each grid value and keep the best.

  Args:
    method: a ``HashingMethod`` whose state holds ``field`` as a float32 [] array; or,
      with ``field=None``, a function ``value -> HashingMethod`` (e.g. ``lambda q:
      jhash.methods.dch(16, quantization=q)``).
    key: PRNG key, the same for every grid point.
    batch: the training batch.
    field: the state's field to set (e.g. CDH's ``"gamma"``), or None (above).
    values: the grid.
    score: what ranks the fitted states, higher is better. None (default): the mAP
      (tie-aware, whole ranking) of ``validation``'s codes as queries against the
      training batch's codes, by their labels. A function ``score(state) -> float``
      (e.g. a cross-view mAP). ``"objective"``: the training objective
      ``method.extras.objective(state, batch)`` (CDH's paper's rule: it grows with a
      weight of its own terms, so it picks the largest such value whatever the codes).
    validation: a held-out batch with labels, for the default score.
    num_steps: steps per grid point (default: the method's schedule).
    progress: show a progress bar per fit.
  Returns:
    ``GridSearch``; ties go to the first grid point.
  """
  try:
    grid = np.asarray(values, np.float64)
  except (TypeError, ValueError):
    grid = np.array([np.nan])
  if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid)):
    raise ValueError(
      f"values must be a non-empty 1-D list of finite numbers; got {_checks.describe(values)}."
    )
  at = _settings(method, key, batch, field)
  score = _score(score, validation, at(float(grid[0]))[0], batch)
  scores, states = [], []
  for value in grid:
    built, first = at(float(value))
    state, _ = _fit.fit(built, key, batch, num_steps, state=first, progress=progress, donate=False)
    scores.append(_as_score(score(state, built), value))
    states.append(state)
  scores = np.asarray(scores, np.float64)
  best = int(np.argmax(scores))
  return GridSearch(float(grid[best]), grid, scores, tuple(states))


def _as_score(value, at: float) -> float:
  """A score as a float; NaN or not a number is an error naming the grid point."""
  try:
    number = float(np.asarray(value).item()) if np.size(value) == 1 else None
  except (TypeError, ValueError):
    number = None
  if number is None or np.isnan(number):
    raise ValueError(
      f"score must give one number for each grid point (higher is better); got "
      f"{_checks.describe(value)} at value {at:g}."
    )
  return number


def _settings(method, key, batch, field) -> Callable:
  """``value -> (method, first state or None)`` for each grid point."""
  if field is None:
    if isinstance(method, _api.HashingMethod) or not callable(method):
      raise ValueError(
        "with field=None, method must be a function value -> HashingMethod (e.g. lambda "
        f"q: jhash.methods.dch(16, quantization=q)); got {type(method).__name__}."
      )
    return lambda value: (method(value), None)
  if not isinstance(method, _api.HashingMethod):
    raise ValueError(
      f"method must be a HashingMethod when field names a state field ({field!r}); a "
      "function of the value goes with field=None."
    )
  start = _fit.init(method, key, batch)
  if field not in getattr(start, "_fields", ()):
    raise ValueError(
      f"field must name a field of the method's state "
      f"{type(start).__name__}{tuple(getattr(start, '_fields', ()))}, or be None with "
      f"method a function of the value; got {field!r}."
    )
  if np.shape(getattr(start, field)) != () or not jnp.issubdtype(
    getattr(start, field).dtype, jnp.floating
  ):
    raise ValueError(
      f"field must name a float scalar of the state (as CDH's 'gamma'); {field!r} is "
      f"{_checks.describe(getattr(start, field))}. For a hyperparameter of the method's "
      "factory, pass method as a function of the value and field=None."
    )
  return lambda value: (method, start._replace(**{field: jnp.asarray(value, jnp.float32)}))


def _score(score, validation, method, batch) -> Callable:
  """The ranking score as a function of a fitted state and the method that fitted it."""
  if callable(score):
    return lambda state, built: score(state)
  if score == "objective":
    if getattr(method.extras, "objective", None) is None:
      raise ValueError(f"{method.name} has no extras.objective: pass a score function.")
    objective = jax.jit(method.extras.objective)
    return lambda state, built: float(objective(state, batch))
  if score is not None:
    raise ValueError(f"score must be None, 'objective' or a function of the state; got {score!r}.")
  if validation is not None and not isinstance(validation, dict):
    raise ValueError(
      f"validation must be a batch dict {{'views': (...), 'labels': ...}}; got "
      f"{_checks.describe(validation)}."
    )
  if validation is None or validation.get("labels") is None or batch.get("labels") is None:
    raise ValueError(
      "grid_search ranks by the mAP of a held-out batch by default: pass validation= (a "
      "batch with labels, the training batch having labels too), or score= (a function "
      "of the state, or 'objective' for the training objective, which is no guide for a "
      "weight of its own terms)."
    )

  def held_out_map(state, built):  # built: the method of the state's grid point
    queries = _encode.encode(built, state, validation)
    database = _encode.encode(built, state, batch)
    return float(
      metrics.mean_average_precision(queries, database, validation["labels"], batch["labels"])
    )

  return held_out_map


class GammaSelection(NamedTuple):
  """The outcome of ``cdh_select_gamma`` (NumPy arrays over the grid, in its order)."""

  gamma: float  # the chosen gamma
  gammas: np.ndarray  # float64 [g], the grid
  scores: np.ndarray  # float64 [g], the ranking score (J, or the given score)
  objective: np.ndarray  # float64 [g], J after the schedule
  semantic: np.ndarray  # float64 [g], its first term
  generative: np.ndarray  # float64 [g], its second term
  states: tuple  # the fitted CDHState of each grid point


def cdh_select_gamma(
  num_bits: int,
  key: jax.Array,
  batch: dict,
  gammas: Sequence[float],
  *,
  score: Callable | str | None = None,
  validation: dict | None = None,
  num_steps: int | None = None,
  progress: bool = False,
  **options,
) -> GammaSelection:
  """Fit CDH at each ``gamma`` of a grid and keep the best (``grid_search`` on "gamma").

  Args:
    num_bits: K.
    key: PRNG key, the same for every grid point (so they differ only in ``gamma``).
    batch: the training batch.
    gammas: the grid of ``gamma`` values (the paper's is ``n * PAPER_GAMMA_OVER_N``).
    score, validation: as in ``grid_search``: by default the mAP of the held-out
      ``validation`` batch; a function of the state (e.g. a cross-view mAP); or
      ``"objective"``, the training objective ``J``, which is the paper's rule but grows
      with ``gamma`` (module docstring) and so picks the largest grid value.
    num_steps: sweeps per grid point (default: the method's, 2).
    progress: show a progress bar per fit.
    **options: the other arguments of ``jhash.methods.cdh``.
  Returns:
    ``GammaSelection``, with each grid point's ``J`` and both of its terms; ties go to
    the first grid point.
  """
  grid = np.asarray(gammas, np.float64).reshape(-1)
  if grid.size == 0 or not np.all(np.isfinite(grid)) or np.any(grid < 0):
    raise ValueError(f"gammas must be a non-empty list of finite values >= 0; got {gammas!r}.")
  if "gamma" in options:
    raise ValueError(
      "gamma is the value cdh_select_gamma sweeps: give the grid as gammas, not gamma=."
    )
  _checks.keywords(options, methods.cdh, "cdh_select_gamma", ("num_bits", "gamma"))
  method = _cdh_method(num_bits, float(grid[0]), options)
  found = grid_search(
    method,
    key,
    batch,
    "gamma",
    grid,
    score=score,
    validation=validation,
    num_steps=num_steps,
    progress=progress,
  )
  terms = jax.jit(method.extras.terms)
  parts = np.asarray([[float(t) for t in terms(s, batch)] for s in found.states], np.float64)
  return GammaSelection(
    found.value, found.values, found.scores, parts.sum(1), parts[:, 0], parts[:, 1], found.states
  )


def _cdh_method(num_bits, gamma: float, options: dict) -> _api.HashingMethod:
  """``cdh(num_bits, gamma=gamma, **options)``, kept per setting when the options can be
  hashed: jit caches are keyed on the method's functions, so selections with the same
  settings (a grid scored twice, say) compile CDH's sweep once."""
  key = (num_bits, gamma, tuple(sorted(options.items())))
  try:
    hash(key)
  except TypeError:
    return methods.cdh(num_bits, gamma=gamma, **options)
  return _cached_cdh(*key)


@functools.lru_cache(maxsize=16, typed=True)
def _cached_cdh(num_bits, gamma: float, options: tuple) -> _api.HashingMethod:
  return methods.cdh(num_bits, gamma=gamma, **dict(options))
