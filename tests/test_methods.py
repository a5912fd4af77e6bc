"""The method API: a conformance suite every registered method passes, and LSH / ITQ checks."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jhash
from jhash import methods

# Small hyperparameters per method for the conformance suite.
SMALL = {
  "lsh": {},
  "itq": {"num_iters": 3},
  "cdh": {"w_iters": 20, "max_inner": 4},
  "hbmp": {"hash_options": {"num_epochs": 2}},
  "cvh": {},
  "scm": {},
  "cmfh": {"num_iters": 3},
  "pairwise": {"batch_size": 32, "num_epochs": 1},
  "ksh": {"batch_size": 32, "num_epochs": 1},
  "hashnet": {"batch_size": 32, "num_epochs": 1},
  "dch": {"batch_size": 32, "num_epochs": 1},
  "mmhh": {"batch_size": 32, "num_epochs": 1},
  "adsh": {"batch_size": 32, "rounds": 1, "steps_per_round": 3, "num_samples": 40},
  "mch": {
    "base_options": {"batch_size": 32, "num_epochs": 1},
    "agent_epochs": 1,
    "agent_batch_size": 32,
  },
}
# Methods whose codes depend on the key (the others are closed forms).
RANDOMISED = {
  "lsh",
  "itq",
  "cdh",
  "hbmp",
  "cmfh",
  "pairwise",
  "ksh",
  "hashnet",
  "dch",
  "mmhh",
  "adsh",
  "mch",
}
# Methods that read images (the others read the feature views).
IMAGES = {"mch"}


def _batch(rng, n=120, dims=(12, 9), images=False):
  if images:
    return {
      "views": (rng.uniform(size=(n, 28, 28)).astype(np.float32),),
      "labels": rng.integers(0, 4, n).astype(np.int32),
    }
  views = tuple(rng.normal(size=(n, d)).astype(np.float32) for d in dims)
  return {"views": views, "labels": rng.integers(0, 4, n).astype(np.int32)}


def test_every_registered_method_is_in_the_suite():
  assert set(SMALL) == set(methods.REGISTRY)


# KSH, HashNet and MMHH are pairwise with another loss: the same code as "pairwise" and
# "dch" (their losses are tested in test_deep_losses.py), so their runs are slow-only.
SAME_PATH_AS_PAIRWISE = {"ksh", "hashnet", "mmhh"}
# MCH's run is slow-only too: test_mch.py fits it, traces its agent's step once, encodes
# it in chunks and empty, on images (the base's path is "dch"'s).
COVERED_ELSEWHERE = SAME_PATH_AS_PAIRWISE | {"mch"}


def _conformance_params():
  return [
    pytest.param(name, marks=pytest.mark.slow) if name in COVERED_ELSEWHERE else name
    for name in sorted(methods.REGISTRY)
  ]


@pytest.mark.parametrize("name", _conformance_params())
def test_conformance(name, rng):
  batch = _batch(rng, images=name in IMAGES)
  method = methods.REGISTRY[name](8, **SMALL[name])
  assert isinstance(method, methods.HashingMethod)
  assert method.num_bits == 8 and method.name == {"mch": "mch-dch"}.get(name, name)
  key = jax.random.key(3)
  state = jhash.init(method, key, batch)
  # update keeps the state's type, tree and shapes (weak types included), and is traced
  # once. (chex keys its counter by source text, and several methods share a no-op
  # update's text.) Checked on shapes, without compiling a second copy of the step:
  # jhash.fit below compiles and runs it.
  chex.clear_trace_counter()
  update = jax.jit(chex.assert_max_traces(method.update, n=1))
  # A minibatch method's step reads a minibatch carrying its items' positions.
  step_batch = batch if method.batch_size is None else {**batch, "index": np.arange(120)}
  new_state, metrics = jax.eval_shape(update, state, step_batch, jax.random.key(1))
  new_state, metrics = jax.eval_shape(update, new_state, step_batch, jax.random.key(2))
  assert type(new_state) is type(state)
  chex.assert_trees_all_equal_shapes_and_dtypes(state, new_state)
  # metrics are scalars or fixed-size arrays (one entry per bit, say)
  assert all(np.ndim(v) <= 1 for v in metrics.values())
  # codes are int8 in {-1,+1} with the right shape.
  state, _ = jhash.fit(method, key, batch, progress=False)
  codes = jhash.encode(method, state, batch)
  assert codes.dtype == jnp.int8 and codes.shape == (120, 8)
  assert set(np.unique(np.asarray(codes))) <= {-1, 1}
  # every method gives its codes as multi-code items too (m = 1 for single-code ones).
  multi, mask = jhash.encode_multi(method, state, batch)
  assert multi.dtype == jnp.int8 and multi.ndim == 3 and multi.shape[0] == 120
  assert mask.dtype == jnp.bool_ and mask.shape == multi.shape[:2] and np.all(mask[:, 0])
  if multi.shape[1] == 1:
    np.testing.assert_array_equal(multi[:, 0], codes)
  # chunked encoding equals one pass; an empty batch gives empty codes.
  np.testing.assert_array_equal(jhash.encode(method, state, batch, chunk_size=50), codes)
  empty = {"views": tuple(v[:0] for v in batch["views"]), "labels": batch["labels"][:0]}
  assert jhash.encode(method, state, empty).shape == (0, 8)
  assert jhash.encode_multi(method, state, empty)[0].shape[0] == 0
  # the same key gives the same codes; another key other codes (randomised methods).
  state2, _ = jhash.fit(method, key, batch, progress=False)
  np.testing.assert_array_equal(codes, jhash.encode(method, state2, batch))
  if name in RANDOMISED:
    state3, _ = jhash.fit(method, jax.random.key(4), batch, progress=False)
    assert not np.array_equal(codes, jhash.encode(method, state3, batch))


@pytest.mark.parametrize("name", sorted(methods.REGISTRY))
def test_bad_num_bits(name):
  for bad in (0, -3, 2.5, "8"):
    with pytest.raises(ValueError, match="num_bits"):
      methods.REGISTRY[name](bad)


def test_lsh_collision_rate_matches_angle(rng):
  # Charikar: P[bit differs] = angle / pi, checked with 8,192 hyperplanes.
  x = rng.normal(size=(6, 20)).astype(np.float32)
  method = methods.lsh(8192, center=False)
  state = jhash.init(method, jax.random.key(0), {"views": (x,)})
  codes = np.asarray(jhash.encode(method, state, {"views": (x,)}), np.int32)
  differ = (codes[:, None, :] != codes[None, :, :]).mean(-1)
  unit = x / np.linalg.norm(x, axis=1, keepdims=True)
  angle = np.arccos(np.clip(unit @ unit.T, -1, 1)) / np.pi
  np.testing.assert_allclose(differ, angle, atol=0.02)


def test_itq_loss_never_increases_and_rotation_stays_orthogonal(rng):
  x = (rng.normal(size=(400, 30)) @ rng.normal(size=(30, 30))).astype(np.float32)
  batch = {"views": (x,)}
  method = methods.itq(12, num_iters=25)
  state, history = jhash.fit(method, jax.random.key(0), batch, progress=False)
  loss = history["quantization_loss"]
  assert loss.shape == (25,)
  assert np.all(np.diff(loss) <= 1e-3 * loss[0]), loss
  assert loss[-1] < loss[0]
  r = np.asarray(state.rotation)
  np.testing.assert_allclose(r @ r.T, np.eye(12), atol=1e-4)


def test_itq_rotation_is_the_procrustes_optimum(rng):
  # After an update, R minimises ||B - V R|| for the B it was fitted to: no
  # nearby orthogonal matrix does better.
  x = rng.normal(size=(300, 16)).astype(np.float32)
  batch = {"views": (x,)}
  method = methods.itq(6)
  state = jhash.init(method, jax.random.key(1), batch)
  v = (x - np.asarray(state.mean)) @ np.asarray(state.pca)
  b = np.where(v @ np.asarray(state.rotation) >= 0, 1.0, -1.0)
  new, _ = method.update(state, batch, jax.random.key(0))
  r = np.asarray(new.rotation, np.float64)
  best = np.sum((b - v @ r) ** 2)
  for _ in range(20):
    a = rng.normal(size=(6, 6)) * 0.05
    q = r @ np.linalg.qr(np.eye(6) + (a - a.T))[0]
    assert np.sum((b - v @ q) ** 2) >= best - 1e-3


def test_itq_pca_matches_numpy(rng):
  x = (rng.normal(size=(500, 10)) * np.arange(1, 11)).astype(np.float32)
  method = methods.itq(4)
  state = jhash.init(method, jax.random.key(0), {"views": (x,)})
  xc = x - x.mean(0)
  _, vecs = np.linalg.eigh(xc.T @ xc / len(x))
  ref = vecs[:, ::-1][:, :4]
  # Same subspace, columns equal up to sign.
  np.testing.assert_allclose(np.abs(np.sum(ref * np.asarray(state.pca), 0)), 1.0, atol=1e-3)


def test_itq_centres_with_the_training_mean_and_reports_the_loss_per_item(rng):
  # Features far from the origin: PCA and the codes must use the centred features.
  x = (rng.normal(size=(200, 8)) * np.arange(1, 9) + rng.normal(size=8) * 50).astype(np.float32)
  method = methods.itq(3)
  assert method.num_steps == 50  # the paper's iterations
  state = jhash.init(method, jax.random.key(0), {"views": (x,)})
  xc = x.astype(np.float64) - x.mean(0)
  np.testing.assert_allclose(np.asarray(state.mean), x.mean(0), rtol=1e-5, atol=1e-4)
  ref = np.linalg.eigh(xc.T @ xc / len(x))[1][:, ::-1][:, :3]
  np.testing.assert_allclose(np.abs(np.sum(ref * np.asarray(state.pca), 0)), 1.0, atol=1e-3)
  # The loss of the first update is ||B - V R||_F^2 / n at the initial rotation.
  vr = xc @ np.asarray(state.pca, np.float64) @ np.asarray(state.rotation, np.float64)
  _, metrics = method.update(state, {"views": (x,)}, jax.random.key(1))
  b = np.where(vr >= 0, 1.0, -1.0)
  np.testing.assert_allclose(
    float(metrics["quantization_loss"]), np.sum((b - vr) ** 2) / len(x), rtol=1e-4
  )
  # Codes of new items: the sign of their centred projections, rotated.
  new = x[:20] + np.float32(0.5)
  p = (new - x.mean(0)) @ np.asarray(state.pca, np.float64) @ np.asarray(state.rotation)
  clear = np.abs(p) > 1e-3
  codes = np.asarray(jhash.encode(method, state, {"views": (new,)}))
  np.testing.assert_array_equal(codes[clear], np.where(p >= 0, 1, -1)[clear])


def test_itq_starts_from_a_uniformly_random_rotation(rng):
  # Q of a Gaussian matrix's QR, its columns' signs set so diag(R) > 0, is uniform over
  # the orthogonal group: every entry as often positive as negative (LAPACK's own Q
  # has Q[0, 0] < 0 whatever the matrix).
  batch = {"views": (rng.normal(size=(40, 5)).astype(np.float32),)}
  method = methods.itq(3)
  corners = [
    float(jhash.init(method, jax.random.key(seed), batch).rotation[0, 0]) for seed in range(16)
  ]
  assert 0 < sum(c > 0 for c in corners) < 16, corners


def test_itq_rejects_more_bits_than_features(rng):
  with pytest.raises(ValueError, match="num_bits"):
    jhash.init(methods.itq(20), jax.random.key(0), {"views": (rng.normal(size=(30, 8)),)})


def test_view_selection(rng):
  batch = _batch(rng)
  both = methods.view_features(batch, None)
  assert both.shape == (120, 21)
  np.testing.assert_array_equal(methods.view_features(batch, 1), batch["views"][1])
  with pytest.raises(ValueError, match="view 2"):
    methods.view_features(batch, 2)
  with pytest.raises(ValueError, match="view 0"):
    methods.view_features({"views": (None, batch["views"][1])}, 0)


@pytest.mark.parametrize(
  "name",
  [
    "lsh",
    "itq",
    "pairwise",
    # the same check_views call; slow-only:
    pytest.param("hbmp", marks=pytest.mark.slow),
    pytest.param("adsh", marks=pytest.mark.slow),
  ],
)
def test_encode_refuses_views_unlike_training(name, rng):
  batch = _batch(rng)  # views of widths 12 and 9
  method = methods.REGISTRY[name](8, **SMALL[name])
  state, _ = jhash.fit(method, jax.random.key(0), batch, progress=False)
  x12, x9 = batch["views"]
  swapped = {"views": (x9, x12)}  # same total width, swapped
  missing = {"views": (x12,)}
  for bad in (swapped, missing):
    with pytest.raises(ValueError, match="views must match"):
      jhash.encode(method, state, bad)
  with pytest.raises(ValueError, match="views must match"):
    jhash.encode_multi(method, state, swapped)
  jhash.encode(method, state, {"views": batch["views"]})  # the training layout is fine


@pytest.mark.parametrize("name", ["cdh", "scm"])
def test_multi_hot_rows_without_a_label_are_refused(name, rng):
  batch = _batch(rng, n=40)
  labels = rng.random((40, 5)) < 0.4
  labels[np.arange(40), rng.integers(0, 5, 40)] = True
  labels[[3, 17], :] = False  # two items carry no supervision
  batch["labels"] = labels
  method = methods.REGISTRY[name](8, **SMALL[name])
  with pytest.raises(ValueError, match="at least one label.*items \\[3, 17\\]"):
    jhash.fit(method, jax.random.key(0), batch, progress=False)
