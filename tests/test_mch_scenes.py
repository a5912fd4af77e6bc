"""MCH's fair test, quick: the pretraining run (``pretrain.py:quick``) writes a backbone, and
``mch.py:scenes-quick`` fine-tunes its base from it on the scenes protocol. Each run is
checked for what it learned; a missing backbone is refused before any cell trains."""

import jax
import numpy as np
import pytest

import _experiment_runs as runs
import jhash
from experiments import harness
from experiments import mch_controls
from experiments import pretrain
from experiments import retrieval


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("pretrain") / "run"
  config, results = runs.run("pretrain", workdir)
  return config, results, workdir


def test_the_pretraining_run_learns_the_classes_and_writes_the_backbone(pretrained):
  config, results, workdir = pretrained
  # Ten balanced classes: chance is 0.1 on the held-out single items.
  assert results["metrics"]["accuracy"] > 0.1, results["metrics"]
  variables, (mean, scale), integer = jhash.coder.load_weights(workdir / pretrain.WEIGHTS)
  assert "projection" in variables["params"] and np.ndim(mean) == 0 and scale > 0
  assert results["backbone"] == pretrain.WEIGHTS


# ~60 s; test_the_controls_of_a_small_mch_state_hold_whatever_it_learned runs its controls
# and diagnosis, and test_papers_configs' MCH quick run its cells through the trainer.
@pytest.mark.slow
def test_the_scenes_run_learns_on_the_pretrained_backbone(pretrained, tmp_path):
  _, _, pre_dir = pretrained
  config = runs.load_config("mch", "scenes-quick").unlock()
  config.pretrained = str(pre_dir / pretrain.WEIGHTS)
  results = runs.run_config(config.lock(), tmp_path / "run")
  cell = results["metrics"]["scenes/mch_dch/16"]
  spec = {k: v for k, v in config.datasets.scenes.to_dict().items() if k != "protocol"}
  _, query, database = jhash.data.load_protocol("scenes", 0, **spec)
  rng = np.random.default_rng(0)
  random_map = float(
    jhash.metrics.mean_average_precision(
      rng.choice([-1, 1], (len(query["labels"]), 16)).astype(np.int8),
      rng.choice([-1, 1], (len(database["labels"]), 16)).astype(np.int8),
      query["labels"],
      database["labels"],
    )
  )
  assert cell["map"] > random_map, (cell["map"], random_map)
  for r in (0, 2):  # extra codes only bring an item nearer
    assert cell[f"recall_radius_{r}_multi"] >= cell[f"recall_radius_{r}"]
  assert 1.0 <= cell["codes_per_item_multi"] <= 6.0
  _check_controls(cell, config.datasets.scenes.to_dict())
  # The agent's diagnosis (scenes-quick sets evaluation.diagnose): the probe, a network of
  # the policy's shape trained on the training crops' oracle labels, fits those labels.
  assert cell["probe_train_auc"] > 0.8, cell["probe_train_auc"]


def test_the_controls_of_a_small_mch_state_hold_whatever_it_learned():
  # The scenes run's controls, diagnosis and split by the query's number of objects
  # (retrieval.controls), on a small state trained from scratch for one epoch: what holds
  # of any trained state. (The scenes run above, slow, checks what it learned.)
  config = runs.load_config("mch", "scenes-quick").unlock()
  config.pretrained = None
  config.datasets.scenes.update({"num_items": 240, "num_queries": 40, "num_train": 120})
  config.lock()
  spec = {k: v for k, v in config.datasets.scenes.to_dict().items() if k != "protocol"}
  batches = jhash.data.load_protocol("scenes", 0, **spec)
  method = retrieval.build_method(config, "mch_dch", 8)
  state, _ = jhash.fit(method, jax.random.key(0), batches[0], progress=False)
  cell = retrieval.evaluate(method, state, *batches[1:], config.evaluation, curve=False)
  cell.update(retrieval.controls(config, "scenes", method, state, batches, 0))
  _check_controls(cell, config.datasets.scenes.to_dict())


def _check_controls(cell: dict, scenes: dict) -> None:
  """What holds of an MCH cell's controls and diagnosis whatever the agent learned."""
  spec = {k: v for k, v in scenes.items() if k != "protocol"}
  # The controls, on the same state: each keeps the whole code, so recall never falls
  # below the base's; keeping every crop keeps the most crop codes.
  for control in ("all", "random", "oracle", "items"):
    for r in (0, 2):
      assert cell[f"recall_radius_{r}_multi@control={control}"] >= cell[f"recall_radius_{r}"]
    assert cell[f"codes_per_item_multi@control={control}"] >= 1.0
  crops = [cell[f"codes_per_item_multi@control={c}"] for c in ("random", "oracle")]
  assert cell["codes_per_item_multi@control=all"] >= max(crops + [cell["codes_per_item_multi"]])
  assert 0.0 <= cell["oracle_keep_fraction"] <= 1.0
  # Split by the query's number of objects: the groups' mAPs average to the whole's.
  ds, split = jhash.data.scene_split(0, **spec)
  counts = np.bincount(ds.extras["num_objects"][split["query"]], minlength=4)[1:]
  for suffix in ("", "_multi"):
    groups = [cell[f"map{suffix}@query_objects={c}"] for c in (1, 2, 3)]
    assert np.average(groups, weights=counts) == pytest.approx(cell[f"map{suffix}"], abs=1e-5)
  # The agent's diagnosis: AUCs (NaN where the oracle keeps all or none).
  for name in ("agent_auc", "probe_auc", "probe_train_auc"):
    assert np.isnan(cell[name]) or 0.0 <= cell[name] <= 1.0
  quantiles = [cell[f"keep_probability_q{q:g}"] for q in mch_controls.KEEP_QUANTILES]
  assert quantiles == sorted(quantiles) and 0.0 <= quantiles[0] and quantiles[-1] <= 1.0
  # Ranking the agent's crops keeps as many as the oracle (the whole code aside).
  oracle_crops = cell["codes_per_item_multi@control=oracle"] - 1.0
  assert cell["codes_per_item_multi@control=agent_ranked"] - 1.0 <= oracle_crops + 1e-9
  for r in (0, 2):
    assert cell[f"recall_radius_{r}_multi@control=probe"] >= cell[f"recall_radius_{r}"]


