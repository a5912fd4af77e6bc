"""What every hashing network returns: the hash head's logits and the features under it."""

from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import jax


class HashOutputs(NamedTuple):
  logits: jax.Array    # float32 [n, num_bits], the hash head's outputs; codes are their sign
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
