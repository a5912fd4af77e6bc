"""Bad input, round 6: the experiment runner. Cases that reused another config's work, read
a hand-edited number as missing, ended in a raw traceback, or left files behind; each is
now a clear error naming the file, the cell or the flag, and how to go on.

* ``experiments.harness.Workdir``: a workdir holding work whose ``config.json`` was
  deleted took any config (the old cells were reused and ``config.json`` rewritten to
  say the new config made them); now the work records its config's fingerprint
  (``progress.json``, ``results.json``) and only that config resumes. A damaged
  ``config.json`` advises deleting it only where the work records the fingerprint.
* ``progress.json`` / ``results.json`` cells with a metric removed or set to a string
  (shown as ``-``, exit 0); ``experiments.report`` given a file as the run directory;
* a paper data folder that is missing (a FileNotFoundError traceback);
* a data check that fails in a new workdir (``config.json`` and ``.lock`` left there);
* ``python -m experiments.mch_crop_rewards --bits 100000`` (an XLA out-of-memory error).
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import _experiment_runs as runs
from experiments import harness
from experiments import report
from experiments import retrieval

CELL = "mfeat/lsh/8/seed=0"


def _cheap(**changes):
  """The baselines' tiny config cut to LSH at 8 bits (one step), then ``changes``."""
  config = runs.load_config("baselines", "tiny")
  with config.unlocked():
    config.bits = (8,)
    config.methods = {"lsh": {"method": "lsh"}}
    config.plots.pr_curve_bits = 8
    config.plots.curves = {}
    for path, value in changes.items():
      *parents, leaf = path.split(".")
      node = config
      for name in parents:
        node = node[name]
      node[leaf] = value
  return config.lock()


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
  """A finished run of ``_cheap()``: (its workdir, results.json)."""
  workdir = tmp_path_factory.mktemp("finished") / "run"
  return workdir, runs.run_config(_cheap(), workdir)


def _copy(finished, tmp_path) -> pathlib.Path:
  workdir = tmp_path / "run"
  shutil.copytree(finished[0], workdir)
  return workdir


def _edit(path: pathlib.Path, edit) -> None:
  data = json.loads(path.read_text())
  edit(data)
  path.write_text(json.dumps(data))


# ------------------------------------------------------------------------- config.json


def test_a_workdir_without_config_json_resumes_only_the_config_its_work_records(finished, tmp_path):
  workdir = _copy(finished, tmp_path)
  (workdir / "config.json").unlink()
  progress = (workdir / "progress.json").read_bytes()
  # was: the seed-0 cell reused for seed 1, and config.json rewritten to say seed 1
  with pytest.raises(harness.WorkdirError, match="different config") as error:
    runs.run_config(_cheap(seed=1), workdir)
  assert str(workdir) in str(error.value) and "seed: 0 -> 1" in str(error.value)
  assert not (workdir / "config.json").exists()
  assert (workdir / "progress.json").read_bytes() == progress
  # Its own config resumes: config.json is written again, the results are the same.
  assert runs.run_config(_cheap(), workdir)["metrics"] == finished[1]["metrics"]
  assert json.loads((workdir / "config.json").read_text())["fingerprint"] == (
    harness.config_fingerprint(_cheap())
  )


def test_work_that_records_no_config_is_refused_without_config_json(tmp_path):
  config = {"seed": 0}
  with harness.Workdir(tmp_path, config) as wd:
    wd.finish("cell", {"map": 0.5}, 1.0)
  _edit(tmp_path / "progress.json", lambda p: p.pop("fingerprint"))  # as an older run wrote it
  (tmp_path / "config.json").unlink()
  for other in (config, {"seed": 1}):  # even its own: nothing says which config it was
    with pytest.raises(harness.WorkdirError, match="but no config.json") as error:
      harness.Workdir(tmp_path, other)
    message = str(error.value)
    assert str(tmp_path) in message and "restore config.json from a copy" in message, message
    assert "use a new workdir, or delete this one" in message, message
    assert not (tmp_path / "config.json").exists()
  # Checkpoints alone record no config either.
  (tmp_path / "progress.json").unlink()
  (tmp_path / "checkpoints" / "cell" / "4").mkdir(parents=True)
  with pytest.raises(harness.WorkdirError, match="but no config.json"):
    harness.Workdir(tmp_path, config)


