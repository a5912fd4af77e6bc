"""CDH: the B-step's theorems, Algorithm 2, the W-step, generative codes, the method API.

Slow dense references are in ``_cdh_reference.py`` (float64 NumPy). Compiled
functions are shared between tests (same static configuration and shapes), so
the file compiles each piece once.
"""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import _cdh_reference as ref
import jhash
from jhash import data
from jhash.methods import HashingMethod
from jhash.methods import _cdh as cdh_lib
from jhash.methods._cdh import _active_set
from jhash.methods._cdh import _bstep
from jhash.methods._cdh import _encode
from jhash.methods._cdh import _objective
from jhash.methods._cdh import _supervision as sv
from jhash.methods._cdh import _wstep

N, K, MAX_INNER = 150, 8, 64  # the random instances' size (one compile per merit)
DIMS = (5, 7)


# ----------------------------------------------------------------------------- helpers

_current_gram = jax.jit(_bstep.current_gram)
_dense_bit_matrix = jax.jit(_bstep.dense_bit_matrix, static_argnames="merit")
_a_times_b = jax.jit(lambda carry, b, sup: _bstep.a_times_b(carry, b, sup, K, "exponential", 32))


@functools.lru_cache(maxsize=None)
def _update_bit(merit):
  return jax.jit(
    lambda carry, k, z, sup, gamma, u: _bstep.update_bit(carry, k, z, sup, gamma, u, merit=merit)
  )


def _random_instance(seed, unknown=0.3):
  """Codes, a symmetric Y with unknown pairs, two views and their weights."""
  rng = np.random.default_rng(seed)
  codes = np.where(rng.random((N, K)) < 0.5, 1, -1).astype(np.int8)
  y = np.where(rng.random((N, N)) < 0.5, 1.0, -1.0)
  y = np.triu(y * (rng.random((N, N)) >= unknown), 1)
  y = y + y.T
  views = [rng.normal(size=(N, d)) for d in DIMS]
  weights = [rng.normal(size=(K, d + 1)) / np.sqrt(d) for d in DIMS]
  return codes, y, views, weights


def _mfeat_instance(seed):
  """A subset of UCI mfeat (views fou and kar), its class supervision, random weights."""
  ds = data.load_mfeat(["fou", "kar"])
  rng = np.random.default_rng(seed)
  index = rng.choice(ds.num_items, N, replace=False)
  views = [v[index].astype(np.float64) for v in ds.views]
  weights = [rng.normal(size=(K, v.shape[1] + 1)) / np.sqrt(v.shape[1]) for v in views]
  z = ref.generative_linear_terms(weights, views)
  codes = np.where(z >= 0, 1, -1).astype(np.int8)  # the paper's initialisation
  return codes, ds.labels[index], views, weights


def _run_bits(codes, sup, y, views, weights, gamma, merit, sweeps, seed, check):
  """Update bits 0..K-1 ``sweeps`` times with the jitted ``update_bit``; ``check`` each."""
  z = ref.generative_linear_terms(weights, views)
  carry = _bstep.start_sweep(jnp.asarray(codes), merit)
  key = jax.random.key(seed)
  for t in range(sweeps * K):
    k = t % K
    if k == 0 and t:
      carry = _bstep.start_sweep(carry.codes, merit)
    before = np.asarray(carry.codes)
    u = jax.random.uniform(jax.random.fold_in(key, t), (MAX_INNER,))
    carry, stats = _update_bit(merit)(
      carry, k, jnp.asarray(z[:, k], jnp.float32), sup, jnp.float32(gamma), u
    )
    check(k, before, np.asarray(carry.codes), stats, z)
  return carry


# ----------------------------------------------------------------------------- Theorem 1