def test_roc_auc_counts_the_pairs_a_positive_wins_ties_half():
  rng = np.random.default_rng(0)
  for n in (2, 7, 50):
    scores = rng.integers(0, 4, n).astype(float)  # many ties
    labels = rng.random(n) < 0.4
    labels[:2] = (True, False)
    pos, neg = scores[labels], scores[~labels]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    assert mch_controls.roc_auc(scores, labels) == pytest.approx(wins / (pos.size * neg.size))
  assert np.isnan(mch_controls.roc_auc([0.1, 0.2], [True, True]))


def test_top_fraction_keeps_the_highest_scores_ties_to_the_first():
  scores = np.array([[0.1, 0.9, 0.5], [0.9, 0.2, 0.5]])
  got = mch_controls.top_fraction(scores, 3 / 6)
  assert got.tolist() == [[False, True, True], [True, False, False]]
  assert not mch_controls.top_fraction(scores, 0.0).any()
  assert mch_controls.top_fraction(scores, 1.0).all()


def test_a_missing_backbone_is_refused_before_training(tmp_path):
  config = runs.load_config("mch", "scenes-quick").unlock()
  config.pretrained = str(tmp_path / "none.npz")
  with pytest.raises(harness.ConfigError, match="config.pretrained: no weights file"):
    runs.run_config(config.lock(), tmp_path / "run")
  assert not (tmp_path / "run" / "progress.json").exists()


def test_the_reward_tables_are_the_bases_losses_on_codes_and_are_plotted(tmp_path):
  from experiments import mch_reward_tables

  labels = np.arange(16) % 4
  found = mch_reward_tables.tables(8, labels)
  assert sorted(found) == sorted(mch_reward_tables.BASES)
  batch = {"views": (np.zeros((16, 4), np.float32),), "labels": labels}
  for name, table in found.items():
    method = jhash.methods.REGISTRY[name](8)
    want = method.extras.code_loss(jhash.init(method, jax.random.key(3), batch))
    np.testing.assert_allclose(table, want, rtol=1e-6)
  assert np.diff(found["mmhh"][0])[2] > 0  # MMHH's margin: d = 2 -> 3 raises the loss
  mch_reward_tables.plot(found, tmp_path / "tables.png")
  runs.assert_pngs(tmp_path, ["tables.png"])


def _cell(r0_base, r0_mch, r0_random, r0_items, map_drop=0.0):
  """A results.json cell of three seeds (noise 1e-4) with the given R@r0s."""
  seeds = {}
  for s, noise in enumerate((-1e-4, 0.0, 1e-4)):
    v = {
      "recall_radius_0": r0_base + noise,
      "recall_radius_0_multi": r0_mch + 2 * noise,
      "recall_radius_0_multi@control=random": r0_random,
      "recall_radius_0_multi@control=items": r0_items + noise,
      "precision_radius_0": 0.5,
      "precision_radius_0_multi": 0.5,
      "map": 0.6,
      "map_multi": 0.6 - map_drop,
      "oracle_keep_fraction": 0.1,
    }
    seeds[str(s)] = v
  return {"per_seed": seeds}


def test_the_verdict_follows_the_rule_fixed_in_advance():
  from experiments import mch_verdict

  bases = mch_verdict.BASES
  gains = {b: _cell(0.02, 0.03, 0.025, 0.04) for b in bases}
  assert mch_verdict.verdict(gains)[0] == "holds"
  costly = {b: _cell(0.02, 0.03, 0.025, 0.04, map_drop=0.02) for b in bases}  # mAP -0.02
  assert mch_verdict.verdict(costly)[0] == "refuted"
  no_better_than_random = {b: _cell(0.02, 0.03, 0.03, 0.04) for b in bases}
  assert mch_verdict.verdict(no_better_than_random)[0] == "refuted"
  three = {**gains, "ksh": _cell(0.02, 0.02, 0.02, 0.04), "dch": _cell(0.02, 0.02, 0.02, 0.04)}
  word, reason = mch_verdict.verdict(three)
  assert word == "refuted" and "3 of 5" in reason
  nothing = {b: _cell(0.02, 0.02, 0.02, 0.02) for b in bases}
  assert mch_verdict.verdict(nothing)[0] == "inconclusive"
  # The paired interval: Student's t over three seeds.
  mean, low, high = mch_verdict.paired_interval(np.array([1.0, 2.0, 3.0]), np.zeros(3))
  assert mean == 2.0 and high - mean == pytest.approx(4.302653 / np.sqrt(3), rel=1e-6)
