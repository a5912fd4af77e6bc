"""Small hashing networks: an MLP on feature vectors and a small CNN on small images.

* ``MLP``: ``hidden`` ReLU layers on features ``[n, d]``; the last hidden layer (the
  input itself when ``hidden`` is empty) is the features, then the linear hash head.
* ``SmallCNN``: 3 x 3 convolutions of stride 2 and ReLU on images ``[n, H, W, C]``
  (28 x 28 or 56 x 56), a dense ReLU layer (the features), then the linear hash head.
  With ``batch_norm=False`` it has the parameter names and shapes of HBMP's former
  ``ConvScores`` (HBMP's "cnn" hash functions are this network).

``batch_norm=True`` puts a BatchNorm (batch statistics in training, running averages in
evaluation) between each layer and its ReLU; those layers then have no bias.

How SmallCNN's convolutions run on the CPU (jax 0.10.2, 2 cores, 28 x 28 x 1 inputs,
the default widths): XLA's gradients of a convolution inside a compiled loop
(``jhash.fit``'s) were about 6 times slower than matrix products over im2col patches (a
training loop at about 1,400 against 8,600 images/s, AMD EPYC). So a layer keeps its
kernel as the dense layer over patches ([9 C, O]) and is ``strided_conv``: differentiated
(training), the patches' product and its gradient; evaluated (encoding), the patches'
product too, except with one input channel, where it is nine fused multiply-adds of
strided slices. Measured on an Intel Xeon (2 cores, AVX-512), encoding in chunks of 256
images, same process, interleaved repeats: the one-channel first layer alone at about
226,000 images/s as multiply-adds against 131,000 as the product; the whole network
about 131,000 with the second layer as the patches' product against 111,000 with XLA's
forward convolution (on an AMD EPYC, in chunks of 1,024 and with the first layer as a
product, XLA's convolution had encoded faster; not measured again there). The
computations agree to float rounding.
"""

from __future__ import annotations

import functools
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jhash import _checks
from jhash.models import _layers as layers
from jhash.models._layers import HashOutputs


