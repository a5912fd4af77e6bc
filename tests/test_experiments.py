"""The retrieval trainer end to end on the baselines' tiny config: what it learns, its
files, command-line overrides, keys from cell identities, resuming after a kill, and
refusing (before anything trains) what it cannot or must not run.

Runs ``python -m experiments.main`` as a user would, from a directory that is not the
repository's root, with the config path relative to it (the resumed run after the kill
runs the trainer in the test's process).
"""

import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import _experiment_runs as runs
import jhash
from experiments import harness
from experiments import retrieval

CONFIG = runs.REPO / "experiments" / "configs" / "baselines.py"
# The tiny config with ITQ at 10 iterations from the command line (the file says 12).
OVERRIDES = ("--config.methods.itq.num_iters=10",)
STABLE_HASH_MFEAT = 0xAA863084  # sha256("mfeat"), first 4 bytes little-endian
CELLS = {f"mfeat/{m}/{b}" for m in ("itq", "lsh") for b in (8, 16)}


def _main(workdir, *extra, env_extra=None):
  """``python -m experiments.main`` on the tiny config, from ``workdir``'s parent."""
  cwd = pathlib.Path(workdir).parent
  env = dict(os.environ, **(env_extra or {}))
  env["PYTHONPATH"] = str(runs.REPO) + os.pathsep + env.get("PYTHONPATH", "")
  config = os.path.relpath(CONFIG, cwd) + ":tiny"
  command = [
    sys.executable,
    "-m",
    "experiments.main",
    "--config",
    config,
    *OVERRIDES,
    *extra,
    "--workdir",
    pathlib.Path(workdir).name,
  ]
  return subprocess.run(
    ["sh", "-c", 'umask 022 && exec "$@"', "sh", *command],
    cwd=cwd,
    env=env,
    capture_output=True,
    text=True,
    timeout=900,
  )


def _results(workdir):
  return json.loads((pathlib.Path(workdir) / "results.json").read_text())


def _tiny(**changes):
  """The tiny config with ITQ at 10 iterations (as ``OVERRIDES``), then ``changes``."""
  config = runs.load_config("baselines", "tiny")
  with config.unlocked():
    config.methods.itq.num_iters = 10
    for path, value in changes.items():
      *parents, leaf = path.split(".")
      node = config
      for name in parents:
        node = node[name]
      node[leaf] = value
  return config


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("reference") / "run"
  proc = _main(workdir)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return workdir, proc


def test_tiny_run_learns_and_writes_its_files(reference):
  workdir, proc = reference
  results = _results(workdir)
  metrics = results["metrics"]
  assert set(metrics) == CELLS
  # ITQ's learned rotation beats random projections, and both beat chance (0.1).
  for bits in (8, 16):
    assert metrics[f"mfeat/itq/{bits}"]["map"] > metrics[f"mfeat/lsh/{bits}"]["map"] + 0.05
    assert metrics[f"mfeat/lsh/{bits}"]["map"] > 0.15
  cell = metrics["mfeat/itq/16"]
  for name in (
    "map",
    "map_index_ties",
    "precision_at_100",
    "precision_radius_2",
    "recall_radius_2",
  ):
    assert 0.0 < cell[name] <= 1.0 and cell["std"][name] == 0.0, name
  assert set(cell["per_seed"]) == {"0"} and "pr_radius" in cell["per_seed"]["0"]
  for key in ("config", "seed", "versions", "wall_time_s", "cell_seconds"):
    assert key in results
  runs.assert_pngs(workdir, ("map_vs_bits.png", "pr_radius.png", "itq_loss.png"))
  assert "| mfeat" in proc.stdout and "map@16 bits" in proc.stdout
  # One line per finished cell; no progress-bar carriage returns when not a terminal.
  assert all(f"{c}/seed=0: map=" in proc.stdout for c in CELLS)
  assert "\r" not in proc.stdout + proc.stderr