@pytest.mark.parametrize("merit", ["exponential", "linear"])
@pytest.mark.parametrize("gamma", [0.0, 0.05])
def test_every_bit_update_never_lowers_the_objective(merit, gamma):
  codes, y, views, weights = _random_instance(seed=1 if merit == "linear" else 2)
  sup = sv.from_matrix(y.astype(np.int8))
  flips = []

  def check(k, before, after, stats, z):
    a = ref.bit_matrix(before, y, k, merit)
    jk0 = ref.bit_objective(a, z[:, k], before[:, k], gamma)
    jk1 = ref.bit_objective(a, z[:, k], after[:, k], gamma)
    assert jk1 >= jk0 - 1e-7, (k, jk0, jk1)
    j0 = ref.objective(before, y, weights, views, gamma, merit)
    j1 = ref.objective(after, y, weights, views, gamma, merit)
    assert j1 >= j0 - 1e-7, (k, j0, j1)
    # Only column k changed, and J moved by exactly the change of J_k.
    np.testing.assert_array_equal(np.delete(before, k, 1), np.delete(after, k, 1))
    np.testing.assert_allclose(j1 - j0, jk1 - jk0, atol=1e-9)
    # The bit objective the B-step records is J_k up to a constant-free float32 error.
    np.testing.assert_allclose(
      [stats.objective_before, stats.objective], [jk0, jk1], rtol=1e-4, atol=1e-6
    )
    flips.append(int(stats.flipped))

  _run_bits(codes, sup, y, views, weights, gamma, merit, sweeps=2, seed=3, check=check)
  assert sum(flips) > N  # the instance is not trivially at a fixed point


def test_bit_updates_on_mfeat_never_lower_the_objective():
  codes, labels, views, weights = _mfeat_instance(seed=0)
  y = ref.dense_supervision(labels)
  gamma = 0.02
  # Y from the class labels, held as a matrix: the same compiled update as the
  # random instances (the label path runs in the method tests on all of mfeat).
  sup = sv.from_matrix(y.astype(np.int8))
  seen = []

  def check(k, before, after, stats, z):
    a = ref.bit_matrix(before, y, k, "exponential")
    jk0 = ref.bit_objective(a, z[:, k], before[:, k], gamma)
    jk1 = ref.bit_objective(a, z[:, k], after[:, k], gamma)
    assert jk1 >= jk0 - 1e-7
    j0 = ref.objective(before, y, weights, views, gamma, "exponential")
    j1 = ref.objective(after, y, weights, views, gamma, "exponential")
    assert j1 >= j0 - 1e-7
    seen.append((int(stats.active), int(stats.flipped), j1))

  _run_bits(codes, sup, y, views, weights, gamma, "exponential", sweeps=2, seed=0, check=check)
  assert sum(s[1] for s in seen) > 0
  assert seen[-1][2] > ref.objective(codes, y, weights, views, gamma, "exponential")


# ----------------------------------------------------------------------------- identity


@pytest.mark.parametrize("merit", ["exponential", "linear"])
def test_changing_one_column_changes_j_by_the_change_of_j_k(merit, rng):
  codes, y, views, weights = _random_instance(seed=4)
  gamma = 0.3
  z = ref.generative_linear_terms(weights, views)
  base = ref.objective(codes, y, weights, views, gamma, merit)
  for k in (0, 3, K - 1):
    a = ref.bit_matrix(codes, y, k, merit)
    for _ in range(5):
      x = np.where(rng.random(N) < 0.5, 1, -1)
      changed = codes.copy()
      changed[:, k] = x
      lhs = ref.objective(changed, y, weights, views, gamma, merit) - base
      rhs = ref.bit_objective(a, z[:, k], x, gamma) - ref.bit_objective(
        a, z[:, k], codes[:, k], gamma
      )
      np.testing.assert_allclose(lhs, rhs, rtol=0, atol=1e-12)


@pytest.mark.parametrize("merit", ["exponential", "linear"])
def test_objective_matches_the_reference(merit):
  codes, y, views, weights = _random_instance(seed=5)
  sup = sv.from_matrix(y.astype(np.int8))
  z = jnp.asarray(ref.generative_linear_terms(weights, views), jnp.float32)
  semantic = _objective.semantic_term(jnp.asarray(codes), sup, merit, block_rows=64)
  generative = _objective.generative_term(jnp.asarray(codes), z, jnp.float32(0.3), len(views))
  np.testing.assert_allclose(semantic, ref.semantic_term(codes, y, merit), rtol=1e-5)
  np.testing.assert_allclose(generative, ref.generative_term(codes, weights, views, 0.3), rtol=1e-5)


# ----------------------------------------------------------------------------- Theorem 2


