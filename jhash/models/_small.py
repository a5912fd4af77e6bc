"""Small hashing networks: an MLP on feature vectors and a small CNN on small images.

* ``MLP``: ``hidden`` ReLU layers on features ``[n, d]``; the last hidden layer (the
  input itself when ``hidden`` is empty) is the features, then the linear hash head.
* ``SmallCNN``: 3 x 3 convolutions of stride 2 and ReLU on images ``[n, H, W, C]``
  (28 x 28 or 56 x 56), a dense ReLU layer (the features), then the linear hash head.
  With ``batch_norm=False`` it has the parameter names and shapes of HBMP's former
  ``ConvScores`` (HBMP's "cnn" hash functions are this network).

``batch_norm=True`` puts a BatchNorm (batch statistics in training, running averages in
evaluation) between each layer and its ReLU; those layers then have no bias.
"""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jhash.models import _layers as layers
from jhash.models._layers import HashOutputs


def strided_patches(x: jax.Array, size: int = 3, stride: int = 2) -> jax.Array:
  """The ``size x size`` patches at stride ``stride`` with "same" padding (im2col).

  A convolution is then a dense layer over the last axis. Built from ``size**2`` strided
  slices of the padded input, so its gradient is a sum of padded slices. "Same" padding
  as ``nn.Conv(padding="SAME")``: the extra row or column of an uneven pad goes last.

  Args:
    x: float [n, H, W, C].
    size: the window's side.
    stride: the step between windows.
  Returns:
    float [n, ceil(H / stride), ceil(W / stride), size * size * C], the window offsets
    row-major, channels innermost (so a HWIO kernel reshaped to [size * size * C, O] is
    the dense layer's kernel).
  """
  _, h, w, _ = x.shape
  out_h, out_w = -(-h // stride), -(-w // stride)
  pad_h = max((out_h - 1) * stride + size - h, 0)
  pad_w = max((out_w - 1) * stride + size - w, 0)
  x = jnp.pad(x, ((0, 0), (pad_h // 2, pad_h - pad_h // 2), (pad_w // 2, pad_w - pad_w // 2),
                  (0, 0)))
  span_h, span_w = stride * (out_h - 1) + 1, stride * (out_w - 1) + 1
  return jnp.concatenate([x[:, i:i + span_h:stride, j:j + span_w:stride, :]
                          for i in range(size) for j in range(size)], axis=-1)


def _normalize_relu(x: jax.Array, batch_norm: bool, train: bool, name: str) -> jax.Array:
  """ReLU, after a BatchNorm named ``name`` when ``batch_norm``."""
  return nn.relu(layers.batch_norm(x, train, name) if batch_norm else x)


class MLP(nn.Module):
  """A multilayer perceptron: float32 [n, d] -> HashOutputs ([n, num_bits], [n, F]).

  F is ``hidden[-1]`` (``d`` when ``hidden`` is empty).
  """
  num_bits: int
  hidden: Sequence[int] = (512,)
  batch_norm: bool = False

  @nn.compact
  def __call__(self, x: jax.Array, *, train: bool = False) -> HashOutputs:
    for i, width in enumerate(self.hidden):
      x = nn.Dense(width, use_bias=not self.batch_norm, name=f"hidden_{i}")(x)
      x = _normalize_relu(x, self.batch_norm, train, f"bn_{i}")
    return layers.hash_head(x, self.num_bits)


class SmallCNN(nn.Module):
  """A small CNN: float32 [n, H, W, C] -> HashOutputs ([n, num_bits], [n, dense]).

  Each entry of ``channels`` is a 3 x 3 convolution of stride 2 ("same" padding) and
  ReLU; then a dense ReLU layer of width ``dense`` (the features) and the hash head.
  With the defaults on 28 x 28 x 1 images: 28 -> 14 -> 7 spatially, 7 * 7 * 32 = 1,568
  inputs to the dense layer; on 56 x 56, 14 * 14 * 32 = 6,272.

  ``im2col=True`` (the default) computes each convolution as a dense layer over
  ``strided_patches`` (kernel [9 C, O]); ``False`` uses ``nn.Conv`` (kernel [3, 3, C, O]).
  Both are the same function of their parameters. On the CPU a training epoch ran about
  4 times faster with im2col: inside XLA loops, convolution gradients were several times
  slower than the matrix products.
  """
  num_bits: int
  channels: Sequence[int] = (16, 32)
  dense: int = 128
  batch_norm: bool = False
  im2col: bool = True

  @nn.compact
  def __call__(self, x: jax.Array, *, train: bool = False) -> HashOutputs:
    use_bias = not self.batch_norm
    for i, width in enumerate(self.channels):
      if self.im2col:
        x = nn.Dense(width, use_bias=use_bias, name=f"conv_{i}")(strided_patches(x))
      else:
        x = nn.Conv(width, (3, 3), strides=(2, 2), padding="SAME", use_bias=use_bias,
                    name=f"conv_{i}")(x)
      x = _normalize_relu(x, self.batch_norm, train, f"bn_{i}")
    x = x.reshape(x.shape[0], -1)
    x = nn.Dense(self.dense, use_bias=use_bias, name="dense")(x)
    x = _normalize_relu(x, self.batch_norm, train, "dense_bn")
    return layers.hash_head(x, self.num_bits)
