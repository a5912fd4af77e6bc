"""AlexNet and VGG-16 laid out as torchvision's ``alexnet`` and ``vgg16``, for hashing.

Krizhevsky et al., "ImageNet classification with deep convolutional neural networks",
NIPS 2012 (torchvision's one-GPU variant); Simonyan and Zisserman, "Very deep
convolutional networks for large-scale image recognition", ICLR 2015 (configuration D).
The backbones of the DCH, HashNet and MCH papers.

Layout NHWC, kernels HWIO. The layers are torchvision's, so its ImageNet weights load
exactly (``load_torchvision``), and named after the index in torchvision's
``nn.Sequential`` (``features_0``, ``classifier_1``):

* ``features``: convolutions with bias and symmetric padding, each followed by a ReLU;
  max pools without padding whose output side is ``floor((side - size) / stride) + 1``
  (torch's ``ceil_mode=False``): 3 x 3 of stride 2 (AlexNet), 2 x 2 of stride 2 (VGG);
* ``adaptive_avg_pool`` to 6 x 6 (AlexNet) or 7 x 7 (VGG), as torch's
  ``AdaptiveAvgPool2d``; at 224 x 224 the features are that size already and it is
  the identity;
* flattened in torch's (C, H, W) order, so fc6's ``[out, in]`` weight, transposed, is
  the Dense kernel;
* the classifier without its last layer (fc8, which the hash head replaces): AlexNet
  ``Dropout, fc6, ReLU, Dropout, fc7, ReLU`` (``classifier_1``, ``classifier_4``); VGG
  ``fc6, ReLU, Dropout, fc7, ReLU, Dropout`` (``classifier_0``, ``classifier_3``). The
  features [n, 4096] are what fc8 reads.

Dropout (torchvision's p = 0.5) runs in training mode only, from the ``"dropout"`` rng
stream (``jhash.models.model``'s ``apply`` supplies one); evaluation is deterministic.

Smallest images: AlexNet 63 x 63 (its third max pool needs a 3 x 3 input), VGG-16
32 x 32 (five halvings). Parameters (float32): AlexNet 57.0 M besides the hash head, 37.7 M
of them fc6's 9,216 x 4,096 (151 MB); VGG-16 134.3 M, 102.8 M of them fc6's 25,088 x 4,096
(411 MB). Initialised as torchvision's: AlexNet with torch's default (uniform, bound
``1 / sqrt(fan_in)``), VGG with He normal (fan out) convolutions, N(0, 0.01) dense layers
and zero biases.
"""

from __future__ import annotations

import itertools
from typing import ClassVar, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jhash import _checks
from jhash.models import _layers as layers
from jhash.models._layers import HashOutputs
from jhash.models._layers import hash_head

POOL = "M"  # a max pool in a layer list, as torchvision's VGG configurations write it
#: VGG-16's features (torchvision's configuration "D"): conv widths and max pools.
VGG16_LAYERS = (64, 64, POOL, 128, 128, POOL, 256, 256, 256, POOL) + (512, 512, 512, POOL) * 2
_ALEXNET_CONVS = ((11, 4, 2), (5, 1, 2), (3, 1, 1), (3, 1, 1), (3, 1, 1))  # size, stride, pad
_ALEXNET_POOLED = (0, 1, 4)  # the convolutions a max pool follows

_vgg_conv_init = nn.initializers.variance_scaling(2.0, "fan_out", "normal")
_vgg_dense_init = nn.initializers.normal(0.01)


def _torch_default(fan_in: int):
  """torch's default init of Conv2d / Linear weights and biases: U(-b, b), b = 1/sqrt(fan_in)."""
  bound = 1.0 / np.sqrt(fan_in)

  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, -bound, bound)

  return init


def _pool_matrix(side: int, out: int) -> np.ndarray:
  """[out, side]: row i averages torch's bin i, ``floor(i side / out)`` to
  ``ceil((i + 1) side / out)`` (exclusive)."""
  matrix = np.zeros((out, side), np.float32)
  for i in range(out):
    start, end = (i * side) // out, -(-(i + 1) * side // out)
    matrix[i, start:end] = 1.0 / (end - start)
  return matrix


