"""Controls for MCH: other rules for which extra codes an item keeps, on the same codes.

MCH keeps the code of each of an item's five fixed crops whose keep probability passes
``xi``. Whether its agent chose well shows only beside other rules applied to the same
trained base model and the same crops (``MCHExtras.crop_codes``):

* ``keep_all``: every crop's code (what keeping without an agent gives);
* ``keep_at_random``: each crop independently with one probability, set so that the
  expected codes per item equal MCH's (is the agent better than chance at its rate?);
* ``oracle_keep``: exactly the crops whose keep reward (``jhash.losses.keep_rewards``)
  against the training items is positive, read with the item's own labels: the agent's
  target, known only to an oracle;
* a positive control: extra codes an agent could not do better than (each object of the
  item coded alone, ``jhash.data.scene_items_alone``), given to ``kept_codes``.

Each gives ``(codes, mask)`` through ``kept_codes``, as ``encode_multi`` does.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jhash import losses
from jhash.methods._mch import _agent


def kept_codes(whole: jax.Array, extra: jax.Array, keep: jax.Array) -> tuple[jax.Array, jax.Array]:
  """An item's whole code first, then its extra codes, and which are kept.

  Args:
    whole: int8 or float [n, K] in {-1, +1}, each item's own code (always kept).
    extra: [n, m, K], candidate extra codes (crops' codes, or its objects').
    keep: bool [n, m], the extra codes to keep.
  Returns:
    (codes int8 [n, 1 + m, K], mask bool [n, 1 + m]): a code equal to an earlier kept
    code of its item is not kept again (``dedupe_mask``).
  """
  codes = jnp.concatenate([whole[:, None, :], extra], axis=1).astype(jnp.int8)
  wanted = jnp.concatenate([jnp.ones_like(keep[:, :1], bool), keep.astype(bool)], axis=1)
  return codes, _agent.dedupe_mask(codes, wanted)


def keep_all(keep_probability: jax.Array) -> jax.Array:
  """bool [n, m]: every extra code kept."""
  return jnp.ones(keep_probability.shape, bool)


def keep_at_random(key: jax.Array, shape: tuple[int, int], rate: float | jax.Array) -> jax.Array:
  """bool ``shape``: each extra code kept independently with probability ``rate``."""
  return jax.random.bernoulli(key, rate, shape)


def matching_rate(mask: jax.Array) -> jax.Array:
  """float32 []: the keep probability per extra code that gives, in expectation, the codes
  per item of ``mask`` [n, 1 + m] (its whole code aside)."""
  extra = mask.shape[1] - 1
  return (jnp.mean(jnp.sum(mask, axis=1).astype(jnp.float32)) - 1.0) / extra


def oracle_keep(
  whole: jax.Array,
  crops: jax.Array,
  others: jax.Array,
  similarity: jax.Array,
  table: jax.Array,
) -> jax.Array:
  """bool [n, m]: the crops whose keep reward is positive.

  Args:
    whole: [n, K] in {-1, +1}, the items' codes.
    crops: [n, m, K], their crops' codes.
    others: [p, K], the codes of the items the reward is read against (the training set).
    similarity: float [n, p] in {0, 1}, by the items' own labels.
    table: float [2, K + 1], the base's loss on codes (``extras.code_loss``).
  Returns:
    ``keep_rewards`` of each crop > 0, pairs weighted as the agent's
    (``balanced_pair_weights``).
  """
  weights = losses.balanced_pair_weights(similarity)
  whole, others = whole.astype(jnp.float32), others.astype(jnp.float32)

  def one_crop(crop):  # crop [n, K]
    return losses.keep_rewards(whole, crop.astype(jnp.float32), others, similarity, weights, table)

  rewards = jax.vmap(one_crop, in_axes=1, out_axes=1)(crops)
  return rewards > 0
