"""Choosing a hyperparameter that lives in a method's state, over a grid.

``grid_search`` fits a method once per grid value, each run from the same initial state
(the same key, so runs differ only in the value) with the state's field replaced, and
ranks the fitted states by a score: the method's training objective
(``method.extras.objective``) by default, or any score of the state, such as a
validation mAP. One compiled ``update`` serves the whole grid, since the value is an
array in the state.

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
from jhash import _fit
from jhash import methods

PAPER_GAMMA_OVER_N = (0.0, 1e-2, 1e-1, 1.0, 5.0, 10.0, 20.0, 50.0)


class GridSearch(NamedTuple):
  """The outcome of ``grid_search`` (NumPy arrays over the grid, in its order)."""

  value: float  # the chosen value
  values: np.ndarray  # float64 [g], the grid
  scores: np.ndarray  # float64 [g], the ranking score of each fitted state
  states: tuple  # the fitted state of each grid point


def grid_search(
  method: _api.HashingMethod,
  key: jax.Array,
  batch: dict,
  field: str,
  values: Sequence[float],
  *,
  score: Callable | None = None,
  num_steps: int | None = None,
  progress: bool = False,
) -> GridSearch:
  """Fit ``method`` at each value of the state field ``field`` and keep the best.

  Args:
    method: a ``HashingMethod`` whose state holds ``field`` as a float32 [] array.
    key: PRNG key, the same for every grid point.
    batch: the training batch.
    field: the state's field to set (e.g. CDH's ``"gamma"``).
    values: the grid.
    score: ``score(state) -> float``, higher is better; None: the training objective
      ``method.extras.objective(state, batch)``.
    num_steps: steps per grid point (default: the method's schedule).
    progress: show a progress bar per fit.
  Returns:
    ``GridSearch``; ties go to the first grid point.
  """
  grid = np.asarray(values, np.float64).reshape(-1)
  if grid.size == 0 or not np.all(np.isfinite(grid)):
    raise ValueError(f"values must be a non-empty list of finite numbers; got {values!r}.")
  start = _fit.init(method, key, batch)
  if field not in getattr(start, "_fields", ()):
    raise ValueError(
      f"field must name a field of the method's state "
      f"{type(start).__name__}{tuple(getattr(start, '_fields', ()))}; got "
      f"{field!r}."
    )
  if score is None:
    if getattr(method.extras, "objective", None) is None:
      raise ValueError(f"{method.name} has no extras.objective: pass score=.")
    objective = jax.jit(method.extras.objective)
    score = lambda state: float(objective(state, batch))
  scores, states = [], []
  for value in grid:
    first = start._replace(**{field: jnp.asarray(value, jnp.float32)})
    state, _ = _fit.fit(method, key, batch, num_steps, state=first, progress=progress, donate=False)
    scores.append(float(score(state)))
    states.append(state)
  scores = np.asarray(scores, np.float64)
  best = int(np.argmax(scores))
  return GridSearch(float(grid[best]), grid, scores, tuple(states))


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
  score: Callable | None = None,
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
    score: ``score(state) -> float``, higher is better (e.g. a validation mAP);
      None: the training objective ``J`` (the paper's rule).
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
  method = _cdh_method(num_bits, float(grid[0]), options)
  found = grid_search(
    method, key, batch, "gamma", grid, score=score, num_steps=num_steps, progress=progress
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
