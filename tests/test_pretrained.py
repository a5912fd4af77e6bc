"""Pretrained backbones: the classifier, its weights file, and every deep base starting from it."""

import jax
import numpy as np
import pytest
from flax import traverse_util

import jhash
from jhash.methods import _classifier

BASES = ("ksh", "hashnet", "adsh", "dch", "mmhh")


def _flat(tree):
  return traverse_util.flatten_dict(jax.device_get(dict(tree)), sep="/")


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
  """A classifier of 3 classes on 16 x 16 images whose class is where a bright square sits."""
  rng = np.random.default_rng(0)
  labels = rng.integers(0, 3, 192).astype(np.int32)
  images = rng.uniform(0, 0.2, (192, 28, 28)).astype(np.float32)
  for i, c in enumerate(labels):
    images[i, 2 + 8 * c : 8 + 8 * c, 10:18] = 1.0
  batch = {"views": (images,), "labels": labels}
  method = jhash.methods.classifier(3, batch_size=32, num_epochs=4, learning_rate=3e-3)
  state, history = jhash.fit(method, jax.random.key(0), batch, progress=False)
  path = jhash.coder.save_weights(tmp_path_factory.mktemp("weights") / "backbone.npz", state)
  return method, state, history, batch, path


def test_the_classifier_learns_the_classes(pretrained):
  method, state, history, batch, _ = pretrained
  accuracy = np.mean(np.asarray(method.extras.predict(state, batch)) == batch["labels"])
  assert accuracy > 0.9, accuracy  # chance is 1/3
  assert history["loss"][-1] < history["loss"][0]


def test_classification_loss_is_the_cross_entropy_by_hand():
  logits = np.array([[2.0, 0.0, -1.0], [0.5, 0.5, 3.0]], np.float32)
  loss, accuracy = _classifier.classification_loss(logits, np.array([0, 1]))
  log_softmax = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
  np.testing.assert_allclose(loss, -(log_softmax[0, 0] + log_softmax[1, 1]) / 2, rtol=1e-6)
  assert accuracy == 0.5
  multi = np.array([[True, False, True], [False, False, True]])
  loss, accuracy = _classifier.classification_loss(logits, multi)
  p = 1 / (1 + np.exp(-logits))
  want = -(multi * np.log(p) + (~multi) * np.log(1 - p)).sum(axis=1).mean()
  np.testing.assert_allclose(loss, want, rtol=1e-5)
  np.testing.assert_allclose(accuracy, np.mean((logits > 0) == multi))


def test_the_weights_file_holds_the_variables_and_statistics(pretrained):
  _, state, _, _, path = pretrained
  variables, (mean, scale), integer = jhash.coder.load_weights(path)
  want = _flat(jhash.training.variables(state.coder.train))
  got = _flat(variables)
  assert sorted(got) == sorted(want)
  for key in want:
    np.testing.assert_array_equal(got[key], want[key])
  np.testing.assert_array_equal(mean, state.coder.mean)
  np.testing.assert_array_equal(scale, state.coder.scale)


@pytest.mark.parametrize("base", BASES)
def test_every_deep_base_starts_from_the_pretrained_backbone(pretrained, base):
  """The backbone's layers are the classifier's, the hash head fresh (the classifier's has 3
  outputs), the standardisation the classifier's: the first outputs differ from a fresh
  start's, and so would fail a method that ignored the weights."""
  _, state, _, batch, path = pretrained
  options = {"rounds": 1, "steps_per_round": 1} if base == "adsh" else {"num_epochs": 1}
  make = jhash.methods.REGISTRY[base]
  fresh = jhash.init(make(8, **options), jax.random.key(5), batch)
  started = jhash.init(make(8, init_variables=str(path), **options), jax.random.key(5), batch)
  pre = _flat(state.coder.train.params)
  got = _flat(started.coder.train.params)
  for key, value in got.items():
    if key.startswith(jhash.coder.HEAD):
      np.testing.assert_array_equal(value, _flat(fresh.coder.train.params)[key])
    else:
      np.testing.assert_array_equal(value, pre[key])
  np.testing.assert_array_equal(started.coder.mean, state.coder.mean)
  net = jhash.network(make(8, **options))
  x = net.coder.read(batch)[:16]
  assert not np.allclose(
    net.coder.outputs(started.coder, x).logits, net.coder.outputs(fresh.coder, x).logits
  )
  # The features the head reads are the classifier's own.
  np.testing.assert_allclose(
    net.coder.outputs(started.coder, x).features,
    jhash.network(pretrained[0]).coder.outputs(state.coder, x).features,
    rtol=1e-5,
    atol=1e-5,
  )


def test_mch_reads_the_pretrained_backbone_through_its_base(pretrained):
  _, state, _, batch, path = pretrained
  base = jhash.methods.dch(8, init_variables=str(path), num_epochs=1)
  mch = jhash.methods.mch(base, agent_epochs=1)
  start = jhash.init(mch, jax.random.key(0), batch)
  np.testing.assert_array_equal(
    start.base.coder.train.params["dense"]["kernel"], state.coder.train.params["dense"]["kernel"]
  )


