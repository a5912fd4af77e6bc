"""Bad input, round 18: what a probe of damaged and edited workdirs still found.

Wall times edited to plausible values (now under a digest), ``config.json``'s options
edited under its fingerprint, an emptied checkpoint step, orbax's own log lines before the
message, and messages that named the wrong thing.
"""

import json
import logging
import time

import jax
import numpy as np
import pytest

import _experiment_runs as runs
from experiments import harness


def _result():
  return {"map": 0.5, "alphas": [0.25, 0.75]}


def _run(path, config=None):
  ran = []
  with harness.Workdir(path, config or {"seed": 0}) as wd:
    harness.run_cells(
      [(c, lambda c=c: ran.append(c) or _result()) for c in ("a", "b")], wd, progress=False
    )
    results = harness.write_results(wd, config or {"seed": 0}, {}, time.time())
  return ran, results


_edit = runs.edit_json


@pytest.mark.parametrize(
  "edit",
  [
    lambda p: p["seconds"].update(a=99999.0),  # plausible: was copied into results.json
    lambda p: p.update(wall_time_s=12345.0),
    lambda p: p["seconds"].pop("b"),
  ],
)
def test_wall_times_edited_to_plausible_values_are_damage(tmp_path, edit):
  assert _run(tmp_path)[0] == ["a", "b"]
  _edit(tmp_path / "progress.json", edit)
  with pytest.raises(harness.WorkdirError) as error:
    _run(tmp_path)
  message = str(error.value)
  assert "wall times ('seconds' and 'wall_time_s') differ from the digest" in message, message
  assert "delete its keys 'seconds' (every cell's), 'wall_time_s' and 'time_digest'" in message, (
    message
  )
  # As the message says: the results kept, nothing trained again, the wall times unknown.
  _edit(
    tmp_path / "progress.json",
    lambda p: [p.pop(k) for k in ("seconds", "wall_time_s", "time_digest")],
  )
  ran, results = _run(tmp_path)
  assert ran == [] and results["cell_seconds"] == {} and results["wall_time_s"] is None  # unknown
  assert _run(tmp_path)[0] == []


def test_a_wall_time_that_is_not_finite_is_refused(tmp_path):
  _run(tmp_path)
  text = (tmp_path / "progress.json").read_text()
  written = json.loads(text)["seconds"]["a"]
  (tmp_path / "progress.json").write_text(text.replace(json.dumps(written), "NaN", 1))
  with pytest.raises(
    harness.WorkdirError, match=r"'seconds' of cell 'a' is NaN; expected seconds >= 0"
  ):
    _run(tmp_path)


def test_results_json_edited_wall_time_is_not_carried_over(tmp_path):
  first = _run(tmp_path)[1]["wall_time_s"]
  _edit(tmp_path / "results.json", lambda r: r.update(wall_time_s=99999.0))
  again = _run(tmp_path)[1]["wall_time_s"]
  assert first <= again < 60, (first, again)  # was: 99999 plus this run's seconds


def test_a_workdir_of_an_earlier_version_is_refused_not_adopted(tmp_path):
  # Round 19: version 2 (wall times without a digest) or none (no digests at all) let an
  # edited wall time or mAP through; their results cannot be checked, so they are refused.
  _run(tmp_path)
  for edit in (
    lambda p: (p.update(version=2), p.pop("time_digest"), p["seconds"].update(a=0.01)),
    lambda p: (p.pop("version"), p.pop("digests"), p["cells"]["a"].update(map=0.99)),
    lambda p: p.update(version=3),  # digests not bound to their cells
    lambda p: p.update(version=4),  # nor to the run's config
  ):
    text = (tmp_path / "progress.json").read_text()
    _edit(tmp_path / "progress.json", edit)
    with pytest.raises(harness.WorkdirError, match=r"'version' must be 5; got .*cannot be checked"):
      _run(tmp_path)
    (tmp_path / "progress.json").write_text(text)
  assert _run(tmp_path)[0] == []


