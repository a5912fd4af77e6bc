"""The five deep base models (KSH, HashNet, ADSH, DCH, MMHH) as methods: they learn on a
small real set, their steps are traced once, ADSH's phases alternate, bad input is named."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jhash
import jhash.data
from jhash.methods import _deep

import _deep_loss_reference as ref

FIVE = ("ksh", "hashnet", "adsh", "dch", "mmhh")
OPTIONS = {
  "adsh": {"rounds": 3, "steps_per_round": 20, "num_samples": 300},
  "hashnet": {"period": 10},
}


@pytest.fixture(scope="module")
def digits():
  ds = jhash.data.load_digits()  # 1,797 real 8x8 digits
  rng = np.random.default_rng(0)
  idx = rng.permutation(ds.labels.size)[:600]
  x = ds.views[0].reshape(ds.labels.size, -1)[idx].astype(np.float32)
  return {"views": (x,), "labels": ds.labels[idx].astype(np.int32)}


def _train_map(method, state, batch):
  codes = jhash.encode(method, state, batch)
  return float(jhash.metrics.mean_average_precision(codes, codes, batch["labels"], batch["labels"]))


# KSH, HashNet and MMHH share DCH's code path (pairwise with another loss, each loss
# tested in test_deep_losses.py): their learning runs are slow-only.
@pytest.mark.parametrize(
  "name",
  [pytest.param(n, marks=pytest.mark.slow) if n in ("ksh", "hashnet", "mmhh") else n for n in FIVE],
)
def test_training_lowers_the_loss_and_raises_training_map(name, digits):
  method = (
    jhash.methods.REGISTRY[name](16, batch_size=50, **{"num_epochs": 4, **OPTIONS.get(name, {})})
    if name != "adsh"
    else jhash.methods.adsh(16, batch_size=50, **OPTIONS["adsh"])
  )
  key = jax.random.key(0)
  before = _train_map(method, jhash.init(method, key, digits), digits)
  state, history = jhash.fit(method, key, digits, progress=False)
  loss = history["loss"]
  assert np.all(np.isfinite(loss))
  assert loss[-5:].mean() < loss[:5].mean(), loss
  after = _train_map(method, state, digits)
  assert after > before + 0.2 and after > 0.6, (before, after)


def test_adsh_alternates_network_and_code_phases(digits):
  method = jhash.methods.adsh(12, batch_size=50, **OPTIONS["adsh"])
  assert [p.name for p in method.phases] == ["network", "codes"] * 3
  state, history = jhash.fit(method, jax.random.key(1), digits, progress=False)
  assert history["loss"].shape == (60,) and history["objective"].shape == (3,)
  # The code phase lowers the paper's J over the drawn items; the codes follow the network.
  assert np.all(np.diff(history["objective"]) < 0), history["objective"]
  v = np.asarray(state.codes)
  assert set(np.unique(v)) == {-1.0, 1.0}
  agree = np.mean(np.where(np.asarray(state.memory.outputs) >= 0, 1.0, -1.0) == v)
  assert agree > 0.8, agree
  # Asymmetric retrieval: network codes of queries against the learned database codes.
  q = jhash.encode(method, state, digits)
  mean_ap = jhash.metrics.mean_average_precision(
    q, v.astype(np.int8), digits["labels"], digits["labels"]
  )
  assert mean_ap > 0.8


def test_adsh_targets_balance_similar_and_dissimilar_pairs():
  s = jnp.asarray([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
  t = np.asarray(_deep.adsh_targets(s))
  np.testing.assert_allclose(t[s == 1], 1.0)
  np.testing.assert_allclose(t[s == 0], -2.0 / 6.0)  # r = 2 similar / 6 dissimilar
  np.testing.assert_allclose(t.sum(), 0.0, atol=1e-6)  # both kinds weigh the same


def test_hashnet_scales_outputs_by_the_continuation(rng):
  method = jhash.methods.hashnet(4, period=2, batch_size=16)
  x = rng.normal(size=(32, 5)).astype(np.float32)
  batch = {"views": (x,), "labels": (x[:, 0] > 0).astype(np.int32)}
  state, _ = jhash.fit(method, jax.random.key(0), batch, num_steps=5, progress=False)
  assert int(state.coder.train.step) == 5
  np.testing.assert_allclose(
    jhash.losses.hashnet_beta(jnp.int32(4), period=2), np.sqrt(1 + 0.005 * 2 * 2), rtol=1e-6
  )


def test_hashnet_code_loss_is_the_loss_on_binary_codes_at_every_step(rng):
  # MCH's reward table: one pair of codes at Hamming distance d, h = c (tanh saturated, not
  # tanh(beta c) at the current step): theta = alpha (K - 2 d) with alpha = 10 / K, and the
  # loss log(1 + e^theta) - s theta, whatever beta the continuation has reached.
  method = jhash.methods.hashnet(4, period=2, rate=0.5)
  x = rng.normal(size=(8, 3)).astype(np.float32)
  state = jhash.init(method, jax.random.key(0), {"views": (x,), "labels": np.arange(8) % 2})
  theta = 10.0 / 4 * (4 - 2 * np.arange(5))
  want = np.stack([np.log1p(np.exp(theta)) - s * theta for s in (0.0, 1.0)])
  for step in (0, 5):
    table = method.extras.code_loss(_at_step(state, step))
    np.testing.assert_allclose(table, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", FIVE)
def test_bad_input_names_the_argument(name, rng):
  factory = jhash.methods.REGISTRY[name]
  with pytest.raises(ValueError, match="num_bits"):
    factory(0)
  method = factory(8)
  x = rng.normal(size=(40, 6)).astype(np.float32)
  with pytest.raises(ValueError, match="labels"):  # labels that do not match the batch
    jhash.fit(
      method, jax.random.key(0), {"views": (x,), "labels": np.zeros(39, np.int32)}, progress=False
    )
  with pytest.raises(ValueError, match="labels"):  # unsupervised data for a supervised method
    jhash.fit(method, jax.random.key(0), {"views": (x,)}, progress=False)
  images = rng.random((40, 28, 28)).astype(np.float32)
  net = jhash.models.backbone((28, 28), 8)
  with pytest.raises(ValueError, match="views"):  # images of the wrong size for the net
    jhash.fit(
      factory(8, backbone=net),
      jax.random.key(0),
      {"views": (images[:, :20, :20],), "labels": np.zeros(40, np.int32)},
      progress=False,
    )


def _at_step(state, step):
  """A network method's state with its optimiser at ``step``."""
  train = state.coder.train._replace(step=jnp.int32(step))
  return state._replace(coder=state.coder._replace(train=train))


