"""Bad input, round 5: the scripts and save/restore. Cases that overwrote an input, wrote
a run where it was not asked for, or ended in a raw traceback; each is now a clear error
naming the argument or the file.

* ``jhash evaluate``: ``--json`` or ``--curves`` naming an input file (it was overwritten),
  a folder (a raw ValueError) or an empty path (silently ignored);
* ``python -m experiments.report``: ``--out`` naming a run's ``results.json`` (it was
  overwritten with Markdown) or a folder; ``machine``, ``seeds`` of the wrong type;
* ``python -m experiments.main``: an empty ``--workdir`` (the run was written into the
  current directory); config files that do not compile, have no ``get_config``, return
  no ConfigDict, or name no usable trainer;
* ``experiments.harness.Workdir``: a workdir that cannot be made (``/proc/xx``), and
  ``config.json`` / ``progress.json`` that parse but are not what a run writes;
* ``python -m experiments.mch_crop_rewards``: every flag checked before the data load;
* ``jhash.save(overwrite=...)`` not a bool; ``jhash.restore`` of hand-edited
  ``jhash_files.json`` / ``jhash_state.json``.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest

import jhash
from jhash import evaluate

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _script(module: str, *args, cwd=ROOT, timeout=120):
  env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
  return subprocess.run(
    [sys.executable, "-m", module, *args],
    cwd=cwd,
    env=env,
    capture_output=True,
    text=True,
    timeout=timeout,
  )


def _error_line(err: str) -> str:
  """The last line of stderr, which must be the script's one-line error."""
  lines = [line for line in err.splitlines() if line.strip()]
  assert "Traceback" not in err, err[-2000:]
  assert lines and "error: " in lines[-1], err[-2000:]
  return lines[-1]


# ------------------------------------------------------------------------- jhash evaluate


@pytest.fixture
def codes(tmp_path):
  rng = np.random.default_rng(0)
  paths = {}
  for name, array in (
    ("q", np.sign(rng.normal(size=(5, 8))).astype("f4")),
    ("db", np.sign(rng.normal(size=(20, 8))).astype("f4")),
    ("ql", rng.integers(0, 3, 5)),
    ("dbl", rng.integers(0, 3, 20)),
  ):
    paths[name] = tmp_path / f"{name}.npy"
    np.save(paths[name], array)
  return paths


def _evaluate(codes, capsys, *extra):
  argv = [
    "--query-codes",
    str(codes["q"]),
    "--db-codes",
    str(codes["db"]),
    "--query-labels",
    str(codes["ql"]),
    "--db-labels",
    str(codes["dbl"]),
    *extra,
  ]
  status = evaluate.main(argv)
  return status, capsys.readouterr().err


@pytest.mark.parametrize("option, name", [("--json", "q"), ("--curves", "db"), ("--json", "dbl")])
def test_evaluate_refuses_an_output_path_that_is_an_input(codes, capsys, option, name):
  before = codes[name].read_bytes()
  status, err = _evaluate(codes, capsys, option, str(codes[name]))
  assert status == 2
  assert "would overwrite an input" in err and option in err
  assert codes[name].read_bytes() == before  # the input is as it was


@pytest.mark.parametrize(
  "option, path, match",
  [("--json", ".", "names a folder"), ("--curves", "/", "names a folder"), ("--json", "", "empty")],
)
def test_evaluate_refuses_a_folder_or_an_empty_output_path(codes, capsys, option, path, match):
  status, err = _evaluate(codes, capsys, option, path)
  assert status == 2 and match in err and option in err


def test_evaluate_refuses_json_and_curves_on_one_path(codes, capsys, tmp_path):
  out = str(tmp_path / "out.json")
  status, err = _evaluate(codes, capsys, "--json", out, "--curves", out)
  assert status == 2 and "is also the path of --json" in err


# ------------------------------------------------------------------------- experiments.report


def _run_dir(path: pathlib.Path, **fields) -> pathlib.Path:
  path.mkdir(parents=True)
  results = {"table": "| a |\n|---|\n| 1 |", "seeds": [0], "machine": {"cpu": "x"}, **fields}
  from experiments import harness  # pylint: disable=import-outside-toplevel

  (path / "results.json").write_text(json.dumps(harness.with_digest(results)))
  (path / "config.json").write_text("{}")
  return path


