"""AlexNet and VGG-16: torchvision's forward pass, the adaptive pool, their torchvision weights.

The full networks are large (VGG-16's fc6 alone is 411 MB), so the full VGG-16 runs once,
in the comparison with torchvision, and every other test uses a narrow net of the same
layout (the same layer names, so the same loader; its shapes are checked entry by entry).
Images are small: 63 px is AlexNet's smallest side, 32 px VGG-16's.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import traverse_util

import jhash
from jhash import models

NARROW = {  # the layouts of torchvision's alexnet and vgg16, 8 to 64 times narrower
  "alexnet": (models.AlexNet(8, channels=(4, 8, 8, 8, 8), hidden=16), (63, 63, 3)),
  "vgg16": (
    models.VGG(8, layers=tuple(8 if w != "M" else w for w in models.VGG16_LAYERS), hidden=16),
    (32, 32, 3),
  ),
}
# One network method of each kind: pairwise's presets (KSH, HashNet, DCH, MMHH) share
# pairwise's coder, which test_pretrained runs them all through; ADSH; the classifier.
METHODS = ("dch", "adsh", "classifier")


def _torch_layout(variables):
  """Flax variables as a torchvision state dict, written independently of the loader:
  ``features_3/kernel`` [kh, kw, I, O] -> ``features.3.weight`` [O, I, kh, kw], Dense
  kernels [in, out] -> Linear weights [out, in]; the hash head left out."""
  state = {}
  for (_, layer, leaf), v in traverse_util.flatten_dict(variables).items():
    if layer != "projection":
      v = np.transpose(v, (3, 2, 0, 1)) if np.ndim(v) == 4 else np.transpose(v)
      state[_torch_name(layer, leaf)] = np.ascontiguousarray(v, np.float32)
  return state


def _torch_name(layer, leaf):
  return f"{layer.replace('_', '.')}.{'weight' if leaf == 'kernel' else 'bias'}"


def _shapes(net, shape, key=jax.random.key(0)):
  return jax.eval_shape(net.init, key, jax.ShapeDtypeStruct((1, *shape), jnp.float32))


def _zeros(net, shape):
  return jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), _shapes(net, shape))


def _narrow(arch, num_bits=None):
  module, shape = NARROW[arch]
  if num_bits is not None:
    module = module.clone(num_bits=num_bits)
  return models.model(module, shape), shape


def _random_state(arch, seed=0):
  """A narrow net's torchvision state dict of random N(0, 0.3) values, with an fc8."""
  net, shape = _narrow(arch)
  rng = np.random.default_rng(seed)
  state = {
    k: (0.3 * rng.normal(size=v.shape)).astype(np.float32)
    for k, v in _torch_layout(_zeros(net, shape)).items()
  }
  return state | {"classifier.6.weight": np.ones((1000, 16), np.float32)}


def _save(state, path):
  pytest.importorskip("safetensors.numpy").save_file(state, str(path))
  return path


# ----------------------------------------------------------------------- adaptive pooling


def _np_adaptive_pool(x, out_h, out_w):
  """torch's AdaptiveAvgPool2d, for clarity: bin i spans floor(i L / out) .. ceil((i + 1) L / out)."""
  n, h, w, c = x.shape
  out = np.zeros((n, out_h, out_w, c))
  for i in range(out_h):
    for j in range(out_w):
      r0, r1 = math.floor(i * h / out_h), math.ceil((i + 1) * h / out_h)
      c0, c1 = math.floor(j * w / out_w), math.ceil((j + 1) * w / out_w)
      out[:, i, j] = x[:, r0:r1, c0:c1].astype(np.float64).mean(axis=(1, 2))
  return out


@pytest.mark.parametrize(
  "h, w, out", [(13, 5, (6, 6)), (7, 11, (3, 4)), (1, 9, (7, 7)), (15, 15, (7, 7)), (6, 6, (6, 6))]
)
def test_adaptive_avg_pool_matches_numpy_on_odd_sizes(h, w, out, rng):
  x = rng.normal(size=(2, h, w, 3)).astype(np.float32)
  got = models.adaptive_avg_pool(x, out)
  assert got.shape == (2, *out, 3)
  np.testing.assert_allclose(got, _np_adaptive_pool(x, *out), rtol=1e-6, atol=1e-6)