def _linear(rng, n=10, d=3):
  """Features, labels and a linear head's logits on them by hand (standardised inputs)."""
  x = rng.normal(size=(n, d)).astype(np.float32) * 2.0 + 1.0
  y = np.array([0, 1, 2, 0, 1, 2, 0, 1, 1, 2][:n], np.int32)

  def logits_of(state, rows):
    p = state.coder.train.params["projection"]
    xs = (x[rows] - x.mean(axis=0)) / x.std(axis=0)
    return xs @ np.asarray(p["kernel"], np.float64) + np.asarray(p["bias"], np.float64)

  return x, y, logits_of


# name -> (options off the defaults, NumPy loss of (z, s, w) at optimiser step 7).
_FACTORY_LOSSES = {
  "hashnet": (
    {"alpha": 0.3, "period": 3, "rate": 0.05, "power": 0.7},
    lambda z, s, w: ref.hashnet(z, z, s, w, beta=(1 + 0.05 * 3 * 2) ** 0.7, alpha=0.3),
  ),
  "dch": (
    {"gamma": 3.0, "quantization": 0.6},
    lambda z, s, w: ref.dch(z, z, s, w, gamma=3.0, lam=0.6),
  ),
  "mmhh": (
    {
      "gamma": 3.0,
      "margin": 1.5,
      "quantization": 0.4,
      "similar_inside": 0.3,
      "dissimilar_inside": 0.6,
      "similar_outside": 1.2,
      "dissimilar_outside": 1.7,
    },
    lambda z, s, w: ref.mmhh(
      z, z, s, w, gamma=3.0, margin=1.5, factors=(0.3, 0.6, 1.2, 1.7), lam=0.4
    ),
  ),
  "ksh": ({}, lambda z, s, w: ref.ksh(z, z, s, w)),
}


