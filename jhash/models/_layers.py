"""Pieces every hashing network shares: its outputs, its hash head, its BatchNorm, and the
convolution of the ResNets, AlexNet and VGG."""

from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp


class HashOutputs(NamedTuple):
  """What a hashing network returns: the hash head's logits and the features it read."""

  logits: jax.Array  # float32 [n, num_bits], the hash head's outputs; codes are their sign
  features: jax.Array  # float32 [n, F], the penultimate features the hash head reads


def hash_head(features: jax.Array, num_bits: int) -> HashOutputs:
  """The linear hash head ``logits = features W + c`` (a layer named "projection").

  Called inside a module's compact ``__call__``, so the layer belongs to that module.

  Args:
    features: float32 [n, F].
    num_bits: K, the number of logits.
  Returns:
    HashOutputs with logits float32 [n, K] and the features unchanged.
  """
  return HashOutputs(nn.Dense(num_bits, name="projection")(features), features)


def batch_norm(x: jax.Array, train: bool, name: str) -> jax.Array:
  """BatchNorm as torch's: epsilon 1e-5, running averages moved 0.1 of the way per step.

  Training normalises by the batch's statistics (biased variance, where torch's running
  variance takes the unbiased one) and updates the running averages; evaluation uses them.
  Flax's ``momentum`` is the weight of the old average: torch's 0.1 is 0.9 here.
  """
  return nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5, name=name)(x)


def conv_general(lhs, rhs, window_strides, padding, *, feature_group_count=1, **options):
  """``lax.conv_general_dilated`` for NHWC images and HWIO kernels; where the kernel is
  larger than the image, the image's patches times the kernel instead.

  XLA's CPU convolution ran about 100x slower there (3 x 3 kernels over 2 x 2 x 512
  images, ResNet's last stage on 64 x 64 inputs, VGG's on 32 x 32: 0.6 GFLOP/s against
  45-140 elsewhere); ``nn.Conv(conv_general_dilated=conv_general)`` uses it;
  the patches' product computes the same sums in another order (float rounding).
  """
  kh, kw = rhs.shape[:2]
  dilated = any(d != 1 for key in ("lhs_dilation", "rhs_dilation") for d in options.get(key) or ())
  if (lhs.shape[1] >= kh and lhs.shape[2] >= kw) or feature_group_count != 1 or dilated:
    return jax.lax.conv_general_dilated(
      lhs, rhs, window_strides, padding, feature_group_count=feature_group_count, **options
    )
  patches = jax.lax.conv_general_dilated_patches(
    lhs,
    (kh, kw),
    window_strides,
    padding,
    dimension_numbers=("NHWC", "HWIO", "NHWC"),
    precision=jax.lax.Precision.HIGHEST,  # the patches are copies of the pixels
  )  # [n, h, w, C kh kw], channel-major
  kernel = jnp.transpose(rhs, (2, 0, 1, 3)).reshape(-1, rhs.shape[-1])
  return jnp.dot(patches, kernel, precision=options.get("precision"))
