"""Bad input, MCH's controls and the scripts around the runs: cases that gave a silent
wrong answer or a raw traceback, each now a clear error naming the argument (or the run
directory, cell, seed and metric) or a documented result.

* ``jhash.methods.mch_parts`` controls (``kept_codes``, ``keep_all``, ``keep_at_random``,
  ``matching_rate``, ``oracle_keep``): codes other than signs, masks of another dtype or
  shape, rates outside [0, 1], similarities outside {0, 1}, arguments whose shapes do not
  fit together;
* ``python -m experiments.mch_verdict`` and ``python -m experiments.mch_reward_tables``:
  ``--help``, a missing or non-run directory, a run with no metrics, a bad ``--bits``, an
  empty ``--out``, a NaN metric of a seed (one line on stderr, exit status 2);
* ``python -m experiments.main``: a seed or a count past what JAX holds
  (``--config.seed=99999999999999999999``, ``--config.classifier.num_classes=10**11``),
  refused before the workdir is made.

The run directories here are hand-made ``results.json`` files in the format
``experiments.retrieval`` writes (per cell ``per_seed``), so the tests take seconds.
"""

import json
import pathlib
import re
import subprocess
import sys

import jax
import numpy as np
import pytest

import _experiment_runs as runs
from jhash import losses
from jhash.methods import mch_parts

ROOT = pathlib.Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------- mch_parts controls


def test_kept_codes_refuses_codes_that_are_not_signs_and_keep_that_is_not_bool():
  whole = np.array([[1, -1, 1]], np.float32)
  extra = np.array([[[0.3, -1, 1]]], np.float32)
  with pytest.raises(ValueError, match=r"extra must hold codes as signs, only -1 and \+1"):
    mch_parts.kept_codes(whole, extra, np.array([[True]]))  # was: 0.3 cast to 0, kept
  with pytest.raises(ValueError, match=r"whole must hold codes as signs.*\[0\.0\]"):
    mch_parts.kept_codes(np.zeros((1, 3), np.float32), -extra.round(), np.array([[True]]))
  signs = np.ones((1, 1, 3), np.int8)
  with pytest.raises(ValueError, match=r"keep must be bool \[n, m\].*pass keep > xi"):
    mch_parts.kept_codes(whole, signs, np.array([[0.3]]))  # was: 0.3 read as True
  codes, mask = mch_parts.kept_codes(whole, signs, np.array([[True]]))  # signs still work
  np.testing.assert_array_equal(mask, [[True, True]])
  # Under jit the values are unknown: shapes are checked, the caller passes signs.
  _, mask = jax.jit(mch_parts.kept_codes)(whole, signs, np.array([[False]]))
  np.testing.assert_array_equal(mask, [[True, False]])


def test_kept_codes_names_arguments_whose_shapes_do_not_fit():
  whole, keep = np.ones((2, 3), np.int8), np.ones((2, 1), bool)
  for extra, keep_, got in (
    (np.ones((3, 1, 3), np.int8), keep, r"extra \[3, 1, 3\]"),  # was: concatenate TypeError
    (np.ones((2, 1, 4), np.int8), keep, r"extra \[2, 1, 4\]"),
    (np.ones((2, 2, 3), np.int8), np.ones((2, 3), bool), r"keep \[2, 3\]"),  # was: broadcast
  ):
    with pytest.raises(ValueError, match=r"whole, extra and keep do not fit together.*" + got):
      mch_parts.kept_codes(whole, extra, keep_)
  with pytest.raises(ValueError, match=r"extra must be 3-D with shape \[n, m, K\]"):
    mch_parts.kept_codes(whole, np.ones((2, 3), np.int8), keep)


def test_matching_rate_checks_its_mask_and_gives_zero_for_no_item():
  # No item: 0.0, nothing kept (was: nan).
  assert float(mch_parts.matching_rate(np.zeros((0, 6), bool))) == 0.0
  with pytest.raises(ValueError, match=r"mask must have 1 \+ m columns.*m >= 1"):
    mch_parts.matching_rate(np.ones((4, 1), bool))  # was: nan (0 / 0)
  with pytest.raises(ValueError, match=r"mask must be bool \[n, 1 \+ m\].*int64"):
    mch_parts.matching_rate(np.full((4, 6), 2))  # was: 2.2, a rate over 1
  with pytest.raises(ValueError, match=r"mask must be bool.*float64"):
    mch_parts.matching_rate(np.full((4, 6), 0.5))  # was: 0.4
  with pytest.raises(ValueError, match=r"mask's column 0 .* must be True; it is False in 4"):
    mch_parts.matching_rate(np.zeros((4, 6), bool))  # was: -0.2, a negative rate
  with pytest.raises(ValueError, match=r"mask must be 2-D with shape \[n, 1 \+ m\]"):
    mch_parts.matching_rate(np.ones(6, bool))  # was: IndexError
  mask = np.zeros((4, 3), bool)
  mask[:, 0], mask[0, 1:] = True, True
  assert float(mch_parts.matching_rate(mask)) == pytest.approx(0.25)
  assert float(jax.jit(mch_parts.matching_rate)(mask)) == pytest.approx(0.25)