@pytest.mark.parametrize("name", ["results.json", "config.json", "progress.json"])
def test_report_refuses_to_write_over_a_run_file(tmp_path, capsys, name):
  from experiments import report

  run = _run_dir(tmp_path / "run")
  before = (run / "results.json").read_bytes()
  assert report.main([str(run), "--out", str(run / name)]) == 2
  assert f"is a run's {name}" in capsys.readouterr().err
  assert (run / "results.json").read_bytes() == before
  other = _run_dir(tmp_path / "other")  # another run's file, not given as input
  assert report.main([str(run), "--out", str(other / "results.json")]) == 2
  assert "would overwrite it" in capsys.readouterr().err


def test_report_refuses_a_folder_as_out_and_names_damaged_fields(tmp_path, capsys):
  from experiments import report

  run = _run_dir(tmp_path / "run")
  assert report.main([str(run), "--out", str(tmp_path)]) == 2
  assert "names a folder" in capsys.readouterr().err
  for field, value, what in (("machine", "x86", "'machine'"), ("seeds", 3, "'seeds'")):
    bad = _run_dir(tmp_path / field, **{field: value})
    assert report.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "is damaged" in err and what in err
  assert report.main([str(run), "--out", str(tmp_path / "page.md")]) == 0
  assert (tmp_path / "page.md").read_text().startswith("# run")


# ------------------------------------------------------------------------- experiments.main


def test_main_refuses_an_empty_workdir(tmp_path):
  config = ROOT / "experiments" / "configs" / "quickstart.py"
  out = _script("experiments.main", "--config", f"{config}:quick", "--workdir", "", cwd=tmp_path)
  assert out.returncode != 0
  assert "--workdir ''" in _error_line(out.stderr)
  assert list(tmp_path.iterdir()) == []  # nothing written into the current directory


_CONFIGS = {
  "syntax": ("def get_config(arg:\n", "is not valid Python"),
  "no_get": ("x = 1\n", "defines no function get_config"),
  "none": ("def get_config(arg=None):\n  return None\n", "got NoneType"),
  "dict": (
    "def get_config(arg=None):\n  return {'trainer': 'experiments.retrieval'}\n",
    "must return an ml_collections.ConfigDict; got dict",
  ),
  "no_trainer": (
    "import ml_collections\ndef get_config(arg=None):\n"
    "  return ml_collections.ConfigDict({'seed': 0})\n",
    "has no key 'trainer'",
  ),
  "trainer_int": (
    "import ml_collections\ndef get_config(arg=None):\n"
    "  return ml_collections.ConfigDict({'trainer': 3})\n",
    "config.trainer must name a module",
  ),
  "no_module": (
    "import ml_collections\ndef get_config(arg=None):\n"
    "  return ml_collections.ConfigDict({'trainer': 'experiments.nope'})\n",
    "no such module",
  ),
  "no_function": (
    "import ml_collections\ndef get_config(arg=None):\n"
    "  return ml_collections.ConfigDict({'trainer': 'json'})\n",
    "has no function train_and_evaluate",
  ),
}


@pytest.mark.parametrize("name", sorted(_CONFIGS))
def test_main_names_a_bad_config_file(tmp_path, name):
  text, match = _CONFIGS[name]
  config = tmp_path / f"{name}.py"
  config.write_text(text)
  out = _script("experiments.main", "--config", str(config), "--workdir", str(tmp_path / "w"))
  line = _error_line(out.stderr)
  assert out.returncode != 0 and match in line and str(config) in line
  assert not (tmp_path / "w").exists()


# ------------------------------------------------------------------------- the workdir


def test_a_workdir_that_cannot_be_made_is_a_workdir_error(tmp_path):
  from experiments import harness

  with pytest.raises(harness.WorkdirError, match="cannot be created or written"):
    harness.Workdir("/proc/jhash_no_such_dir", {"seed": 0})


