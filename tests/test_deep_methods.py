"""The five deep base models (KSH, HashNet, ADSH, DCH, MMHH) as methods: they learn on a
small real set, their steps are traced once, ADSH's phases alternate, bad input is named."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jhash
import jhash.data
from jhash.methods import _deep

FIVE = ("ksh", "hashnet", "adsh", "dch", "mmhh")
OPTIONS = {"adsh": {"rounds": 3, "steps_per_round": 20, "num_samples": 300},
           "hashnet": {"period": 10}}


@pytest.fixture(scope="module")
def digits():
  ds = jhash.data.load_digits()                     # 1,797 real 8x8 digits
  rng = np.random.default_rng(0)
  idx = rng.permutation(ds.labels.size)[:600]
  x = ds.views[0].reshape(ds.labels.size, -1)[idx].astype(np.float32)
  return {"views": (x,), "labels": ds.labels[idx].astype(np.int32)}


def _train_map(method, state, batch):
  codes = jhash.encode(method, state, batch)
  return float(jhash.metrics.mean_average_precision(codes, codes, batch["labels"],
                                                    batch["labels"]))


# KSH, HashNet and MMHH share DCH's code path (pairwise with another loss, each loss
# tested in test_deep_losses.py): their learning runs are slow-only.
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow)
                                  if n in ("ksh", "hashnet", "mmhh") else n for n in FIVE])
def test_training_lowers_the_loss_and_raises_training_map(name, digits):
  method = jhash.methods.REGISTRY[name](16, batch_size=50, **{"num_epochs": 4,
                                                             **OPTIONS.get(name, {})}) \
      if name != "adsh" else jhash.methods.adsh(16, batch_size=50, **OPTIONS["adsh"])
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
  agree = np.mean(np.where(np.asarray(state.outputs) >= 0, 1.0, -1.0) == v)
  assert agree > 0.8, agree
  # Asymmetric retrieval: network codes of queries against the learned database codes.
  q = jhash.encode(method, state, digits)
  mean_ap = jhash.metrics.mean_average_precision(q, v.astype(np.int8), digits["labels"],
                                                 digits["labels"])
  assert mean_ap > 0.8


def test_adsh_targets_balance_similar_and_dissimilar_pairs():
  s = jnp.asarray([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
  t = np.asarray(_deep.adsh_targets(s))
  np.testing.assert_allclose(t[s == 1], 1.0)
  np.testing.assert_allclose(t[s == 0], -2.0 / 6.0)           # r = 2 similar / 6 dissimilar
  np.testing.assert_allclose(t.sum(), 0.0, atol=1e-6)           # both kinds weigh the same


def test_hashnet_scales_outputs_by_the_continuation(rng):
  method = jhash.methods.hashnet(4, period=2, batch_size=16)
  x = rng.normal(size=(32, 5)).astype(np.float32)
  batch = {"views": (x,), "labels": (x[:, 0] > 0).astype(np.int32)}
  state, _ = jhash.fit(method, jax.random.key(0), batch, num_steps=5, progress=False)
  assert int(state.train.step) == 5
  np.testing.assert_allclose(jhash.losses.hashnet_beta(jnp.int32(4), period=2),
                             np.sqrt(1 + 0.005 * 2 * 2), rtol=1e-6)


@pytest.mark.parametrize("name", FIVE)
def test_bad_input_names_the_argument(name, rng):
  factory = jhash.methods.REGISTRY[name]
  with pytest.raises(ValueError, match="num_bits"):
    factory(0)
  method = factory(8)
  x = rng.normal(size=(40, 6)).astype(np.float32)
  with pytest.raises(ValueError, match="labels"):         # labels that do not match the batch
    jhash.fit(method, jax.random.key(0), {"views": (x,), "labels": np.zeros(39, np.int32)},
              progress=False)
  with pytest.raises(ValueError, match="labels"):         # unsupervised data for a supervised method
    jhash.fit(method, jax.random.key(0), {"views": (x,)}, progress=False)
  images = rng.random((40, 28, 28)).astype(np.float32)
  net = jhash.models.backbone((28, 28), 8)
  with pytest.raises(ValueError, match="views"):          # images of the wrong size for the net
    jhash.fit(factory(8, backbone=net), jax.random.key(0),
              {"views": (images[:, :20, :20],), "labels": np.zeros(40, np.int32)},
              progress=False)