def test_a_damaged_config_json_advises_deleting_it_only_where_that_is_safe(tmp_path):
  config = {"seed": 0}
  with harness.Workdir(tmp_path, config) as wd:
    wd.finish("cell", {"map": 0.5}, 1.0)
  (tmp_path / "config.json").write_text('{"fingerp')
  with pytest.raises(harness.WorkdirError, match="config.json is damaged") as error:
    harness.Workdir(tmp_path, config)
  assert "delete it and run again" in str(error.value)
  (tmp_path / "config.json").unlink()  # doing so: another config is still refused
  with pytest.raises(harness.WorkdirError, match="different config"):
    harness.Workdir(tmp_path, {"seed": 1})
  harness.Workdir(tmp_path, config).close()
  # Work that records no fingerprint: deleting config.json would lose which config ran.
  _edit(tmp_path / "progress.json", lambda p: p.pop("fingerprint"))
  (tmp_path / "config.json").write_text("[]")
  with pytest.raises(harness.WorkdirError, match="config.json is damaged") as error:
    harness.Workdir(tmp_path, config)
  assert "delete it" not in str(error.value) and "restore config.json from a copy" in str(
    error.value
  )


# ------------------------------------------------------------------------- hand-edited cells


@pytest.mark.parametrize(
  "edit, match",
  [
    (lambda r: r.update(map="x"), r"has 'map' = \"x\"; expected a number"),
    (lambda r: r.pop("map"), r"has no 'map' \(expected a number\)"),
    (lambda r: r.update(precision_at_100=[0.5]), r"has 'precision_at_100' = \[0.5\]; expected"),
  ],
)
def test_a_hand_edited_progress_cell_is_named_with_its_metric(finished, tmp_path, edit, match):
  workdir = _copy(finished, tmp_path)
  _edit(workdir / "progress.json", lambda p: edit(p["cells"][CELL]))
  # was: the table showed '-' for the metric, exit 0
  with pytest.raises(harness.WorkdirError, match=match) as error:
    runs.run_config(_cheap(), workdir)
  message = str(error.value)
  assert f"{workdir / 'progress.json'} is damaged: the result of cell '{CELL}'" in message
  assert f"delete the entry '{CELL}' from its 'cells' and run again" in message
  _edit(workdir / "progress.json", lambda p: p["cells"].pop(CELL))  # as the message says
  assert runs.run_config(_cheap(), workdir)["metrics"] == finished[1]["metrics"]


def test_numbers_the_runner_writes_for_undefined_metrics_are_accepted(finished, tmp_path):
  workdir = _copy(finished, tmp_path)
  # jsonable writes NaN as null and infinities as "inf" / "-inf".
  _edit(
    workdir / "progress.json",
    lambda p: (
      p["cells"][CELL].update(precision_at_100=None, recall_radius_2="inf"),
      p["digests"].update(
        {CELL: harness.cell_digest(CELL, p["cells"][CELL], p["fingerprint"])}
      ),  # as written
    ),
  )
  results = runs.run_config(_cheap(), workdir)
  assert "precision_at_100" not in results["metrics"]["mfeat/lsh/8"]  # no number to average
  assert report.main([str(workdir)]) == 0


def test_report_names_a_hand_edited_metric_and_a_file_given_as_a_run(finished, tmp_path, capsys):
  workdir = _copy(finished, tmp_path)
  results = workdir / "results.json"
  for edit, named in (
    (lambda m: m["mfeat/lsh/8"].update(map="oops"), "cell 'mfeat/lsh/8' has 'map' = \"oops\""),
    (lambda m: m["mfeat/lsh/8"]["std"].update(map="x"), "cell 'mfeat/lsh/8' std has 'map'"),
    (
      lambda m: m["mfeat/lsh/8"]["per_seed"]["0"].update(precision_at_100=True),
      "cell 'mfeat/lsh/8' per_seed 0 has 'precision_at_100' = true",
    ),
  ):
    shutil.copy(finished[0] / "results.json", results)
    _edit(results, lambda r: edit(r["metrics"]))
    assert report.main([str(workdir)]) == 2  # was: 0, the page printed
    err = capsys.readouterr().err
    assert err.startswith(f"error: {results} is damaged: {named}"), err
    assert "expected a number" in err and "written again" in err, err
  # was: '.../config.json/results.json does not exist: the run in .../config.json ...'
  assert report.main([str(workdir / "config.json")]) == 2
  assert "config.json is a file, not a run directory" in capsys.readouterr().err
  # Other trainers' metrics keep their own layouts (CDH writes "skipped" cells as text).
  _edit(results, lambda r: r["config"].update(trainer="experiments.cdh_mfeat"))
  results.write_text(json.dumps(harness.with_digest(json.loads(results.read_text()))))
  assert report.main([str(workdir)]) == 0