def _same_pads(side: int, size: int, stride: int) -> tuple[int, int]:
  """The "same" padding of one axis, as ``nn.Conv(padding="SAME")``: the extra one last."""
  out = -(-side // stride)
  pad = max((out - 1) * stride + size - side, 0)
  return pad // 2, pad - pad // 2


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
  _checks.positive_int(size, "size")
  _checks.positive_int(stride, "stride")
  _checks.rank(x, 4, "x", "images [n, H, W, C]")
  _, h, w, _ = x.shape
  out_h, out_w = -(-h // stride), -(-w // stride)
  x = jnp.pad(x, ((0, 0), _same_pads(h, size, stride), _same_pads(w, size, stride), (0, 0)))
  span_h, span_w = stride * (out_h - 1) + 1, stride * (out_w - 1) + 1
  return jnp.concatenate(
    [
      x[:, i : i + span_h : stride, j : j + span_w : stride, :]
      for i in range(size)
      for j in range(size)
    ],
    axis=-1,
  )


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def strided_conv(x: jax.Array, kernel: jax.Array, size: int = 3, stride: int = 2) -> jax.Array:
  """``strided_patches(x, size, stride) @ kernel``, a convolution kept as a patches' product.

  Evaluated, one input channel is ``size**2`` fused multiply-adds of strided slices, more
  channels the patches' product (module docstring). Differentiated (a ``custom_jvp``), it
  is always the patches' matrix product, whose patches the kernel's derivative needs
  anyway: the tangent is ``patches(dx) kernel + patches(x) dkernel``, so reverse mode
  gives ``patches(x)^T dy`` for the kernel and the patches' transpose (a sum of padded
  slices) of ``dy kernel^T`` for the input, which XLA runs much faster than a
  convolution's gradients inside compiled loops. The values agree to float rounding.

  Args:
    x: float32 [n, H, W, C].
    kernel: float32 [size * size * C, O], rows as ``strided_patches``' columns.
    size: the window's side.
    stride: the step between windows.
  Returns:
    float32 [n, ceil(H / stride), ceil(W / stride), O].
  """
  if x.shape[-1] == 1:
    return _one_channel_taps(x, kernel, size, stride)
  return strided_patches(x, size, stride) @ kernel


def _one_channel_taps(x: jax.Array, kernel: jax.Array, size: int, stride: int) -> jax.Array:
  """The convolution of a one-channel image as ``size**2`` multiply-adds of strided slices
  (one fused loop; a product with a 9-row kernel, or XLA's convolution, is slower)."""
  _, h, w, _ = x.shape
  out_h, out_w = -(-h // stride), -(-w // stride)
  x = jnp.pad(x, ((0, 0), _same_pads(h, size, stride), _same_pads(w, size, stride), (0, 0)))
  span_h, span_w = stride * (out_h - 1) + 1, stride * (out_w - 1) + 1
  y = 0.0
  for i in range(size):
    for j in range(size):
      y = (
        y
        + x[:, i : i + span_h : stride, j : j + span_w : stride, :]
        * kernel[i * size + j][None, None, None, :]
      )
  return y


def _strided_conv_jvp(size, stride, primals, tangents):
  x, kernel = primals
  dx, d_kernel = tangents
  patches = strided_patches(x, size, stride)
  y = patches @ kernel
  dy = jnp.zeros_like(y)
  if not isinstance(dx, jax.custom_derivatives.SymbolicZero):
    dy = dy + strided_patches(dx, size, stride) @ kernel
  if not isinstance(d_kernel, jax.custom_derivatives.SymbolicZero):
    dy = dy + patches @ d_kernel
  return y, dy


strided_conv.defjvp(_strided_conv_jvp, symbolic_zeros=True)


class StridedConv(nn.Module):
  """A 3 x 3 convolution of stride 2 ("same" padding) kept as a dense layer over patches.

  Parameters as ``nn.Dense(features)`` applied to ``strided_patches(x)`` (kernel
  [9 C, O], lecun-normal; bias [O], zeros), and the same function of them; computed by
  ``strided_conv`` (module docstring).
  """

  features: int
  use_bias: bool = True

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    channels = x.shape[-1]
    kernel = self.param(
      "kernel", nn.initializers.lecun_normal(), (9 * channels, self.features), jnp.float32
    )
    y = strided_conv(x, kernel)
    if self.use_bias:
      bias = self.param("bias", nn.initializers.zeros_init(), (self.features,), jnp.float32)
      y = y + bias.reshape((1,) * (y.ndim - 1) + (-1,))
    return y


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

  ``im2col=True`` (the default) keeps each convolution as a dense layer over
  ``strided_patches`` (``StridedConv``: kernel [9 C, O]; differentiated, that product and
  its gradient; evaluated, the same product, or multiply-adds with one input channel);
  ``False`` uses ``nn.Conv`` (kernel
  [3, 3, C, O]) and XLA's convolution gradients. Both are the same function of their parameters. On
  the CPU a training epoch ran about 4 times faster with im2col: inside XLA loops,
  convolution gradients were several times slower than the matrix products.
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
        x = StridedConv(width, use_bias=use_bias, name=f"conv_{i}")(x)
      else:
        x = nn.Conv(
          width, (3, 3), strides=(2, 2), padding="SAME", use_bias=use_bias, name=f"conv_{i}"
        )(x)
      x = _normalize_relu(x, self.batch_norm, train, f"bn_{i}")
    x = x.reshape(x.shape[0], -1)
    x = nn.Dense(self.dense, use_bias=use_bias, name="dense")(x)
    x = _normalize_relu(x, self.batch_norm, train, "dense_bn")
    return layers.hash_head(x, self.num_bits)
