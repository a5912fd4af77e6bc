"""The five deep hashing base models' losses (KSH, HashNet, ADSH, DCH, MMHH).

Each loss against a float64 NumPy transcription of its paper's formula (value, and
gradient by central differences); each pulls a similar pair together and pushes a
dissimilar one apart; ADSH's code step against brute force; KSH's greedy fit on a
separable case; MMHH's margin weights; and every loss inside ``jhash.methods.pairwise``.
"""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import jhash
from jhash import losses

import _deep_loss_reference as ref

MMHH_FACTORS = (0.3, 0.6, 1.2, 1.7)  # similar in, dissimilar in, similar out, dissimilar out

# name -> (jhash loss with its hyperparameters, NumPy reference of (u, v, s, w)). The
# hyperparameters differ from the defaults where a default of 0 or 1 would hide a factor.
CASES = {
  "ksh": (losses.ksh_loss, ref.ksh),
  "hashnet": (
    functools.partial(losses.hashnet_loss, beta=1.7, alpha=0.9),
    lambda u, v, s, w: ref.hashnet(u, v, s, w, beta=1.7, alpha=0.9),
  ),
  "adsh": (
    functools.partial(losses.adsh_loss, gamma=3.0),
    lambda u, v, s, w: ref.adsh(u, v, s, w, gamma=3.0, own=ref.sign(u)),
  ),
  "dch": (
    functools.partial(losses.dch_loss, gamma=2.0, quantization=0.7),
    lambda u, v, s, w: ref.dch(u, v, s, w, gamma=2.0, lam=0.7),
  ),
}


def _mmhh_case(margin):
  loss = functools.partial(
    losses.mmhh_loss,
    gamma=3.0,
    margin=margin,
    quantization=0.4,
    similar_inside=MMHH_FACTORS[0],
    dissimilar_inside=MMHH_FACTORS[1],
    similar_outside=MMHH_FACTORS[2],
    dissimilar_outside=MMHH_FACTORS[3],
  )
  reference = lambda u, v, s, w: ref.mmhh(
    u, v, s, w, gamma=3.0, margin=margin, factors=MMHH_FACTORS, lam=0.4
  )
  return loss, reference


def _pairs(rng, b=6, m=5, k=8):
  u = rng.normal(size=(b, k))
  v = rng.normal(size=(m, k))
  s = (rng.random((b, m)) < 0.4).astype(np.float64)
  s[0, 0], s[0, 1] = 1.0, 0.0
  w = 0.5 + rng.random((b, m))
  return u, v, s, w


def _case(name, u, v):
  if name != "mmhh":
    return CASES[name]
  # The margin halfway between two distances near the median: pairs on both sides of
  # the Hamming ball, none on its border (where a finite difference would jump).
  d = np.unique(np.round(ref.relaxed_hamming(np.tanh(u), np.tanh(v)), 6))
  middle = len(d) // 2
  return _mmhh_case(float(d[middle - 1] + d[middle]) / 2)


def _f32(*arrays):
  return tuple(jnp.asarray(a, jnp.float32) for a in arrays)


def _assert_gradient_close(grad, expected):
  # Float32 autodiff against float64 central differences: a wrong factor or sign is off
  # by the gradient's own size, far beyond this tolerance.
  scale = np.max(np.abs(expected))
  assert scale > 1e-3
  np.testing.assert_allclose(grad, expected, rtol=2e-3, atol=2e-3 * scale)


NAMES = ["ksh", "hashnet", "adsh", "dch", "mmhh"]


@pytest.mark.parametrize("name", NAMES)
def test_loss_value_and_gradients_against_numpy(rng, name):
  u, v, s, w = _pairs(rng)
  loss, reference = _case(name, u, v)
  value, (grad_u, grad_v) = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(*_f32(u, v, s, w))
  np.testing.assert_allclose(value, reference(u, v, s, w), rtol=1e-5)
  _assert_gradient_close(grad_u, ref.central_gradient(lambda x: reference(x, v, s, w), u))
  if name == "adsh":
    # The codes are held fixed: no gradient reaches v (the reference's sign(v) is flat).
    np.testing.assert_array_equal(grad_v, 0.0)
  else:
    _assert_gradient_close(grad_v, ref.central_gradient(lambda x: reference(u, x, s, w), v))


