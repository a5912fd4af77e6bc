"""The crop agent's policy network (MCH): five dense layers over the state, two actions."""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax

from jhash.models import _layers as layers

NUM_ACTIONS = 2  #: the agent's actions per crop: 0 discard, 1 keep


class PolicyMLP(nn.Module):
  """MCH's policy: float32 [n, D] states -> float32 [n, 2] action logits (discard, keep).

  Five fully connected layers, as the paper (Li, Jiang and Li, "Multiple Code Hashing for
  Efficient Image Retrieval"): the ``hidden`` layers each Dense, BatchNorm, ReLU; the last
  Dense gives the logits of the two actions (the softmax over them is the policy
  ``pi(a | h)``). The paper gives no widths: the default halves from 512 down to 64.
  """

  hidden: Sequence[int] = (512, 256, 128, 64)

  @nn.compact
  def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
    for i, width in enumerate(self.hidden):
      x = nn.Dense(width, use_bias=False, name=f"hidden_{i}")(x)
      x = nn.relu(layers.batch_norm(x, train, f"bn_{i}"))
    return nn.Dense(NUM_ACTIONS, name="logits")(x)