def test_command_line_override_reaches_the_run(reference):
  workdir, _ = reference
  results = _results(workdir)
  assert results["config"]["methods"]["itq"]["num_iters"] == 10
  loss = results["metrics"]["mfeat/itq/16"]["per_seed"]["0"]["history"]["quantization_loss"]
  assert len(loss) == 10 and loss[-1] < loss[0]


def test_results_and_plots_are_readable_by_the_group(reference):
  workdir, _ = reference  # run under umask 022
  for name in (
    "results.json",
    "config.json",
    "progress.json",
    "map_vs_bits.png",
    "pr_radius.png",
    "itq_loss.png",
  ):
    assert stat.S_IMODE((workdir / name).stat().st_mode) == 0o644, name


def test_training_curves_are_tensorboard_event_files(reference):
  workdir, _ = reference
  scalars = runs.read_scalars(workdir / "tensorboard" / "mfeat_itq_16_seed=0")
  history = _results(workdir)["metrics"]["mfeat/itq/16"]["per_seed"]["0"]["history"]
  curve = scalars["quantization_loss"]
  assert sorted(curve) == list(range(1, 11))
  np.testing.assert_allclose(
    [curve[s] for s in range(1, 11)], history["quantization_loss"], rtol=1e-6
  )


def test_a_cell_gives_the_same_result_alone_as_in_a_grid(reference, tmp_path):
  alone = runs.run_config(
    _tiny(bits=(16,), methods={"itq": {"method": "itq", "num_iters": 10}}), tmp_path
  )
  grid = _results(reference[0])["metrics"]["mfeat/itq/16"]
  assert set(alone["metrics"]) == {"mfeat/itq/16"}
  assert alone["metrics"]["mfeat/itq/16"]["map"] == grid["map"]
  assert alone["metrics"]["mfeat/itq/16"]["per_seed"] == grid["per_seed"]


def test_killed_run_refuses_another_config_and_resumes_to_the_same_results(reference, tmp_path):
  workdir = tmp_path / "run"
  # Saves: ITQ at 8 bits checkpoints at steps 4 and 8: killed inside its loop, before
  # any cell finished, with a mid-cell checkpoint and the config on disk.
  killed = _main(workdir, env_extra={harness.CRASH_ENV: "2"})
  assert killed.returncode == -9, killed.stderr[-2000:]
  assert (workdir / "config.json").exists() and not (workdir / "results.json").exists()
  assert not (workdir / "progress.json").exists()  # no cell finished
  assert (workdir / "checkpoints" / "mfeat_itq_8_seed=0" / "8").is_dir()
  other = _main(workdir, "--config.seed=1")
  assert other.returncode != 0 and "different config" in other.stderr, other.stderr[-2000:]
  assert "seed: 0 -> 1" in other.stderr
  assert (workdir / "checkpoints" / "mfeat_itq_8_seed=0" / "8").is_dir()
  # Rerun with the config the CLI ran, in this process (the reference and the killed run
  # are other processes, so the results must not depend on the process either).
  resumed = runs.run_config(_tiny(), workdir)
  assert resumed["metrics"] == _results(reference[0])["metrics"]
  assert not list((workdir / "checkpoints").iterdir())


@pytest.mark.parametrize(
  "change, names",
  [
    ({"checkpoint_evry": 3}, ("checkpoint_evry", "checkpoint_every")),
    ({"methods.itq.num_iter": 5}, ("num_iter", "num_iters")),
    ({"methods.itq.method": "iqt"}, ("iqt", "'itq'")),
    ({"datasets.mfeat.protocol": "mfeet"}, ("mfeet", "'mfeat'")),
    ({"plots.pr_curve_bits": 12}, ("pr_curve_bits", "16")),
    ({"tables": ("mAP",)}, ("mAP", "'map'")),
  ],
)
def test_a_config_naming_what_does_not_exist_is_refused_before_training(change, names, tmp_path):
  with pytest.raises(harness.ConfigError) as error:
    retrieval.train_and_evaluate(_tiny(**change), tmp_path)
  for name in names:
    assert name in str(error.value), (name, str(error.value))
  assert not list(tmp_path.iterdir())  # nothing written, nothing trained