@pytest.mark.parametrize("name", NAMES)
def test_in_batch_pairs_as_the_pairwise_method_passes_them(rng, name):
  # loss(u, u, s, w) with w balanced over distinct pairs: the gradient counts both sides.
  labels = rng.integers(0, 3, 7)
  s = (labels[:, None] == labels[None, :]).astype(np.float64)
  w = np.asarray(
    losses.balanced_pair_weights(jnp.asarray(s, jnp.float32), losses.off_diagonal(7)), np.float64
  )
  u = rng.normal(size=(7, 8))
  loss, reference = _case(name, u, u)
  value, grad = jax.jit(jax.value_and_grad(lambda x, s, w: loss(x, x, s, w)))(*_f32(u, s, w))
  np.testing.assert_allclose(value, reference(u, u, s, w), rtol=1e-5)
  if name == "adsh":
    # ADSH's codes of the minibatch are sign(u), held fixed (no gradient).
    expected = ref.central_gradient(lambda x: ref.adsh(x, u, s, w, gamma=3.0, own=ref.sign(u)), u)
  else:
    expected = ref.central_gradient(lambda x: reference(x, x, s, w), u)
  _assert_gradient_close(grad, expected)


def test_adsh_takes_the_items_own_codes(rng):
  u, v, s, w = _pairs(rng)
  codes = ref.sign(rng.normal(size=u.shape))
  loss = jax.jit(functools.partial(losses.adsh_loss, gamma=3.0))
  value = loss(*_f32(u, ref.sign(v), s, w), own_codes=jnp.asarray(codes, jnp.int8))
  np.testing.assert_allclose(value, ref.adsh(u, v, s, w, gamma=3.0, own=codes), rtol=1e-5)


def test_defaults_are_the_papers(rng):
  u, v, s, w = _pairs(rng)
  args = _f32(u, v, s, w)
  value = lambda loss: jax.jit(loss)(*args)
  np.testing.assert_allclose(
    value(losses.hashnet_loss), ref.hashnet(u, v, s, w, beta=1.0, alpha=10.0 / 8), rtol=1e-5
  )
  np.testing.assert_allclose(
    value(losses.adsh_loss), ref.adsh(u, v, s, w, gamma=200.0, own=ref.sign(u)), rtol=1e-5
  )
  np.testing.assert_allclose(
    value(losses.dch_loss), ref.dch(u, v, s, w, gamma=20.0, lam=0.1), rtol=1e-5
  )
  np.testing.assert_allclose(
    value(losses.mmhh_loss),
    ref.mmhh(u, v, s, w, gamma=10.0, margin=2.0, factors=(0.5, 0.8, 1.0, 1.0), lam=0.001),
    rtol=1e-5,
  )


def test_mmhh_defaults_inside_the_hamming_ball(rng):
  # Random pairs of 8 bits lie outside the default ball (d > 2): here three pairs of
  # near-equal outputs lie inside it, of both labels, so every default factor counts.
  u = rng.normal(size=(4, 8))
  v = np.concatenate([u[:3] + 0.05 * rng.normal(size=(3, 8)), rng.normal(size=(2, 8))])
  s = np.zeros((4, 5))
  s[0, 0] = s[2, 2] = s[3, 4] = s[1, 3] = 1.0
  w = 0.5 + rng.random((4, 5))
  d = ref.relaxed_hamming(np.tanh(u), np.tanh(v))
  inside = d <= 2.0
  assert (inside & (s == 1)).any() and (inside & (s == 0)).any()
  assert (~inside & (s == 1)).any() and (~inside & (s == 0)).any()
  np.testing.assert_allclose(
    jax.jit(losses.mmhh_loss)(*_f32(u, v, s, w)),
    ref.mmhh(u, v, s, w, gamma=10.0, margin=2.0, factors=(0.5, 0.8, 1.0, 1.0), lam=0.001),
    rtol=1e-5,
  )


