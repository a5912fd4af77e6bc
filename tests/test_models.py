"""jhash.models: NumPy references, output shapes, batch statistics, backbone, torchvision weights.

Speed: on the CPU each random initialiser compiles for about a second, so the variables
come from ``jax.eval_shape(init)`` filled with NumPy random values (``_random_variables``;
``init`` itself runs for real once, on an MLP), and ``apply`` is jitted. ResNet-18 / -50
run only through ``eval_shape`` or with torchvision weights; the NumPy checks of the
ResNet code use narrow two-stage ResNets, and the loader's round trip ResNets of the
same names 16 times narrower.
"""

import functools
import sys

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import traverse_util

from jhash import models
from jhash.models import _resnet

# ----------------------------------------------------------------------------- references


def _np_conv(x, kernel, stride, pad):
  """Convolution by a loop over output pixels: x [n, H, W, C], kernel HWIO.

  pad: an int (that many rows and columns on every side) or ((top, bottom), (left, right)).
  """
  pads = ((pad, pad), (pad, pad)) if isinstance(pad, int) else pad
  xp = np.pad(x, ((0, 0), *pads, (0, 0)))
  kh, kw, _, out = kernel.shape
  out_h, out_w = (xp.shape[1] - kh) // stride + 1, (xp.shape[2] - kw) // stride + 1
  y = np.zeros((x.shape[0], out_h, out_w, out), np.float64)
  for r in range(out_h):
    for c in range(out_w):
      window = xp[:, r * stride : r * stride + kh, c * stride : c * stride + kw, :]
      y[:, r, c] = np.einsum("nijc,ijco->no", window, kernel)
  return y


def _np_max_pool(x):
  """3 x 3 max pooling of stride 2, one row / column of -inf on every side."""
  xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
  out_h, out_w = (xp.shape[1] - 3) // 2 + 1, (xp.shape[2] - 3) // 2 + 1
  return np.array(
    [
      [xp[:, 2 * r : 2 * r + 3, 2 * c : 2 * c + 3].max(axis=(1, 2)) for c in range(out_w)]
      for r in range(out_h)
    ]
  ).transpose(2, 0, 1, 3)


def _relu(x):
  return np.maximum(x, 0.0)


def _np_small_cnn(p, x):
  """SmallCNN / ConvScores with HWIO kernels; on even sides "same" pads one row after."""
  for name in ("conv_0", "conv_1"):
    x = _relu(_np_conv(x, p[name]["kernel"], 2, ((0, 1), (0, 1))) + p[name]["bias"])
  h = _relu(x.reshape(x.shape[0], -1) @ p["dense"]["kernel"] + p["dense"]["bias"])
  return h @ p["projection"]["kernel"] + p["projection"]["bias"], h


def _np_bn(x, p, s):
  return (x - s["mean"]) / np.sqrt(s["var"] + 1e-5) * p["scale"] + p["bias"]


def _np_conv_bn(x, p, s, conv, bn, stride, pad):
  return _np_bn(_np_conv(x, p[conv]["kernel"], stride, pad), p[bn], s[bn])


def _np_block(x, p, s, stride):
  """torchvision's BasicBlock (two convolutions) or Bottleneck (three) in eval mode."""
  if "conv3" in p:
    y = _relu(_np_conv_bn(x, p, s, "conv1", "bn1", 1, 0))
    y = _relu(_np_conv_bn(y, p, s, "conv2", "bn2", stride, 1))
    y = _np_conv_bn(y, p, s, "conv3", "bn3", 1, 0)
  else:
    y = _relu(_np_conv_bn(x, p, s, "conv1", "bn1", stride, 1))
    y = _np_conv_bn(y, p, s, "conv2", "bn2", 1, 1)
  if "downsample_conv" in p:
    x = _np_conv_bn(x, p, s, "downsample_conv", "downsample_bn", stride, 0)
  return _relu(y + x)


def _np_resnet(variables, x, stem):
  """torchvision's ResNet forward in eval mode (blocks named layer{stage}_{index})."""
  p, s = variables["params"], variables["batch_stats"]
  if stem == "cifar":
    x = _relu(_np_conv_bn(x, p, s, "conv1", "bn1", 1, 1))
  else:
    x = _np_max_pool(_relu(_np_conv_bn(x, p, s, "conv1", "bn1", 2, 3)))
  blocks = sorted(
    (int(k[5:].split("_")[0]), int(k.split("_")[1]), k) for k in p if k.startswith("layer")
  )
  for stage, index, name in blocks:
    x = _np_block(x, p[name], s[name], 2 if stage > 1 and index == 0 else 1)
  features = x.mean(axis=(1, 2))
  return features @ p["projection"]["kernel"] + p["projection"]["bias"], features


