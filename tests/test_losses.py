"""jhash.losses against NumPy transcriptions of their formulas, and their documented sums."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jhash
import jhash.data
from jhash import losses


def _multi_hot(rng, n, c=5):
  y = rng.random((n, c)) < 0.3
  y[np.arange(n), rng.integers(0, c, n)] = True
  return y


@pytest.mark.parametrize("multi_label", [False, True])
def test_label_similarity_is_share_a_label(rng, multi_label):
  a = _multi_hot(rng, 30) if multi_label else rng.integers(0, 4, 30).astype(np.int32)
  b = _multi_hot(rng, 20) if multi_label else rng.integers(0, 4, 20).astype(np.int32)
  expected = jhash.data.similarity(a, b, "share_label").astype(np.float32)
  np.testing.assert_array_equal(losses.label_similarity(jnp.asarray(a), jnp.asarray(b)), expected)


def test_balanced_pair_weights_sum_as_documented(rng):
  s = (rng.random((12, 12)) < 0.2).astype(np.float32)
  mask = np.asarray(losses.off_diagonal(12))
  w = np.asarray(losses.balanced_pair_weights(jnp.asarray(s), jnp.asarray(mask)))
  pairs = mask.sum()
  np.testing.assert_allclose(w.sum(), pairs, rtol=1e-5)
  np.testing.assert_allclose(w[(s == 1) & mask].sum(), pairs / 2, rtol=1e-5)
  np.testing.assert_allclose(w[(s == 0) & mask].sum(), pairs / 2, rtol=1e-5)
  assert np.all(w[~mask] == 0)
  # HashNet's w = |S| / |S1| for similar pairs, up to the documented factor 1/2.
  similar = ((s == 1) & mask).sum()
  np.testing.assert_allclose(w[(s == 1) & mask], pairs / (2 * similar), rtol=1e-5)


def test_balanced_pair_weights_with_one_kind_only():
  w = losses.balanced_pair_weights(jnp.ones((3, 3)))
  np.testing.assert_array_equal(w, np.ones((3, 3)))


def _likelihood_numpy(u, v, s, w, alpha, eta):
  theta = alpha * (u @ v.T)
  nll = np.log1p(np.exp(theta)) - s * theta
  quant = np.mean(np.sum((u - np.sign(u)) ** 2, axis=1)) / u.shape[1]
  return np.sum(w * nll) / np.sum(w) + eta * quant


def test_pairwise_likelihood_value_and_gradient_against_numpy(rng):
  u = rng.normal(size=(6, 4))
  v = rng.normal(size=(5, 4))
  s = (rng.random((6, 5)) < 0.4).astype(np.float64)
  w = rng.random((6, 5))
  f = lambda uu: losses.pairwise_likelihood(
    uu,
    jnp.asarray(v, jnp.float32),
    jnp.asarray(s, jnp.float32),
    jnp.asarray(w, jnp.float32),
    alpha=0.5,
    quantization=0.3,
  )
  value, grad = jax.value_and_grad(f)(jnp.asarray(u, jnp.float32))
  np.testing.assert_allclose(value, _likelihood_numpy(u, v, s, w, 0.5, 0.3), rtol=1e-5)
  # d/du of the transcription: pair term sum_j w (sigmoid(theta) - s) alpha v_j / sum w,
  # quantisation 2 (u - sign u) / (n K).
  theta = 0.5 * u @ v.T
  pair = (w * (1 / (1 + np.exp(-theta)) - s)) @ v * 0.5 / w.sum()
  quant = 0.3 * 2 * (u - np.sign(u)) / (u.shape[0] * u.shape[1])
  np.testing.assert_allclose(grad, pair + quant, rtol=1e-4, atol=1e-6)


def test_pairwise_likelihood_defaults_are_dpsh_half_and_the_documented_eta(rng):
  # DPSH's theta = <u_i, v_j> / 2 (alpha = 1/2) and the documented eta = 0.1.
  u, v = rng.normal(size=(6, 4)), rng.normal(size=(5, 4))
  s = (rng.random((6, 5)) < 0.4).astype(np.float64)
  w = rng.random((6, 5))
  value = losses.pairwise_likelihood(*(jnp.asarray(a, jnp.float32) for a in (u, v, s, w)))
  np.testing.assert_allclose(value, _likelihood_numpy(u, v, s, w, 0.5, 0.1), rtol=1e-5)


def test_pairwise_likelihood_pulls_similar_and_pushes_dissimilar():
  u = jnp.asarray([[1.0, 1.0], [0.5, -0.5]])
  v = jnp.asarray([[1.0, 0.0]])
  for similar, direction in ((1.0, 1.0), (0.0, -1.0)):
    s = jnp.full((2, 1), similar)
    grad = jax.grad(
      lambda uu: losses.pairwise_likelihood(uu, v, s, jnp.ones((2, 1)), quantization=0.0)
    )(u)
    # A descent step moves u toward v (similar) or away from it (dissimilar).
    moved = (u - 0.1 * grad) @ v.T - u @ v.T
    assert np.all(direction * np.asarray(moved) > 0)