@pytest.mark.parametrize("name", sorted(_FACTORY_LOSSES))
def test_a_step_minimises_the_papers_loss_with_the_options_given(name, rng):
  # The loss a step reports: the paper's loss (with the options passed to the factory,
  # HashNet's continuation at the optimiser's step) on the minibatch's distinct pairs,
  # weighted P / (2 P1) and P / (2 P0).
  options, reference = _FACTORY_LOSSES[name]
  x, y, logits_of = _linear(rng)
  method = jhash.methods.REGISTRY[name](
    6, backbone=jhash.models.backbone((3,), 6, hidden=()), **options
  )
  state = jhash.init(method, jax.random.key(0), {"views": (x,), "labels": y})
  state = _at_step(state, 7)
  rows = np.array([0, 3, 1, 4, 2, 8])
  _, metrics = jax.jit(method.update)(
    state, {"views": (x[rows],), "labels": y[rows], "index": jnp.asarray(rows)}, jax.random.key(1)
  )
  s = (y[rows][:, None] == y[rows][None, :]).astype(np.float64)
  mask = ~np.eye(6, dtype=bool)
  total, similar = mask.sum(), (mask * s).sum()
  w = mask * np.where(s == 1, total / (2 * similar), total / (2 * (total - similar)))
  np.testing.assert_allclose(metrics["loss"], reference(logits_of(state, rows), s, w), rtol=2e-5)


def _adsh_state(rng, gamma):
  x, y, logits_of = _linear(rng)
  method = jhash.methods.adsh(
    6, gamma=gamma, num_samples=4, backbone=jhash.models.backbone((3,), 6, hidden=())
  )
  state = jhash.init(method, jax.random.key(0), {"views": (x,), "labels": y})
  return (
    method,
    state._replace(codes=jnp.asarray(np.where(rng.random((10, 6)) < 0.5, 1.0, -1.0), jnp.float32)),
    x,
    y,
    logits_of,
  )


def _np_adsh_targets(s):
  r = s.sum() / (s.size - s.sum())
  return np.where(s == 1, 1.0, -r)


