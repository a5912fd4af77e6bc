"""Choosing CDH's gamma over a grid (the paper's rule and a validation score)."""

from types import SimpleNamespace
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import _cdh_reference as ref
import jhash
from jhash import data

BITS = 8
OPTS = dict(w_iters=20, max_inner=6)


@pytest.fixture(scope="module")
def mfeat_small():
  ds = data.load_mfeat(["pix", "fou"])
  rng = np.random.default_rng(0)
  idx = np.sort(rng.choice(ds.labels.size, 240, replace=False))
  return {"views": tuple(v[idx] for v in ds.views), "labels": ds.labels[idx]}


@pytest.fixture(scope="module")
def selection(mfeat_small):
  return jhash.cdh_select_gamma(
    BITS, jax.random.key(0), mfeat_small, [0.0, 0.01, 0.5], num_steps=1, score="objective", **OPTS
  )


def test_paper_rule_keeps_the_highest_training_objective(selection, mfeat_small):
  # Each fitted state's J and both terms, recomputed by the dense float64 reference
  # from the state's codes and weights (not from the implementation's own numbers).
  y = ref.dense_supervision(mfeat_small["labels"])
  for g, state, j, sem, gen in zip(
    selection.gammas,
    selection.states,
    selection.objective,
    selection.semantic,
    selection.generative,
  ):
    assert float(state.gamma) == pytest.approx(g)  # fitted at its grid point's gamma
    want_sem = ref.semantic_term(np.asarray(state.codes), y, "exponential")
    want_gen = ref.generative_term(np.asarray(state.codes), state.weights, mfeat_small["views"], g)
    assert sem == pytest.approx(want_sem, rel=1e-4, abs=1e-6)
    assert gen == pytest.approx(want_gen, rel=1e-4, abs=1e-6)
    assert j == pytest.approx(want_sem + want_gen, rel=1e-4, abs=1e-6)
  # The paper's rule: the grid point of the highest J is kept.
  np.testing.assert_allclose(selection.scores, selection.objective, rtol=1e-6)
  assert selection.gamma == selection.gammas[int(np.argmax(selection.objective))]
  # The generative term is never negative, and is 0 at gamma = 0 (CDH-0).
  assert selection.generative[0] == 0.0 and np.all(selection.generative >= 0)


def test_a_fit_at_one_grid_point_equals_a_plain_fit(selection, mfeat_small):
  key = jax.random.key(0)
  method = jhash.methods.cdh(BITS, gamma=0.01, **OPTS)
  state, _ = jhash.fit(method, key, mfeat_small, num_steps=1, progress=False)
  np.testing.assert_array_equal(np.asarray(state.codes), np.asarray(selection.states[1].codes))


def test_a_validation_score_ranks_the_grid(selection, mfeat_small):
  calls = []

  def score(state):
    calls.append(float(state.gamma))
    return -abs(float(state.gamma) - 0.01)  # prefers the middle grid point

  chosen = jhash.cdh_select_gamma(
    BITS, jax.random.key(0), mfeat_small, [0.0, 0.01, 0.5], num_steps=1, score=score, **OPTS
  )
  assert chosen.gamma == pytest.approx(0.01)
  assert calls == pytest.approx([0.0, 0.01, 0.5])
  np.testing.assert_allclose(chosen.objective, selection.objective, rtol=1e-6)


@pytest.mark.parametrize("grid", [[], [0.1, -1.0], [np.nan]])
def test_bad_grid_names_itself(mfeat_small, grid):
  with pytest.raises(ValueError, match="gammas"):
    jhash.cdh_select_gamma(BITS, jax.random.key(0), mfeat_small, grid)


class _Sum(NamedTuple):
  gamma: jax.Array  # float32 []: the grid's field
  total: jax.Array  # float32 []: gamma added once a step