def test_two_runs_on_one_workdir_do_not_mix(tmp_path):
  config = _tiny()
  with harness.Workdir(tmp_path, config):
    with pytest.raises(harness.WorkdirError, match="in use by another run"):
      harness.Workdir(tmp_path, config)
  harness.Workdir(tmp_path, config).close()  # free again once the first has closed


def test_a_checkpoint_of_another_state_structure_is_refused_by_name(tmp_path):
  """A checkpoint written by a version whose state had other fields (HBMP's pursuit before
  its ``factor``) is refused with the cell, the folder and what to do; one that fits loads."""
  config = _tiny()
  old = {"codes": np.ones((3, 4), np.int8), "step": np.int32(2)}
  with harness.Workdir(tmp_path, config) as wd:
    wd.save_state("hbmp/16", 2, old, {"loss": np.ones(2)})
  with harness.Workdir(tmp_path, config) as wd:
    fits = jax.eval_shape(lambda: jax.tree.map(jnp.asarray, old))
    step, state, history = wd.load_state("hbmp/16", fits)
    assert step == 2 and np.asarray(state["codes"]).sum() == 12
    np.testing.assert_array_equal(history["loss"], np.ones(2))
    template = {**fits, "factor": jax.ShapeDtypeStruct((4, 4), jnp.float32)}
    with pytest.raises(harness.WorkdirError) as error:
      wd.load_state("hbmp/16", template)
  message = str(error.value)
  for part in ("'hbmp/16'", "step 2", "another version", "delete", "starts again from step 0"):
    assert part in message, (part, message)


def test_cell_keys_are_stable_hashes_of_the_cell_identity():
  key = harness.cell_key(0, "mfeat", "itq", 16)
  assert jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
  want = jax.random.key(0)
  for part in (harness.stable_hash("mfeat"), harness.stable_hash("itq"), 16):
    want = jax.random.fold_in(want, part)
  np.testing.assert_array_equal(jax.random.key_data(key), jax.random.key_data(want))
  # The same in every process and Python version (pinned; Python's hash is salted).
  assert harness.stable_hash("mfeat") == STABLE_HASH_MFEAT
  assert harness.stable_hash("itq") != harness.stable_hash("lsh")


def test_multi_code_methods_are_scored_by_the_minimum_over_their_codes(rng):
  x = rng.normal(size=(60, 8)).astype(np.float32)
  y = (np.arange(60) % 3).astype(np.int32)
  base = jhash.methods.lsh(8)

  def two_codes(state, batch):
    # An item's second code is its first negated: its distance to a query is
    # min(d, 8 - d), so the multi-code ranking differs from the single-code one.
    codes = base.encode(state, batch)
    return jax.numpy.stack([codes, -codes], axis=1), jax.numpy.ones(codes.shape[:1] + (2,), bool)

  method = base._replace(encode_multi=two_codes)
  state, _ = jhash.fit(method, jax.random.key(0), {"views": (x,)}, progress=False)
  batch = {"views": (x,), "labels": y}
  evaluation = _tiny(
    **{"evaluation.map_ties": ("aware",), "evaluation.precision_at": (), "evaluation.radius": None}
  ).evaluation
  out = retrieval.evaluate(method, state, batch, batch, evaluation, curve=False)
  codes = np.asarray(jhash.encode(method, state, batch))
  multi = np.stack([codes, -codes], axis=1)
  want = jhash.metrics.mean_average_precision(codes, multi, y, y, db_mask=np.ones((60, 2), bool))
  assert out["map_multi"] == pytest.approx(want)
  assert out["map"] == pytest.approx(jhash.metrics.mean_average_precision(codes, codes, y, y))
  assert set(retrieval.metric_names(evaluation, weighted=False)) == set(out)


