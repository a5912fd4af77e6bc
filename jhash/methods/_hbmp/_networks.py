"""The scoring functions ``psi`` of HBMP's hash functions ``f_t(x) = sign(psi_t(x))``.

Cakir et al., Eq. 11: ``psi`` is "either a shallow model such as a linear function, or a
deep neural network". Three Flax modules, each mapping a batch of (standardised) inputs
to ``b`` real scores, one per bit:

* ``LinearScores``: ``psi(x) = W x + c`` on features ``[n, d]``;
* ``MLPScores``: hidden ReLU layers, then a linear layer to ``b`` scores;
* ``ConvScores``: a small CNN on images ``[n, H, W, C]`` (e.g. 28 x 28 grey-scale):
  3 x 3 convolutions of stride 2, each followed by ReLU, then a ReLU dense layer and a
  linear layer to ``b`` scores (convolutions as dense layers over image patches,
  ``strided_patches``, by default: faster to train on the CPU).

``network(kind, num_bits, ...)`` builds one by name. The modules hold no state besides
their parameters (no batch statistics, no dropout), so a step needs no extra keys.
"""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

KINDS = ("linear", "mlp", "cnn")
IMAGE_KINDS = ("cnn",)


class LinearScores(nn.Module):
  """``psi(x) = W x + c``: float32 [n, d] -> float32 [n, num_bits]."""
  num_bits: int

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    return nn.Dense(self.num_bits, name="projection")(x)


class MLPScores(nn.Module):
  """A multilayer perceptron: ``hidden`` ReLU layers, then ``num_bits`` linear scores."""
  num_bits: int
  hidden: Sequence[int] = (512,)

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    for i, width in enumerate(self.hidden):
      x = nn.relu(nn.Dense(width, name=f"hidden_{i}")(x))
    return nn.Dense(self.num_bits, name="projection")(x)


def strided_patches(x: jax.Array, size: int = 3, stride: int = 2) -> jax.Array:
  """The ``size x size`` patches at stride ``stride`` with "same" padding (im2col).

  A convolution is then a dense layer over the last axis. Built from ``size**2`` strided
  slices of the padded input, so its gradient is a sum of padded slices.

  Args:
    x: float [n, H, W, C].
    size: the window's side.
    stride: the step between windows.
  Returns:
    float [n, ceil(H / stride), ceil(W / stride), size * size * C], the window offsets
    row-major, channels innermost.
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


class ConvScores(nn.Module):
  """A small CNN on images: float32 [n, H, W, C] -> float32 [n, num_bits].

  Each entry of ``channels`` is a 3 x 3 convolution of stride 2 ("same" padding) and
  ReLU; then a dense ReLU layer of width ``dense`` and a linear layer to the scores.
  With the defaults on 28 x 28 x 1 images: 28 -> 14 -> 7 spatially, 7 * 7 * 32 = 1,568
  features into the dense layer, about 0.3M multiply-adds per image.

  ``im2col=True`` (the default) computes each convolution as a dense layer over
  ``strided_patches``; ``False`` uses ``nn.Conv``. Both are the same function of their
  parameters. On the CPU, a training epoch (a ``lax.scan`` of minibatch steps) ran about
  4 times faster with im2col: inside XLA loops, convolution gradients were several
  times slower than the matrix products. (Strides instead of max pooling for the same
  reason: the gradient of max pooling made a step 10 times slower.)
  """
  num_bits: int
  channels: Sequence[int] = (16, 32)
  dense: int = 128
  im2col: bool = True

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    for i, width in enumerate(self.channels):
      if self.im2col:
        x = nn.Dense(width, name=f"conv_{i}")(strided_patches(x))
      else:
        x = nn.Conv(width, (3, 3), strides=(2, 2), padding="SAME", name=f"conv_{i}")(x)
      x = nn.relu(x)
    x = x.reshape(x.shape[0], -1)
    x = nn.relu(nn.Dense(self.dense, name="dense")(x))
    return nn.Dense(self.num_bits, name="projection")(x)


def network(kind: str, num_bits: int, *, hidden: Sequence[int] = (512,),
            channels: Sequence[int] = (16, 32), dense: int = 128) -> nn.Module:
  """The scoring network of a hash-function family by name.

  Args:
    kind: "linear", "mlp" or "cnn".
    num_bits: b, the number of scores (one per hash function).
    hidden: the MLP's hidden widths.
    channels, dense: the CNN's convolution widths and dense width.
  Returns:
    A Flax module mapping a batch of inputs to float32 [n, num_bits] scores.
  """
  if kind == "linear":
    return LinearScores(num_bits)
  if kind == "mlp":
    return MLPScores(num_bits, tuple(int(h) for h in hidden))
  if kind == "cnn":
    return ConvScores(num_bits, tuple(int(c) for c in channels), int(dense))
  raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}; got {kind!r}.")
