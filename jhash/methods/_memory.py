"""A memory bank: the latest outputs (or codes) of every training item, with its labels.

The minibatch methods that pair an item with the whole training set (``pairwise`` with
``memory=True``, ADSH's ``U``, MCH's reward) keep one row per training item, written when
the item is in a minibatch, and read the pairs of a minibatch with every filled row
(``pairs_with_memory``). Its size grows linearly with the training set: ``n * K * 4``
bytes of outputs plus the labels (60,000 items at 64 bits: 15 MB).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jhash import losses


class Memory(NamedTuple):
  """The latest outputs of every training item (a memory bank), with their labels."""

  outputs: jax.Array  # float32 [n, K]: the item's output when it was last in a minibatch
  labels: jax.Array  # int32 [n] class ids or bool [n, C] multi-hot
  filled: jax.Array  # bool [n]: the item has been seen (its output is set)


def empty_memory(num_items: int, num_bits: int, labels: jax.Array) -> Memory:
  """A memory bank of ``num_items`` rows, none filled, labels shaped like ``labels``."""
  shape = (num_items,) + tuple(labels.shape[1:])
  return Memory(
    jnp.zeros((num_items, num_bits), jnp.float32),
    jnp.zeros(shape, labels.dtype),
    jnp.zeros((num_items,), bool),
  )


def write_memory(memory: Memory, index: jax.Array, outputs: jax.Array, labels: jax.Array) -> Memory:
  """The memory with rows ``index`` set to a minibatch's outputs (no gradient) and labels."""
  return Memory(
    memory.outputs.at[index].set(lax.stop_gradient(outputs)),
    memory.labels.at[index].set(labels),
    memory.filled.at[index].set(True),
  )


def pairs_with_memory(labels: jax.Array, index: jax.Array, memory: Memory | None):
  """Similarities and balanced weights of a minibatch's pairs: in-batch, then memory.

  Returns (similarity float32 [b, b + n], weights float32 [b, b + n]) with the
  minibatch's own rows first (the diagonal left out), then the memory's filled rows
  other than the items themselves; without memory only the [b, b] in-batch block.
  """
  b = labels.shape[0]
  similarity = losses.label_similarity(labels, labels)
  mask = losses.off_diagonal(b)
  if memory is not None:
    n = memory.filled.shape[0]
    own = jnp.zeros((b, n), bool).at[jnp.arange(b), index].set(True)
    similarity = jnp.concatenate(
      [similarity, losses.label_similarity(labels, memory.labels)], axis=1
    )
    mask = jnp.concatenate([mask, memory.filled[None, :] & ~own], axis=1)
  return similarity, losses.balanced_pair_weights(similarity, mask)