@pytest.mark.parametrize("name", NAMES)
def test_loss_jits(rng, name):
  u, v, s, w = _pairs(rng)
  loss, reference = _case(name, u, v)
  traces = []
  jitted = jax.jit(lambda *args: traces.append(1) or loss(*args))
  np.testing.assert_allclose(jitted(*_f32(u, v, s, w)), reference(u, v, s, w), rtol=1e-5)
  u2, v2, s2, w2 = _pairs(rng)  # new values, same shapes: no retrace
  np.testing.assert_allclose(jitted(*_f32(u2, v2, s2, w2)), reference(u2, v2, s2, w2), rtol=1e-5)
  assert len(traces) == 1


def _inner_distance(h, g):
  """(K - <h, g>) / 2: the Hamming distance on codes, for losses of inner products."""
  return (h.shape[-1] - h @ g) / 2


def _cosine_distance(h, g):
  return ref.relaxed_hamming(h[None, :], g[None, :])[0, 0]


# name -> (loss without its quantisation term, relaxation of u, of v, distance).
PULL_PUSH = {
  "ksh": (losses.ksh_loss, lambda x: np.tanh(x / 2), lambda x: np.tanh(x / 2), _inner_distance),
  "hashnet": (losses.hashnet_loss, np.tanh, np.tanh, _inner_distance),
  "adsh": (functools.partial(losses.adsh_loss, gamma=0.0), np.tanh, np.sign, _inner_distance),
  "dch": (functools.partial(losses.dch_loss, quantization=0.0), np.tanh, np.tanh, _cosine_distance),
  "mmhh": (
    functools.partial(losses.mmhh_loss, quantization=0.0),
    np.tanh,
    np.tanh,
    _cosine_distance,
  ),
}


@pytest.mark.parametrize("name", NAMES)
def test_one_step_pulls_similar_and_pushes_dissimilar(name):
  loss, relax_u, relax_v, distance = PULL_PUSH[name]
  u = np.asarray([[0.6, -0.4, 0.3, 0.2, -0.5, 0.1]])
  v = np.asarray([[0.5, 0.7, -0.6, 0.4, -0.3, -0.8]])
  before = distance(relax_u(u[0]), relax_v(v[0]))
  grad_fn = jax.jit(jax.grad(loss))
  for similar in (1.0, 0.0):
    grad = np.asarray(grad_fn(*_f32(u, v, np.full((1, 1), similar), np.ones((1, 1)))))
    stepped = u - 0.05 * grad / np.linalg.norm(grad)
    after = distance(relax_u(stepped[0]), relax_v(v[0]))
    assert (after < before) if similar else (after > before), (similar, before, after)


def test_hashnet_beta_follows_the_authors_schedule():
  steps = jnp.asarray([0, 199, 200, 399, 400, 799, 800])
  np.testing.assert_allclose(
    jax.jit(jax.vmap(losses.hashnet_beta))(steps), np.sqrt([1, 1, 2, 2, 3, 4, 5]), rtol=1e-6
  )
  # The general form: (1 + rate * period * (step // period)) ** power.
  np.testing.assert_allclose(
    losses.hashnet_beta(250, period=100, rate=0.02, power=1.0), 1 + 0.02 * 100 * 2, rtol=1e-6
  )


def test_mmhh_margin_weights_sum_as_documented(rng):
  s = (rng.random((9, 7)) < 0.4).astype(np.float32)
  w = rng.random((9, 7)).astype(np.float32)
  d = rng.uniform(0, 6, (9, 7)).astype(np.float32)
  d[0, 0] = 2.0  # on the margin: inside the ball
  factors = dict(
    zip(
      ("similar_inside", "dissimilar_inside", "similar_outside", "dissimilar_outside"), MMHH_FACTORS
    )
  )
  margin_weights = jax.jit(functools.partial(losses.mmhh_margin_weights, margin=2.0, **factors))
  scaled = np.asarray(margin_weights(*_f32(s, w, d)))
  np.testing.assert_allclose(scaled, ref.mmhh_weights(s, w, d, 2.0, MMHH_FACTORS), rtol=1e-6)
  groups = [(s == 1) & (d <= 2), (s == 0) & (d <= 2), (s == 1) & (d > 2), (s == 0) & (d > 2)]
  assert all(g.any() for g in groups)
  for group, factor in zip(groups, MMHH_FACTORS):
    np.testing.assert_allclose(scaled[group].sum(), factor * w[group].sum(), rtol=1e-5)
  np.testing.assert_allclose(
    scaled.sum(), sum(f * w[g].sum() for g, f in zip(groups, MMHH_FACTORS)), rtol=1e-5
  )
  ones = jax.jit(
    functools.partial(losses.mmhh_margin_weights, similar_inside=1.0, dissimilar_inside=1.0)
  )(*_f32(s, w, d))
  np.testing.assert_array_equal(ones, w)


