"""Bad input, round 11: the experiment runner, its workdir and ``jhash evaluate``. Each
case names what it did before."""

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import scipy.io as scipy_io

import _experiment_runs as runs
from experiments import cdh_common
from experiments import harness
from experiments import hbmp_figure1
from experiments import retrieval
from jhash import evaluate

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _config(**changes):
  import ml_collections

  return ml_collections.ConfigDict({"seed": 0, "n": 3, **changes})


def test_work_copied_from_another_config_is_refused(tmp_path):
  with harness.Workdir(tmp_path, _config()) as wd:
    wd.finish("cell", {"map": 0.5}, 1.0)
  other = tmp_path / "other"
  with harness.Workdir(other, _config(n=4)) as wd:
    wd.finish("cell", {"map": 0.25}, 1.0)
  (tmp_path / "progress.json").write_text((other / "progress.json").read_text())
  with pytest.raises(
    harness.WorkdirError,
    match=r"progress\.json is damaged or another run's: it records fingerprint",
  ):
    harness.Workdir(tmp_path, _config())  # was: the other config's numbers, reported as this


def test_numbers_a_run_never_writes_are_damage():
  for value, match in (
    (7.0, r"'map' = 7\.0; a mAP"),
    (-0.3, r"in \[0, 1\]"),
    (float("nan"), "NaN"),
  ):
    problem = harness.metric_problem({"map": value})  # was: None (accepted, tabled)
    assert problem is not None and re.search(match, problem), problem
  assert harness.metric_problem({"map": None, "map_k": 5000, "codes_per_item_multi": 2.5}) is None
  assert harness.metric_problem({"precision_at_100_multi": 1.01}) is not None


def test_entries_of_the_wrong_kind_in_a_workdir_are_named(tmp_path):
  cases = {
    "checkpoints": "file",
    "tensorboard": "file",
    "progress.json": "folder",
    "config.json": "folder",
    "results.json": "folder",
    "pr_radius.png": "folder",
    ".lock": "folder",
  }
  for name, kind in cases.items():
    workdir = tmp_path / name.strip(".")
    workdir.mkdir()
    (workdir / name).mkdir() if kind == "folder" else (workdir / name).write_text("x")
    with pytest.raises(harness.WorkdirError, match=rf"{name}' is a {kind}|{name} is a {kind}"):
      harness.Workdir(workdir, _config())  # was: NotADirectoryError / IsADirectoryError
  nested = tmp_path / "nested"
  (nested / "checkpoints").mkdir(parents=True)
  (nested / "checkpoints" / "cell").write_text("x")
  with pytest.raises(harness.WorkdirError, match=r"cell is a file, where a run keeps a folder"):
    harness.Workdir(nested, _config())


def test_the_figure_configs_refuse_counts_they_cannot_run():
  for key, value in (("train_queries", -3), ("num_sweeps", 0), ("gamma_sweeps", 0)):
    config = runs.load_config("cdh_figure1").unlock()
    config[key] = value  # was: permutation[:-3], or a crash after training
    with pytest.raises(harness.ConfigError, match=rf"config\.{key}: must be an int >= 1"):
      cdh_common.validate(config, tuple(config.keys()))
  for key, value in (("num_queries", -5), ("num_queries", 0), ("repeats", 0)):
    config = runs.load_config("hbmp_figure1").unlock()
    config[key] = value
    with pytest.raises(harness.ConfigError, match=rf"config\.{key}: must be an int >= 1"):
      hbmp_figure1.validate(config)
  config = runs.load_config("hbmp_figure1").unlock()
  config.num_queries = config.num_classes * config.instances_per_class
  with pytest.raises(harness.ConfigError, match=r"config\.num_queries: must leave database"):
    hbmp_figure1.validate(config)


def test_cdh_figure1_refuses_more_training_queries_than_items(tmp_path):
  config = runs.load_config("cdh_figure1").unlock()
  config.train_queries = 100_000  # was: cut to the training set's size without a word
  with pytest.raises(harness.ConfigError, match=r"config\.train_queries: must be at most the"):
    runs.run_config(config, tmp_path / "w")
  assert not (tmp_path / "w").exists()