@pytest.mark.parametrize("merit", ["exponential", "linear"])
def test_an_empty_active_set_is_a_fixed_point_of_single_flips(merit):
  codes, y, views, weights = _random_instance(seed=6)
  sup = sv.from_matrix(y.astype(np.int8))
  gamma = 0.05
  converged = []

  def check(k, before, after, stats, z):
    if not bool(stats.converged):
      return
    converged.append(k)
    a = ref.bit_matrix(after, y, k, merit)
    gains = ref.single_flip_gains(a, z[:, k], after[:, k], gamma)
    assert gains.max() <= 1e-7, (k, gains.max())
    # ... and sign(g) == B_k there.
    g = 2 * a @ after[:, k] / N**2 + gamma * z[:, k] / N
    assert np.all(g * after[:, k] >= -1e-7)

  _run_bits(codes, sup, y, views, weights, gamma, merit, sweeps=1, seed=7, check=check)
  assert len(converged) == K


@pytest.mark.parametrize("merit", ["exponential", "linear"])
def test_items_with_a_zero_gradient_never_enter_the_active_set(merit):
  # gamma = 0 and a third of the items with no known pair: their gradient is exactly 0,
  # a flip gains nothing, and the strict active set (g b < 0) must leave them out. With
  # g b <= 0 they would be flipped at every inner update and no bit would converge.
  codes, y, views, weights = _random_instance(seed=11)
  lonely = np.arange(0, N, 3)
  y[lonely, :] = 0.0
  y[:, lonely] = 0.0
  sup = sv.from_matrix(y.astype(np.int8))
  seen = []

  def check(k, before, after, stats, z):
    np.testing.assert_array_equal(after[lonely, k], before[lonely, k])  # never flipped
    others = np.setdiff1d(np.arange(N), lonely)
    # |I| at the first inner update counts only items with a strictly improving sign.
    a = ref.bit_matrix(before, y, k, merit)
    g = 2 * a @ before[:, k] / N**2
    assert int(stats.active) == int(np.sum(g[others] * before[others, k] < -1e-12))
    seen.append(bool(stats.converged))

  _run_bits(codes, sup, y, views, weights, 0.0, merit, sweeps=1, seed=3, check=check)
  assert all(seen), seen  # every bit ends at a fixed point


# ----------------------------------------------------------------------------- incremental A


def test_incremental_gram_and_a_equal_rebuilt_from_scratch():
  codes, y, views, weights = _random_instance(seed=8)
  sup = sv.from_matrix(y.astype(np.int8))
  changed = []
  carry = _run_bits(
    codes, sup, y, views, weights, 0.05, "exponential", sweeps=1, seed=9, check=lambda *a: None
  )
  # One sweep more, checking after every bit (several rank-one updates deep).
  carry = _bstep.start_sweep(carry.codes, "exponential")
  z = ref.generative_linear_terms(weights, views)
  for k in range(K):
    b_now = np.asarray(carry.codes, np.int64)
    np.testing.assert_array_equal(_current_gram(carry), b_now @ b_now.T)
    for j in (k, (k + 3) % K):
      a_inc = np.asarray(_dense_bit_matrix(carry, j, sup, merit="exponential"))
      np.testing.assert_allclose(
        a_inc, ref.bit_matrix(b_now, y, j, "exponential"), rtol=1e-5, atol=1e-7
      )
    # The pass over the Gram forms A b for the bit.
    _, ab = _a_times_b(carry, jnp.asarray(b_now[:, k], jnp.float32), sup)
    np.testing.assert_allclose(
      ab, ref.bit_matrix(b_now, y, k, "exponential") @ b_now[:, k], rtol=1e-5, atol=1e-6
    )
    before = np.asarray(carry.codes)
    carry, _ = _update_bit("exponential")(
      carry,
      k,
      jnp.asarray(z[:, k], jnp.float32),
      sup,
      jnp.float32(0.0),
      jax.random.uniform(jax.random.key(k), (MAX_INNER,)),
    )
    changed.append(int(np.sum(before[:, k] != np.asarray(carry.codes)[:, k])))
  assert sum(changed) > 0


# ----------------------------------------------------------------------------- Algorithm 2


@functools.lru_cache(maxsize=None)
def _reduce_jit():
  return jax.jit(
    lambda m, active, start: _active_set.reduce_active_set(lambda p: m[p], active, start)
  )


