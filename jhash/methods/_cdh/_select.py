"""Choosing CDH's ``gamma`` (the paper's Sec. 4, "Parameter setting").

The paper runs a grid of ``gamma / n`` in {0, 1e-2, 1e-1, 1, 5, 10, 20, 50} and keeps the
value "with the highest objective value on the training data". ``select_gamma`` does
that (``score=None``) or ranks the grid by any score of the fitted state, e.g. mAP on
held-out items.

One compiled ``update`` serves the whole grid: ``gamma`` is an array in the state,
so each grid point starts from the same initial state with its ``gamma`` replaced.

A caution on the paper's rule with ``J`` normalised as in ``cdh`` (``_method``): the
generative term ``(gamma / n) sum_ik (V/2 + b_ik Z_ik)`` is never negative, so ``J``
grows with ``gamma`` for codes of any quality, and the highest ``J`` is at the largest
grid value. ``select_gamma`` reports every grid point's ``J`` and both of its terms;
a validation score is the better guide.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jhash import _fit
from jhash.methods._cdh import _method

PAPER_GAMMA_OVER_N = (0.0, 1e-2, 1e-1, 1.0, 5.0, 10.0, 20.0, 50.0)


class GammaSelection(NamedTuple):
  """The outcome of ``select_gamma`` (NumPy arrays over the grid, in its order)."""
  gamma: float               # the chosen gamma
  gammas: np.ndarray         # float64 [g], the grid
  scores: np.ndarray         # float64 [g], the ranking score (J, or the given score)
  objective: np.ndarray      # float64 [g], J after the schedule
  semantic: np.ndarray       # float64 [g], its first term
  generative: np.ndarray     # float64 [g], its second term
  states: tuple              # the fitted CDHState of each grid point


def select_gamma(num_bits: int, key: jax.Array, batch: dict, gammas: Sequence[float], *,
                 score: Callable | None = None, num_steps: int | None = None,
                 progress: bool = False, **options) -> GammaSelection:
  """Fit CDH at each ``gamma`` of a grid and keep the best.

  Args:
    num_bits: K.
    key: PRNG key, the same for every grid point (so they differ only in ``gamma``).
    batch: the training batch.
    gammas: the grid of ``gamma`` values (the paper's is ``n *
      PAPER_GAMMA_OVER_N``).
    score: ``score(state) -> float``, higher is better (e.g. a validation mAP);
      None: the training objective ``J`` (the paper's rule).
    num_steps: sweeps per grid point (default: the method's, 2).
    progress: show a progress bar per fit.
    **options: the other arguments of ``cdh``.
  Returns:
    ``GammaSelection``; ties go to the first grid point.
  """
  grid = np.asarray(gammas, np.float64).reshape(-1)
  if grid.size == 0 or not np.all(np.isfinite(grid)) or np.any(grid < 0):
    raise ValueError(f"gammas must be a non-empty list of finite values >= 0; got {gammas!r}.")
  method = _method.cdh(num_bits, gamma=float(grid[0]), **options)
  start = _fit.init(method, key, batch)
  terms = jax.jit(method.extras.terms)
  rows, states = [], []
  for g in grid:
    first = start._replace(gamma=jnp.asarray(g, jnp.float32))
    state, _ = _fit.fit(method, key, batch, num_steps, state=first, progress=progress,
                        donate=False)
    semantic, generative = (float(t) for t in terms(state, batch))
    value = semantic + generative if score is None else float(score(state))
    rows.append((value, semantic + generative, semantic, generative))
    states.append(state)
  table = np.asarray(rows, np.float64)
  best = int(np.argmax(table[:, 0]))
  return GammaSelection(float(grid[best]), grid, table[:, 0], table[:, 1], table[:, 2],
                        table[:, 3], tuple(states))
