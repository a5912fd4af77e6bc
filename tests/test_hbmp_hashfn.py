"""HBMP stage ii: the hinge bound, the networks, training, and ``hbmp`` with hash functions."""

import importlib

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jhash

hb = importlib.import_module("jhash.methods._hbmp")


def _hinge_reference(scores, targets):
  """(1/n) sum_i sum_t max(0, 1 - u_it s_it), by loops."""
  total = 0.0
  for s_row, u_row in zip(np.asarray(scores, np.float64), np.asarray(targets, np.float64)):
    for s, u in zip(s_row, u_row):
      total += max(0.0, 1.0 - u * s)
  return total / len(scores)


def _separable(rng, n, w, margin=0.5):
  """Features with targets sign(W^T x), every point at least ``margin`` from each plane."""
  x = rng.normal(size=(8 * n, w.shape[0])) * 2.0 + 0.5
  keep = np.all(np.abs(x @ w) > margin, axis=1)
  x = x[keep][:n].astype(np.float32)
  assert len(x) == n
  return x, np.where(x @ w >= 0, 1, -1).astype(np.int8)


def _blobs(rng, n=240, classes=4, dim=12):
  centers = rng.normal(size=(classes, dim)) * 4.0
  y = np.arange(n) % classes
  x = centers[y] + rng.normal(size=(n, dim))
  return {"views": (x.astype(np.float32),), "labels": y.astype(np.int32)}


# ----------------------------------------------------------------------------- the loss


def test_hinge_loss_equals_numpy_reference_and_bounds_the_hamming_loss(rng):
  scores = rng.normal(size=(37, 9)).astype(np.float32) * 2.0
  targets = np.where(rng.normal(size=(37, 9)) >= 0, 1, -1).astype(np.int8)
  scores[0, :3] = [1.0, -1.0, 0.0]  # the hinge's kink and sign(0) = +1
  targets[0, :3] = [1, -1, -1]
  got = float(hb.hinge_loss(scores, targets))
  np.testing.assert_allclose(got, _hinge_reference(scores, targets), rtol=1e-6)
  mismatched = np.mean(np.where(scores >= 0, 1, -1) != targets)
  np.testing.assert_allclose(float(hb.bit_error(scores, targets)), mismatched, rtol=1e-6)
  assert got >= mismatched * scores.shape[1]  # Eq. 12: an upper bound
  with pytest.raises(ValueError, match="same shape"):
    hb.hinge_loss(scores, targets[:, :4])


def test_instance_hinge_vmapped_equals_a_loop(rng):
  scores = rng.normal(size=(11, 5)).astype(np.float32)
  targets = np.where(rng.normal(size=(11, 5)) >= 0, 1.0, -1.0).astype(np.float32)
  vmapped = jax.vmap(hb.instance_hinge)(scores, targets)
  looped = np.array([hb.instance_hinge(s, t) for s, t in zip(scores, targets)])
  np.testing.assert_allclose(vmapped, looped, rtol=1e-6)


# ----------------------------------------------------------------------------- networks


def test_networks_map_a_batch_to_one_score_per_bit(key):
  features = jnp.ones((3, 20))
  for kind, x in (
    ("linear", features),
    ("mlp", features),
    ("cnn", jnp.ones((3, 28, 28, 1))),
    ("cnn", jnp.ones((3, 9, 11, 2))),
  ):
    net = hb.network(kind, 7, x.shape[1:], hidden=(16, 8), channels=(4,))
    variables = net.init(key, x)
    assert net.apply(variables, x)[0].logits.shape == (3, 7)
  linear = hb.network("linear", 7, (20,))
  assert set(linear.init(key, features)["params"]) == {"projection"}  # W x + c only
  with pytest.raises(ValueError, match="kind must be one of"):
    hb.network("rbf", 8, (20,))