def test_a_frozen_backbone_trains_only_the_hash_head(pretrained):
  """KSH as the paper runs it: a hash function over fixed pretrained features."""
  _, state, _, batch, path = pretrained
  ksh = jhash.methods.ksh(8, init_variables=str(path), trainable="head", num_epochs=1)
  trained, _ = jhash.fit(ksh, jax.random.key(0), batch, progress=False)
  got, pre = _flat(trained.coder.train.params), _flat(state.coder.train.params)
  for key, value in got.items():
    if not key.startswith(jhash.coder.HEAD):
      np.testing.assert_array_equal(value, pre[key])
  start = jhash.init(ksh, jax.random.key(0), batch)
  head = jhash.coder.HEAD + "/kernel"
  assert not np.array_equal(got[head], _flat(start.coder.train.params)[head])


def test_weights_files_that_are_not_a_backbone_are_named(pretrained, tmp_path):
  _, state, _, batch, path = pretrained
  with pytest.raises(ValueError, match="must name a .npz file"):
    jhash.coder.save_weights(tmp_path / "w.bin", state)
  with pytest.raises(ValueError, match="a state given as weights must hold a network"):
    jhash.coder.save_weights(tmp_path / "w.npz", {"a": 1})
  damaged = tmp_path / "damaged.npz"
  damaged.write_bytes(path.read_bytes()[:200])
  with pytest.raises(ValueError, match="damaged.npz' is not a readable .npz weights file"):
    jhash.methods.dch(8, init_variables=str(damaged)).init(jax.random.key(0), batch)
  foreign = tmp_path / "foreign.npz"
  np.savez(foreign, x=np.ones(3))
  with pytest.raises(ValueError, match="foreign.npz' is not a jhash weights file"):
    jhash.init(jhash.methods.dch(8, init_variables=str(foreign)), jax.random.key(0), batch)
  with pytest.raises(ValueError, match="no weights file"):
    jhash.init(
      jhash.methods.dch(8, init_variables=str(tmp_path / "none.npz")), jax.random.key(0), batch
    )
  other = {"views": (np.zeros((8, 12)),), "labels": np.zeros(8, np.int32)}  # an MLP's input
  with pytest.raises(ValueError, match="init_variables has no"):
    jhash.init(jhash.methods.dch(8, init_variables=str(path)), jax.random.key(0), other)
  with pytest.raises(ValueError, match="num_classes=3"):
    jhash.fit(
      jhash.methods.classifier(3), jax.random.key(0), {**batch, "labels": batch["labels"] + 1}
    )


def test_weights_record_their_inputs_kind_and_refuse_the_other(pretrained, tmp_path):
  method, state, _, batch, _ = pretrained
  path = jhash.coder.save_weights(tmp_path / "float.npz", state)
  assert jhash.coder.load_weights(path).integer_inputs is False  # trained on floats
  pixels = {**batch, "views": ((batch["views"][0] * 255).astype(np.uint8),)}
  with pytest.raises(ValueError, match="input statistics come from floating inputs"):
    jhash.init(jhash.methods.dch(8, init_variables=str(path)), jax.random.key(0), pixels)
  with pytest.raises(ValueError, match="input statistics come from floating inputs"):
    jhash.init(jhash.methods.dch(8, init_variables=state), jax.random.key(0), pixels)  # was: ran
  # A network state alone does not say what it read: no check, as before.
  no_record = jhash.coder.save_weights(tmp_path / "coder.npz", state.coder)
  assert jhash.coder.load_weights(no_record).integer_inputs is None
  jhash.init(jhash.methods.dch(8, init_variables=str(no_record)), jax.random.key(0), pixels)


def test_weights_files_of_other_kinds_or_places_are_named(pretrained, tmp_path):
  _, state, _, _, path = pretrained
  np.save(tmp_path / "x.npy", np.ones(3))
  with pytest.raises(ValueError, match="must name a .npz file"):
    jhash.coder.load_weights(tmp_path / "x.npy")  # was: TypeError, context manager
  for bad in (5, None):
    with pytest.raises(ValueError, match="must be a file name ending in .npz"):
      jhash.coder.load_weights(bad)  # was: TypeError expected str, bytes or os.PathLike
  (tmp_path / "a_file").write_text("")
  with pytest.raises(ValueError, match="path: could not write"):
    jhash.coder.save_weights(tmp_path / "a_file" / "w.npz", state)  # was: OSError, a temp name
  arrays = dict(np.load(path))
  arrays["input/scale"] = np.float32(0.0)
  np.savez(tmp_path / "zero.npz", **arrays)
  with pytest.raises(ValueError, match="zero.npz' is damaged"):
    jhash.coder.load_weights(tmp_path / "zero.npz")  # was: loaded, inputs divided by 0


def test_predict_checks_what_encode_checks(pretrained):
  method, state, _, batch, _ = pretrained
  x = batch["views"][0]
  with pytest.raises(ValueError, match="views must match what classifier was trained on"):
    method.extras.predict(state, {"views": (x[:, :16, :16],)})  # was: predictions
  with pytest.raises(ValueError, match="dtype classifier was trained on"):
    method.extras.predict(state, {"views": ((x * 255).astype(np.uint8),)})  # was: predictions
  with pytest.raises(ValueError, match="state must be a ClassifierState"):
    method.extras.predict(state.coder, batch)  # was: AttributeError 'coder'
  with pytest.raises(ValueError, match=r"labels: class ids must be >= 0; found -1"):
    jhash.fit(
      jhash.methods.classifier(3), jax.random.key(0), {**batch, "labels": batch["labels"] - 1}
    )