def _adsh_problem(rng, n=8, k=3, index=(5, 1, 6, 2)):
  codes = ref.sign(rng.normal(size=(n, k)))
  outputs = np.tanh(rng.normal(size=(len(index), k)))
  s_tilde = ref.sign(rng.normal(size=(len(index), n)))
  return codes, outputs, s_tilde, np.asarray(index)


def test_adsh_objective_against_numpy(rng):
  codes, outputs, s_tilde, index = _adsh_problem(rng)
  objective = jax.jit(losses.adsh_objective)
  np.testing.assert_allclose(
    objective(*_f32(codes, outputs, s_tilde), index, 7.0),
    ref.adsh_objective(codes, outputs, s_tilde, index, 7.0),
    rtol=1e-5,
  )


@pytest.mark.parametrize(
  "seed,index,gamma", [(0, (5, 1, 6, 2), 5.0), (1, (0, 3, 4, 7), 5.0), (2, (3, 3, 0, 6), 200.0)]
)  # 3 sampled twice; gamma large enough that it counts
def test_adsh_code_step_is_the_brute_force_minimiser_column_by_column(seed, index, gamma):
  rng = np.random.default_rng(seed)
  codes, outputs, s_tilde, index = _adsh_problem(rng, index=index)
  # Column by column, every one of the 2^n values of the column, the others fixed.
  expected = codes.copy()
  objective = [ref.adsh_objective(expected, outputs, s_tilde, index, gamma)]
  for k in range(codes.shape[1]):
    best = None
    for column in itertools.product((-1.0, 1.0), repeat=codes.shape[0]):
      trial = expected.copy()
      trial[:, k] = column
      j = ref.adsh_objective(trial, outputs, s_tilde, index, gamma)
      if best is None or j < best[0]:
        best = (j, trial)
    expected = best[1]
    objective.append(best[0])
  updated = jax.jit(losses.adsh_update_codes)(*_f32(codes, outputs, s_tilde), index, gamma)
  np.testing.assert_array_equal(updated, expected)
  assert np.all(np.diff(objective) <= 1e-9)


def test_adsh_code_step_sets_a_zero_coefficient_to_plus_one():
  # Outputs 0: every coefficient 2 V_-k U_-k^T U_k + Qbar_k is exactly 0, and J does not
  # depend on V; the documented tie-break takes +1 (sign(0) = +1, as jhash's codes).
  codes = -np.ones((5, 3))
  s_tilde = ref.sign(np.random.default_rng(0).normal(size=(2, 5)))
  updated = jax.jit(losses.adsh_update_codes)(
    *_f32(codes, np.zeros((2, 3)), s_tilde), np.asarray([0, 3]), 200.0
  )
  np.testing.assert_array_equal(updated, 1.0)


def test_adsh_code_steps_never_raise_the_objective(rng):
  codes, outputs, s_tilde, index = _adsh_problem(rng, n=40, k=6, index=tuple(range(0, 40, 3)))
  step = jax.jit(losses.adsh_update_codes)
  values = [ref.adsh_objective(codes, outputs, s_tilde, index, 200.0)]
  for _ in range(3):
    codes = np.asarray(step(*_f32(codes, outputs, s_tilde), index, 200.0), np.float64)
    assert set(np.unique(codes)) <= {-1.0, 1.0}
    values.append(ref.adsh_objective(codes, outputs, s_tilde, index, 200.0))
  assert np.all(np.diff(values) <= 1e-6 * values[0]), values
  assert values[-1] < values[0]