def test_algorithm2_equals_the_papers_transcription(rng):
  n = 120
  for trial in range(6):
    a = rng.normal(size=(n, n)).astype(np.float32)
    a = np.triu(a, 1)
    a = a + a.T
    b = np.where(rng.random(n) < 0.5, 1.0, -1.0).astype(np.float32)
    active = rng.random(n) < (0.2 + 0.12 * trial)
    start = int(rng.choice(np.flatnonzero(active)))
    m = a * np.outer(b, b)
    flip, size = _reduce_jit()(jnp.asarray(m), jnp.asarray(active), start)
    want = ref.algorithm2(a, b, active, start)
    np.testing.assert_array_equal(np.asarray(flip), want)
    assert int(size) == want.sum()
    assert np.all(want <= active) and want[start]
    # Condition (12): the flips never make (X - B)^T A (X - B) negative.
    d = np.where(want, -2 * b, 0).astype(np.float64)
    assert d @ a.astype(np.float64) @ d >= -1e-4


@pytest.mark.parametrize("merit", ["exponential", "linear"])
def test_restricted_reduction_equals_the_transcription_on_the_bits_a(merit, rng):
  # The B-step's path: compact I, build M on I from the codes, start at item
  # floor(u |I|) of I; equal to Algorithm 2 on the dense A of the bit.
  codes, y, views, weights = _random_instance(seed=10)
  sup = sv.from_matrix(y.astype(np.int8))
  carry = _bstep.start_sweep(jnp.asarray(codes), merit)
  k = 2
  b = codes[:, k].astype(np.float32)
  a = np.asarray(_dense_bit_matrix(carry, k, sup, merit=merit))
  reduce = jax.jit(
    lambda active, count, u: _bstep._reduce(
      active, count, carry.gram, jnp.asarray(b), jnp.asarray(b), sup, u, K, merit, (N,)
    )
  )
  for fraction in (0.1, 0.4, 0.8):
    active = rng.random(N) < fraction
    u = float(rng.random())
    members = np.flatnonzero(active)
    start = members[min(int(np.floor(np.float32(u) * np.float32(len(members)))), len(members) - 1)]
    flip = reduce(jnp.asarray(active), jnp.int32(active.sum()), jnp.float32(u))
    np.testing.assert_array_equal(np.asarray(flip) > 0, ref.algorithm2(a, b, active, start))


# ----------------------------------------------------------------------------- W-step


@pytest.mark.parametrize("kind", ["probability", "log_likelihood"])
def test_vmapped_wstep_equals_a_loop_over_bits_and_improves(kind, rng):
  n, d = 300, 6
  x = rng.normal(size=(n, d)).astype(np.float32)
  true = rng.normal(size=(d, K))
  codes = np.where(x @ true + 0.5 * rng.normal(size=(n, K)) >= 0, 1, -1).astype(np.int8)
  weights = (jnp.asarray(rng.normal(size=(K, d + 1)) * 0.3, jnp.float32),)
  batches = _wstep.minibatches(jax.random.uniform(jax.random.key(0), (60, 64)), n)
  options = dict(kind=kind, l2=1e-3, learning_rate=0.05)
  new, before, after = jax.jit(functools.partial(_wstep.wstep, **options))(
    weights, (x,), jnp.asarray(codes), batches
  )
  fit = jax.jit(functools.partial(_wstep.fit_bit, **options))
  x1 = _encode.with_bias(x)
  for k in range(K):
    w_k = fit(weights[0][k], x1, jnp.asarray(codes[:, k], jnp.float32), batches)
    np.testing.assert_allclose(new[0][k], w_k, rtol=1e-5, atol=1e-5)
  # The objective (mean over bits) rises, and for most bits on its own.
  assert float(after) > float(before)
  per_bit = _wstep.view_objective(new[0], x, jnp.asarray(codes), kind, 1e-3)
  old = _wstep.view_objective(weights[0], x, jnp.asarray(codes), kind, 1e-3)
  assert np.mean(np.asarray(per_bit) >= np.asarray(old)) >= 0.75
  if kind == "log_likelihood":
    # Exact L2-regularised logistic regression (NumPy, float64) bounds the W-step's
    # objective from above, and the 60 Adam steps close most of the gap to it.
    for k in range(K):
      exact = ref.logistic_regression(x, codes[:, k], l2=1e-3)
      j = [
        ref.wstep_objective(w, x, codes[:, k], kind, 1e-3)
        for w in (weights[0][k], new[0][k], exact)
      ]
      assert j[1] <= j[2] + 1e-9 and j[1] - j[0] >= 0.8 * (j[2] - j[0]), (k, j)