def adaptive_avg_pool(x: jax.Array, out: tuple[int, int]) -> jax.Array:
  """torch's ``AdaptiveAvgPool2d``: bin i of a side of length L averages the rows
  ``floor(i L / out)`` to ``ceil((i + 1) L / out) - 1`` (bins overlap, or repeat a row,
  when L is not a multiple of ``out``).

  Args:
    x: float [n, H, W, C].
    out: (out_h, out_w), ints >= 1.
  Returns:
    float32 [n, out_h, out_w, C]; ``x`` itself when (H, W) is ``out``.
  """
  _checks.rank(x, 4, "x", "images [n, H, W, C]")
  if not isinstance(out, (tuple, list)) or len(out) != 2:
    raise ValueError(f"out must be (out_h, out_w), two ints >= 1; got {out!r}.")
  out_h, out_w = (_checks.positive_int(side, "out") for side in out)
  _, h, w, _ = x.shape
  if (h, w) == (out_h, out_w):
    return x
  rows, cols = _pool_matrix(h, out_h), _pool_matrix(w, out_w)
  # HIGHEST: on a GPU the default would round the inputs to bfloat16 / TF32.
  x = jnp.einsum("ih,nhwc->niwc", rows, x, precision=jax.lax.Precision.HIGHEST)
  return jnp.einsum("jw,niwc->nijc", cols, x, precision=jax.lax.Precision.HIGHEST)


def _flatten_chw(x: jax.Array) -> jax.Array:
  """[n, H, W, C] -> [n, C H W] in torch's order (channel slowest), as fc6's weight reads."""
  return jnp.transpose(x, (0, 3, 1, 2)).reshape(x.shape[0], -1)


def _spec(module: nn.Module) -> list[tuple[int, tuple[int, int, int, int] | str]]:
  """The feature layers with their torchvision index: (index, (width, size, stride, pad))
  for a convolution (its ReLU is index + 1), (index, POOL) for a max pool."""
  if isinstance(module, AlexNet):
    entries = []
    for k, (width, conv) in enumerate(zip(module.channels, _ALEXNET_CONVS)):
      entries += [(width, *conv)] + ([POOL] if k in _ALEXNET_POOLED else [])
  else:
    entries = [POOL if e == POOL else (e, 3, 1, 1) for e in module.layers]
  out, index = [], 0
  for entry in entries:
    out.append((index, entry))
    index += 1 if entry == POOL else 2
  return out


def torchvision_layers(module: nn.Module) -> list[str]:
  """The layers with weights, in torchvision's names: ``features.0``, ..., ``classifier.4``."""
  convs = [f"features.{i}" for i, entry in _spec(module) if entry != POOL]
  return convs + [f"classifier.{i}" for i in module.classifier_indices]


def _side_after(module: nn.Module, side: int) -> int:
  """The features' side for images of ``side``; 0 when a layer's window does not fit."""
  pool_size, pool_stride = module.pool
  for _, entry in _spec(module):
    size, stride, pad = (pool_size, pool_stride, 0) if entry == POOL else entry[1:]
    if side + 2 * pad < size:
      return 0
    side = (side + 2 * pad - size) // stride + 1
  return side


def min_side(module: nn.Module) -> int:
  """The smallest image side the network's features take (63 AlexNet, 32 VGG-16)."""
  return next(side for side in itertools.count(1) if _side_after(module, side) >= 1)


def _check_side(module: nn.Module, x: jax.Array) -> None:
  if x.ndim != 4 or min(x.shape[1:3]) < min_side(module):
    m = min_side(module)
    raise ValueError(
      f"x must be images [n, H, W, C] of at least {m} x {m} for {type(module).__name__} "
      f"(smaller ones leave a max pool no full window); got {_checks.describe(x)}."
    )


def _conv_init(module: nn.Module, fan_in: int):
  """A convolution's (kernel_init, bias_init), as torchvision initialises the network."""
  if isinstance(module, AlexNet):
    return _torch_default(fan_in), _torch_default(fan_in)
  return _vgg_conv_init, nn.initializers.zeros