def test_rbf_anchor_features_against_numpy(rng):
  x = rng.normal(size=(12, 3))
  anchors = x[[1, 4, 7, 9]]
  sigma, mu = jax.jit(losses.rbf_anchor_statistics)(*_f32(x, anchors))
  squared = ((x[:, None, :] - anchors[None, :, :]) ** 2).sum(-1)
  np.testing.assert_allclose(sigma**2, squared.mean(), rtol=1e-5)
  features = jax.jit(losses.rbf_anchor_features)(*_f32(x, anchors), sigma, mu)
  np.testing.assert_allclose(
    features, ref.rbf_features(x, anchors, float(sigma), np.asarray(mu)), rtol=1e-4, atol=1e-6
  )
  # Centred by the training mean.
  np.testing.assert_allclose(np.mean(features, axis=0), 0.0, atol=1e-6)


# (classes, ||K S~ - sum_{t<k} h_t h_t^T||_F for k = 0..K) for 40 items and K = 2 bits
# (the same shapes: one compilation). Two classes: each bit splits them. Four classes: the
# first bit splits them in pairs, and only the residual turns the second to the other
# pairing (the same split again would leave the pairs' codes equal).
KSH_CASES = [(2, [80.0, 40.0, 0.0]), (4, [80.0, np.sqrt(4800.0), np.sqrt(3200.0)])]


@functools.lru_cache(maxsize=None)
def _jitted_ksh_greedy_fit():
  return jax.jit(losses.ksh_greedy_fit, static_argnums=2, static_argnames="num_steps")