def test_chunked_scores_equal_one_pass(rng, key):
  x = rng.normal(size=(23, 6)).astype(np.float32)
  fns = hb.hash_functions("mlp", 5, hidden=(8,), encode_chunk=4)  # 23 = 5 chunks + 3
  batch = {"views": (x,)}
  state = fns.init(key, batch)
  net = hb.network("mlp", 5, (6,), hidden=(8,))
  direct = net.apply(
    {"params": state.train.params}, (x - state.mean[None, :]) * state.scale[None, :]
  )[0].logits
  np.testing.assert_allclose(fns.scores(state, batch), direct, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(fns.encode(state, batch), np.where(np.asarray(direct) >= 0, 1, -1))


# ----------------------------------------------------------------------------- training


def _per_epoch(values, num_epochs):
  """A metric per step averaged over each epoch's steps."""
  return np.asarray(values).reshape(num_epochs, -1).mean(axis=1)


def test_linear_hash_functions_fit_separable_targets(rng, key):
  w = rng.normal(size=(10, 6))
  w /= np.linalg.norm(w, axis=0, keepdims=True)
  x, targets = _separable(rng, 600, w)
  x_new, t_new = _separable(rng, 300, w)
  method = hb.fit_to_targets(hb.hash_functions("linear", 6), num_epochs=30, batch_size=50)
  batch = {"views": (x,)}
  state, history = jhash.fit(method, key, {**batch, "targets": targets}, progress=False)
  bit_error = _per_epoch(history["bit_error"], 30)
  assert bit_error[0] > 0.05 and bit_error[-1] < 0.01
  assert np.mean(np.asarray(jhash.encode(method, state, batch)) != targets) < 0.002
  # The planes are learned, not the points: new points of the same planes.
  new_codes = np.asarray(jhash.encode(method, state, {"views": (x_new,)}))
  assert np.mean(new_codes != t_new) < 0.01


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_a_few_epochs_decrease_the_hinge_loss(rng, key, kind):
  images = rng.random((256, 12, 12)).astype(np.float32)
  w = rng.normal(size=(144, 8))
  targets = np.where((images.reshape(256, -1) - 0.5) @ w >= 0, 1, -1).astype(np.int8)
  fns = hb.hash_functions(kind, 8, learning_rate=1e-2, hidden=(32,), channels=(4, 8), dense=16)
  method = hb.fit_to_targets(fns, num_epochs=4, batch_size=32)
  batch = {"views": (images,)}
  state, history = jhash.fit(method, key, {**batch, "targets": targets}, progress=False)
  hinge, bit_error = (_per_epoch(history[k], 4) for k in ("hinge_loss", "bit_error"))
  assert np.all(np.diff(hinge) < 0), hinge
  assert hinge[-1] < 0.85 * hinge[0]
  assert bit_error[-1] < bit_error[0] - 0.05
  scores = fns.scores(state.coder, batch)
  assert scores.shape == (256, 8) and scores.dtype == jnp.float32
  assert int(state.coder.train.step) == 4 * (256 // 32)
  if kind == "cnn":
    assert fns.read(batch).shape == (256, 12, 12, 1)
    assert state.coder.mean.shape == ()  # one mean over the pixels
  else:
    assert state.coder.mean.shape == (144,)  # images flattened to features


def test_standardisation_keeps_constant_columns_finite(rng):
  x = rng.normal(size=(50, 4)).astype(np.float32) * np.array([1.0, 10.0, 0.1, 1.0])
  x[:, 3] = 5.0
  mean, scale = jhash.training.input_statistics(jnp.asarray(x))
  z = (x - np.asarray(mean)) * np.asarray(scale)
  np.testing.assert_allclose(z[:, :3].std(0), 1.0, rtol=1e-4)
  np.testing.assert_allclose(z[:, 3], 0.0, atol=1e-6)
  assert np.all(np.isfinite(np.asarray(scale)))


# ----------------------------------------------------------------------------- hbmp + stage ii


@pytest.fixture(scope="module")
def blobs_run():
  batch = _blobs(np.random.default_rng(0))
  method = jhash.methods.hbmp(
    8,
    num_items=4,
    hash_function="linear",
    hash_options={"num_epochs": 6, "batch_size": 40, "learning_rate": 0.05},
  )
  counted = method._replace(
    phases=tuple(p._replace(update=_counting(p.update, p.name)) for p in method.phases)
  )
  key = jax.random.key(3)
  state, history = jhash.fit(counted, key, batch, progress=False)
  # Each phase's step is traced once for the whole run (the minibatch loop's probe of
  # its metrics' shapes and its body share one trace).
  assert TRACES == {"pursuit": 1, "hash_functions": 1}, TRACES
  return method, counted, key, batch, state, history


TRACES = {}


def _counting(update, name):
  def counted(state, batch, key):
    TRACES[name] = TRACES.get(name, 0) + 1
    return update(state, batch, key)

  return counted


def test_hbmp_runs_the_pursuit_then_the_hash_functions(blobs_run):
  method, _, _, batch, state, history = blobs_run
  assert [p.name for p in method.phases] == ["pursuit", "hash_functions"]
  assert jhash.schedule(method, 240) == 8 + 6 * (240 // 40) and method.num_bits == 8
  assert int(state.pursuit.step) == 8 and int(state.hashing.train.step) == 6 * (240 // 40)
  # Each phase reports its own metrics, one entry per step of that phase.
  assert history["residual_norm"].shape == (8,) and history["hinge_loss"].shape == (36,)
  assert np.all(np.isfinite(history["hinge_loss"]))
  assert history["hinge_loss"][-6:].mean() < history["hinge_loss"][:6].mean()
  # Separated classes: the learned functions reproduce the target codes.
  codes = jhash.encode(method, state, {"views": batch["views"]})  # no labels needed
  assert codes.dtype == jnp.int8 and codes.shape == (240, 8)
  assert set(np.unique(np.asarray(codes))) <= {-1, 1}
  np.testing.assert_array_equal(codes, state.target_codes)
  np.testing.assert_array_equal(method.extras.encode_targets(state, batch), state.target_codes)
  scores = method.extras.scores(state, batch)
  np.testing.assert_array_equal(np.where(np.asarray(scores) >= 0, 1, -1), codes)
  params = state.hashing.train.params
  assert set(params) == {"projection"} and params["projection"]["kernel"].shape == (12, 8)


def test_hbmp_with_hash_functions_conforms(blobs_run):
  method, counted, key, batch, state, _ = blobs_run
  fresh = jhash.init(method, key, batch)
  chex.assert_trees_all_equal_shapes_and_dtypes(fresh, state)  # one fixed-shape state
  # Traced for all 44 steps of both phases in the fixture's fit, not again here.
  traces = dict(TRACES)
  again, _ = jhash.fit(counted, key, batch, progress=False)
  assert TRACES == traces
  for a, b in zip(jax.tree.leaves(again), jax.tree.leaves(state)):
    np.testing.assert_array_equal(a, b)
  other, _ = jhash.fit(counted, jax.random.key(4), batch, progress=False)
  new = np.random.default_rng(5).normal(size=(30, 12)).astype(np.float32) * 4.0
  assert not np.array_equal(
    jhash.encode(method, state, {"views": (new,)}), jhash.encode(method, other, {"views": (new,)})
  )


def test_hbmp_with_hash_functions_resumes_to_the_same_state(blobs_run):
  method, counted, key, batch, state, history = blobs_run
  for stop in (5, 17):  # inside the pursuit, inside the training
    part, _ = jhash.fit(counted, key, batch, num_steps=stop, progress=False)
    resumed, rest = jhash.fit(counted, key, batch, state=part, start_step=stop, progress=False)
    for a, b in zip(jax.tree.leaves(resumed), jax.tree.leaves(state)):
      np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(rest["bit_error"], history["bit_error"][max(stop - 8, 0) :])


def test_hbmp_cnn_reads_images_at_instance_level(rng):
  images = rng.random((60, 10, 10)).astype(np.float32)
  labels = (images[:, :5].mean((1, 2)) > images[:, 5:].mean((1, 2))).astype(np.int32)
  method = jhash.methods.hbmp(
    4,
    level="instance",
    hash_function="cnn",
    hash_options={
      "num_epochs": 8,
      "batch_size": 20,
      "learning_rate": 1e-2,
      "channels": [4],
      "dense": 8,
    },
  )
  batch = {"views": (images,), "labels": labels}
  state, history = jhash.fit(method, jax.random.key(0), batch, progress=False)
  assert history["bit_error"].shape == (8 * 3,)
  # The CNN learns the target codes of the training images from their pixels.
  assert history["bit_error"][-3:].mean() < history["bit_error"][:3].mean() - 0.1, history[
    "bit_error"
  ]
  codes = np.asarray(jhash.encode(method, state, {"views": (images,)}))
  assert np.mean(codes == np.asarray(state.target_codes)) > 0.75
  new = rng.random((7, 10, 10)).astype(np.float32)
  codes = jhash.encode(method, state, {"views": (new,)})  # new data: not the training set
  assert codes.shape == (7, 4) and codes.dtype == jnp.int8


def test_bad_hash_function_arguments_name_themselves(rng):
  with pytest.raises(ValueError, match="hash_function must be one of 'linear'"):
    jhash.methods.hbmp(8, hash_function="svm")
  with pytest.raises(ValueError, match="hash_function must be one of"):
    jhash.methods.hbmp(16, hash_function="mpl")  # the error names the argument given
  with pytest.raises(ValueError, match="hash_options.*unexpected keyword argument 'widths'"):
    jhash.methods.hbmp(8, hash_options={"widths": (4,)})
  with pytest.raises(ValueError, match="hash_options need a hash_function"):
    jhash.methods.hbmp(8, hash_function=None, hash_options={"num_epochs": 3})
  with pytest.raises(ValueError, match="num_bits=8"):
    jhash.methods.hbmp(8, hash_function=hb.hash_functions("linear", 6))
  with pytest.raises(ValueError, match="learning_rate"):
    hb.hash_functions("linear", 6, learning_rate=-1.0)
  with pytest.raises(ValueError, match="image view"):
    method = jhash.methods.hbmp(2, num_items=2, hash_function="cnn")
    jhash.init(
      method,
      jax.random.key(0),
      {
        "views": (rng.normal(size=(10, 5)).astype(np.float32),),
        "labels": np.arange(10, dtype=np.int32) % 2,
      },
    )
  method = hb.fit_to_targets(hb.hash_functions("linear", 3))
  with pytest.raises(ValueError, match="targets'\\] must hold one code per training instance"):
    jhash.fit(
      method,
      jax.random.key(0),
      {"views": (np.zeros((5, 2), np.float32),), "targets": np.ones((4, 3), np.int8)},
      progress=False,
    )
  with pytest.raises(ValueError, match="targets"):
    jhash.fit(method, jax.random.key(0), {"views": (np.zeros((5, 2), np.float32),)}, progress=False)