# ----------------------------------------------------------------------------- encoding


def test_generative_codes_follow_the_product_rule(rng):
  n, dims, k = 7, (3, 2, 4), 5
  views = [rng.normal(size=(n, d)).astype(np.float32) for d in dims]
  weights = [rng.normal(size=(k, d + 1)).astype(np.float32) for d in dims]
  odds = rng.normal(size=k).astype(np.float32)
  encode = lambda vs: np.asarray(
    _encode.encode([jnp.asarray(w) for w in weights], jnp.asarray(odds), vs)
  )
  # All views, against the rule written with probabilities, item by item.
  got = encode(views)
  prior_plus = 1 / (1 + np.exp(-odds.astype(np.float64)))
  for i in range(n):
    for bit in range(k):
      joint = {}
      for s in (1, -1):
        p = prior_plus[bit] if s > 0 else 1 - prior_plus[bit]
        for w, x in zip(weights, views):
          p *= ref.sigmoid(s * (ref.with_bias(x[i : i + 1]) @ w[bit].astype(np.float64))[0])
        joint[s] = p
      assert got[i, bit] == (1 if joint[1] >= joint[-1] else -1)
  np.testing.assert_array_equal(got, ref.encode(weights, views, odds))
  # Subsets of the views: only their terms.
  for subset in [(0,), (1,), (2,), (0, 2)]:
    partial = [v if i in subset else None for i, v in enumerate(views)]
    np.testing.assert_array_equal(encode(partial), ref.encode(weights, partial, odds))
  assert got.dtype == np.int8


def test_prior_is_the_clipped_fraction_of_plus_ones():
  codes = jnp.asarray(np.array([[1, 1, -1], [1, -1, -1], [1, 1, -1], [1, -1, -1]], np.int8))
  odds = np.asarray(_encode.log_prior_odds(codes, 0.01))
  np.testing.assert_allclose(odds, [np.log(0.99 / 0.01), 0.0, np.log(0.01 / 0.99)], rtol=1e-5)


# ----------------------------------------------------------------------------- supervision


def test_supervision_rows_from_labels_equal_the_dense_matrix(rng):
  ids = rng.integers(0, 4, 30).astype(np.int32)
  hot = rng.random((30, 5)) < 0.3
  index = np.array([3, 0, 17, 29])

  @jax.jit
  def views_of_y(sup):
    among = sv.among(sup, jnp.asarray(index))
    return (
      sv.dense(sup),
      sv.rows(sup, jnp.asarray(index)),
      sv.block(sup, 5, 7),
      sv.submatrix(sup, jnp.asarray(index)),
      jnp.stack([among(p) for p in range(4)]),
    )

  for labels in (ids, hot):
    sup = sv.from_labels(labels)
    assert sup.dense is None  # labels never build the n x n matrix
    want = ref.dense_supervision(labels)
    got = views_of_y(sup)
    sub = want[np.ix_(index, index)]
    for have, expected in zip(got, (want, want[index], want[5:12], sub, sub)):
      np.testing.assert_array_equal(have, expected)


def test_pairs_give_a_symmetric_matrix_with_unknown_zeros():
  sup = sv.from_pairs(np.array([0, 2, 3]), np.array([1, 0, 3]), np.array([1, -1, 1]), 4)
  want = np.zeros((4, 4))
  want[0, 1] = want[1, 0] = 1
  want[2, 0] = want[0, 2] = -1
  want[3, 3] = 1
  np.testing.assert_array_equal(sv.dense(sup), want)


# ----------------------------------------------------------------------------- the method


@pytest.fixture(scope="module")
def mfeat_run():
  """CDH (16 bits, defaults) on all of mfeat's views fou and kar, two sweeps."""
  ds = data.load_mfeat(["fou", "kar"])
  batch = ds.batch()
  method = cdh_lib.cdh(16)
  method = method._replace(
    phases=(method.phases[0]._replace(update=chex.assert_max_traces(method.update, n=1)),)
  )
  state, history = jhash.fit(method, jax.random.key(0), batch, progress=False, donate=False)
  return method, state, history, batch