@pytest.mark.parametrize("num_classes,expected", KSH_CASES)
def test_ksh_greedy_fit_lowers_the_residual_bit_by_bit(rng, num_classes, expected):
  fit = _jitted_ksh_greedy_fit()
  labels = np.repeat(np.arange(num_classes), 40 // num_classes)
  x = rng.normal(size=(labels.size, 5)) + 4.0 * np.eye(5)[labels]
  anchors = x[rng.permutation(labels.size)[:16]]
  features = jax.jit(
    lambda x, a: losses.rbf_anchor_features(x, a, *losses.rbf_anchor_statistics(x, a))
  )(*_f32(x, anchors))
  s_tilde = np.where(labels[:, None] == labels[None, :], 1.0, -1.0)
  projection = fit(features, jnp.asarray(s_tilde, jnp.float32), 2, num_steps=50)
  assert projection.shape == (16, 2)
  codes = ref.sign(np.asarray(features, np.float64) @ np.asarray(projection, np.float64))
  norms = ref.ksh_residual_norms(codes, s_tilde)
  assert np.all(np.diff(norms) < 0), norms
  np.testing.assert_allclose(norms, expected, atol=1e-9)
  # One code per class, a different one for each class.
  assert len({tuple(c) for c in codes}) == num_classes


def test_ksh_greedy_fit_subtracts_each_bits_whole_outer_product():
  # Classes A, B, C of 20, 12 and 8 items, K = 3. Over splits of one class from the rest,
  # g_X^T S~ g_X = n_X^2 + (n_Y - n_Z)^2 + 2 n_X (n - n_X): 1216, 960, 640, and
  # g_X^T g_Y = n_Z - n_X - n_Y. Bit 1 is g_A (3 * 1216). On R_1 = 3 S~ - g_A g_A^T,
  # g_A scores 3648 - 1600 = 2048 and g_B 2880 - 24^2 = 2304: bit 2 is g_B (had only half
  # of g_A g_A^T been taken off, g_A would win again, 2848 > 2592). (Bit 3 is left alone:
  # there the greedy fit's heuristic finds a split close to g_C, not g_C itself.)
  rng = np.random.default_rng(3)
  labels = np.repeat(np.arange(3), [20, 12, 8])
  x = rng.normal(size=(40, 5)) + 4.0 * np.eye(5)[labels]
  anchors = x[rng.permutation(40)[:16]]
  features = jax.jit(
    lambda x, a: losses.rbf_anchor_features(x, a, *losses.rbf_anchor_statistics(x, a))
  )(*_f32(x, anchors))
  s_tilde = np.where(labels[:, None] == labels[None, :], 1.0, -1.0)
  projection = jax.jit(losses.ksh_greedy_fit, static_argnums=2, static_argnames="num_steps")(
    features, jnp.asarray(s_tilde, jnp.float32), 3, num_steps=50
  )
  codes = ref.sign(np.asarray(features, np.float64) @ np.asarray(projection, np.float64))
  splits = np.where(labels[:, None] == np.arange(3)[None, :], 1.0, -1.0)  # g_A, g_B, g_C
  for bit in range(2):
    assert abs(codes[:, bit] @ splits[:, bit]) == 40, (bit, codes[:, bit] @ splits)


def test_ksh_greedy_fit_keeps_the_better_of_spectral_and_descended_bits():
  # Classes that overlap: the spectral relaxation's bits are not the best ones, and the
  # descent from it finds better. Each bit's h^T R h is at least that of the spectral
  # bits on the same residual (the top generalised eigenvector of (Phi^T R Phi, Phi^T Phi),
  # here in float64), and above it for some bit.
  rng = np.random.default_rng(2)
  labels = rng.integers(0, 3, 40)
  x = rng.normal(size=(40, 5)) + 1.5 * np.eye(5)[labels]
  anchors = x[rng.permutation(40)[:10]]
  features = np.asarray(
    jax.jit(lambda x, a: losses.rbf_anchor_features(x, a, *losses.rbf_anchor_statistics(x, a)))(
      *_f32(x, anchors)
    ),
    np.float64,
  )
  s_tilde = np.where(labels[:, None] == labels[None, :], 1.0, -1.0)
  projection = jax.jit(losses.ksh_greedy_fit, static_argnums=2, static_argnames="num_steps")(
    *_f32(features, s_tilde), 3, num_steps=50
  )
  codes = ref.sign(features @ np.asarray(projection, np.float64))
  gram = features.T @ features
  gram += 1e-6 * np.mean(np.diag(gram)) * np.eye(10)
  residual = 3 * s_tilde
  fitted, spectral = [], []
  for k in range(3):
    top = scipy.linalg.eigh(features.T @ residual @ features, gram)[1][:, -1]
    h_spectral = ref.sign(features @ top)
    fitted.append(codes[:, k] @ residual @ codes[:, k])
    spectral.append(h_spectral @ residual @ h_spectral)
    residual = residual - np.outer(codes[:, k], codes[:, k])
  assert np.all(np.asarray(fitted) >= spectral) and np.any(np.asarray(fitted) > spectral), (
    fitted,
    spectral,
  )


def test_losses_check_their_inputs(rng):
  u, v, s, w = _f32(*_pairs(rng))
  with pytest.raises(ValueError, match="similarity"):
    losses.dch_loss(u, v, s[0], w)
  with pytest.raises(ValueError, match="s_tilde"):
    losses.ksh_greedy_fit(u, s, 2)
  with pytest.raises(ValueError, match="s_tilde"):
    losses.adsh_update_codes(jnp.sign(v), u, s.T, jnp.arange(6), 1.0)


def _labelled_features(rng):
  x = rng.normal(size=(96, 8)).astype(np.float32)
  return {"views": (x,), "labels": (x[:, 0] > 0).astype(np.int32) + (x[:, 1] > 0)}


def test_all_five_losses_train_inside_the_pairwise_method(rng):
  # One compiled method for the five (their sum; each alone: the slow test below).
  every = [
    losses.ksh_loss,
    losses.hashnet_loss,
    functools.partial(losses.adsh_loss, gamma=0.5),
    losses.dch_loss,
    losses.mmhh_loss,
  ]
  method = jhash.methods.pairwise(16, lambda *a: sum(f(*a) for f in every), batch_size=32)
  _, history = jhash.fit(
    method, jax.random.key(0), _labelled_features(rng), num_steps=3, progress=False
  )
  assert history["loss"].shape == (3,) and np.all(np.isfinite(history["loss"]))


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_each_loss_trains_inside_the_pairwise_method(rng, name):
  loss = {
    "ksh": losses.ksh_loss,
    "hashnet": losses.hashnet_loss,
    "adsh": losses.adsh_loss,
    "dch": losses.dch_loss,
    "mmhh": losses.mmhh_loss,
  }[name]
  method = jhash.methods.pairwise(16, loss, batch_size=32)
  _, history = jhash.fit(
    method, jax.random.key(0), _labelled_features(rng), num_steps=3, progress=False
  )
  assert np.all(np.isfinite(history["loss"]))