def test_config_json_options_edited_under_their_fingerprint_are_damage(tmp_path):
  config = {"seed": 0, "bits": 16}
  _run(tmp_path, config)
  _edit(tmp_path / "config.json", lambda c: c["config"].update(bits=64))  # fingerprint kept
  with pytest.raises(harness.WorkdirError) as error:
    _run(tmp_path, config)
  message = str(error.value)
  assert "config.json is damaged: its 'config' and its 'fingerprint'" in message
  assert "delete it and run again" in message, message
  (tmp_path / "config.json").unlink()  # as the message says
  assert _run(tmp_path, config)[0] == []
  assert json.loads((tmp_path / "config.json").read_text())["config"]["bits"] == 16


def _two_steps(tmp_path):
  state = {"w": np.arange(4.0)}
  with harness.Workdir(tmp_path, {"seed": 0}) as wd:
    wd.save_state("c/1", 1, state, {"loss": [1.0]})
    wd.save_state("c/1", 2, state, {"loss": [1.0, 0.5]})
  return tmp_path / "checkpoints" / "c_1", jax.eval_shape(lambda: state)


def _no_orbax_lines(caplog):
  lines = [
    r.getMessage() for r in caplog.records if r.name == "absl" and r.levelno >= logging.WARNING
  ]
  assert lines == [], lines


def test_an_emptied_step_is_not_used_and_orbax_logs_nothing(tmp_path, caplog, capsys):
  folder, template = _two_steps(tmp_path)
  for f in (folder / "2").iterdir():
    f.unlink() if f.is_file() else __import__("shutil").rmtree(f)
  with harness.Workdir(tmp_path, {"seed": 0}) as wd:  # was: "another version" (round 18)
    assert wd.load_state("c/1", template)[0] == 1  # its list is gone with it: not used
  out = capsys.readouterr().out
  assert "step(s) 2 of cell 'c/1' have no jhash_files.json" in out and "resuming from step 1" in out
  _no_orbax_lines(caplog)


def test_a_truncated_checkpoint_metadata_is_named_without_orbaxs_log_lines(tmp_path, caplog):
  folder, template = _two_steps(tmp_path)
  meta = folder / "2" / "_CHECKPOINT_METADATA"
  meta.write_bytes(meta.read_bytes()[:30])
  with harness.Workdir(tmp_path, {"seed": 0}) as wd, pytest.raises(harness.WorkdirError) as error:
    wd.load_state("c/1", template)
  assert f"{meta} has 30 bytes where" in str(error.value), error.value
  _no_orbax_lines(caplog)  # was: orbax's "Failed to json parse" line first


def test_a_killed_saves_leftover_is_removed_quietly(tmp_path, caplog):
  folder, template = _two_steps(tmp_path)
  (folder / "3.orbax-checkpoint-tmp").mkdir()
  with harness.Workdir(tmp_path, {"seed": 0}) as wd:
    assert wd.load_state("c/1", template)[0] == 2
    wd.save_state("c/1", 3, {"w": np.ones(4)}, {"loss": [1.0]})
    assert wd.load_state("c/1", template)[0] == 3
  assert not (folder / "3.orbax-checkpoint-tmp").exists()
  _no_orbax_lines(caplog)


def test_messages_that_named_the_wrong_thing(tmp_path):
  # A checkpoint that is not a cell's is named as its caller says (cdh_figure1's trajectory).
  folder, template = _two_steps(tmp_path)
  (folder / "2" / "jhash_files.json").write_text("")
  with harness.Workdir(tmp_path, {"seed": 0}) as wd, pytest.raises(harness.WorkdirError) as error:
    wd.load_state("c/1", template, label="'c/1' (the state X starts from)", restart="X runs again")
  message = str(error.value)
  assert "the checkpoint of 'c/1' (the state X starts from) at step 2" in message, message
  # A list in a result replaced by a string: a number is not all that could be there.
  _run(tmp_path / "w")
  _edit(tmp_path / "w" / "progress.json", lambda p: p["cells"]["a"].update(alphas="x"))
  with pytest.raises(harness.WorkdirError) as error:
    _run(tmp_path / "w")
  message = str(error.value)
  assert "differs from the digest jhash wrote with it" in message, message
  assert "'alphas' = \"x\"; expected a number (or a list or object, as jhash wrote it)" in message
  # A workdir that is a file: what to do about it.
  (tmp_path / "file").write_text("")
  with pytest.raises(
    harness.WorkdirError, match="is a file. Move or delete that file, or give another workdir"
  ):
    harness.Workdir(tmp_path / "file" / "sub", {"seed": 0})
