"""MCH's experiment (``experiments/configs/mch.py:quick``) on the retrieval trainer: the
base model learns, MCH's extra codes only add buckets (recall within a radius never
falls), sigma = 1 re-encodes to the base model exactly, the F1-bucket curves and
sweep numbers are written; and the trainer's new evaluation keys are checked."""

import numpy as np
import pytest

import _experiment_runs as runs
import jhash
from experiments import harness
from experiments import retrieval


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("mch") / "run"
  config, results = runs.run("mch", workdir)
  return config, results, workdir


# ~31 s; faster runs cover the same code: test_papers_configs' mch_papers quick run (MCH
# over DCH on the retrieval trainer, its sweep of sigma, F1-bucket curves and plots) and
# test_mch_scenes' scenes-quick run (the mch.py config family, with its controls).
@pytest.mark.slow
def test_mch_quick_run_learns_and_writes_its_files(quick):
  config, results, workdir = quick
  cell = results["metrics"]["canvases/mch_dch/16"]
  # The base model learned: its mAP is far above random codes' on the same split.
  _, query, database = jhash.data.load_protocol(
    "canvases",
    0,
    **{k: v for k, v in config.datasets.canvases.to_dict().items() if k != "protocol"},
  )
  rng = np.random.default_rng(0)
  random_map = float(
    jhash.metrics.mean_average_precision(
      rng.choice([-1, 1], (len(query["labels"]), 16)).astype(np.int8),
      rng.choice([-1, 1], (len(database["labels"]), 16)).astype(np.int8),
      query["labels"],
      database["labels"],
    )
  )
  assert cell["map"] > random_map + 0.05, (cell["map"], random_map)
  # Extra codes can only bring an item nearer: recall within a radius never falls.
  for r in (0, 2):
    assert cell[f"recall_radius_{r}_multi"] >= cell[f"recall_radius_{r}"]
  assert 1.0 <= cell["codes_per_item_multi"] <= 6.0
  # sigma = 1: the crops are the image, every repeated code dropped: the base model.
  for metric in retrieval.SWEEP_METRICS:
    single = 1.0 if metric == "codes_per_item" else cell[metric]
    assert cell[f"{metric}_multi@sigma=1.0"] == single, metric
  assert cell["map_multi@sigma=0.5"] == cell["map_multi"]  # the config's own sigma
  per_seed = cell["per_seed"]["0"]
  for key in ("f1_buckets", "f1_buckets_multi"):
    curve = per_seed[key]
    assert len(curve["f1"]) == 17 and curve["buckets"][0] == 1.0
  assert np.all(np.isfinite(per_seed["history"]["agent_loss"]))
  runs.assert_pngs(workdir, ["f1_buckets.png", "agent.png", "recall_radius_0_vs_bits.png"])
  assert "recall_radius_0_multi" in results["table"]


def test_new_evaluation_keys_are_checked():
  config = runs.load_config("mch")
  for path, value, message in (
    ("evaluation.radius", (0, 40), "radius"),
    ("evaluation.sweep", {"sigma": (0.0,)}, "sweep.sigma"),
    ("plots.f1_bucket_bits", 8, "f1_bucket_bits"),
  ):
    bad = runs.load_config("mch")
    with bad.unlocked():
      *parents, leaf = path.split(".")
      node = bad
      for name in parents:
        node = node[name]
      node[leaf] = value
    with pytest.raises(harness.ConfigError, match=message):
      retrieval.validate(bad)
  retrieval.validate(config)
  names = retrieval.metric_names(config.evaluation)
  assert {
    "recall_radius_0",
    "precision_radius_2_multi",
    "codes_per_item_multi",
    "recall_radius_0_multi@sigma=1.0",
  } <= set(names)