@pytest.mark.parametrize(
  "name, content, match",
  [
    ("config.json", [], "config.json is damaged"),
    ("config.json", {}, "config.json is damaged"),
    ("config.json", {"fingerprint": 1}, "config.json is damaged"),
    ("progress.json", [], "progress.json is damaged"),
    ("progress.json", {"cells": [], "seconds": {}}, "progress.json is damaged .*'cells'"),
    ("progress.json", {"cells": {"a": 3}, "seconds": {}}, "progress.json is damaged .*'a'"),
    ("progress.json", {"cells": {}, "seconds": 3}, "progress.json is damaged .*'seconds'"),
  ],
)
def test_workdir_json_of_the_wrong_structure_is_named_as_damaged(tmp_path, name, content, match):
  from experiments import harness

  (tmp_path / name).write_text(json.dumps(content))
  with pytest.raises(harness.WorkdirError, match=match):
    harness.Workdir(tmp_path, {"seed": 0})
  (tmp_path / name).unlink()
  harness.Workdir(tmp_path, {"seed": 0}).close()  # as a run writes them: fine


# ------------------------------------------------------------------------- mch_crop_rewards


CROP_REWARDS_CASES = [
  (["--sigma", "0"], "--sigma"),
  (["extra"], "unexpected arguments: extra"),
  (["--base", "itq"], "--base 'itq'"),
  (["--bits", "0"], "--bits 0"),
  (["--epochs", "-1"], "--epochs -1"),
  (["--num_train", "99999"], "--num_train 99999"),
  (["--crop_augment", "abc"], "--crop_augment 'abc'"),
]
# Every case in one process (one import of JAX and jhash, not one each): the script's own
# flag parsing and main, its flags unparsed between cases; a case that got past the checks
# would load the data and train, which the test would notice by its exit status.
_CROP_REWARDS_RUN = """
import contextlib, io, json, sys
from absl import flags
from experiments import _cli
from experiments import mch_crop_rewards as script
results = []
for args in json.loads(sys.argv[1]):
  flags.FLAGS.unparse_flags()
  err, code = io.StringIO(), 0
  with contextlib.redirect_stderr(err):
    try:
      script.main(_cli.parse_flags(["mch_crop_rewards", *args]))
    except SystemExit as stop:
      code = stop.code
  results.append([code, err.getvalue()])
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def crop_rewards_checks():
  env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
  cases = json.dumps([args for args, _ in CROP_REWARDS_CASES])
  out = subprocess.run(
    [sys.executable, "-c", _CROP_REWARDS_RUN, cases],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert out.returncode == 0, out.stderr[-2000:]
  return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", range(len(CROP_REWARDS_CASES)))
def test_crop_rewards_checks_its_flags_before_loading_data(crop_rewards_checks, case):
  code, err = crop_rewards_checks[case]
  assert code == 2 and CROP_REWARDS_CASES[case][1] in _error_line(err)


# ------------------------------------------------------------------------- save and restore


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  batch = {"views": (np.random.default_rng(0).normal(size=(50, 8)).astype("f4"),)}
  method = jhash.methods.itq(4, num_iters=3)
  state, _ = jhash.fit(method, jax.random.key(0), batch, progress=False)
  path = jhash.save(tmp_path_factory.mktemp("saved") / "itq", state)
  return path, method, batch, state


def test_save_refuses_an_overwrite_that_is_not_a_bool(saved):
  path, _, _, state = saved
  with pytest.raises(ValueError, match="overwrite must be True or False; got str 'yes'"):
    jhash.save(path, state, overwrite="yes")


@pytest.mark.parametrize(
  "name, content, unlisted",
  [
    ("jhash_files.json", {"files": []}, False),
    ("jhash_files.json", {"files": {"jhash_state.json": 3}}, False),
    ("jhash_state.json", [], True),
    ("jhash_state.json", {"format": "jhash-state/1"}, True),
    ("jhash_state.json", {"format": "jhash-state/1", "method": None, "arrays": None}, True),
  ],
)
def test_restore_names_hand_edited_json_as_damaged(saved, tmp_path, name, content, unlisted):
  path, method, batch, _ = saved
  copy = tmp_path / "copy"
  shutil.copytree(path, copy)
  (copy / name).write_text(json.dumps(content))
  if unlisted:  # the state's entry taken out of the list of files too
    manifest = json.loads((copy / "jhash_files.json").read_text())
    del manifest["files"]["jhash_state.json"]
    (copy / "jhash_files.json").write_text(json.dumps(manifest))
  with pytest.raises(ValueError, match="is damaged") as info:
    jhash.restore(copy, method, batch)
  assert name in str(info.value)