def _randomize(variables, rng):
  """Random values of the same shapes: kernels scaled by fan-in, BatchNorm variances > 0."""
  out = {}
  for path, leaf in traverse_util.flatten_dict(variables).items():
    value = rng.standard_normal(size=leaf.shape, dtype=np.float32)
    if path[-1] == "kernel":
      value *= np.sqrt(2.0 / np.prod(leaf.shape[:-1]))
    elif path[-1] in ("var", "scale"):
      value = rng.uniform(0.5, 1.5, size=leaf.shape)
    elif path[-1] in ("bias", "mean"):
      value *= 0.1
    out[path] = value.astype(np.float32, copy=False)
  return traverse_util.unflatten_dict(out)


def _random_variables(net, x, rng):
  """Variables of ``net`` for a batch like ``x``, random, without running ``init``."""
  return _randomize(jax.eval_shape(net.init, jax.random.key(0), x), rng)


def _jit_apply(net):
  return jax.jit(net.apply, static_argnames="train")


def _shapes(tree):
  return jax.tree.map(lambda a: tuple(a.shape), tree)


def _tiny_resnet(block, stem):
  return models.ResNet(3, (1, 1), block, stem, width=4)


# ----------------------------------------------------------------------------- small networks


# SmallCNN(7) on 28 x 28 x 1 has the parameters HBMP's ConvScores had (names and shapes),
# so HBMP's hash functions kept their layout when they moved onto it.
_SMALL_CNN_SHAPES = {
  "conv_0": {"bias": (16,), "kernel": (9, 16)},
  "conv_1": {"bias": (32,), "kernel": (144, 32)},
  "dense": {"bias": (128,), "kernel": (1568, 128)},
  "projection": {"bias": (7,), "kernel": (128, 7)},
}