def test_keep_at_random_refuses_rates_outside_zero_one_and_other_shapes():
  key = jax.random.key(0)
  for rate in (1.5, -0.5, float("nan")):  # was: all kept, none kept, none kept
    with pytest.raises(ValueError, match=r"rate must be a probability in \[0, 1\]; got"):
      mch_parts.keep_at_random(key, (2, 3), rate)
  with pytest.raises(ValueError, match=r"shape must be \(n, m\), two ints >= 0"):
    mch_parts.keep_at_random(key, (2, 3, 4), 0.5)  # was: a 3-D mask
  with pytest.raises(ValueError, match=r"keep_probability must be 2-D with shape \[n, m\]"):
    mch_parts.keep_all(np.zeros(5))  # was: a 1-D mask
  assert mch_parts.keep_at_random(key, (2, 3), 1.0).all()
  traced = jax.jit(lambda r: mch_parts.keep_at_random(key, (2, 3), r))(0.0)  # jit: no value
  assert not traced.any()


def test_oracle_keep_refuses_similarities_outside_zero_one_and_names_shapes():
  k = 8
  b = np.ones((1, k), np.float32)
  crops = np.stack([b, -b], axis=1)
  others = np.concatenate([b, -b])
  table = losses.code_loss_table(losses.pairwise_likelihood, k)
  for bad in ([[0.5, 2.0]], [[np.nan, 1.0]]):  # was: a plausible mask, [[False, False]]
    with pytest.raises(ValueError, match=r"similarity must hold only 0 and 1"):
      mch_parts.oracle_keep(b, crops, others, np.array(bad, np.float32), table)
  with pytest.raises(ValueError, match=r"whole must hold codes as signs"):
    mch_parts.oracle_keep(0.3 * b, crops, others, np.array([[1.0, 0.0]], np.float32), table)
  shapes = r"whole, crops, others and similarity do not fit together.*"
  sim = np.array([[1.0, 0.0]], np.float32)
  with pytest.raises(ValueError, match=shapes + r"crops \[2, 2, 8\]"):
    mch_parts.oracle_keep(b, np.ones((2, 2, k), np.float32), others, sim, table)  # was: [2, 2]
  with pytest.raises(ValueError, match=shapes + r"others \[2, 4\]"):
    mch_parts.oracle_keep(b, crops, np.ones((2, 4), np.float32), sim, table)  # was: matmul
  with pytest.raises(ValueError, match=shapes + r"similarity \[1, 3\]"):  # was: broadcasting
    jax.jit(mch_parts.oracle_keep)(b, crops, others, np.zeros((1, 3), np.float32), table)
  keep = mch_parts.oracle_keep(b, crops, others, np.array([[True, False]]), table)  # bool: fine
  assert keep.shape == (1, 2)


# ------------------------------------------------------------------------- the scripts


