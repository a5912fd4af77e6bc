"""MCH's reward and policy-gradient loss (Li, Jiang and Li, "Multiple Code Hashing for Efficient
Image Retrieval", Section 3).

The reward of keeping a crop's code ``c_i`` next to an image's code ``b_i`` is the fall of
the base model's pairwise loss when the image's distance to each other item ``j`` becomes
the asymmetric ``d*_ij = min(d_H(b_i, b_j), d_H(c_i, b_j))``, as hash-bucket search sees it
(the item is found at the nearer of its buckets). Every base loss here is a function of a
pair's similarity and its codes' inner product ``K - 2 d``, so on codes it is a table
``T[s, d]`` over ``s`` in {0, 1} and ``d`` in 0..K (``code_loss_table``).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jhash import _checks


def _only(x, name: str, values: tuple, what: str) -> None:
  """Where ``x`` is concrete, every entry is one of ``values`` (``what`` says so)."""
  if not _checks.is_concrete(x):
    return
  a = np.asarray(x)
  bad = np.ones(a.shape, bool)
  for v in values:
    bad &= a != v
  if bad.any():
    raise ValueError(
      f"{name} must hold {what}; found {int(bad.sum())} other values "
      f"({np.unique(a[bad])[:5].tolist()}...) in {_checks.describe(x)}."
    )


def codes_at_distance(num_bits: int) -> jax.Array:
  """float32 [K + 1, K]: row ``d`` is the all-ones code with its first ``d`` bits flipped,
  so its Hamming distance to the all-ones code is ``d``."""
  bits = jnp.arange(num_bits)
  return jnp.where(bits[None, :] < jnp.arange(num_bits + 1)[:, None], -1.0, 1.0)


def code_loss_table(
  loss: Callable, num_bits: int, activation: Callable[[jax.Array], jax.Array] | None = None
) -> jax.Array:
  """A pairwise loss on binary codes, as a table over similarity and Hamming distance.

  ``T[s, d] = loss(a(1), a(c_d), [[s]], [[1]])``: the loss of one pair of weight 1, the
  all-ones code against ``c_d`` (``codes_at_distance``), both through ``activation``: the
  loss's inputs at which its relaxed codes are the codes (default identity, for a loss
  that reads the codes as they are; ``saturated`` for one that applies ``tanh`` inside).
  Terms of a loss on single codes (quantisation) are the same in every entry, so they
  cancel in the reward's differences.

  Args:
    loss: ``loss(u, v, similarity, weights) -> float32 []`` (``jhash.losses``'s
      signature).
    num_bits: K.
    activation: ``activation(codes) -> outputs`` applied to both sides.
  Returns:
    float32 [2, K + 1]: row 0 dissimilar pairs, row 1 similar pairs.
  """
  act = (lambda c: c) if activation is None else activation
  anchor = act(jnp.ones((1, num_bits), jnp.float32))
  others = act(codes_at_distance(num_bits))

  def one(s, other):
    return loss(
      anchor, other[None, :], jnp.full((1, 1), s, jnp.float32), jnp.ones((1, 1), jnp.float32)
    )

  return jax.vmap(lambda s: jax.vmap(lambda o: one(s, o))(others))(jnp.array([0.0, 1.0]))


#: The loss input whose tanh is 1 in float32 (``tanh(20) = 1 - 8e-18``): ``TANH_SATURATION *
#: codes`` are outputs at which a loss that squashes by ``tanh(u)`` or ``tanh(u / 2)`` reads
#: the codes themselves.
TANH_SATURATION = 40.0


def saturated(codes: jax.Array) -> jax.Array:
  """The raw outputs at which a tanh-squashing loss's relaxed codes equal ``codes``.

  For ``code_loss_table``'s ``activation`` with the losses that apply ``tanh`` inside
  (``ksh_loss``'s ``2 sigmoid(u) - 1 = tanh(u / 2)``, ``hashnet_loss``, ``dch_loss``,
  ``mmhh_loss``): ``TANH_SATURATION * codes``, so ``tanh`` gives ``codes`` exactly in
  float32 and the table is the loss on the binary codes, as MCH's reward reads it.
  """
  return TANH_SATURATION * jnp.asarray(codes, jnp.float32)


def hamming_of_signs(a: jax.Array, b: jax.Array) -> jax.Array:
  """Hamming distances between codes in {-1, +1}: int32 [m, n] from [m, K] and [n, K]."""
  k = a.shape[-1]
  inner = a.astype(jnp.float32) @ b.astype(jnp.float32).T
  return jnp.round((k - inner) / 2.0).astype(jnp.int32)


def keep_rewards(
  codes: jax.Array,
  crop_codes: jax.Array,
  others: jax.Array,
  similarity: jax.Array,
  weights: jax.Array,
  table: jax.Array,
) -> jax.Array:
  """The reward of keeping each crop's code: the weighted mean fall of the pair loss.

      r_i = sum_j w_ij (T[s_ij, d_ij] - T[s_ij, min(d_ij, d*_ij)]) / sum_j w_ij,

  with ``d_ij = d_H(b_i, o_j)``, ``d*_ij = d_H(c_i, o_j)`` over the other items ``o_j``
  (pairs of weight 0, such as an item with itself, do not count; an item with no counted
  pair gets 0). Positive when the crop's code brings the image nearer to similar items
  (or away from nothing), negative when it lets dissimilar ones find it.

  Args:
    codes: float [b, K] in {-1, +1}, the images' codes ``b_i``.
    crop_codes: float [b, K], the crops' codes ``c_i``.
    others: float [m, K], the other items' codes ``o_j``.
    similarity: float [b, m] in {0, 1}.
    weights: float [b, m], pair weights (``balanced_pair_weights``).
    table: float [2, K + 1], ``code_loss_table``, finite.
  Returns:
    float32 [b].
  Raises:
    ValueError: shapes that do not fit (nothing is broadcast), a non-real array, or
      (concrete values only) codes other than -1 and +1, similarities other than 0 and 1
      (a similarity of 2 would read past the table), or NaN / infinite weights or table.
      Under jit only shapes and dtypes are checked.
  """
  names = ("codes", "crop_codes", "others", "similarity", "weights", "table")
  given = (codes, crop_codes, others, similarity, weights, table)
  arrays = [_checks.as_array(a, name) for name, a in zip(names, given)]
  for name, a in zip(names, arrays):
    _checks.rank(a, 2, name)
  codes, crop_codes, others, similarity, weights, table = arrays
  for name, a in (("codes", codes), ("crop_codes", crop_codes), ("others", others)):
    _checks.real_array(a, name, "codes of -1 and +1 (int8 or float)")
    _only(a, name, (-1, 1), "codes as signs, only -1 and +1 (jhash.codes.sign gives signs)")
  b, k = codes.shape
  m = others.shape[0]
  want = {"codes": (b, k), "crop_codes": (b, k), "others": (m, k)}
  want.update(similarity=(b, m), weights=(b, m))
  got = {
    "codes": codes.shape,
    "crop_codes": crop_codes.shape,
    "others": others.shape,
    "similarity": similarity.shape,
    "weights": weights.shape,
  }
  if any(tuple(got[n]) != w for n, w in want.items()):
    shown = ", ".join(f"{n} {list(s)}" for n, s in got.items())
    raise ValueError(
      "codes, crop_codes, others, similarity and weights do not fit together (codes [b, K], "
      f"crop_codes [b, K], others [m, K], similarity [b, m], weights [b, m]); got {shown}."
    )
  if _checks.dtype_of(similarity) != np.bool_:
    _checks.real_array(similarity, "similarity", "float or bool [b, m] in {0, 1}")
  _only(similarity, "similarity", (0, 1), "only 0 and 1 (dissimilar, similar pairs)")
  _checks.real_array(weights, "weights", "float [b, m] pair weights")
  _checks.finite(weights, "weights")
  if tuple(table.shape) != (2, k + 1):
    raise ValueError(
      f"table must be the loss on codes [2, K + 1] = [2, {k + 1}] (code_loss_table); got "
      f"{_checks.describe(table)}."
    )
  _checks.real_array(table, "table", "float [2, K + 1], the loss on codes (code_loss_table)")
  _checks.finite(table, "table")
  table = jnp.asarray(table, jnp.float32)  # a NumPy table indexed by traced distances
  d = hamming_of_signs(codes, others)
  d_kept = jnp.minimum(d, hamming_of_signs(crop_codes, others))
  s = similarity.astype(jnp.int32)
  fall = table[s, d] - table[s, d_kept]
  w = weights.astype(jnp.float32)
  total = jnp.sum(w, axis=1)
  return jnp.sum(w * fall, axis=1) / jnp.where(total > 0, total, 1.0)


def reinforce_loss(logits: jax.Array, actions: jax.Array, advantages: jax.Array) -> jax.Array:
  """REINFORCE (Williams, 1992) as a loss: ``-mean_i A_i log pi(a_i | h_i)``.

  Its gradient is the policy-gradient estimate ``-mean_i A_i grad log pi(a_i | h_i)``:
  with actions drawn from the policy and ``A_i = r_i - baseline`` (a baseline that does
  not depend on the action), its expectation is minus the gradient of the expected
  reward. ``advantages`` carry no gradient.

  Args:
    logits: float [b, A], the policy's action logits.
    actions: int [b], the actions taken.
    advantages: float [b].
  Returns:
    float32 [].
  """
  log_pi = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  taken = jnp.take_along_axis(log_pi, actions[:, None].astype(jnp.int32), axis=1)[:, 0]
  return -jnp.mean(jax.lax.stop_gradient(advantages) * taken)