def _hwio(params):
  """SmallCNN parameters with im2col kernels [9 C, O] as the HWIO kernels they flatten."""
  out = jax.tree.map(np.asarray, params)
  for name in ("conv_0", "conv_1"):
    kernel = out[name]["kernel"]
    out[name] = {**out[name], "kernel": kernel.reshape(3, 3, kernel.shape[0] // 9, -1)}
  return out


def test_small_cnn_matches_numpy_by_im2col_and_by_conv(rng):
  x = rng.normal(size=(2, 28, 28)).astype(np.float32)
  net = models.model(models.SmallCNN(7), (28, 28))
  variables = _random_variables(net, x, rng)
  assert _shapes(variables) == {"params": _SMALL_CNN_SHAPES}
  out, _ = _jit_apply(net)(variables, x)
  logits, features = _np_small_cnn(_hwio(variables["params"]), x[..., None])
  np.testing.assert_allclose(out.logits, logits, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(out.features, features, rtol=1e-4, atol=1e-4)
  conv = models.model(models.SmallCNN(7, im2col=False), (28, 28))
  conv_out, _ = _jit_apply(conv)({"params": _hwio(variables["params"])}, x)
  np.testing.assert_allclose(conv_out.logits, out.logits, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(conv_out.features, out.features, rtol=1e-5, atol=1e-5)


def test_small_cnn_gradients_by_im2col_match_the_convolutions(rng):
  # The im2col layers' custom derivative (patches' product) against XLA's convolution
  # gradients: the first layer's kernel gets its gradient through the second layer's input
  # tangent, the second layer's (16 -> 3 channels, strided_conv) through its kernel tangent.
  x = rng.normal(size=(2, 28, 28)).astype(np.float32)
  net = models.model(models.SmallCNN(3, channels=(4, 3), dense=5), (28, 28))
  conv = models.model(models.SmallCNN(3, channels=(4, 3), dense=5, im2col=False), (28, 28))
  params = _random_variables(net, x, rng)["params"]
  target = rng.normal(size=(2, 3)).astype(np.float32)

  def loss(net, params, x):
    return jnp.sum((net.apply({"params": params}, x)[0].logits - target) ** 2)

  grads = jax.jit(jax.grad(functools.partial(loss, net), argnums=(0, 1)))(params, x)
  conv_grads = jax.jit(jax.grad(functools.partial(loss, conv), argnums=(0, 1)))(_hwio(params), x)
  for name in ("conv_0", "conv_1", "dense"):
    scale = np.abs(conv_grads[0][name]["kernel"]).max()
    assert scale > 1e-3, name
    np.testing.assert_allclose(
      _hwio(grads[0])[name]["kernel"],
      conv_grads[0][name]["kernel"],
      rtol=1e-4,
      atol=1e-4 * scale,
      err_msg=name,
    )
  np.testing.assert_allclose(
    grads[1], conv_grads[1], rtol=1e-4, atol=1e-4 * np.abs(conv_grads[1]).max()
  )


def test_strided_patches_convolution_matches_numpy_on_odd_sides(rng):
  x = rng.normal(size=(2, 9, 11, 2)).astype(np.float32)
  kernel = rng.normal(size=(3, 3, 2, 5)).astype(np.float32)
  got = models.strided_patches(x) @ kernel.reshape(18, 5)
  # "same" on 9 -> 5 and 11 -> 6 at stride 2: two rows of padding, one on each side.
  np.testing.assert_allclose(got, _np_conv(x, kernel, 2, 1), rtol=1e-5, atol=1e-5)


def test_init_gives_arrays_and_the_same_key_the_same_variables(key):
  net = models.backbone((3,), 2, hidden=())  # one initialiser (each compiles for ~1 s)
  x = np.ones((4, 3), np.float32)
  variables = net.init(key, x)
  assert _shapes(variables) == {"params": {"projection": {"bias": (2,), "kernel": (3, 2)}}}
  assert all(isinstance(leaf, jax.Array) for leaf in jax.tree.leaves(variables))
  chex.assert_trees_all_equal(variables, net.init(key, x))


def test_mlp_matches_numpy(rng):
  x = rng.normal(size=(3, 10)).astype(np.float32)
  net = models.model(models.MLP(5, (8, 6)), (10,))
  variables = _random_variables(net, x, rng)
  out, same = net.apply(variables, x)
  assert same is variables  # eval mode returns the variables unchanged
  p = variables["params"]
  h = _relu(x @ p["hidden_0"]["kernel"] + p["hidden_0"]["bias"])
  h = _relu(h @ p["hidden_1"]["kernel"] + p["hidden_1"]["bias"])
  np.testing.assert_allclose(out.features, h, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(
    out.logits, h @ p["projection"]["kernel"] + p["projection"]["bias"], rtol=1e-5, atol=1e-6
  )


# ----------------------------------------------------------------------------- ResNet


@pytest.mark.parametrize(
  "block, stem, side", [(models.BasicBlock, "cifar", 8), (models.Bottleneck, "imagenet", 16)]
)
def test_resnet_matches_numpy_with_torchvision_padding(block, stem, side, rng):
  # Even sides: symmetric padding differs from "SAME" (which pads after) at every stride 2.
  net = models.model(_tiny_resnet(block, stem), (side, side, 3))
  x = rng.normal(size=(2, side, side, 3)).astype(np.float32)
  variables = _random_variables(net, x, rng)
  out, _ = _jit_apply(net)(variables, x)
  logits, features = _np_resnet(variables, x, stem)
  np.testing.assert_allclose(out.features, features, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(out.logits, logits, rtol=1e-4, atol=1e-5)


def test_resnet_convolutions_start_as_torchvision_kaiming_normal_fan_out(key):
  # torchvision: kaiming_normal_(mode="fan_out", nonlinearity="relu"), std sqrt(2 / (kh kw O)).
  kernel = np.asarray(_resnet._conv_init(key, (3, 3, 32, 64), jnp.float32))
  np.testing.assert_allclose(kernel.mean(), 0.0, atol=0.003)
  np.testing.assert_allclose(kernel.std(), np.sqrt(2.0 / (3 * 3 * 64)), rtol=0.03)


@pytest.mark.parametrize(
  "build, stem, side, num_features",
  [
    (models.resnet18, "cifar", 32, 512),
    (models.resnet18, "imagenet", 224, 512),
    (models.resnet50, "imagenet", 224, 2048),
  ],
)
def test_resnet18_and_50_output_shapes(build, stem, side, num_features, key):
  net = models.model(build(12, stem), (side, side, 3))
  x = jax.ShapeDtypeStruct((2, side, side, 3), jnp.float32)
  variables = jax.eval_shape(net.init, key, x)
  side_of_conv1 = 3 if stem == "cifar" else 7
  assert variables["params"]["conv1"]["kernel"].shape == (side_of_conv1, side_of_conv1, 3, 64)
  for train in (False, True):
    out, new = jax.eval_shape(lambda v, x: net.apply(v, x, train=train), variables, x)
    assert (out.logits.shape, out.logits.dtype) == ((2, 12), jnp.float32)
    assert (out.features.shape, out.features.dtype) == ((2, num_features), jnp.float32)
    assert _shapes(new) == _shapes(variables)


# ----------------------------------------------------------------------------- every network


_NETWORKS = [  # (module, one item's shape, features, has batch_stats)
  (models.MLP(6), (20,), 512, False),
  (models.MLP(6, ()), (20,), 20, False),
  (models.MLP(6, (16,), batch_norm=True), (20,), 16, True),
  (models.SmallCNN(6), (28, 28), 128, False),
  (models.SmallCNN(6, batch_norm=True, im2col=False), (56, 56, 3), 128, True),
  (_tiny_resnet(models.BasicBlock, "cifar"), (8, 8, 3), 8, True),
  (_tiny_resnet(models.Bottleneck, "imagenet"), (16, 16, 1), 32, True),
]


@pytest.mark.parametrize("module, shape, num_features, has_stats", _NETWORKS)
def test_outputs_and_batch_statistics(module, shape, num_features, has_stats, rng):
  net = models.model(module, shape)
  x = rng.normal(size=(4, *shape)).astype(np.float32) + 1.0
  variables = _random_variables(net, x, rng)
  assert sorted(variables) == (["batch_stats", "params"] if has_stats else ["params"])
  both_modes = jax.jit(lambda v, x: (net.apply(v, x, train=False), net.apply(v, x, train=True)))
  (out, same), (train_out, new) = both_modes(variables, x)
  assert isinstance(out, models.HashOutputs)
  chex.assert_trees_all_equal(same, variables)
  assert (out.logits.shape, out.logits.dtype) == ((4, module.num_bits), jnp.float32)
  assert (out.features.shape, out.features.dtype) == ((4, num_features), jnp.float32)
  assert _shapes(new) == _shapes(variables)
  chex.assert_trees_all_equal(new["params"], variables["params"])
  if has_stats:  # a layer before a BatchNorm has no bias (torch's convention): only BN, head
    biased = {
      path[-2] for path in traverse_util.flatten_dict(variables["params"]) if path[-1] == "bias"
    }
    assert all(name == "projection" or "bn" in name for name in biased), biased
    # The running averages move; the outputs use the batch's statistics.
    moved = jax.tree.map(
      lambda a, b: bool(np.any(np.asarray(a) != np.asarray(b))),
      new["batch_stats"],
      variables["batch_stats"],
    )
    assert all(jax.tree.leaves(moved)), moved
    assert not np.allclose(train_out.logits, out.logits)
  else:
    np.testing.assert_array_equal(train_out.logits, out.logits)


def test_running_mean_moves_a_tenth_of_the_way_as_torch(rng):
  x = rng.normal(size=(5, 4)).astype(np.float32) + 2.0
  net = models.model(models.MLP(3, (6,), batch_norm=True), (4,))
  variables = _random_variables(net, x, rng)
  variables["batch_stats"] = jax.tree.map(np.ones_like, variables["batch_stats"])
  _, new = _jit_apply(net)(variables, x, train=True)
  hidden = x @ np.asarray(variables["params"]["hidden_0"]["kernel"])
  np.testing.assert_allclose(
    new["batch_stats"]["bn_0"]["mean"], 0.9 + 0.1 * hidden.mean(axis=0), rtol=1e-5, atol=1e-6
  )
  np.testing.assert_allclose(
    new["batch_stats"]["bn_0"]["var"], 0.9 + 0.1 * hidden.var(axis=0), rtol=1e-5, atol=1e-6
  )


def test_jitted_apply_traces_once_per_mode(rng):
  net = models.backbone((10,), 4, batch_norm=True)
  x = rng.normal(size=(3, 10)).astype(np.float32)
  variables = _random_variables(net, x, rng)
  apply = jax.jit(chex.assert_max_traces(net.apply, n=2), static_argnames="train")
  for _ in range(2):
    for train in (False, True):
      out, _ = apply(variables, x, train=train)
  assert out.logits.shape == (3, 4)


# ----------------------------------------------------------------------------- backbone


@pytest.mark.parametrize(
  "shape, kind, stem, item",
  [
    ((20,), models.MLP, None, (20,)),
    ((28, 28), models.SmallCNN, None, (28, 28, 1)),
    ((28, 28, 1), models.SmallCNN, None, (28, 28, 1)),
    ((56, 56, 3), models.SmallCNN, None, (56, 56, 3)),
    ((8, 8), models.ResNet, "cifar", (8, 8, 1)),
    ((32, 32, 3), models.ResNet, "cifar", (32, 32, 3)),
    ((28, 56, 3), models.ResNet, "cifar", (28, 56, 3)),
    ((64, 64, 3), models.ResNet, "cifar", (64, 64, 3)),
    ((65, 64, 3), models.ResNet, "imagenet", (65, 64, 3)),
    ((224, 224, 3), models.ResNet, "imagenet", (224, 224, 3)),
  ],
)
def test_backbone_chooses_by_one_item(shape, kind, stem, item):
  net = models.backbone(shape, 16)
  assert type(net.module) is kind and net.module.num_bits == 16
  assert net.input_shape == item
  if kind is models.ResNet:
    assert (net.module.stem, tuple(net.module.stage_sizes)) == (stem, (2, 2, 2, 2))


def test_backbone_passes_options():
  assert models.backbone((20,), 8, hidden=[32], batch_norm=True).module == models.MLP(
    8, (32,), True
  )
  assert models.backbone((28, 28), 8, channels=[4], im2col=False).module == models.SmallCNN(
    8, (4,), im2col=False
  )
  net = models.backbone((32, 32, 3), 8, arch="resnet50", stem="imagenet").module
  assert (net.block_cls, net.stem) == (models.Bottleneck, "imagenet")


@pytest.mark.parametrize(
  "shape",
  [
    (),
    (2, 28, 28, 3),
    (5, 5),
    (7, 32),
    (28, 28, 2),
    (28, 28, 0),
    (0,),
    (-3,),
    (28.0, 28.0),
    (True,),
    "28x28",
    28,
    None,
  ],
)
def test_backbone_rejects_bad_shapes(shape):
  with pytest.raises(ValueError, match=r"input_shape must be \(d,\) .* got"):
    models.backbone(shape, 8)


@pytest.mark.parametrize("num_bits", [0, -1, 8.0, "8", True, None])
def test_backbone_rejects_bad_num_bits(num_bits):
  with pytest.raises(ValueError, match="num_bits must be"):
    models.backbone((20,), num_bits)


def test_backbone_and_resnet_reject_bad_options():
  with pytest.raises(
    ValueError,
    match=r"builds MLP for input_shape \(20,\); its options are "
    "hidden, batch_norm; got unknown option",
  ):
    models.backbone((20,), 8, channels=(4,))
  with pytest.raises(ValueError, match="arch must be one of 'resnet18', 'resnet50'; got 'vgg'"):
    models.backbone((32, 32, 3), 8, arch="vgg")
  with pytest.raises(ValueError, match="stem must be one of 'cifar', 'imagenet'; got 'tiny'"):
    models.backbone((32, 32, 3), 8, stem="tiny")
  with pytest.raises(ValueError, match="num_bits must be"):
    models.resnet50(0)


# ----------------------------------------------------------------------------- input checks


def test_models_reject_batches_of_the_wrong_shape_or_type(rng):
  cnn = models.backbone((28, 28), 8)
  variables = _random_variables(cnn, np.zeros((2, 28, 28, 1), np.uint8), rng)  # ints are cast
  message = r"x must be a batch of shape \[n, 28, 28, 1\] or \[n, 28, 28\] for this SmallCNN"
  for bad in (
    np.zeros((2, 32, 32)),
    np.zeros((2, 28, 28, 3)),
    np.zeros((28, 28)),
    np.zeros((2, 1, 28, 28, 1)),
    [[0.0] * 28] * 28,
  ):
    with pytest.raises(ValueError, match=message):
      cnn.apply(variables, bad)
  with pytest.raises(ValueError, match=message):
    jax.jit(cnn.apply)(variables, jnp.zeros((2, 32, 32, 1)))  # shapes are checked in jit
  with pytest.raises(ValueError, match="images must hold real numbers"):
    models.check_input(cnn, np.zeros((2, 28, 28), bool), name="images")
  rgb = models.backbone((56, 56, 3), 8)
  with pytest.raises(
    ValueError,
    match=r"batch of shape \[n, 56, 56, 3\] for this SmallCNN; "
    r"got array of shape \(2, 56, 56\)",
  ):
    models.check_input(rgb, np.zeros((2, 56, 56)))
  with pytest.raises(ValueError, match=r"x must be a batch of shape \[n, 20\] for this MLP"):
    models.check_input(models.backbone((20,), 8), np.zeros((2, 21)))


def test_model_without_input_shape_checks_the_rank(rng):
  cnn = models.model(models.SmallCNN(4, channels=(4,)))
  variables = _random_variables(cnn, np.zeros((2, 9, 11)), rng)
  assert variables["params"]["conv_0"]["kernel"].shape == (9, 4)  # one channel added
  out, _ = jax.eval_shape(cnn.apply, variables, np.ones((3, 9, 11)))
  assert out.logits.shape == (3, 4)
  with pytest.raises(ValueError, match=r"\[n, H, W\] or \[n, H, W, C\] for this SmallCNN"):
    models.check_input(cnn, np.zeros((2, 9)))
  with pytest.raises(ValueError, match=r"\[n, d\] for this MLP"):
    models.check_input(models.model(models.MLP(4)), np.zeros((2, 9, 9)))
  with pytest.raises(ValueError, match=r"input_shape must be \(d,\) for MLP"):
    models.model(models.MLP(4), (28, 28))
  with pytest.raises(ValueError, match="input_shape must be a tuple of ints >= 1"):
    models.model(models.MLP(4), (0,))


# ----------------------------------------------------------------------------- torchvision


def _torch_name(path):
  """A Flax variable's name in torchvision's state dict (written independently)."""
  _, *layers, leaf = path
  layers = [
    {"downsample_conv": "downsample.0", "downsample_bn": "downsample.1"}.get(l, l).replace("_", ".")
    for l in layers
  ]
  leaf = {
    "kernel": "weight",
    "scale": "weight",
    "bias": "bias",
    "mean": "running_mean",
    "var": "running_var",
  }[leaf]
  return ".".join([*layers, leaf])


def _torchvision_state(variables):
  """Flax variables as a torchvision state dict: names, and kernels HWIO -> OIHW."""
  return {
    _torch_name(path): np.ascontiguousarray(
      np.transpose(v, (3, 2, 0, 1)) if path[-1] == "kernel" else v
    )
    for path, v in traverse_util.flatten_dict(variables).items()
    if path[1] != "projection"
  }


@functools.lru_cache(maxsize=None)
def _narrow_variables(arch, stem="imagenet"):
  """Random variables of ``arch`` 16 times narrower (names as the full net; do not modify)."""
  net = models.model(getattr(models, arch)(5, stem).clone(width=4), (32, 32, 3))
  x = jax.ShapeDtypeStruct((1, 32, 32, 3), jnp.float32)
  return _random_variables(net, x, np.random.default_rng(len(arch) + len(stem)))


_TORCHVISION_FACTS = {  # entries (no fc, no counters) and a few shapes of torchvision's nets
  "resnet18": (
    100,
    {
      "conv1.weight": (64, 3, 7, 7),
      "layer2.0.downsample.0.weight": (128, 64, 1, 1),
      "layer4.1.bn2.running_var": (512,),
    },
  ),
  "resnet50": (
    265,
    {
      "layer1.0.downsample.0.weight": (256, 64, 1, 1),
      "layer3.5.conv2.weight": (256, 256, 3, 3),
      "layer4.2.conv3.weight": (2048, 512, 1, 1),
    },
  ),
}


@pytest.mark.parametrize("arch", ["resnet18", "resnet50"])
def test_torchvision_names_and_shapes_of_the_full_nets(arch, key):
  net = models.backbone((224, 224, 3), 5, arch=arch)
  x = jax.ShapeDtypeStruct((1, 224, 224, 3), jnp.float32)
  zeros = jax.tree.map(
    lambda s: np.broadcast_to(np.float32(0), s.shape),  # no memory
    jax.eval_shape(net.init, key, x),
  )
  state = _torchvision_state(zeros)
  count, shapes = _TORCHVISION_FACTS[arch]
  assert len(state) == count and {k: state[k].shape for k in shapes} == shapes


@pytest.mark.parametrize("arch", ["resnet18", "resnet50"])
def test_safetensors_round_trip_fills_every_variable_exactly(arch, tmp_path, rng):
  save_file = pytest.importorskip("safetensors.numpy").save_file
  want = _narrow_variables(arch)
  state = _torchvision_state(want)
  assert len(state) == _TORCHVISION_FACTS[arch][0]
  state |= {
    "fc.weight": np.ones((1000, 7), np.float32),
    "fc.bias": np.ones(1000, np.float32),
    "bn1.num_batches_tracked": np.array(3, np.int64),
  }
  save_file(state, str(tmp_path / "w.safetensors"))
  start = jax.tree.map(np.zeros_like, want)
  start["params"]["projection"] = _randomize(want["params"]["projection"], rng)
  got = models.load_torchvision_resnet(tmp_path / "w.safetensors", start, arch)
  flat_got, flat_want = traverse_util.flatten_dict(got), traverse_util.flatten_dict(want)
  assert sorted(flat_got) == sorted(flat_want)
  for path, value in flat_got.items():
    expected = traverse_util.flatten_dict(start if path[1] == "projection" else want)[path]
    assert value.dtype == jnp.float32
    np.testing.assert_array_equal(value, expected, err_msg="/".join(path))


def test_torchvision_loader_puts_each_weight_where_torchvision_means_it(monkeypatch):
  # No torch, no safetensors: the state dict is built here, each value telling its place. A
  # conv weight [O, I, kh, kw] holds 1000 o + 100 i + 10 h + w, which must land at kernel
  # [h, w, i, o]; BatchNorm's weight, bias, running mean and var hold 1, 2, 3 and 4.
  from jhash.models import _torchvision

  variables = _narrow_variables("resnet18")
  bn = {"weight": 1.0, "bias": 2.0, "running_mean": 3.0, "running_var": 4.0}
  state = {}
  for name, v in _torchvision_state(variables).items():
    if v.ndim == 4:
      state[name] = np.fromfunction(
        lambda o, i, h, w: 1000 * o + 100 * i + 10 * h + w, v.shape, dtype=np.float32
      )
    else:
      state[name] = np.full(v.shape, bn[name.rsplit(".", 1)[1]], np.float32)
  monkeypatch.setattr(_torchvision, "_read_state_dict", lambda path: state)
  got = traverse_util.flatten_dict(models.load_torchvision_resnet("w.safetensors", variables))
  leaves = {"scale": 1.0, "bias": 2.0, "mean": 3.0, "var": 4.0}
  for path, value in got.items():
    if path[1] == "projection":
      continue
    if path[-1] == "kernel":
      h, w, i, o = np.meshgrid(*map(np.arange, value.shape), indexing="ij")
      np.testing.assert_array_equal(value, 1000 * o + 100 * i + 10 * h + w, err_msg=str(path))
    else:
      np.testing.assert_array_equal(value, leaves[path[-1]], err_msg=str(path))


def test_torchvision_loader_errors(tmp_path, monkeypatch):
  save_file = pytest.importorskip("safetensors.numpy").save_file
  variables = _narrow_variables("resnet18")
  state = _torchvision_state(variables)
  path = tmp_path / "w.safetensors"

  def load(changes, drop=(), target=variables, arch="resnet18"):
    save_file({k: v for k, v in {**state, **changes}.items() if k not in drop}, str(path))
    return models.load_torchvision_resnet(path, target, arch)

  with pytest.raises(
    ValueError,
    match=r"missing keys \[layer3.1.bn2.running_var\]; "
    r"unexpected keys \[\]",
  ):
    load({}, drop=("layer3.1.bn2.running_var",))
  with pytest.raises(ValueError, match=r"unexpected keys \[layer5.0.conv1.weight\]"):
    load({"layer5.0.conv1.weight": np.ones((2, 2, 3, 3), np.float32)})
  with pytest.raises(
    ValueError,
    match=r"layer2.0.conv1.weight in .* has shape \(3, 3, 8, 4\)"
    r" in Flax layout; the model's variable has shape \(3, 3, 4, 8\)",
  ):
    load({"layer2.0.conv1.weight": np.ones((4, 8, 3, 3), np.float32)})
  with pytest.raises(ValueError, match=r"conv1.weight .* stem='imagenet'"):
    load({}, target=_narrow_variables("resnet18", stem="cifar"))
  with pytest.raises(
    ValueError,
    match="is not a torchvision resnet50 state dict: missing keys "
    r"\[layer1.0.bn3.bias, .* and \d+ more\]",
  ):
    load({}, arch="resnet50")
  with pytest.raises(ValueError, match="variables are not those of a Flax resnet18"):
    load({}, target=_narrow_variables("resnet50"))
  with pytest.raises(ValueError, match="arch must be one of"):
    models.load_torchvision_resnet(path, variables, "resnet34")
  with pytest.raises(ValueError, match="path must name a .safetensors, .pth or .pt file"):
    models.load_torchvision_resnet(tmp_path / "w.npz", variables)
  monkeypatch.setitem(sys.modules, "torch", None)  # as if torch were not installed
  with pytest.raises(ValueError, match=r"no weights file at .*w\.pth"):  # named first
    models.load_torchvision_resnet(tmp_path / "w.pth", variables)
  (tmp_path / "w.pth").write_bytes(b"not read")
  with pytest.raises(ImportError, match="needs torch"):
    models.load_torchvision_resnet(tmp_path / "w.pth", variables)


def _torchvision_resnet(arch):
  """torchvision's net with random weights and BatchNorm statistics, and its state dict."""
  torch = pytest.importorskip("torch")
  torchvision = pytest.importorskip("torchvision")
  torch.manual_seed(0)
  net = getattr(torchvision.models, arch)(weights=None)
  with torch.no_grad():
    for layer in net.modules():
      if isinstance(layer, torch.nn.BatchNorm2d):
        layer.weight.uniform_(0.5, 1.5)
        layer.bias.normal_(0.0, 0.1)
        layer.running_mean.normal_(0.0, 0.1)
        layer.running_var.uniform_(0.5, 1.5)
  state = net.state_dict()  # with fc and num_batches_tracked, which the loader skips
  net.fc = torch.nn.Identity()
  return net.eval(), state


# ResNet-50 is slow (torch's and XLA's compilations); its Bottleneck is checked against NumPy
# and its names and shapes by the safetensors round trip.
@pytest.mark.parametrize("arch", ["resnet18", pytest.param("resnet50", marks=pytest.mark.slow)])
def test_torchvision_weights_give_torchvision_features(arch, tmp_path, rng, key):
  net, state = _torchvision_resnet(arch)
  safetensors_torch = pytest.importorskip("safetensors.torch")
  import torch

  torch.save(state, tmp_path / "w.pth")
  safetensors_torch.save_file(state, str(tmp_path / "w.safetensors"))
  x = rng.normal(size=(2, 64, 64, 3)).astype(np.float32)
  with torch.no_grad():
    want = net(torch.from_numpy(x.transpose(0, 3, 1, 2).copy())).numpy()
  flax_net = models.model(getattr(models, arch)(5, "imagenet"), (64, 64, 3))
  zeros = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), jax.eval_shape(flax_net.init, key, x))
  apply = jax.jit(flax_net.apply, static_argnames="train")
  for name in ("w.pth", "w.safetensors"):
    variables = models.load_torchvision_resnet(tmp_path / name, zeros, arch)
    out, _ = apply(variables, x, train=False)
    assert np.linalg.norm(out.features - want) <= 1e-4 * np.linalg.norm(want), name
    np.testing.assert_allclose(out.features, want, rtol=1e-3, atol=1e-4 * np.abs(want).max())


def test_resnet_conv_of_kernels_larger_than_the_image_equals_xlas(rng):
  """The networks' convolution takes the patches' product where the kernel is larger than the
  image (XLA's CPU convolution was ~100x slower there): the same values and gradients."""
  from jhash.models._layers import conv_general  # pylint: disable=import-outside-toplevel

  w = jnp.asarray(rng.normal(size=(3, 3, 6, 5)).astype(np.float32))
  dims = ("NHWC", "HWIO", "NHWC")
  for side, stride in ((2, 1), (1, 1), (2, 2), (5, 1)):
    x = jnp.asarray(
      rng.normal(size=(4, side, side + 1 if side < 5 else side, 6)).astype(np.float32)
    )
    pad = ((1, 1), (1, 1))
    ours = lambda x, w: conv_general(x, w, (stride, stride), pad, dimension_numbers=dims)
    xla = lambda x, w: jax.lax.conv_general_dilated(
      x, w, (stride, stride), pad, dimension_numbers=dims
    )
    np.testing.assert_allclose(ours(x, w), xla(x, w), rtol=1e-5, atol=1e-5)
    for arg in (0, 1):
      grads = [jax.grad(lambda *a, f=f: jnp.sum(f(*a) ** 2), arg)(x, w) for f in (ours, xla)]
      np.testing.assert_allclose(grads[0], grads[1], rtol=1e-4, atol=1e-4)