def test_method_conformance(mfeat_run):
  method, state, history, batch = mfeat_run
  assert isinstance(method, HashingMethod) and method.name == "cdh" and method.num_steps == 2
  # update keeps the state's type and shapes; traced once for every call in this file.
  new_state, metrics = jax.jit(method.update)(state, batch, jax.random.key(5))
  assert type(new_state) is type(state)
  chex.assert_trees_all_equal_shapes_and_dtypes(state, new_state)
  for name in ("active_set_size", "flipped", "inner_steps", "bit_objective"):
    assert metrics[name].shape == (16,)
    assert history[name].shape == (2, 16)
  assert np.ndim(metrics["objective"]) == 0
  # codes: int8 in {-1, +1}, [n, K], from any non-empty subset of views.
  for views in (batch["views"], (batch["views"][0], None), (None, batch["views"][1])):
    codes = jhash.encode(method, state, {"views": views})
    assert codes.dtype == jnp.int8 and codes.shape == (2000, 16)
    assert set(np.unique(np.asarray(codes))) <= {-1, 1}
  assert state.codes.dtype == jnp.int8 and set(np.unique(np.asarray(state.codes))) <= {-1, 1}
  # (The same key gives the same state: fit's schedule, for every method, in test_train.py;
  # CDH's cells resuming to the same state in test_cdh_experiments.py.)


def test_method_converges_in_two_sweeps_on_mfeat(mfeat_run):
  method, state, history, batch = mfeat_run
  before, after = history["objective_before"], history["objective"]
  # J never drops in a B-step; the second sweep changes J by under 1% (the paper's
  # "stable after two passes").
  assert np.all(history["objective_after_bstep"] >= before - 1e-5 * np.abs(before))
  assert np.all(history["bit_objective"] >= history["bit_objective_before"] - 1e-6)
  assert abs(after[1] - after[0]) < 0.01 * abs(after[0]), (before, after)
  assert np.all(history["w_objective"] > history["w_objective_before"])
  # objective() agrees with the recorded J.
  np.testing.assert_allclose(jax.jit(method.extras.objective)(state, batch), after[1], rtol=1e-4)
  # The learned codes retrieve same-class items far better than chance (0.1).
  from jhash import metrics

  q = jhash.encode(method, state, {"views": (batch["views"][0], None)})
  assert (
    float(
      metrics.mean_average_precision(q[:200], state.codes, batch["labels"][:200], batch["labels"])
    )
    > 0.5
  )


def test_wstep_fits_the_codes_the_bstep_just_made(mfeat_run):
  """The first sweep's B-step moves a third of the codes; the W-step after it fits them.

  Per view, the logistic hash functions' predictions ``sign(w^T [x, 1])`` agree with the
  new codes far above chance (0.5) and far above the weights the W-step started from, as
  well as exact logistic regression on those codes (NumPy, float64) to within 0.02; the
  W-step's objective against those codes (float64) rises for every bit and view.
  """
  method, _, _, batch = mfeat_run
  key = jax.random.key(0)
  # The fixture's method: its compiled init and update run again, with no new trace.
  old = jhash.init(method, key, batch)
  new, _ = jhash.fit(method, key, batch, 1, progress=False, donate=False)
  codes = np.asarray(new.codes)  # the B-step's codes, which this sweep's W-step fitted
  assert np.mean(codes != np.asarray(old.codes)) > 0.2
  for v, x in enumerate(batch["views"]):
    x = np.asarray(x, np.float64)
    w_old, w_new = (np.asarray(s.weights[v], np.float64) for s in (old, new))
    exact = np.stack(
      [ref.logistic_regression(x, codes[:, k], l2=1e-4) for k in range(codes.shape[1])]
    )
    agree = [
      np.mean(np.where(ref.with_bias(x) @ w.T >= 0, 1, -1) == codes) for w in (w_old, w_new, exact)
    ]
    assert agree[1] > 0.85 and agree[1] > agree[0] + 0.2, (v, agree)
    assert agree[1] >= agree[2] - 0.02, (v, agree)
    for k in range(codes.shape[1]):
      rise = [ref.wstep_objective(w[k], x, codes[:, k], "probability") for w in (w_old, w_new)]
      assert rise[1] > rise[0], (v, k, rise)


