"""Bad input, round 12: the experiment configs' counts, repeats and empty lists, checked
before any training; the results page on damaged files; metrics over no queries. Each
case names what it did before."""

import json

import numpy as np
import pytest

import _experiment_runs as runs
from experiments import cdh_common
from experiments import cdh_multilabel
from experiments import harness
from experiments import hbmp_step_sizes
from experiments import quickstart
from experiments import report
from experiments import retrieval
from jhash import codes
from jhash import metrics


def _refused(validate, config, match):
  with pytest.raises(harness.ConfigError, match=match):
    validate(config)


def test_the_retrieval_trainer_refuses_repeats_and_empty_curves():
  cases = [
    ("plots.curves.itq_loss.methods", (), r"curves\.itq_loss\.methods: must name at least one"),
    ("plots.curves.itq_loss.methods", ("itq", "itq"), r"'itq' repeats"),
    ("evaluation.precision_at", (5, 5), r"config\.evaluation\.precision_at: each value once"),
    ("evaluation.map_ties", ("aware", "aware"), r"config\.evaluation\.map_ties: each value once"),
    ("tables", ("map", "map"), r"config\.tables: each value once"),
  ]
  for path, value, match in cases:  # was: a crash after training, or repeated output
    config = runs.load_config("baselines", "tiny").unlock()
    *parents, key = path.split(".")
    node = config
    for p in parents:
      node = node[p]
    node[key] = value
    _refused(retrieval.validate, config, match)
  for value, match in (((0, 0), r"config\.evaluation\.radius: each value once"),):
    config = runs.load_config("mch", "quick").unlock()
    config.evaluation.radius = value  # was: blamed config.tables
    _refused(retrieval.validate, config, match)
  for value, match in (((0.5, 0.5), "each value once"), ((), "must hold at least one value")):
    config = runs.load_config("mch", "quick").unlock()
    config.evaluation.sweep.sigma = value
    _refused(retrieval.validate, config, rf"config\.evaluation\.sweep\.sigma: {match}")


def test_cdh_configs_refuse_zero_sweeps_and_options_for_baselines_not_run():
  config = runs.load_config("cdh_mfeat").unlock()
  config.cdh.num_sweeps = 0  # was: a KeyError after the first cell trained
  _refused(lambda c: cdh_common.validate(c, tuple(c.keys())), config, r"num_sweeps: must be")
  config = runs.load_config("cdh_mfeat").unlock()
  config.baselines = ()
  _refused(  # was: "'cmfh' is not allowed; allowed values: ."
    lambda c: cdh_common.validate(c, tuple(c.keys())),
    config,
    r"config\.baseline_options\.\w+: options for a baseline .* \(it runs none\)",
  )


def test_hbmp_step_sizes_refuses_counts_empties_and_repeats():
  for key, value in (
    ("repeats", 0),
    ("max_bits", 0),
    ("checkpoint_every", 0),
    ("step_sizes", ()),
    ("bits", (12, 12)),
  ):  # was: tracebacks, or tables with no or repeated rows
    config = runs.load_config("hbmp_step_sizes").unlock()
    config[key] = value
    _refused(hbmp_step_sizes.validate, config, rf"config\.{key}: ")


def test_cdh_multilabel_checks_its_data_sets_before_any_data():
  for key, value, match in (
    ("split", "foo", r"split: 'foo' is not allowed"),
    ("num_validation", -1, r"num_validation: must be an int >= 1"),
    ("num_validation", 0, r"num_validation: must be an int >= 1"),  # was: ZeroDivisionError
    ("num_train", 0, r"num_train: must be an int >= 1"),
    ("grid", (2,), r"grid: must be \(rows, columns\)"),
  ):
    config = runs.load_config("cdh_multilabel").unlock()
    config.datasets.canvases[key] = value
    _refused(cdh_multilabel.check_config, config, rf"config\.datasets\.canvases\.{match}")


def test_quickstart_checks_the_cross_view_data_before_training():
  config = runs.load_config("quickstart", "tiny").unlock()
  config.cross_view.dataset.views = ("pix",)  # was: checked after the Fashion part trained
  _refused(quickstart.validate, config, r"config\.cross_view\.dataset\.views: must name two")


def test_the_results_page_names_damage_in_any_trainers_results(tmp_path):
  def write(results):
    (tmp_path / "results.json").write_text(json.dumps(harness.with_digest(results)))

  base = {"table": "| a |\n|---|\n| 1 |", "config": {"trainer": "experiments.cdh_mfeat"}}
  write({**base, "metrics": [1, 2]})  # was: AttributeError
  with pytest.raises(ValueError, match=r"its 'metrics' must be an object; got list"):
    report.load(tmp_path)
  write({**base, "metrics": {"cdh/32": 5}})  # was: AttributeError in the sweep tables
  assert "| a |" in report.page([tmp_path])
  write({**base, "metrics": {}, "table": "  "})
  with pytest.raises(ValueError, match=r"its 'table' is empty"):
    report.load(tmp_path)
  write({**base, "metrics": {}, "config": "str"})
  with pytest.raises(ValueError, match=r"its 'config' must be an object"):
    report.load(tmp_path)
  folder = tmp_path / "folder"
  (folder / "results.json").mkdir(parents=True)
  with pytest.raises(ValueError, match=r"is a folder, not the results file"):
    report.load(folder)  # was: "does not exist: the run has not finished"
  write({**base, "metrics": {}, "machine": {"cpu": None, "cores": "many"}})
  assert "many cores" not in report.page([tmp_path])  # was: "on many cores of None"


def test_tuples_of_strings_get_a_quoting_hint():
  with pytest.raises(harness.ConfigError, match=r"needs its strings quoted"):
    harness.check_choice("(map,)", ["map"], "config.tables")


def test_metrics_over_no_queries_with_multi_hot_labels(rng):
  q, db = np.ones((0, 16), np.int8), codes.sign(rng.normal(size=(10, 16)))
  labels = np.ones((10, 3), bool)
  ap, defined = metrics.average_precisions(q, db, np.zeros((0, 3), bool), labels)
  assert ap.shape == defined.shape == (0,)  # was: ZeroDivisionError in the native kernel
  with pytest.raises(ValueError, match=r"query_codes must hold at least one query"):
    metrics.mean_average_precision(q, db, np.zeros((0, 3), bool), labels)


def test_a_rerun_adds_to_the_recorded_wall_time(tmp_path):
  import time

  config = runs.load_config("baselines", "tiny")
  with harness.Workdir(tmp_path, config) as wd:
    wd.finish("cell", {"map": 0.5}, 20.0)  # a cell of 20 s, from a run killed before results
    first = harness.write_results(wd, config, {}, time.time() - 3)["wall_time_s"]
  assert first == pytest.approx(20.0)  # at least the cells' own seconds (was: 3)
  with harness.Workdir(tmp_path, config) as wd:  # a rerun of the finished workdir
    again = harness.write_results(wd, config, {}, time.time() - 1)["wall_time_s"]
  assert again == pytest.approx(first + 1, abs=0.5)  # was: 1, the rerun's own seconds