def test_adsh_network_step_fits_all_codes_and_the_items_own(rng):
  method, state, x, y, logits_of = _adsh_state(rng, gamma=7.0)
  rows = np.array([6, 1, 3])
  new, metrics = jax.jit(method.update)(
    state, {"views": (x[rows],), "labels": y[rows], "index": jnp.asarray(rows)}, jax.random.key(1)
  )
  codes = np.asarray(state.codes, np.float64)
  s_tilde = _np_adsh_targets((y[rows][:, None] == y[None, :]).astype(np.float64))
  z = logits_of(state, rows)
  want = ref.adsh(z, codes, (s_tilde + 1) / 2, np.ones_like(s_tilde), gamma=7.0, own=codes[rows])
  np.testing.assert_allclose(metrics["loss"], want, rtol=2e-5)
  # U = tanh(F(x)) before the step, written at the items' rows.
  outputs = np.zeros((10, 6))
  outputs[rows] = np.tanh(z)
  np.testing.assert_allclose(new.memory.outputs, outputs, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(new.memory.filled, np.isin(np.arange(10), rows))


def test_adsh_code_step_updates_the_codes_from_the_items_seen(rng):
  # Four items seen, num_samples=4: the code step draws exactly those four.
  method, state, _, y, _ = _adsh_state(rng, gamma=7.0)
  seen = np.array([2, 5, 7, 9])
  outputs = np.zeros((10, 6), np.float32)
  outputs[seen] = np.tanh(rng.normal(size=(4, 6)))
  state = state._replace(
    memory=state.memory._replace(
      outputs=jnp.asarray(outputs), filled=jnp.asarray(np.isin(np.arange(10), seen))
    )
  )
  new, metrics = jax.jit(method.phases[1].update)(state, None, jax.random.key(3))
  s_tilde = _np_adsh_targets((y[seen][:, None] == y[None, :]).astype(np.float64))
  want = jhash.losses.adsh_update_codes(
    state.codes,
    jnp.asarray(outputs[seen]),
    jnp.asarray(s_tilde, jnp.float32),
    jnp.asarray(seen),
    7.0,
  )
  np.testing.assert_array_equal(new.codes, want)
  changed = np.asarray(want) != np.asarray(state.codes)
  assert changed.any()
  np.testing.assert_allclose(metrics["changed"], changed.mean(), rtol=1e-6)
  np.testing.assert_allclose(
    metrics["objective"],
    ref.adsh_objective(np.asarray(want, np.float64), outputs[seen], s_tilde, seen, 7.0),
    rtol=1e-5,
  )


def test_hashnet_step_uses_beta_of_the_optimizer_step_across_a_period_boundary(rng):
  # period 3: steps 5 and 6 straddle the boundary, beta = (1 + 0.05 * 3 * (step // 3)) ** 0.7
  # steps from stage 1 to stage 2; each step's loss is the paper's at its own beta.
  options, _ = _FACTORY_LOSSES["hashnet"]
  x, y, logits_of = _linear(rng)
  method = jhash.methods.hashnet(6, backbone=jhash.models.backbone((3,), 6, hidden=()), **options)
  state = jhash.init(method, jax.random.key(0), {"views": (x,), "labels": y})
  rows = np.array([0, 3, 1, 4, 2, 8])
  s = (y[rows][:, None] == y[rows][None, :]).astype(np.float64)
  w = np.asarray(
    jhash.losses.balanced_pair_weights(jnp.asarray(s, jnp.float32), jhash.losses.off_diagonal(6)),
    np.float64,
  )
  update = jax.jit(method.update)
  for step, stage in ((5, 1), (6, 2)):
    at = _at_step(state, step)
    _, metrics = update(
      at, {"views": (x[rows],), "labels": y[rows], "index": jnp.asarray(rows)}, jax.random.key(1)
    )
    want = ref.hashnet(
      logits_of(at, rows), logits_of(at, rows), s, w, beta=(1 + 0.05 * 3 * stage) ** 0.7, alpha=0.3
    )
    np.testing.assert_allclose(metrics["loss"], want, rtol=2e-5, err_msg=str(step))


def test_adsh_code_step_gives_each_drawn_item_its_outputs_sign_when_gamma_dominates(rng):
  # V_k = -sign(2 V_-k U_-k^T U_k + Qbar_k) with Qbar = -2 K S~^T U - 2 gamma Ubar: at the row
  # idx(i) of a drawn item, -2 gamma u_ik outweighs the rest (at most 2 K m + 2 K m = 96 here)
  # once gamma |u_ik| > 48, so V[idx(i)] = sign(u_i), each item its own output's sign.
  method, state, _, _, _ = _adsh_state(rng, gamma=1e4)
  seen = np.array([2, 5, 7, 9])
  outputs = np.zeros((10, 6), np.float32)
  outputs[seen] = np.where(rng.random((4, 6)) < 0.5, -1.0, 1.0) * rng.uniform(0.1, 0.9, (4, 6))
  state = state._replace(
    memory=state.memory._replace(
      outputs=jnp.asarray(outputs), filled=jnp.asarray(np.isin(np.arange(10), seen))
    )
  )
  new, _ = jax.jit(method.phases[1].update)(state, None, jax.random.key(3))
  np.testing.assert_array_equal(np.asarray(new.codes)[seen], np.sign(outputs[seen]))