def test_adaptive_avg_pool_matches_torch(rng):
  torch = pytest.importorskip("torch")
  x = rng.normal(size=(2, 10, 13, 4)).astype(np.float32)
  for out in ((6, 6), (7, 7), (4, 9)):
    want = torch.nn.AdaptiveAvgPool2d(out)(torch.from_numpy(x.transpose(0, 3, 1, 2).copy()))
    got = models.adaptive_avg_pool(x, out)
    np.testing.assert_allclose(got, want.numpy().transpose(0, 2, 3, 1), rtol=1e-6, atol=1e-6)


# -------------------------------------------------------------------- torchvision's forward


@pytest.mark.parametrize("arch, shape", [("alexnet", (64, 160, 3)), ("vgg16", (32, 80, 3))])
def test_the_full_networks_give_torchvision_features(arch, shape, tmp_path, rng, monkeypatch):
  """torchvision's own network with its random initial weights, fc8 removed: the 4,096
  features (fc7 after its ReLU) agree to float32 rounding. The sides make the adaptive pool
  repeat and overlap bins (AlexNet 1 x 4 -> 6 x 6, VGG 1 x 2 -> 7 x 7). AlexNet's weights
  go through a .pth file; VGG's 528 MB are handed to the loader in memory."""
  torch = pytest.importorskip("torch")
  torchvision = pytest.importorskip("torchvision")
  from jhash.models import _torchvision

  torch.manual_seed(0)
  net = getattr(torchvision.models, arch)(weights=None).eval()
  state = net.state_dict()  # with fc8, which the loader skips
  net.classifier[6] = torch.nn.Identity()
  x = rng.normal(size=(2, *shape)).astype(np.float32)
  with torch.no_grad():
    want = net(torch.from_numpy(x.transpose(0, 3, 1, 2).copy())).numpy()
  if arch == "alexnet":
    torch.save(state, tmp_path / "w.pth")
    path = tmp_path / "w.pth"
  else:
    state = {k: v.numpy() for k, v in state.items()}  # torch's memory, not a copy
    monkeypatch.setattr(_torchvision, "_read_state_dict", lambda path: state)
    path = "vgg16.safetensors"
  flax_net = models.backbone(shape, 8, arch=arch)
  variables = models.load_torchvision(path, _zeros(flax_net, shape), arch)
  out, _ = flax_net.apply(variables, x, train=False)
  assert out.features.shape == (2, 4096) and out.logits.shape == (2, 8)
  assert np.linalg.norm(out.features - want) <= 1e-5 * np.linalg.norm(want)
  np.testing.assert_allclose(out.features, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


# ------------------------------------------------------------------ layout, names, shapes

_FACTS = {  # torchvision's entries without fc8, and a few of their shapes
  "alexnet": (
    14,
    {
      "features.0.weight": (64, 3, 11, 11),
      "features.10.weight": (256, 256, 3, 3),
      "classifier.1.weight": (4096, 9216),
      "classifier.4.bias": (4096,),
    },
  ),
  "vgg16": (
    30,
    {
      "features.0.weight": (64, 3, 3, 3),
      "features.28.weight": (512, 512, 3, 3),
      "classifier.0.weight": (4096, 25088),
      "classifier.3.weight": (4096, 4096),
    },
  ),
}


@pytest.mark.parametrize("arch", ["alexnet", "vgg16"])
def test_torchvision_names_and_shapes_of_the_full_nets(arch):
  net = models.backbone((224, 224, 3), 5, arch=arch)
  state = {  # names and shapes only: VGG-16's 528 MB are not allocated
    _torch_name(layer, leaf): (s.shape[3], s.shape[2], *s.shape[:2])
    if s.ndim == 4
    else s.shape[::-1]
    for (_, layer, leaf), s in traverse_util.flatten_dict(_shapes(net, (224, 224, 3))).items()
    if layer != "projection"
  }
  count, shapes = _FACTS[arch]
  assert len(state) == count and {k: state[k] for k in shapes} == shapes
  assert jhash._coder_weights._torchvision_arch(net) == arch


def test_each_weight_lands_where_torchvision_means_it(tmp_path):
  """Each value tells its place: a conv weight [O, I, kh, kw] holds 1000 o + 100 i + 10 h +
  w, a Linear weight [out, in] 1000 o + i, a bias its index; they must land at kernel
  [h, w, i, o], kernel [i, o] and bias [o]."""
  net, shape = _narrow("alexnet")
  state = {}
  for name, v in _torch_layout(_zeros(net, shape)).items():
    if v.ndim == 4:
      state[name] = np.fromfunction(lambda o, i, h, w: 1000 * o + 100 * i + 10 * h + w, v.shape)
    elif v.ndim == 2:
      state[name] = np.fromfunction(lambda o, i: 1000 * o + i, v.shape)
    else:
      state[name] = np.arange(v.shape[0], dtype=np.float32)
  state = {k: v.astype(np.float32) for k, v in state.items()}
  start = net.init(jax.random.key(0), np.zeros((1, *shape), np.float32))
  got = models.load_torchvision(_save(state, tmp_path / "w.safetensors"), start, "alexnet")
  for path, value in traverse_util.flatten_dict(got).items():
    if path[1] == "projection":
      np.testing.assert_array_equal(value, start["params"]["projection"][path[2]])
    elif value.ndim == 4:
      h, w, i, o = np.meshgrid(*map(np.arange, value.shape), indexing="ij")
      np.testing.assert_array_equal(value, 1000 * o + 100 * i + 10 * h + w, err_msg=str(path))
    elif value.ndim == 2:
      i, o = np.meshgrid(*map(np.arange, value.shape), indexing="ij")
      np.testing.assert_array_equal(value, 1000 * o + i, err_msg=str(path))
    else:
      np.testing.assert_array_equal(value, np.arange(value.shape[0]), err_msg=str(path))
    assert value.dtype == jnp.float32


# ------------------------------------------------------------- what the methods start from


@pytest.fixture(scope="module")
def alexnet_file(tmp_path_factory):
  state = _random_state("alexnet")
  return _save(state, tmp_path_factory.mktemp("tv") / "alexnet.safetensors"), state


def _images(shape, n=16, seed=0):
  rng = np.random.default_rng(seed)
  return {
    "views": (rng.uniform(0, 1, (n, *shape)).astype(np.float32),),
    "labels": (np.arange(n) % 3).astype(np.int32),
  }


@pytest.mark.parametrize("name", METHODS)
def test_network_methods_start_from_the_torchvision_file(alexnet_file, name):
  """The backbone is the file's, the hash head fresh (fc8 is not read): the features equal
  the network applied with the loaded variables, and differ from a fresh network's (a
  method that ignored the file would fail here)."""
  path, _ = alexnet_file
  module, shape = NARROW["alexnet"]
  batch = _images(shape)
  make = jhash.methods.classifier if name == "classifier" else jhash.methods.REGISTRY[name]
  bits = 3 if name == "classifier" else 8  # the classifier's head: one output a class
  net = models.model(module.clone(num_bits=bits), shape)
  options = {"rounds": 1, "steps_per_round": 1} if name == "adsh" else {"num_epochs": 1}
  method = make(bits, backbone=net, init_variables=str(path), **options)
  started = jhash.init(method, jax.random.key(5), batch)
  variables = jhash.training.variables(started.coder.train)
  loaded = models.load_torchvision(path, variables, "alexnet")  # the same head
  got = traverse_util.flatten_dict(variables)
  for key, value in traverse_util.flatten_dict(loaded).items():
    np.testing.assert_array_equal(got[key], value, err_msg=str(key))
  coder = jhash.network(method).coder
  x = coder.read(batch)
  features = coder.outputs(started.coder, x).features
  standardized = jhash.training.standardize(x, started.coder.mean, started.coder.scale)
  want, _ = net.apply(loaded, standardized)
  np.testing.assert_allclose(features, want.features, rtol=1e-5, atol=1e-6)
  fresh, _ = net.apply(net.init(jax.random.key(5), standardized), standardized)
  assert not np.allclose(features, fresh.features, atol=1e-3)


def test_hbmp_hash_functions_start_from_the_torchvision_file(alexnet_file):
  """HBMP's stage ii network (``hash_options``' ``model`` and ``init_variables``) is the
  file's backbone with a fresh hash layer, as the paper fine-tunes a pretrained network."""
  path, _ = alexnet_file
  module, shape = NARROW["alexnet"]
  batch = _images(shape)
  net = models.model(module.clone(num_bits=4), shape)  # 3 classes: at most 4 bits
  options = {"model": net, "init_variables": str(path), "num_epochs": 1}
  method = jhash.methods.hbmp(4, num_items=3, hash_function="cnn", hash_options=options)
  started = jhash.init(method, jax.random.key(5), batch).hashing
  variables = jhash.training.variables(started.train)
  loaded = models.load_torchvision(path, variables, "alexnet")
  got = traverse_util.flatten_dict(variables)
  for key, value in traverse_util.flatten_dict(loaded).items():
    np.testing.assert_array_equal(got[key], value, err_msg=str(key))
  fresh = jhash.init(
    jhash.methods.hbmp(4, num_items=3, hash_function="cnn", hash_options={"model": net}),
    jax.random.key(5),
    batch,
  ).hashing
  backbone = lambda state: traverse_util.flatten_dict(state.train.params)[("features_0", "kernel")]
  assert not np.allclose(backbone(started), backbone(fresh))


def test_coder_starts_vgg_from_the_torchvision_file(tmp_path):
  net, shape = _narrow("vgg16")
  path = _save(_random_state("vgg16"), tmp_path / "vgg16.SAFETENSORS")
  coder = jhash.coder.coder(8, network=net, init_variables=path)
  batch = _images(shape, n=4)
  state = coder.init(jax.random.key(0), batch)
  fresh = jhash.coder.coder(8, network=net).init(jax.random.key(0), batch)
  loaded = models.load_torchvision(path, jhash.training.variables(fresh.train), "vgg16")
  x = coder.read(batch)
  want, _ = net.apply(loaded, jhash.training.standardize(x, state.mean, state.scale))
  np.testing.assert_allclose(coder.outputs(state, x).features, want.features, rtol=1e-5, atol=1e-6)
  assert not np.allclose(coder.outputs(state, x).features, coder.outputs(fresh, x).features)


# --------------------------------------------------------------------------------- dropout


def test_dropout_only_in_training_and_from_the_key(rng):
  net, shape = _narrow("alexnet")
  x = rng.normal(size=(4, *shape)).astype(np.float32)
  variables = net.init(jax.random.key(0), x)
  apply = jax.jit(net.apply, static_argnames="train")
  evaluated = apply(variables, x)[0].features
  first, second = (apply(variables, x, True, jax.random.key(k))[0].features for k in (1, 2))
  again = apply(variables, x, True, jax.random.key(1))[0].features
  np.testing.assert_array_equal(first, again)
  assert not np.allclose(first, second) and not np.allclose(first, evaluated)
  np.testing.assert_array_equal(
    evaluated, apply(variables, x, False, jax.random.key(1))[0].features
  )
  # Without a key (a caller that gives none): masks from the minibatch, still dropped.
  keyless = apply(variables, x, True)[0].features
  np.testing.assert_array_equal(keyless, apply(variables, x, True)[0].features)
  assert not np.allclose(keyless, evaluated)
  assert not np.allclose(keyless, apply(variables, x[::-1].copy() + 1, True)[0].features)
  off = models.model(NARROW["alexnet"][0].clone(dropout=0.0), shape)
  np.testing.assert_array_equal(off.apply(variables, x, True)[0].features, evaluated)


def test_a_method_trains_a_network_with_dropout():
  net, shape = _narrow("alexnet")
  batch = _images(shape, n=8)
  method = jhash.methods.dch(8, backbone=net, num_epochs=2, batch_size=8)
  state, history = jhash.fit(method, jax.random.key(0), batch, progress=False)
  assert np.all(np.isfinite(history["loss"])) and len(history["loss"]) == 2
  assert jhash.encode(method, state, batch).shape == (8, 8)


@pytest.mark.parametrize("name", ["dch", "adsh", "classifier"])
def test_a_methods_step_key_draws_the_dropout_masks(name):
  """The same minibatch and state under two step keys: other masks, so another loss; the
  same key: the same loss (the method hands its key to the network)."""
  net, shape = _narrow("alexnet", num_bits=3 if name == "classifier" else 8)
  batch = {**_images(shape, n=8), "index": np.arange(8)}
  make = jhash.methods.classifier if name == "classifier" else jhash.methods.REGISTRY[name]
  method = make(3 if name == "classifier" else 8, backbone=net)
  state = jhash.init(method, jax.random.key(0), batch)
  update = jax.jit(method.phases[0].update)  # ADSH: its network phase
  loss = lambda k: float(update(state, batch, jax.random.key(k))[1]["loss"])
  assert loss(1) == loss(1) and loss(1) != loss(2)


# --------------------------------------------------------------------------------- backbone


def test_backbone_builds_the_named_network():
  assert type(models.backbone((224, 224, 3), 8, arch="alexnet").module) is models.AlexNet
  vgg = models.backbone((56, 56, 3), 8, arch="vgg16", dropout=0.25)  # not SmallCNN's 56 x 56
  assert vgg.module == models.VGG(8, dropout=0.25) and vgg.input_shape == (56, 56, 3)
  assert type(models.backbone((28, 28), 8, arch="resnet18").module) is models.ResNet
  assert models.alexnet(8) == models.AlexNet(8) and models.CLASSIC_ARCHS["vgg16"] is models.vgg16


def test_networks_refuse_images_too_small_and_bad_options():
  with pytest.raises(ValueError, match=r"input_shape: alexnet takes images of at least 63 x 63"):
    models.backbone((62, 200, 3), 8, arch="alexnet")
  with pytest.raises(ValueError, match=r"input_shape: vgg16 takes images of at least 32 x 32"):
    models.backbone((31, 31), 8, arch="vgg16")
  with pytest.raises(ValueError, match=r"x must be images \[n, H, W, C\] of at least 63 x 63"):
    models.model(models.AlexNet(4)).init(jax.random.key(0), np.zeros((1, 40, 40, 3)))
  with pytest.raises(
    ValueError, match="builds AlexNet .* its options are arch, dropout; got unknown"
  ):
    models.backbone((64, 64, 3), 8, arch="alexnet", stem="imagenet")
  with pytest.raises(ValueError, match=r"dropout must be a float in \[0, 1\); got 1"):
    models.backbone((64, 64, 3), 8, arch="vgg16", dropout=1)
  with pytest.raises(ValueError, match="'resnet50'; got 'vgg' .*'alexnet' or 'vgg16'"):
    models.backbone((64, 64, 3), 8, arch="vgg")
  with pytest.raises(ValueError, match=r"out must be \(out_h, out_w\)"):
    models.adaptive_avg_pool(np.zeros((1, 4, 4, 1)), 6)


# ------------------------------------------------------------------------------- bad files


def _resnet18_names():
  """torchvision's resnet18 entries (written out here, not taken from the loader)."""
  bn = ("weight", "bias", "running_mean", "running_var")
  names = ["conv1.weight", *(f"bn1.{leaf}" for leaf in bn), "fc.weight", "fc.bias"]
  for stage in range(1, 5):
    for block in range(2):
      prefix = f"layer{stage}.{block}"
      for k in (1, 2):
        names += [f"{prefix}.conv{k}.weight", *(f"{prefix}.bn{k}.{leaf}" for leaf in bn)]
      if block == 0 and stage > 1:
        names += [f"{prefix}.downsample.0.weight", *(f"{prefix}.downsample.1.{l}" for l in bn)]
  return names


def test_a_file_of_another_network_is_named_with_what_was_expected(alexnet_file, tmp_path):
  net, shape = _narrow("alexnet")
  variables = _zeros(net, shape)
  resnet = _save(
    {k: np.zeros(2, np.float32) for k in _resnet18_names()}, tmp_path / "r18.safetensors"
  )
  with pytest.raises(
    ValueError,
    match=r"r18.safetensors is not a torchvision alexnet state dict: missing keys "
    r"\[classifier.1.bias, .*\]; unexpected keys \[bn1.bias, .*\]. It holds torchvision's resnet18",
  ):
    models.load_torchvision(resnet, variables, "alexnet")
  batch = _images(shape, n=4)
  with pytest.raises(ValueError, match="r18.safetensors is not a torchvision alexnet state dict"):
    jhash.init(
      jhash.methods.dch(8, backbone=net, init_variables=str(resnet)), jax.random.key(0), batch
    )
  vgg, vgg_shape = _narrow("vgg16")
  with pytest.raises(
    ValueError,
    match="alexnet.safetensors is not a torchvision vgg16 .* It holds torchvision's alexnet",
  ):
    models.load_torchvision(alexnet_file[0], _zeros(vgg, vgg_shape), "vgg16")
  with pytest.raises(ValueError, match="variables are not those of a Flax vgg16"):
    models.load_torchvision(
      _save(_random_state("vgg16"), tmp_path / "v.safetensors"), variables, "vgg16"
    )
  mlp = {"views": (np.zeros((4, 12), np.float32),), "labels": np.zeros(4, np.int32)}
  with pytest.raises(ValueError, match="fits a ResNet, AlexNet or VGG-16 .*; this network is MLP"):
    jhash.init(jhash.methods.dch(8, init_variables=str(alexnet_file[0])), jax.random.key(0), mlp)


def test_damaged_files_and_shapes_are_named(alexnet_file, tmp_path):
  path, state = alexnet_file
  net, shape = _narrow("alexnet")
  variables = _zeros(net, shape)
  truncated = tmp_path / "cut.safetensors"
  truncated.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
  with pytest.raises(ValueError, match=r"cut.safetensors' is not a readable .safetensors file"):
    models.load_torchvision(truncated, variables, "alexnet")
  with pytest.raises(ValueError, match=r"cut.safetensors' is not a readable"):
    jhash.init(
      jhash.methods.dch(8, backbone=net, init_variables=str(truncated)),
      jax.random.key(0),
      _images(shape, n=4),
    )
  wide = _save(
    state | {"classifier.1.weight": np.ones((16, 99), np.float32)}, tmp_path / "wide.safetensors"
  )
  with pytest.raises(
    ValueError,
    match=r"classifier.1.weight in .*wide.safetensors has shape \(99, 16\) in Flax layout; "
    r"the model's variable has shape \(288, 16\)",
  ):
    models.load_torchvision(wide, variables, "alexnet")
  nan = _save(
    state | {"classifier.4.bias": np.full(16, np.nan, np.float32)}, tmp_path / "nan.safetensors"
  )
  with pytest.raises(ValueError, match=r"classifier.4.bias in .*nan.safetensors is damaged"):
    models.load_torchvision(nan, variables, "alexnet")
  gray = models.model(NARROW["alexnet"][0], (63, 63, 1))
  with pytest.raises(
    ValueError,
    match=r"features.0.weight .* \(the file's convolution reads 3-channel images, the network's 1\)",
  ):
    models.load_torchvision(path, _zeros(gray, (63, 63, 1)), "alexnet")
  with pytest.raises(
    ValueError, match="arch must be one of 'resnet18', 'resnet50', 'alexnet', 'vgg16'"
  ):
    models.load_torchvision(path, variables, "vgg19")
  with pytest.raises(ValueError, match="arch must be one of 'resnet18', 'resnet50'; got 'alexnet'"):
    models.load_torchvision_resnet(path, variables, "alexnet")
  with pytest.raises(TypeError, match="variables must be the AlexNet's variables"):
    models.load_torchvision(path, None, "alexnet")


def test_a_method_builds_the_network_it_names():
  batch = _images((64, 64, 3), n=4)
  for arch, first in (("alexnet", "classifier_1"), ("resnet18", "layer1_0")):  # VGG: 4 s more
    state = jhash.init(jhash.methods.dch(8, backbone=arch), jax.random.key(0), batch)
    assert first in state.coder.train.params
  with pytest.raises(ValueError, match=r"one of 'resnet18', 'resnet50', 'alexnet', 'vgg16'"):
    jhash.methods.dch(8, backbone="alexnt")
