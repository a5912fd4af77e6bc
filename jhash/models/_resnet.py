"""ResNets (He et al., "Deep residual learning for image recognition", CVPR 2016) for hashing.

Layout NHWC, kernels HWIO. The structure is torchvision's ``resnet18`` / ``resnet50``
(the "v1.5" bottleneck, stride on its 3 x 3 convolution), so its ImageNet weights load
exactly (``load_torchvision_resnet``):

* every convolution has no bias and symmetric padding ``size // 2`` (not "SAME", which
  on an even side pads only after: a stride-2 convolution would see shifted windows);
* BatchNorm as torch's (``_layers.batch_norm``: epsilon 1e-5, running averages moved
  0.1 of the way per step); batch statistics in training, running averages in evaluation;
* a block's shortcut is a 1 x 1 convolution of the block's stride and a BatchNorm when
  the stride or width changes (``downsample`` in torchvision), else the identity.

The layers are named as torchvision's (``conv1``, ``bn1``, ``layer2_0/conv1``,
``layer2_0/downsample_conv``, ``layer2_0/downsample_bn``). Two stems: ``"imagenet"``
(7 x 7 stride-2 convolution and 3 x 3 stride-2 max pooling, for 224 x 224 images: the
last stage is 7 x 7) and ``"cifar"`` (a 3 x 3 stride-1 convolution, no pooling, for small
images such as 32 x 32: the last stage is 4 x 4). The features are the last stage
averaged over space (512 for ResNet-18, 2,048 for ResNet-50), then the linear hash head.
"""

from __future__ import annotations

from typing import ClassVar, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jhash import _checks
from jhash.models import _layers as layers
from jhash.models._layers import HashOutputs

STEMS = ("cifar", "imagenet")

# torchvision's initialisation of convolutions: kaiming_normal_(mode="fan_out", relu).
_conv_init = nn.initializers.variance_scaling(2.0, "fan_out", "normal")


def _conv(x: jax.Array, features: int, size: int, stride: int, name: str) -> jax.Array:
  """A bias-free ``size x size`` convolution padded by ``size // 2`` on every side."""
  pad = size // 2
  return nn.Conv(
    features,
    (size, size),
    strides=(stride, stride),
    padding=((pad, pad), (pad, pad)),
    use_bias=False,
    kernel_init=_conv_init,
    conv_general_dilated=layers.conv_general,
    name=name,
  )(x)


def _conv_bn(
  x: jax.Array, features: int, size: int, stride: int, train: bool, conv: str, bn: str
) -> jax.Array:
  """A convolution named ``conv`` then a BatchNorm named ``bn`` (no ReLU)."""
  return layers.batch_norm(_conv(x, features, size, stride, conv), train, bn)


def _shortcut(x: jax.Array, features: int, stride: int, train: bool) -> jax.Array:
  """The identity, or torchvision's ``downsample`` when the shape changes."""
  if stride == 1 and x.shape[-1] == features:
    return x
  return _conv_bn(x, features, 1, stride, train, "downsample_conv", "downsample_bn")


class BasicBlock(nn.Module):
  """Two 3 x 3 convolutions: float32 [n, H, W, C] -> [n, H / stride, W / stride, planes]."""

  planes: int
  stride: int = 1
  expansion: ClassVar[int] = 1

  @nn.compact
  def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
    y = nn.relu(_conv_bn(x, self.planes, 3, self.stride, train, "conv1", "bn1"))
    y = _conv_bn(y, self.planes, 3, 1, train, "conv2", "bn2")
    return nn.relu(y + _shortcut(x, self.planes, self.stride, train))


class Bottleneck(nn.Module):
  """1 x 1, 3 x 3 (with the stride), 1 x 1: [n, H, W, C] -> [n, H / s, W / s, 4 planes]."""

  planes: int
  stride: int = 1
  expansion: ClassVar[int] = 4

  @nn.compact
  def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
    out = self.planes * self.expansion
    y = nn.relu(_conv_bn(x, self.planes, 1, 1, train, "conv1", "bn1"))
    y = nn.relu(_conv_bn(y, self.planes, 3, self.stride, train, "conv2", "bn2"))
    y = _conv_bn(y, out, 1, 1, train, "conv3", "bn3")
    return nn.relu(y + _shortcut(x, out, self.stride, train))


def _check_stem(stem: str) -> str:
  if stem not in STEMS:
    raise ValueError(f"stem must be one of {', '.join(map(repr, STEMS))}; got {stem!r}.")
  return stem


def _stem(x: jax.Array, stem: str, width: int, train: bool) -> jax.Array:
  if _check_stem(stem) == "cifar":
    return nn.relu(_conv_bn(x, width, 3, 1, train, "conv1", "bn1"))
  x = nn.relu(_conv_bn(x, width, 7, 2, train, "conv1", "bn1"))
  return nn.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))  # pads with -inf


class ResNet(nn.Module):
  """A ResNet: float32 [n, H, W, C] -> HashOutputs ([n, num_bits], [n, F]).

  Stage ``i`` (from 0) has ``stage_sizes[i]`` blocks of ``width * 2**i`` planes, the first
  of stride 2 except in stage 0; F = ``width * 2**(len(stage_sizes) - 1) * expansion``.
  """

  num_bits: int
  stage_sizes: Sequence[int]
  block_cls: type = BasicBlock
  stem: str = "imagenet"
  width: int = 64

  @nn.compact
  def __call__(self, x: jax.Array, *, train: bool = False) -> HashOutputs:
    x = _stem(x, self.stem, self.width, train)
    for i, num_blocks in enumerate(self.stage_sizes):
      for j in range(num_blocks):
        stride = 2 if i > 0 and j == 0 else 1
        x = self.block_cls(self.width * 2**i, stride, name=f"layer{i + 1}_{j}")(x, train=train)
    return layers.hash_head(jnp.mean(x, axis=(1, 2)), self.num_bits)


def resnet18(num_bits: int, stem: str = "imagenet") -> ResNet:
  """ResNet-18 (basic blocks, 2-2-2-2): 512 features, then ``num_bits`` logits."""
  num_bits = _checks.code_length(num_bits, "num_bits")
  return ResNet(num_bits, (2, 2, 2, 2), BasicBlock, _check_stem(stem))


def resnet50(num_bits: int, stem: str = "imagenet") -> ResNet:
  """ResNet-50 (bottleneck blocks, 3-4-6-3): 2,048 features, then ``num_bits`` logits."""
  num_bits = _checks.code_length(num_bits, "num_bits")
  return ResNet(num_bits, (3, 4, 6, 3), Bottleneck, _check_stem(stem))


#: name -> constructor, for ``backbone(..., arch=...)`` and the torchvision loader.
ARCHS = {"resnet18": resnet18, "resnet50": resnet50}