def test_retrieval_options_name_the_key_at_fault():
  config = runs.load_config("baselines", "tiny").unlock()
  config.evaluation.map_ties = ()
  with pytest.raises(harness.ConfigError, match=r"config\.evaluation\.map_ties: must name"):
    retrieval.validate(config)  # was: blamed config.tables
  config = runs.load_config("baselines", "tiny").unlock()
  config.plots.pr_curve_bits = -1
  with pytest.raises(harness.ConfigError, match=r"allowed values: 8, 16, 0\."):
    retrieval.validate(config)  # was: 8, 16 (0, no curves, left out)


def _main(args, tmp_path, env=None):
  return subprocess.run(
    [sys.executable, "-m", "experiments.main", *args, "--workdir", str(tmp_path / "w")],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=120,
    env=env,
  )


def test_the_runner_names_tuple_entries_configs_without_py_and_interrupts(tmp_path):
  out = _main(["--config", "experiments/configs/baselines.py:tiny", "--config.bits[0]=0"], tmp_path)
  assert out.returncode == 1 and "Traceback" not in out.stderr
  assert "config.bits is a tuple" in out.stderr  # was: "no such key"
  plain = tmp_path / "noext"
  plain.write_text((ROOT / "experiments" / "configs" / "baselines.py").read_text())
  out = _main(["--config", f"{plain}:tiny", "--config.foo=1"], tmp_path)
  assert "config has no key 'foo'" in out.stderr, out.stderr  # was: "importing ... failed"
  (tmp_path / "stop_trainer.py").write_text(  # a scheduler's SIGTERM, read as Ctrl-C
    "import os, signal, time\n\ndef train_and_evaluate(config, workdir):\n"
    "  os.kill(os.getpid(), signal.SIGTERM)\n  time.sleep(30)\n"
  )
  (tmp_path / "stop.py").write_text(
    "import ml_collections\n\ndef get_config(arg=None):\n"
    "  return ml_collections.ConfigDict({'trainer': 'stop_trainer'})\n"
  )
  env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
  out = _main(["--config", str(tmp_path / "stop.py")], tmp_path, env)
  assert "Traceback" not in out.stderr and "interrupted: the run stopped" in out.stderr
  assert out.returncode == 1  # was: status 143 and nothing said


@pytest.fixture
def disjoint(tmp_path):
  rng = np.random.default_rng(0)
  arrays = {
    "qc": np.where(rng.normal(size=(5, 16)) > 0, 1, -1).astype(np.int8),
    "dc": np.where(rng.normal(size=(20, 16)) > 0, 1, -1).astype(np.int8),
    "ql": np.arange(5) + 10,  # classes no database item has
    "dl": np.arange(20) % 5,
  }
  for name, a in arrays.items():
    np.save(tmp_path / f"{name}.npy", a)
  names = ("--query-codes", "--db-codes", "--query-labels", "--db-labels")
  return [x for n, k in zip(names, arrays) for x in (n, str(tmp_path / f"{k}.npy"))]


def test_evaluate_says_when_queries_have_no_relevant_item(disjoint, capsys):
  for rule, says in (("zero", "each counts as 0"), ("skip", "left out of the mAP")):
    assert evaluate.main(disjoint + ["--no-relevant", rule]) == 0
    out, err = capsys.readouterr()
    assert "5 of the 5 queries have no relevant item" in out and says in out  # was: silent
    assert "RuntimeWarning" not in err


def test_evaluate_refuses_outputs_and_ks_it_would_get_wrong(disjoint, tmp_path, capsys):
  (tmp_path / "file.txt").write_text("x")
  for extra, match in (
    (["--json", str(tmp_path / "file.txt" / "m.json")], "is a file, not a folder"),
    (["--curves", str(tmp_path / "c.png")], "expected the JSON file's path"),
    (["--ks", "5,,6"], "no empty entries"),
    (["--ks", "10,10"], "each cut-off once; 10 repeats"),
  ):
    assert evaluate.main(disjoint + extra) == 2, extra
    assert match in capsys.readouterr().err
  assert not (tmp_path / "c.png").exists()
  empty = tmp_path / "empty.mat"
  scipy_io.savemat(empty, {})
  args = list(disjoint)
  args[1] = str(empty)
  assert evaluate.main(args) == 2
  assert "the .mat file holds no variables" in capsys.readouterr().err