def _summing(num_steps: int = 3) -> jhash.HashingMethod:
  def init(key, batch):
    del key, batch
    return _Sum(jnp.float32(0.0), jnp.float32(0.0))

  def update(state, batch, key):
    del batch, key
    return state._replace(total=state.total + state.gamma), {}

  encode = lambda state, batch: jnp.ones((batch["views"][0].shape[0], 1), jnp.int8)
  objective = lambda state, batch: -jnp.abs(state.total - 4.5)
  return jhash.HashingMethod(
    init,
    encode,
    1,
    "summing",
    (jhash.Phase("summing", update, None, num_steps=num_steps),),
    extras=SimpleNamespace(objective=objective),
  )


def test_grid_search_fits_each_value_and_keeps_the_first_best():
  # After 3 steps, total = 3 gamma; the objective -|total - 4.5| ties at gamma 1 and 2.
  batch = {"views": (np.zeros((4, 2), np.float32),)}
  found = jhash.grid_search(
    _summing(), jax.random.key(0), batch, "gamma", [0.0, 1.0, 2.0], score="objective"
  )
  np.testing.assert_array_equal(found.values, [0.0, 1.0, 2.0])
  np.testing.assert_allclose(found.scores, [-4.5, -1.5, -1.5])
  np.testing.assert_allclose([float(s.total) for s in found.states], [0.0, 3.0, 6.0])
  assert found.value == 1.0  # ties go to the first grid point
  # A score of the state; num_steps per grid point.
  found = jhash.grid_search(
    _summing(),
    jax.random.key(0),
    batch,
    "gamma",
    [2.0, 1.0],
    score=lambda s: -float(s.total),
    num_steps=1,
  )
  np.testing.assert_allclose(found.scores, [-2.0, -1.0])
  assert found.value == 1.0
  for bad in ([], [1.0, np.nan], [np.inf]):
    with pytest.raises(ValueError, match="values"):
      jhash.grid_search(_summing(), jax.random.key(0), batch, "gamma", bad)
  with pytest.raises(ValueError, match="field"):
    jhash.grid_search(_summing(), jax.random.key(0), batch, "gama", [1.0])


def _labelled(n, seed):
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, 3, n).astype(np.int32)
  x = rng.normal(size=(n, 10)).astype(np.float32) + 2.0 * labels[:, None]
  return {"views": (x,), "labels": labels}


def test_the_default_score_is_a_held_out_map_and_a_factory_argument_is_swept():
  train, validation = _labelled(80, 0), _labelled(30, 1)
  backbone = jhash.models.backbone((10,), 8, hidden=(16,))

  def build(q):
    return jhash.methods.dch(8, quantization=q, batch_size=20, num_epochs=1, backbone=backbone)

  key = jax.random.key(0)
  found = jhash.grid_search(build, key, train, None, [0.0, 1.0], validation=validation)
  for value, state, got in zip(found.values, found.states, found.scores):
    method = build(value)
    alone, _ = jhash.fit(method, key, train, progress=False)  # the grid point is a plain fit
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(alone)):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    want = jhash.metrics.mean_average_precision(
      jhash.encode(method, state, validation),
      jhash.encode(method, state, train),
      validation["labels"],
      train["labels"],
    )
    assert got == pytest.approx(want, rel=1e-6)
  assert found.value == found.values[int(np.argmax(found.scores))]


def test_no_score_and_no_validation_is_refused_naming_both():
  batch = {"views": (np.zeros((4, 2), np.float32),)}
  with pytest.raises(ValueError, match="pass validation=.*or score="):
    jhash.grid_search(_summing(), jax.random.key(0), batch, "gamma", [1.0])
  with pytest.raises(ValueError, match="method must be a function value -> HashingMethod"):
    jhash.grid_search(_summing(), jax.random.key(0), batch, None, [1.0], score="objective")
  with pytest.raises(ValueError, match="score must be None, 'objective' or a function"):
    jhash.grid_search(_summing(), jax.random.key(0), batch, "gamma", [1.0], score="map")