def test_map_at_k_is_the_tie_aware_map_over_the_first_k_and_follows_the_protocol(rng):
  x = rng.normal(size=(60, 8)).astype(np.float32)
  y = (np.arange(60) % 3).astype(np.int32)
  method = jhash.methods.lsh(8)
  state, _ = jhash.fit(method, jax.random.key(0), {"views": (x,)}, progress=False)
  batch = {"views": (x,), "labels": y}
  base = {
    "evaluation.map_ties": ("aware",),
    "evaluation.precision_at": (),
    "evaluation.radius": None,
  }
  codes = np.asarray(jhash.encode(method, state, batch))
  for k, want_k in ((7, 7), (500, 60)):  # K past the database is clipped to it
    evaluation = _tiny(**base, **{"evaluation.map_at": k}).evaluation
    out = retrieval.evaluate(method, state, batch, batch, evaluation, curve=False, top_k=k)
    want = jhash.metrics.mean_average_precision(codes, codes, y, y, top_k=want_k)
    assert out["map_at_k"] == pytest.approx(want) and out["map_k"] == want_k
    assert set(retrieval.metric_names(evaluation, weighted=False, multi=False)) == set(out)
  assert out["map_at_k"] == pytest.approx(out["map"])  # K = n: the whole database
  protocol = _tiny(**base, **{"evaluation.map_at": "protocol"}).evaluation
  assert retrieval.map_at(protocol, "nuswide_21") == 5000
  assert (
    retrieval.map_at(protocol, "cifar10") is None and retrieval.map_at(protocol, "mfeat") is None
  )
  assert retrieval.map_at(_tiny(**base, **{"evaluation.map_at": 9}).evaluation, "coco") == 9
  for bad in (0, -3, "all", 2.5):
    with pytest.raises(harness.ConfigError, match="config.evaluation.map_at"):
      retrieval.validate(_tiny(**base, **{"evaluation.map_at": bad}))


def _purge_steps(logdir) -> list[int]:
  """The steps of the session-start (purge) events in a TensorBoard run directory."""
  harness.summary_writer_class()
  from tensorboardX.proto import event_pb2

  steps = []
  for path in sorted(pathlib.Path(logdir).glob("events.out.tfevents.*")):
    data, at = path.read_bytes(), 0
    while at < len(data):
      length = int.from_bytes(data[at : at + 8], "little")
      event = event_pb2.Event.FromString(data[at + 12 : at + 12 + length])
      at += 12 + length + 4
      if event.HasField("session_log") and event.session_log.status == event.session_log.START:
        steps.append(event.step)
  return steps


def _small_itq_run(rng):
  x = rng.normal(size=(60, 8)).astype(np.float32)
  return jhash.methods.itq(4, num_iters=9), jax.random.key(3), {"views": (x,)}


def test_workdir_fit_checkpoints_every_n_steps_and_resumes_to_an_uninterrupted_run(rng, tmp_path):
  method, key, batch = _small_itq_run(rng)
  full, full_history = jhash.fit(method, key, batch, progress=False)
  template = jax.eval_shape(lambda k: jhash.init(method, k, batch), key)
  config = {"seed": 0}
  with harness.Workdir(tmp_path / "a", config) as wd:
    state, history = wd.fit("c/1", method, key, batch, checkpoint_every=3, progress=False)
    jax.tree.map(np.testing.assert_array_equal, full, state)
    np.testing.assert_array_equal(history["quantization_loss"], full_history["quantization_loss"])
    # Saves at steps 3 and 6 (not at 9, the end): the last holds step 6's state and the
    # history of steps 0..5.
    step, saved, saved_history = wd.load_state("c/1", template)
    assert step == 6 and set(saved_history) == {"quantization_loss"}
    np.testing.assert_array_equal(
      saved_history["quantization_loss"], full_history["quantization_loss"][:6]
    )
    six, _ = jhash.fit(method, key, batch, 6, progress=False)
    jax.tree.map(np.testing.assert_array_equal, six, saved)
  # A run killed after its save at step 4 resumes from it: state and the whole history
  # (restored steps included) equal the run never interrupted.
  four, four_history = jhash.fit(method, key, batch, 4, progress=False)
  with harness.Workdir(tmp_path / "b", config) as wd:
    wd.save_state("c/1", 4, four, four_history)
    state, history = wd.fit("c/1", method, key, batch, checkpoint_every=100, progress=False)
  jax.tree.map(np.testing.assert_array_equal, full, state)
  np.testing.assert_array_equal(history["quantization_loss"], full_history["quantization_loss"])
  logdir = tmp_path / "b" / "tensorboard" / "c_1"
  curve = runs.read_scalars(logdir)["quantization_loss"]
  assert sorted(curve) == list(range(5, 10))  # the resumed run writes steps 5..9
  np.testing.assert_allclose(
    [curve[s] for s in range(5, 10)], full_history["quantization_loss"][4:], rtol=1e-6
  )
  # and purges (hides) what a killed run wrote after its checkpoint: steps 5 on, not 4.
  assert _purge_steps(logdir) == [5]