def _script(module: str, *args, cwd=ROOT):
  return subprocess.run(
    [sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True, timeout=300
  )


def _one_line_error(capsys, status: int, match: str) -> str:
  """The script's stderr: one line, ``error: ...``, matching ``match``; status 2."""
  err = capsys.readouterr().err
  assert status == 2, err
  assert err.startswith("error: ") and err.count("\n") == 1, err
  assert "Traceback" not in err
  assert re.search(match, err), err
  return err


def _cell(r0_mch: float, nan_seed: str | None = None) -> dict:
  """A results.json cell of three seeds with every number mch_verdict reads (a NaN, written
  as null, in ``recall_radius_0_multi`` of seed ``nan_seed``)."""
  seeds = {}
  for s, noise in enumerate((-1e-4, 0.0, 1e-4)):
    v = {}
    for suffix, r0 in (("", 0.02), ("_multi", r0_mch)):
      v[f"recall_radius_0{suffix}"] = r0 + noise
      v[f"precision_radius_0{suffix}"] = 0.5
      v[f"recall_radius_2{suffix}"] = 0.1
      v[f"precision_radius_2{suffix}"] = 0.3
      v[f"map{suffix}"] = 0.6
    v["codes_per_item_multi"] = 1.5
    v["recall_radius_0_multi@control=random"] = 0.025
    v["recall_radius_0_multi@control=items"] = 0.04 + noise
    v["oracle_keep_fraction"] = 0.1
    if str(s) == nan_seed:
      v["recall_radius_0_multi"] = None  # results.json writes a NaN as null
    seeds[str(s)] = v
  # The mean over seeds of every number, as experiments.retrieval.aggregate writes it.
  means = {k: [r[k] for r in seeds.values()] for k in seeds["0"]}
  cell = {k: None if None in v else float(np.mean(v)) for k, v in means.items()}
  return {**cell, "per_seed": seeds}


def _run_dir(path: pathlib.Path, metrics: dict) -> pathlib.Path:
  path.mkdir(parents=True)
  results = {
    "metrics": metrics,
    "command": "python -m experiments.main --config experiments/configs/mch.py:scenes",
    "wall_time_s": 120.0,
    "finished": "2026-12-05T00:00:00Z",
    "machine": {"cores": 2, "cpu": "test"},
  }
  from experiments import harness  # pylint: disable=import-outside-toplevel

  (path / "results.json").write_text(json.dumps(harness.with_digest(results)))
  return path


def _mch_run(path, bits=32, nan_seed=None):
  from experiments import mch_verdict

  cells = {f"scenes/mch_{b}/{bits}": _cell(0.03) for b in mch_verdict.BASES}
  if nan_seed is not None:
    cells[f"scenes/mch_dch/{bits}"] = _cell(0.03, nan_seed)
  return _run_dir(path, cells)


def test_the_verdict_script_prints_help_and_names_a_bad_argument_on_one_line(tmp_path):
  out = _script("experiments.mch_verdict", "--help")
  assert out.returncode == 0 and "usage: python -m experiments.mch_verdict" in out.stdout
  assert "RUN_DIR" in out.stdout and "--bits" in out.stdout  # was: '--help/results.json'
  run = _mch_run(tmp_path / "run")
  out = _script("experiments.mch_verdict", str(run), "--bits", "abc")
  assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr  # was: int() error
  assert out.stderr.strip() == (
    "error: argument --bits: invalid int value: 'abc' (see python -m "
    "experiments.mch_verdict --help)"
  )


def test_the_verdict_script_refuses_a_missing_or_non_run_directory(tmp_path, capsys):
  from experiments import mch_verdict

  (tmp_path / "afile").write_text("x")
  (tmp_path / "empty").mkdir()
  for run, match in (
    (tmp_path / "none", r"RUN_DIR '.*none' does not exist"),  # was: FileNotFoundError
    (tmp_path / "afile", r"RUN_DIR '.*afile' is a file, not a run directory"),
    (tmp_path / "empty", r"RUN_DIR '.*empty' is not a finished run: it holds no results.json"),
  ):
    _one_line_error(capsys, mch_verdict.main([str(run)]), match)
  other = _run_dir(tmp_path / "other", {"fashion_mnist/itq/32": {"map": 0.4}})
  _one_line_error(  # was: nothing printed, status 0
    capsys, mch_verdict.main([str(other)]), r"RUN_DIR: the run holds no MCH cells on scenes"
  )
  nothing = _run_dir(tmp_path / "nothing", {})
  _one_line_error(  # was: nothing printed, status 0
    capsys, mch_verdict.main([str(nothing)]), r"results.json holds no metrics"
  )


def test_the_verdict_script_refuses_bits_the_run_does_not_hold_and_an_empty_out(
  tmp_path, capsys, monkeypatch
):
  from experiments import mch_verdict

  run = _mch_run(tmp_path / "run", bits=32)
  status = mch_verdict.main([str(run), "--bits", "48"])  # was: nothing printed, status 0
  _one_line_error(capsys, status, r"--bits 48: the run holds no cells at 48 bits; it holds 32\.")
  _one_line_error(capsys, mch_verdict.main([str(run), "--bits", "0"]), r"--bits 0: ")
  monkeypatch.chdir(tmp_path)
  status = mch_verdict.main([str(run), "--out", ""])  # was: IsADirectoryError: '.'
  _one_line_error(capsys, status, r"--out: expected the page's file path; got ''")
  status = mch_verdict.main([str(run), "--out", str(tmp_path)])
  _one_line_error(capsys, status, r"--out: '.*' is a directory")
  assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # nothing written
  assert mch_verdict.main([str(run), "--out", "page.md"]) == 0
  page = (tmp_path / "page.md").read_text()
  assert page.startswith("# MCH on scenes, 32 bits") and "**Verdict at 32 bits" in page
  assert "| MCH  | 0.0300 ± 0.0001 |" in page  # the tables read the hand-made run


def test_a_nan_metric_of_a_seed_gives_no_verdict_but_names_the_seed(tmp_path, capsys):
  from experiments import mch_verdict

  run = _mch_run(tmp_path / "run", nan_seed="1")
  status = mch_verdict.main([str(run)])  # was: a table of nan and a verdict, status 0
  err = _one_line_error(
    capsys,
    status,
    r"cell scenes/mch_dch/32: seed 1's recall_radius_0_multi is NaN \(null in results.json\)",
  )
  assert "no mean, interval or verdict" in err
  cells = {b: _cell(0.03) for b in mch_verdict.BASES}
  cells["dch"] = _cell(0.03, nan_seed="2")
  cells["dch"]["per_seed"]["2"]["recall_radius_0_multi"] = float("nan")
  with pytest.raises(ValueError, match=r"DCH's cell: seed 2's recall_radius_0_multi is nan"):
    mch_verdict.verdict(cells)  # was: a verdict ('refuted'), the NaN read as a failed test
  # Fewer than five bases: the tables, and an explicit "no verdict" (was: silence).
  few = _run_dir(tmp_path / "few", {"scenes/mch_dch/32": _cell(0.03)})
  assert mch_verdict.main([str(few)]) == 0
  assert "**No verdict at 32 bits**: the rule reads all five bases; the run holds 1" in (
    capsys.readouterr().out
  )


def test_the_reward_tables_script_prints_help_and_refuses_bad_arguments(
  tmp_path, capsys, monkeypatch
):
  from experiments import mch_reward_tables

  out = _script("experiments.mch_reward_tables", "--help")  # was: exit status 1
  assert out.returncode == 0 and "usage: python -m experiments.mch_reward_tables" in out.stdout
  out = _script("experiments.mch_reward_tables", "--bits", "abc")  # was: FATAL ..., status 1
  assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
  assert out.stderr.startswith("error: argument --bits: invalid int value: 'abc'")
  monkeypatch.chdir(tmp_path)
  (tmp_path / "afile").write_text("x")
  for args, match in (
    (["--bits", "0"], r"--bits: expected a code length, an int in \[1, 2147483647\] .*; got 0\."),
    (["--bits", str(10**11)], r"--bits: .* got 100000000000"),  # was: OverflowError
    (["--out", ""], r"--out: expected a folder .*; got ''"),  # was: wrote into the cwd
    (["--out", "afile"], r"--out: 'afile' is a file; expected a folder"),
  ):
    _one_line_error(capsys, mch_reward_tables.main(args), match)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing written


# ------------------------------------------------------------------------- experiments.main


def test_a_seed_or_count_past_what_jax_holds_is_refused_before_the_workdir(tmp_path):
  for config, override, match in (
    (  # was: OverflowError: Python int too large to convert to C long, in jax.random.key
      "experiments/configs/quickstart.py",
      "--config.seed=99999999999999999999",
      "error: config.seed: a seed must be an int in [0, 2**32 - 1] (jax.random.key keeps "
      "32 bits); got 99999999999999999999.",
    ),
    (  # was: OverflowError: Python integer 100000000000 out of bounds for int32
      "experiments/configs/pretrain.py:quick",
      f"--config.classifier.num_classes={10**11}",
      "error: config.classifier.num_classes: an int must fit JAX's int32, "
      "[-2147483648, 2147483647]; got 100000000000.",
    ),
  ):
    workdir = tmp_path / "run"
    out = _script("experiments.main", "--config", config, override, "--workdir", str(workdir))
    # experiments.main's status for a bad config (tests/test_bad_input.py): 1
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert out.stderr.strip() == match
    assert not workdir.exists()


def test_the_retrieval_trainer_refuses_seeds_past_two_to_the_32(tmp_path):
  from experiments import harness
  from experiments import retrieval

  config = runs.load_config("baselines", "tiny").unlock()
  config.seed, config.num_seeds = 2**32 - 1, 2  # the second seed, 2**32, has seed 0's key
  with pytest.raises(harness.ConfigError, match=r"the last seed, 4294967296, is past 2\*\*32"):
    retrieval.train_and_evaluate(config.lock(), tmp_path / "run")
  assert not (tmp_path / "run").exists()
  with pytest.raises(harness.ConfigError, match=r"config.seeds\[1\]: a seed must be an int"):
    harness.check_int_ranges({"seeds": (0, -1)})
  harness.check_int_ranges({"seed": 2**32 - 1, "bits": (16, 32), "flag": True})