def _features(module: nn.Module, x: jax.Array) -> jax.Array:
  """The ``features`` Sequential: convolutions (each with a ReLU) and max pools."""
  size, stride = module.pool
  for index, entry in _spec(module):
    if entry == POOL:
      x = nn.max_pool(x, (size, size), strides=(stride, stride))
      continue
    width, k, s, p = entry
    kernel, bias = _conv_init(module, k * k * x.shape[-1])
    pads = ((p, p), (p, p))
    conv = nn.Conv(
      width,
      (k, k),
      (s, s),
      pads,
      kernel_init=kernel,
      bias_init=bias,
      conv_general_dilated=layers.conv_general,
      name=f"features_{index}",
    )
    x = nn.relu(conv(x))
  return x


def _check_rate(rate: float) -> float:
  if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate < 1:
    raise ValueError(f"dropout must be a float in [0, 1); got {rate!r}.")
  return float(rate)


class AlexNet(nn.Module):
  """torchvision's AlexNet: float32 [n, H, W, C] -> HashOutputs ([n, num_bits], [n, hidden]).

  ``channels`` are the five convolutions' widths, ``hidden`` fc6's and fc7's (a narrower
  net keeps torchvision's names, for tests); ``dropout`` the rate in training mode.
  """

  num_bits: int
  channels: Sequence[int] = (64, 192, 384, 256, 256)
  hidden: int = 4096
  dropout: float = 0.5
  pool: ClassVar[tuple[int, int]] = (3, 2)  # max pools: size, stride
  classifier_indices: ClassVar[tuple[int, int]] = (1, 4)  # fc6, fc7 in torchvision's

  @nn.compact
  def __call__(self, x: jax.Array, *, train: bool = False) -> HashOutputs:
    _check_side(self, x)
    x = _flatten_chw(adaptive_avg_pool(_features(self, x), (6, 6)))
    for index in self.classifier_indices:
      x = nn.Dropout(self.dropout, deterministic=not train)(x)
      init = _torch_default(x.shape[-1])
      dense = nn.Dense(self.hidden, kernel_init=init, bias_init=init, name=f"classifier_{index}")
      x = nn.relu(dense(x))
    return hash_head(x, self.num_bits)


class VGG(nn.Module):
  """torchvision's VGG without BatchNorm: float32 [n, H, W, C] -> HashOutputs ([n, num_bits],
  [n, hidden]).

  ``layers`` lists the convolutions' widths (3 x 3, padding 1) and ``"M"`` for a 2 x 2
  max pool, as torchvision's configurations (``VGG16_LAYERS``); ``hidden`` is fc6's and
  fc7's width; ``dropout`` the rate in training mode.
  """

  num_bits: int
  layers: Sequence[int | str] = VGG16_LAYERS
  hidden: int = 4096
  dropout: float = 0.5
  pool: ClassVar[tuple[int, int]] = (2, 2)
  classifier_indices: ClassVar[tuple[int, int]] = (0, 3)

  @nn.compact
  def __call__(self, x: jax.Array, *, train: bool = False) -> HashOutputs:
    _check_side(self, x)
    x = _flatten_chw(adaptive_avg_pool(_features(self, x), (7, 7)))
    for index in self.classifier_indices:
      dense = nn.Dense(self.hidden, kernel_init=_vgg_dense_init, name=f"classifier_{index}")
      x = nn.Dropout(self.dropout, deterministic=not train)(nn.relu(dense(x)))
    return hash_head(x, self.num_bits)


def alexnet(num_bits: int, dropout: float = 0.5) -> AlexNet:
  """AlexNet (five convolutions, fc6, fc7): 4,096 features, then ``num_bits`` logits."""
  return AlexNet(_checks.code_length(num_bits, "num_bits"), dropout=_check_rate(dropout))


def vgg16(num_bits: int, dropout: float = 0.5) -> VGG:
  """VGG-16 (13 convolutions, fc6, fc7): 4,096 features, then ``num_bits`` logits."""
  return VGG(_checks.code_length(num_bits, "num_bits"), dropout=_check_rate(dropout))


#: name -> constructor, for ``backbone(..., arch=...)`` and the torchvision loader.
ARCHS = {"alexnet": alexnet, "vgg16": vgg16}