def test_a_workdir_holding_no_work_takes_another_config_but_not_one_with_a_finished_cell(tmp_path):
  first, second = {"seed": 0, "bits": [8]}, {"seed": 1, "bits": [8]}
  harness.Workdir(tmp_path, first).close()
  with harness.Workdir(tmp_path, second):  # nothing finished yet: the new config is kept
    pass
  saved = json.loads((tmp_path / "config.json").read_text())
  assert saved == {"fingerprint": harness.config_fingerprint(second), "config": second}
  with harness.Workdir(tmp_path, second) as wd:
    wd.finish("cell", {"map": 0.5}, 1.0)
  with pytest.raises(harness.WorkdirError, match="different config") as error:
    harness.Workdir(tmp_path, first)
  assert "seed: 1 -> 0" in str(error.value)
  with harness.Workdir(tmp_path, second) as wd:  # its own config resumes, the cell done
    assert wd.done("cell") == {"map": 0.5}


def test_config_fingerprints_and_differences():
  a = {"seed": 0, "methods": {"itq": {"num_iters": 10}}}
  b = {"seed": 0, "methods": {"itq": {"num_iters": 12}, "lsh": {}}, "bits": [8]}
  assert harness.config_fingerprint(a) == harness.config_fingerprint(
    {"methods": {"itq": {"num_iters": 10}}, "seed": 0}
  )  # key order does not matter
  assert harness.config_fingerprint(a) != harness.config_fingerprint(
    {"seed": 0, "methods": {"itq": {"num_iters": 11}}}
  )
  assert harness.config_differences(a, b) == [
    "bits: '(absent)' -> [8]",
    "methods.itq.num_iters: 10 -> 12",
  ]
  assert harness.config_differences(b, a)[0] == "bits: [8] -> '(absent)'"


def test_jsonable_writes_numpy_values_and_non_finite_floats():
  got = harness.jsonable(
    {
      "a": np.float32(1.5),
      "b": np.arange(2),
      3: (float("inf"),),
      "d": -float("inf"),
      "e": float("nan"),
      "f": jnp.ones((1,), jnp.int32),
    }
  )
  assert got == {"a": 1.5, "b": [0, 1], "3": ["inf"], "d": "-inf", "e": None, "f": [1]}
  assert type(got["b"][0]) is int


def test_cell_keys_fold_a_bool_part_by_its_hash_and_an_int_as_it_is():
  def key_data(key):
    return np.asarray(jax.random.key_data(key))

  np.testing.assert_array_equal(
    key_data(harness.cell_key(2, np.int64(7))), key_data(jax.random.fold_in(jax.random.key(2), 7))
  )
  np.testing.assert_array_equal(
    key_data(harness.cell_key(2, True)),
    key_data(jax.random.fold_in(jax.random.key(2), harness.stable_hash("True"))),
  )
  assert not np.array_equal(
    key_data(harness.cell_key(2, "a", 8)), key_data(harness.cell_key(2, 8, "a"))
  )


