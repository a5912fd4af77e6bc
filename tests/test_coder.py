"""jhash.coder: one network coder for every deep method, pretrained weights in one place,
and a training path that notices when it goes wrong."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import traverse_util

import jhash
from jhash import coder as coder_lib
from jhash import models


def _features(rng, n=64, d=6):
  x = rng.normal(size=(n, d)).astype(np.float32)
  return {"views": (x,), "labels": ((x[:, 0] > 0) + 2 * (x[:, 1] > 0)).astype(np.int32)}


def _flat(tree):
  return {"/".join(k): np.asarray(v) for k, v in traverse_util.flatten_dict(tree).items()}


def _variables(state):
  return jhash.training.variables(state.coder.train)


# ----------------------------------------------------------------------------- weights


def _narrow_resnet():
  """ResNet-18 (ImageNet stem, torchvision's layout) 16 times narrower, on 32 x 32 RGB."""
  return models.model(models.resnet18(8, "imagenet").clone(width=4), (32, 32, 3))


def _torchvision_file(variables, path):
  """Flax ResNet variables written as a torchvision state dict (written independently of
  the loader: names by rule, convolutions HWIO -> OIHW, fc and counters added)."""
  save_file = pytest.importorskip("safetensors.numpy").save_file
  state = {}
  for key, value in traverse_util.flatten_dict(variables).items():
    if key[1] == "projection":
      continue
    layers = [
      {"downsample_conv": "downsample.0", "downsample_bn": "downsample.1"}.get(l, l).replace(
        "_", "."
      )
      for l in key[1:-1]
    ]
    leaf = {
      "kernel": "weight",
      "scale": "weight",
      "bias": "bias",
      "mean": "running_mean",
      "var": "running_var",
    }[key[-1]]
    value = np.asarray(value, np.float32)
    state[".".join(layers + [leaf])] = np.ascontiguousarray(
      value.transpose(3, 2, 0, 1) if key[-1] == "kernel" else value
    )
  state["fc.weight"] = np.ones((1000, 32), np.float32)
  state["bn1.num_batches_tracked"] = np.array(7, np.int64)
  save_file(state, str(path))


def _pretrained_like(key, shape, rng):
  """Random weights unlike an initialisation that keep activations bounded (as trained
  weights do): He-normal kernels, BatchNorm scales, shifts and moments near 1 and 0."""
  leaf = key[-1]
  if leaf == "kernel":
    return (rng.normal(size=shape) * np.sqrt(2.0 / np.prod(shape[:-1]))).astype(np.float32)
  if leaf in ("scale", "var"):
    return rng.uniform(0.5, 1.5, shape).astype(np.float32)
  return rng.normal(size=shape).astype(np.float32) * 0.1  # bias, mean


@pytest.fixture(scope="module")
def resnet_weights(tmp_path_factory):
  """A narrow ResNet-18, random weights saved in torchvision's layout, and images."""
  net = _narrow_resnet()
  rng = np.random.default_rng(1)
  shapes = jax.eval_shape(net.init, jax.random.key(0), jnp.zeros((1, 32, 32, 3)))
  weights = traverse_util.unflatten_dict(
    {k: _pretrained_like(k, s.shape, rng) for k, s in traverse_util.flatten_dict(shapes).items()}
  )
  path = tmp_path_factory.mktemp("weights") / "resnet18.safetensors"
  _torchvision_file(weights, path)
  images = rng.integers(0, 256, (48, 32, 32, 3)).astype(np.uint8)
  batch = {"views": (images,), "labels": rng.integers(0, 3, 48).astype(np.int32)}
  return net, weights, path, batch


def test_a_method_starts_from_weights_in_torchvisions_layout(resnet_weights):
  net, weights, path, batch = resnet_weights
  method = jhash.methods.dch(8, backbone=net, init_variables=path, batch_size=16)
  state = jhash.init(method, jax.random.key(0), batch)
  got, want = _flat(_variables(state)), _flat(weights)
  assert sorted(got) == sorted(want)
  for name, value in got.items():
    if "projection" not in name:  # the backbone is the file's
      np.testing.assert_array_equal(value, want[name], err_msg=name)
  fresh = _flat(
    _variables(
      jhash.init(jhash.methods.dch(8, backbone=net, batch_size=16), jax.random.key(0), batch)
    )
  )
  np.testing.assert_array_equal(
    got["params/projection/kernel"],  # the head is fresh
    fresh["params/projection/kernel"],
  )
  assert not np.array_equal(got["params/conv1/kernel"], fresh["params/conv1/kernel"])


def test_head_only_training_leaves_the_backbone_as_it_came(resnet_weights):
  net, weights, path, batch = resnet_weights
  key = jax.random.key(0)
  runs = {}
  for trainable in ("head", "all"):
    method = jhash.methods.dch(
      8,
      backbone=net,
      init_variables=path,
      trainable=trainable,
      batch_size=16,
      num_epochs=1,
      learning_rate=1e-2,
    )
    start = _flat(_variables(jhash.init(method, key, batch)))
    state, _ = jhash.fit(method, key, batch, progress=False)
    runs[trainable] = (start, _flat(_variables(state)))
  start, end = runs["head"]
  for name in start:
    if "projection" in name:
      assert not np.array_equal(start[name], end[name]), name
    else:  # parameters and running statistics
      np.testing.assert_array_equal(start[name], end[name], err_msg=name)
  start, end = runs["all"]
  assert not np.array_equal(start["params/conv1/kernel"], end["params/conv1/kernel"])
  assert not np.array_equal(start["batch_stats/bn1/mean"], end["batch_stats/bn1/mean"])


def test_a_trained_state_or_a_variables_tree_starts_a_method(rng):
  batch = _features(rng)
  net = models.backbone((6,), 8, hidden=(16,))
  key = jax.random.key(0)
  trained, _ = jhash.fit(
    jhash.methods.dch(8, backbone=net, batch_size=16, num_epochs=2), key, batch, progress=False
  )
  # From the state: its variables and its input statistics, so the same codes.
  method = jhash.methods.hashnet(8, backbone=net, init_variables=trained)
  state = jhash.init(method, jax.random.key(5), batch)
  for name, value in _flat(_variables(trained)).items():
    np.testing.assert_array_equal(_flat(_variables(state))[name], value, err_msg=name)
  np.testing.assert_array_equal(state.coder.mean, trained.coder.mean)
  np.testing.assert_array_equal(
    jhash.encode(method, state, batch),
    jhash.encode(jhash.methods.dch(8, backbone=net), trained, batch),
  )
  # From a variables tree without the head: the hash head is the method's own.
  tree = jhash.training.variables(trained.coder.train)
  tree = {"params": {k: v for k, v in tree["params"].items() if k != "projection"}}
  state = jhash.init(jhash.methods.dch(8, backbone=net, init_variables=tree), key, batch)
  assert not np.array_equal(
    _flat(_variables(state))["params/projection/kernel"],
    _flat(_variables(trained))["params/projection/kernel"],
  )
  np.testing.assert_array_equal(
    _flat(_variables(state))["params/hidden_0/kernel"],
    _flat(_variables(trained))["params/hidden_0/kernel"],
  )


@pytest.mark.parametrize("name", ["dch", "adsh", "classifier"])
def test_standardize_false_reads_the_inputs_as_they_come(name, rng):
  batch = _features(rng)
  batch["views"] = (batch["views"][0] * 5 + 3,)  # mean 3, scale 1/5: far from 0 and 1
  net = models.backbone((6,), 4 if name == "classifier" else 8, hidden=(16,))
  factory = getattr(jhash.methods, name)
  make = lambda **o: factory(4 if name == "classifier" else 8, backbone=net, **o)
  key = jax.random.key(0)
  coder_of = lambda state: next(f for f in state if isinstance(f, coder_lib.CoderState))
  as_given = coder_of(jhash.init(make(standardize=False), key, batch))
  np.testing.assert_array_equal(as_given.mean, np.zeros(6))
  np.testing.assert_array_equal(as_given.scale, np.ones(6))
  by_data = coder_of(jhash.init(make(), key, batch))
  np.testing.assert_allclose(by_data.mean, batch["views"][0].mean(0), rtol=1e-5)
  with pytest.raises(ValueError, match=r"standardize must be True or False"):
    make(standardize="no")
  # A state given to start from brings the statistics its network was trained with:
  # they win over standardize=False (features [d] too: was refused as "other inputs").
  if name == "dch":
    trained, _ = jhash.fit(make(batch_size=16, num_epochs=1), key, batch, progress=False)
    again = coder_of(jhash.init(make(standardize=False, init_variables=trained), key, batch))
    np.testing.assert_array_equal(again.mean, trained.coder.mean)
    np.testing.assert_array_equal(again.scale, trained.coder.scale)


def test_weights_that_do_not_fit_name_the_first_layer_that_differs(rng, resnet_weights):
  batch = _features(rng)
  net = models.backbone((6,), 8, hidden=(16,))
  good = net.init(jax.random.key(0), jnp.zeros((1, 6)))
  wrong = jax.tree.map(lambda v: v, good)
  wrong["params"]["hidden_0"] = {"kernel": jnp.zeros((6, 12)), "bias": jnp.zeros(12)}
  with pytest.raises(
    ValueError,
    match=r"'params/hidden_0/\w+' has shape \((6, )?12\); the "
    r"network's is \((6, )?16\) \(the first layer",
  ):
    jhash.init(jhash.methods.dch(8, backbone=net, init_variables=wrong), jax.random.key(0), batch)
  missing = {"params": {"projection": good["params"]["projection"]}}
  with pytest.raises(ValueError, match=r"has no 'params/hidden_0/\w+', which the network has"):
    jhash.init(jhash.methods.dch(8, backbone=net, init_variables=missing), jax.random.key(0), batch)
  extra = {"params": {**good["params"], "spare": {"kernel": jnp.zeros(3)}}}
  with pytest.raises(ValueError, match="has 'params/spare/kernel', which the network does not"):
    jhash.init(jhash.methods.dch(8, backbone=net, init_variables=extra), jax.random.key(0), batch)
  _, _, path, _ = resnet_weights
  with pytest.raises(ValueError, match="torchvision weights file fits a ResNet"):
    jhash.init(jhash.methods.dch(8, backbone=net, init_variables=path), jax.random.key(0), batch)
  with pytest.raises(ValueError, match="trainable must be one of"):
    jhash.methods.dch(8, trainable="backbone")


def test_the_network_head_must_have_num_bits_outputs(rng):
  with pytest.raises(ValueError, match="hash head of num_bits = 8 outputs; its head has 4"):
    jhash.fit(
      jhash.methods.dch(8, backbone=models.backbone((6,), 4)),
      jax.random.key(0),
      _features(rng),
      progress=False,
    )


def test_coder_functions_agree_with_the_network_by_hand(rng):
  # scores = head of the standardised inputs, chunked or not; encode = their sign.
  batch = _features(rng, n=23)
  net = models.backbone((6,), 5, hidden=())
  coder = coder_lib.coder(5, network=net, encode_chunk=4)
  state = coder.init(jax.random.key(0), batch)
  x = batch["views"][0]
  p = state.train.params["projection"]
  want = (x - x.mean(0)) / x.std(0) @ np.asarray(p["kernel"]) + np.asarray(p["bias"])
  np.testing.assert_allclose(coder.scores(state, batch), want, rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(coder.encode(state, batch), np.where(want >= 0, 1, -1))
  # Features: the hidden layer the head reads, chunked as the scores.
  deep = coder_lib.coder(5, network=models.backbone((6,), 5, hidden=(7,)), encode_chunk=4)
  state = deep.init(jax.random.key(1), batch)
  hidden = state.train.params["hidden_0"]
  z = (x - x.mean(0)) / x.std(0) @ np.asarray(hidden["kernel"]) + np.asarray(hidden["bias"])
  got = deep.features(state, batch)
  assert got.shape == (23, 7)
  np.testing.assert_allclose(got, np.maximum(z, 0), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- noticing


@pytest.mark.parametrize("name", ["hashnet", "dch"])
def test_a_loss_that_becomes_nan_stops_fit_with_its_step(name, rng):
  # A first step of 1e38 takes the parameters to float32's edge, so the next logits
  # overflow on every CPU (1e30 stayed finite on some: their loss saturated instead).
  method = jhash.methods.REGISTRY[name](8, batch_size=32, num_epochs=2, learning_rate=1e38)
  with pytest.raises(
    FloatingPointError,
    match=r"loss is (nan|inf) at step 1 \(phase '" + name + r"'\); its last finite value was \d",
  ):
    jhash.fit(method, jax.random.key(0), _features(rng, n=128), progress=False)


def test_a_nan_metric_of_a_full_batch_method_stops_fit_too(rng):
  x = rng.normal(size=(40, 6)).astype(np.float32)
  method = jhash.methods.itq(4, num_iters=3)
  nan_update = lambda s, b, k: (s, {"quantization_loss": jnp.float32(jnp.nan)})
  with pytest.raises(FloatingPointError, match="it was never finite"):
    jhash.fit(
      method._replace(phases=(method.phases[0]._replace(update=nan_update),)),
      jax.random.key(0),
      {"views": (x,)},
      progress=False,
    )


def test_encode_refuses_pixels_of_another_dtype_than_training(rng):
  images = rng.integers(0, 256, (64, 28, 28)).astype(np.uint8)
  batch = {"views": (images,), "labels": rng.integers(0, 2, 64).astype(np.int32)}
  small = models.backbone((28, 28), 8, channels=(4,), dense=16)
  method = jhash.methods.dch(8, backbone=small, batch_size=32, num_epochs=1)
  state, _ = jhash.fit(method, jax.random.key(0), batch, progress=False)
  assert jhash.encode(method, state, batch).shape == (64, 8)
  with pytest.raises(
    ValueError,
    match=r"views\[0\] must have the dtype dch was trained on "
    r"\(uint8\); got float32",
  ):
    jhash.encode(method, state, {"views": (images.astype(np.float32) / 255,)})
  with pytest.raises(ValueError, match=r"\(uint8\); got int32"):
    jhash.encode_multi(method, state, {"views": (images.astype(np.int32),)})
  floats = {"views": (images.astype(np.float32),), "labels": batch["labels"]}
  state, _ = jhash.fit(method, jax.random.key(0), floats, progress=False)
  jhash.encode(method, state, {"views": (images.astype(np.float64),)})  # floats are floats


def test_encode_refuses_a_state_of_another_method_or_length(rng):
  x = rng.normal(size=(80, 40)).astype(np.float32)
  batch = {"views": (x,), "labels": (x[:, 0] > 0).astype(np.int32)}
  key = jax.random.key(0)
  itq16, _ = jhash.fit(jhash.methods.itq(16), key, batch, progress=False)
  with pytest.raises(
    ValueError,
    match=r"trained by itq \(16 bits\); the method given is itq "
    r"\(32 bits\)",
  ):
    jhash.encode(jhash.methods.itq(32), itq16, batch)
  with pytest.raises(ValueError, match=r"trained by itq \(16 bits\); the method given is cdh"):
    jhash.encode(jhash.methods.cdh(16), itq16, batch)
  cdh16, _ = jhash.fit(jhash.methods.cdh(16, num_sweeps=1), key, batch, progress=False)
  with pytest.raises(ValueError, match=r"trained by cdh \(16 bits\); the method given is itq"):
    jhash.encode(jhash.methods.itq(16), cdh16, batch)
  dch8, _ = jhash.fit(jhash.methods.dch(8, batch_size=40, num_epochs=1), key, batch, progress=False)
  with pytest.raises(
    ValueError,
    match=r"trained by dch \(8 bits\); the method given is dch "
    r"\(16 bits\)",
  ):
    jhash.encode(jhash.methods.dch(16), dch8, batch)
  with pytest.raises(ValueError, match=r"trained by dch \(8 bits\); the method given is mch-dch"):
    jhash.encode_multi(jhash.methods.mch(jhash.methods.dch(8)), dch8, batch)


@pytest.mark.parametrize("name", ["dch", "hashnet", "adsh"])
def test_items_with_no_label_are_refused(name, rng):
  x = rng.normal(size=(20, 4)).astype(np.float32)
  labels = np.eye(3, dtype=bool)[np.arange(20) % 3] | (rng.random((20, 3)) < 0.3)
  labels[[3, 7]] = False
  with pytest.raises(ValueError, match=r"2 of 20 multi-hot rows are all False \(items \[3, 7\]"):
    jhash.fit(
      jhash.methods.REGISTRY[name](4),
      jax.random.key(0),
      {"views": (x,), "labels": labels},
      progress=False,
    )


def test_training_inputs_that_cannot_train_are_refused(rng):
  x = rng.normal(size=(20, 4)).astype(np.float32)
  y = np.arange(20, dtype=np.int32) % 2
  with pytest.raises(ValueError, match="dch needs training items; the views have 0 rows"):
    jhash.fit(
      jhash.methods.dch(4), jax.random.key(0), {"views": (x[:0],), "labels": y[:0]}, progress=False
    )
  with pytest.raises(ValueError, match=r"views\[0\] must be an array .* got list"):
    jhash.fit(
      jhash.methods.dch(4), jax.random.key(0), {"views": (x.tolist(),), "labels": y}, progress=False
    )
  method = jhash.methods.dch(4, batch_size=10)
  stream = [
    {"views": (x[:10],), "labels": y[:10], "index": np.arange(10)},
    {"views": (x[10:, :3],), "labels": y[10:], "index": np.arange(10, 20)},
  ]
  with pytest.raises(ValueError, match=r"minibatch of step 1: its views .* differ from the first"):
    jhash.fit(method, jax.random.key(0), stream, 2, progress=False)