def test_swapping_two_views_of_equal_width_is_not_refused_and_gives_wrong_codes(rng):
  """What guards the order of the views: their widths, nothing else.

  Two views of the same width, each a different noisy picture of four classes. Each
  view has its own logistic models, so the views in the wrong slots give other codes,
  which retrieve at about chance. The state records only each view's width (the
  shape of ``weights[v]``, as ``_api.view_widths`` does for other methods), so the
  swap passes every check and nothing refuses it; a swap of views of different
  widths is refused (``test_bad_input_raises_naming_the_argument``).
  """
  n, d = 160, 6
  labels = np.tile(np.arange(4), n // 4).astype(np.int32)
  views = [
    ((3 * rng.normal(size=(4, d)))[labels] + rng.normal(size=(n, d))).astype(np.float32)
    for _ in range(2)
  ]
  train, query = slice(0, n // 2), slice(n // 2, n)
  batch = {"views": tuple(v[train] for v in views), "labels": labels[train]}
  method = cdh_lib.cdh(8, w_iters=50, max_inner=8)
  state, _ = jhash.fit(method, jax.random.key(0), batch, progress=False)
  assert [w.shape[1] - 1 for w in state.weights] == [d, d]  # all it records of the views
  a, b = (v[query] for v in views)

  def retrieval(query_views):  # mAP of the query half against the learned codes
    codes = jhash.encode(method, state, {"views": query_views})  # never raises here
    return float(
      jhash.metrics.mean_average_precision(codes, state.codes, labels[query], labels[train])
    )

  for right, swapped in [((a, b), (b, a)), ((a, None), (b, None)), ((None, b), (None, a))]:
    scores = retrieval(right), retrieval(swapped)
    assert scores[0] > 0.9 and scores[1] < 0.5, scores
  assert not np.array_equal(
    jhash.encode(method, state, {"views": (a, b)}), jhash.encode(method, state, {"views": (b, a)})
  )


def test_pairs_supervision_and_linear_merit_through_the_method(rng):
  n = 80
  views = (rng.normal(size=(n, 5)).astype(np.float32),)
  rows, cols = np.divmod(rng.choice(n * n, 600, replace=False), n)
  keep = rows < cols  # each unordered pair at most once
  values = np.where(rng.random(600) < 0.5, 1, -1)[keep]
  batch = {"views": views, "Y": (rows[keep], cols[keep], values)}
  method = cdh_lib.cdh(4, merit="linear", supervision="pairs", gamma=0.05, w_iters=20)
  assert method.check_batch(batch) == n
  state, history = jhash.fit(method, jax.random.key(0), batch, 1, progress=False)
  assert history["objective_after_bstep"][0] >= history["objective_before"][0] - 1e-6
  y = np.zeros((n, n))
  y[rows[keep], cols[keep]] = values
  y = y + y.T
  weights = [np.asarray(w, np.float64) for w in state.weights]
  np.testing.assert_allclose(
    history["objective"][0],
    ref.objective(np.asarray(state.codes), y, weights, views, 0.05, "linear"),
    rtol=1e-5,
  )


# ----------------------------------------------------------------------------- bad input


def test_bad_input_raises_naming_the_argument(mfeat_run):
  method, state, _, batch = mfeat_run
  fou, kar = batch["views"]
  with pytest.raises(ValueError, match="views"):
    method.init(jax.random.key(0), {"views": (fou, kar[:-1]), "labels": batch["labels"]})
  nan = fou.copy()
  nan[3, 4] = np.nan
  with pytest.raises(ValueError, match=r"views\[0\]"):
    method.init(jax.random.key(0), {"views": (nan, kar), "labels": batch["labels"]})
  with pytest.raises(ValueError, match="views"):
    method.encode(state, {"views": (None, None)})
  with pytest.raises(ValueError, match="views"):
    _encode.encode(state.weights, state.log_prior_odds, [None, None])
  with pytest.raises(ValueError, match="views"):
    method.encode(state, {"views": (fou,)})
  with pytest.raises(ValueError, match=r"views\[1\]"):
    method.encode(state, {"views": (None, fou)})
  with pytest.raises(ValueError, match="labels"):
    method.init(jax.random.key(0), {"views": (fou, kar)})


def test_bad_supervision_raises_naming_y():
  y = np.array([[1, 1, 0], [-1, 1, 0], [0, 0, 1]])
  with pytest.raises(ValueError, match=r"Y must be symmetric.*Y\[0, 1\] = 1"):
    sv.from_matrix(y)
  with pytest.raises(ValueError, match=r"Y must hold only.*2"):
    sv.from_matrix(np.array([[1, 2], [2, 1]]))
  with pytest.raises(ValueError, match="Y must be a square"):
    sv.from_matrix(np.ones((3, 4)), 3)
  with pytest.raises(ValueError, match=r"Y must be symmetric.*\(0, 1\)"):
    sv.from_pairs(np.array([0, 1]), np.array([1, 0]), np.array([1, -1]), 3)
  with pytest.raises(ValueError, match="Y must hold only"):
    sv.from_pairs(np.array([0]), np.array([1]), np.array([3]), 3)
  method = cdh_lib.cdh(4, supervision="pairs")
  views = (np.zeros((3, 2), np.float32),)
  with pytest.raises(ValueError, match="Y must be symmetric"):
    method.init(jax.random.key(0), {"views": views, "Y": y})
  with pytest.raises(ValueError, match="Y is required"):
    method.init(jax.random.key(0), {"views": views})
  with pytest.raises(ValueError, match="Y must hold only"):
    method.check_batch({"views": views, "Y": (np.array([0]), np.array([2]), np.array([5]))})
  assert (
    method.check_batch({"views": views, "Y": (np.array([0]), np.array([2]), np.array([-1]))}) == 3
  )
  with pytest.raises(ValueError, match="merit"):
    cdh_lib.cdh(4, merit="quadratic")
  with pytest.raises(ValueError, match="gamma"):
    cdh_lib.cdh(4, gamma=-1.0)


def test_each_sweeps_before_is_the_last_sweeps_after_and_the_reference_j(mfeat_run):
  # The state keeps J's two terms, so a sweep reads its "before" from them instead of
  # recomputing J. Sweep s's before must be sweep s-1's after and the float64
  # reference J of the state sweep s starts from. gamma is replaced after init (as a
  # grid over gamma does): the kept terms leave gamma out, so they stay valid.
  method, _, _, batch = mfeat_run
  key = jax.random.key(1)
  start = jhash.init(method, key, batch)._replace(gamma=jnp.float32(0.3))
  states = [jax.tree.map(np.asarray, start)]
  _, history = jhash.fit(
    method,
    key,
    batch,
    3,
    state=start,
    progress=False,
    donate=False,
    on_step=lambda step, s, m: states.append(jax.tree.map(np.asarray, s)),
  )
  y = ref.dense_supervision(batch["labels"])
  want = []
  for s in states:  # the reference J and its terms, from each state's codes and weights
    semantic = ref.semantic_term(s.codes, y, "exponential")
    generative = ref.generative_term(s.codes, s.weights, batch["views"], 0.3)
    assert float(s.semantic) == pytest.approx(semantic, rel=1e-5)
    assert 0.3 * float(s.generative_sum) / len(y) == pytest.approx(generative, rel=1e-5)
    want.append(semantic + generative)
  before, after = history["objective_before"], history["objective"]
  np.testing.assert_allclose(before, want[:-1], rtol=1e-5)
  np.testing.assert_allclose(after, want[1:], rtol=1e-5)
  # Equal up to float32 rounding, not bit for bit: XLA reassociates gamma * sum / n
  # differently in the sweep that computes it and in the next one (1 ulp at most seen).
  np.testing.assert_allclose(before[1:], after[:-1], rtol=1e-6)


@pytest.mark.parametrize(
  "name, value",
  [
    ("num_bits", 0),
    ("merit", "quadratic"),
    ("supervision", "dense"),
    ("w_objective", "hinge"),
    ("gamma", -1.0),
    ("max_inner", 0),
    ("w_iters", -1),
    ("w_batch_size", 0),
    ("num_sweeps", -1),
    ("block_rows", 0),
    ("chunk_size", 1),
    ("chunk_split", "random"),
    ("chunk_seed", -1),
    ("prior_eps", 0.5),
  ],
)
def test_each_bad_factory_argument_names_itself(name, value):
  args = {"num_bits": 8, name: value}
  with pytest.raises(ValueError, match=name):
    cdh_lib.cdh(args.pop("num_bits"), **args)