@pytest.fixture(scope="module")
def killed_mid_cell(tmp_path_factory):
  """A run killed after its 5th save: mfeat/itq/8 finished, mfeat/itq/16 checkpointed at
  steps 4 and 8 (the two kept)."""
  workdir = tmp_path_factory.mktemp("killed") / "run"
  killed = _main(workdir, env_extra={harness.CRASH_ENV: "5"})
  assert killed.returncode == -9, killed.stderr[-2000:]
  cell = workdir / "checkpoints" / "mfeat_itq_16_seed=0"
  assert sorted(p.name for p in cell.iterdir()) == ["4", "8"]
  assert set(json.loads((workdir / "progress.json").read_text())["cells"]) == {"mfeat/itq/8/seed=0"}
  return workdir


def _largest_data_file(step):
  files = [p for p in (step / "state").rglob("*") if p.is_file() and "/d/" in str(p)]
  return max(files, key=lambda p: p.stat().st_size)


def _truncate(path):
  path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
  return path


def _delete(path):
  path.unlink()
  return path


@pytest.mark.parametrize("name", ["progress.json", "results.json", "config.json"])
def test_a_deleted_run_file_is_written_again_with_the_same_results(
  name, killed_mid_cell, reference, tmp_path
):
  # progress.json deleted: the finished cell trains again (same seed, same result) and
  # the checkpointed one resumes; results.json and config.json are written again.
  workdir = tmp_path / "run"
  shutil.copytree(killed_mid_cell if name != "results.json" else reference[0], workdir)
  (workdir / name).unlink()
  assert runs.run_config(_tiny(), workdir)["metrics"] == _results(reference[0])["metrics"]
  assert (workdir / name).exists()


CELL_16 = pathlib.Path("checkpoints") / "mfeat_itq_16_seed=0"


@pytest.mark.parametrize(
  "kind, damage, named, remedy",
  [
    # The newest checkpoint's data or metadata: named; the remedy is to delete that step,
    # and the cell resumes from the one before it.
    ("data", lambda w: _truncate(_largest_data_file(w / CELL_16 / "8")), None, CELL_16 / "8"),
    (
      "metadata",
      lambda w: _truncate(w / CELL_16 / "8" / "state" / "_METADATA"),
      None,
      CELL_16 / "8",
    ),
    # Both kept checkpoints damaged: the cell starts again.
    (
      "both",
      lambda w: [_truncate(_largest_data_file(w / CELL_16 / s)) for s in ("8", "4")][0],
      None,
      CELL_16,
    ),
    # A data file deleted: named as missing, the same remedy.
    ("deleted", lambda w: _delete(_largest_data_file(w / CELL_16 / "8")), None, CELL_16 / "8"),
    ("progress", lambda w: _truncate(w / "progress.json"), "progress.json", "progress.json"),
    ("config", lambda w: _truncate(w / "config.json"), "config.json", "config.json"),
  ],
)
def test_a_damaged_workdir_names_the_file_and_loses_no_finished_result(
  kind, damage, named, remedy, killed_mid_cell, reference, tmp_path
):
  workdir = tmp_path / "run"
  shutil.copytree(killed_mid_cell, workdir)
  progress = (workdir / "progress.json").read_bytes()
  damaged = damage(workdir)
  with pytest.raises(harness.WorkdirError) as error:
    runs.run_config(_tiny(), workdir)
  message = str(error.value)
  assert str(workdir / (named or damaged.relative_to(workdir))) in message, message
  assert f"delete {workdir / remedy}" in message or "delete it" in message, message
  if kind not in ("progress",):  # the finished cell's result is untouched
    assert (workdir / "progress.json").read_bytes() == progress
    assert "Finished cells are intact" in message or kind == "config", message
  if kind in ("data", "metadata", "deleted"):
    assert "resumes from its checkpoint at step 4" in message, message
  if kind == "deleted":
    assert "is missing" in message, message
  if kind == "both":
    assert "starts again from step 0" in message, message
  # Doing what the message says ends with the results of a run never interrupted.
  target = workdir / remedy
  shutil.rmtree(target) if target.is_dir() else target.unlink()
  assert runs.run_config(_tiny(), workdir)["metrics"] == _results(reference[0])["metrics"]