# ------------------------------------------------------------------------- data and workdirs


def test_a_missing_paper_data_folder_is_a_config_error_that_leaves_nothing(tmp_path):
  config = runs.load_config("papers", "quick")
  with config.unlocked():
    config.datasets.cifar10.root = str(tmp_path / "none")
  workdir = tmp_path / "new" / "run"
  # was: FileNotFoundError, a traceback from experiments/retrieval.py load_split
  with pytest.raises(harness.ConfigError, match="config.datasets.cifar10: .*is not a folder"):
    retrieval.train_and_evaluate(config.lock(), workdir)
  assert not (tmp_path / "new").exists()  # was: config.json and .lock left in it


@pytest.mark.parametrize(
  "change, match",
  [
    ({"datasets.mfeat.query_per_class": -5}, "query_per_class must be >= 0"),
    ({"evaluation.precision_at": (10000,)}, "the cut-off 10000 exceeds"),
  ],
)
def test_a_failed_data_check_removes_the_workdir_it_made_only(tmp_path, change, match):
  workdir = tmp_path / "new" / "run"
  with pytest.raises(harness.ConfigError, match=match):
    retrieval.train_and_evaluate(_cheap(**change), workdir)
  assert not (tmp_path / "new").exists()  # was: config.json and .lock left there
  mine = tmp_path / "mine"  # a folder that was there before: its files stay
  mine.mkdir()
  (mine / "notes.txt").write_text("keep")
  with pytest.raises(harness.ConfigError, match=match):
    retrieval.train_and_evaluate(_cheap(**change), mine)
  assert (mine / "notes.txt").read_text() == "keep"


def test_a_failed_run_removes_its_new_workdir_only_before_any_work(tmp_path):
  workdir = tmp_path / "run"
  with pytest.raises(RuntimeError), harness.Workdir(workdir, {"seed": 0}):
    raise RuntimeError("before any work")
  assert not workdir.exists()
  with pytest.raises(RuntimeError), harness.Workdir(workdir, {"seed": 0}) as wd:
    wd.finish("cell", {"map": 0.5}, 1.0)
    raise RuntimeError("after a finished cell")
  assert sorted(p.name for p in workdir.iterdir()) == [".lock", "config.json", "progress.json"]


# ------------------------------------------------------------------------- mch_crop_rewards


def test_crop_rewards_bounds_bits_and_epochs_before_loading_data():
  root = pathlib.Path(__file__).resolve().parent.parent
  env = {**os.environ, "PYTHONPATH": str(root), "JAX_PLATFORMS": "cpu"}
  cases = (
    # was: accepted, then JaxRuntimeError: Out of memory allocating 40000400000 bytes
    (
      ["--bits", "100000", "--num_train", "2", "--epochs", "0"],
      "--bits 100000: must be an int in [1, 1024]",
    ),
    (
      ["--num_train", "9000", "--epochs", "20000000"],
      "--epochs 20000000: must be an int in [0, 15230380]",
    ),
  )
  procs = [
    subprocess.Popen(
      [sys.executable, "-m", "experiments.mch_crop_rewards", *args],
      cwd=root,
      env=env,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )
    for args, _ in cases
  ]
  for proc, (_, match) in zip(procs, cases):
    _, err = proc.communicate(timeout=120)
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 2 and "Traceback" not in err, err[-2000:]
    assert lines[-1].startswith(f"error: {match}"), lines[-1]
