"""Pieces every hashing network shares: its outputs, its hash head, its BatchNorm."""

from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import jax


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
