"""MMHH: a t-distribution cross-entropy re-weighted by a Hamming-ball margin.

Kang, Cao, Long, Wang and Yu, "Maximum-Margin Hamming Hashing", ICCV 2019. On the relaxed
Hamming distance ``d_ij = (K/2) (1 - cos(h_i, h_j))`` of ``h = tanh(z)`` (as DCH), a pair is
similar with the heavy-tailed probability

    p_ij = (1/2) gamma / (d_ij + gamma)        (at most 1/2, reached at d = 0),

and the cross-entropy of the labels is
``s_ij log(1 / p_ij) + (1 - s_ij) log(1 / (1 - p_ij))``. The margin is the Hamming radius
``H`` of the lookup: a pair's weight is scaled by one of four factors according to its
label and to whether ``d_ij <= H`` (inside the Hamming ball) or not
(``mmhh_margin_weights``), so that similar pairs already inside the ball, which are
retrieved anyway, are penalised less. The quantisation term is ``log cosh(|h| - 1)``.

Defaults are those of the authors' code (``thuml/MMHH``): the README's training command
(``--radius 2 --gamma 10.0 --loss_lambda 0.001``) and the margin factors of
``src/train_mmhh.py`` (``--margin_params 0.5:0.8:1.0:1.0:2.0``: similar inside 0.5,
dissimilar inside 0.8, both outside 1, margin 2). Note that with these factors the
dissimilar pairs inside the ball are also down-weighted, and those outside are not.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jhash import _checks
from jhash.losses._dch import cosine_hamming_distance


def mmhh_margin_weights(
  similarity: jax.Array,
  weights: jax.Array,
  distance: jax.Array,
  *,
  margin: float = 2.0,
  similar_inside: float = 0.5,
  dissimilar_inside: float = 0.8,
  similar_outside: float = 1.0,
  dissimilar_outside: float = 1.0,
) -> jax.Array:
  """Pair weights scaled by label and by the side of the Hamming ball ``d <= margin``.

      w'_ij = w_ij * { similar_inside      if s_ij = 1 and d_ij <= H
                       dissimilar_inside   if s_ij = 0 and d_ij <= H
                       similar_outside     if s_ij = 1 and d_ij >  H
                       dissimilar_outside  if s_ij = 0 and d_ij >  H }

  so ``sum w'`` is the four groups' sums of ``w``, each times its factor. The factors are
  constant in ``d``: no gradient flows through the choice of side.

  Args:
    similarity: float [b, m] in {0, 1}.
    weights: float [b, m].
    distance: float [b, m], the relaxed Hamming distances ``d_ij``.
    margin: ``H``, the Hamming radius.
    similar_inside, dissimilar_inside, similar_outside, dissimilar_outside: the factors.
  Returns:
    float32 [b, m].
  """
  inside = lax.stop_gradient(distance) <= margin
  similar = similarity > 0
  factor = jnp.where(
    inside,
    jnp.where(similar, similar_inside, dissimilar_inside),
    jnp.where(similar, similar_outside, dissimilar_outside),
  )
  return weights * factor


def mmhh_loss(
  u: jax.Array,
  v: jax.Array,
  similarity: jax.Array,
  weights: jax.Array,
  *,
  gamma: float = 10.0,
  margin: float = 2.0,
  similar_inside: float = 0.5,
  dissimilar_inside: float = 0.8,
  similar_outside: float = 1.0,
  dissimilar_outside: float = 1.0,
  quantization: float = 0.001,
) -> jax.Array:
  """MMHH's margin-weighted t-distribution cross-entropy plus its log-cosh quantisation::

      h_i = tanh(u_i),   h'_j = tanh(v_j),   d_ij = (K/2) (1 - cos(h_i, h'_j)),
      p_ij = 0.5 gamma / (d_ij + gamma),
      L = sum_ij w'_ij (s_ij log(1 / p_ij) + (1 - s_ij) log(1 / (1 - p_ij))) / sum_ij w_ij
          + lambda mean_i sum_k log cosh(|h_ik| - 1),

  ``w' = mmhh_margin_weights(s, w, d, ...)``. The pair term is divided by the sum of the
  weights before the margin re-weighting, so that a down-weighted pair lowers the loss
  (the authors' code divides by the number of pairs); the quantisation term is, as there,
  summed over bits and averaged over items.

  Args:
    u: float [b, K], the minibatch's raw outputs.
    v: float [m, K], the other side's raw outputs (``u`` itself for in-batch pairs).
    similarity: float [b, m] in {0, 1}.
    weights: float [b, m], pair weights (0 for pairs that do not count).
    gamma: the scale of the t-distribution, in bits.
    margin: ``H``, the Hamming radius of the ball.
    similar_inside, dissimilar_inside, similar_outside, dissimilar_outside: the
      margin factors (``mmhh_margin_weights``).
    quantization: ``lambda``, the weight of the quantisation term.
  Returns:
    float32 [].
  """
  for name, a in (("u", u), ("v", v), ("similarity", similarity), ("weights", weights)):
    _checks.rank(a, 2, name)
  h = jnp.tanh(u)
  d = cosine_hamming_distance(h, jnp.tanh(v))
  # log(1/p) = log 2 + log(1 + d/gamma);  log(1/(1-p)) = log(1 + 0.5 gamma / (d + 0.5 gamma)).
  nll = similarity * (jnp.log(2.0) + jnp.log1p(d / gamma)) + (1.0 - similarity) * jnp.log1p(
    0.5 * gamma / (d + 0.5 * gamma)
  )
  scaled = mmhh_margin_weights(
    similarity,
    weights,
    d,
    margin=margin,
    similar_inside=similar_inside,
    dissimilar_inside=dissimilar_inside,
    similar_outside=similar_outside,
    dissimilar_outside=dissimilar_outside,
  )
  pair_term = jnp.sum(scaled * nll) / jnp.maximum(jnp.sum(weights), 1e-12)
  quant = jnp.mean(jnp.sum(_log_cosh(jnp.abs(h) - 1.0), axis=1))
  return pair_term + quantization * quant


def _log_cosh(x: jax.Array) -> jax.Array:
  """``log cosh(x) = |x| + log(1 + exp(-2|x|)) - log 2``, without overflow."""
  a = jnp.abs(x)
  return a + jnp.log1p(jnp.exp(-2.0 * a)) - jnp.log(2.0)