def test_a_damaged_results_file_is_written_again(reference, tmp_path):
  workdir = tmp_path / "run"
  shutil.copytree(reference[0], workdir)
  _truncate(workdir / "results.json")
  assert runs.run_config(_tiny(), workdir)["metrics"] == _results(reference[0])["metrics"]


def test_a_checkpoint_of_another_structure_blames_the_version_not_damage(tmp_path):
  state = {"w": jnp.arange(12.0).reshape(3, 4)}
  with harness.Workdir(tmp_path, _tiny()) as workdir:
    workdir.save_state("cell", 4, state, {"loss": np.zeros(4)})
    with pytest.raises(harness.WorkdirError) as error:
      workdir.load_state("cell", jax.eval_shape(lambda: {"v": state["w"]}))
    assert workdir.load_state("cell", jax.eval_shape(lambda: state))[0] == 4
  message = str(error.value)
  assert (
    "its files are as written, so it was written for another cell or by another version" in message
  )
  assert f"delete {tmp_path / 'checkpoints' / 'cell'} and run again" in message


def test_a_results_page_is_made_from_the_run(reference, tmp_path):
  from experiments import report

  workdir, _ = reference
  results = _results(workdir)
  assert results["command"].startswith("python -m experiments.main --config ")
  assert "--config.methods.itq.num_iters=10" in results["command"]
  assert results["machine"]["cores"] >= 1 and results["machine"]["cpu"]
  out = tmp_path / "page.md"
  assert report.main([str(workdir), "--title", "Tiny", "--out", str(out)]) == 0
  text = out.read_text()
  assert text.startswith("# Tiny\n\n| dataset")  # one run: its title is the page's
  # Every number of the table is the run's: ITQ's mAP at 16 bits, to four decimals.
  row = next(line for line in text.splitlines() if line.startswith("| mfeat") and "itq" in line)
  assert f"{results['metrics']['mfeat/itq/16']['map']:.4f}" in row
  assert f"`{results['command']}`" in text and results["machine"]["cpu"] in text
  assert report.main([str(tmp_path / "nothing")]) == 2  # no results.json: named, status 2


def test_a_caption_above_a_table_stays_a_paragraph_of_its_own():
  from experiments import report

  table = "(a) caption\n| x | y |\n|---|---|\n| 1 | 2 |\nnote under it\n\n| z |\n|---|"
  want = "(a) caption\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\nnote under it\n\n| z |\n|---|"
  assert report.markdown_blocks(table) == want
  aligned = "| a   | b        |\n|-----|----------|\n| cdh | |J2-J1|  |"
  got = report.markdown_blocks(aligned).splitlines()
  assert got[:2] == aligned.splitlines()[:2] and got[2] == "| cdh | \\|J2-J1\\|  |"


def test_report_tables_a_sweep_by_parameter_with_the_base_beside_it():
  from experiments import report  # pylint: disable=import-outside-toplevel

  numbers = {"map": 0.6, "map_multi": 0.5, "recall_radius_0": 0.1}
  for value, (m, c) in {"0.3": (0.4, 4.0), "1.0": (0.6, 1.0)}.items():
    numbers[f"map_multi@sigma={value}"] = m
    numbers[f"codes_per_item_multi@sigma={value}"] = c
  text = report.sweep_tables({"metrics": {"d/mch/32": numbers, "d/itq/32": {"map": 0.3}}})
  assert text.startswith("d/mch/32, re-encoded with each sigma:")
  assert "| sigma | 0.3 | 1.0 | base |" in text
  assert "| map | 0.4000 | 0.6000 | 0.6000 |" in text
  assert "| codes_per_item | 4.0000 | 1.0000 | 1.0000 |" in text
  assert "itq" not in text and report.sweep_tables({"metrics": {"d/itq/32": {"map": 0.3}}}) == ""
