"""Bad input, round 20: what a third probe of damaged workdirs still found.

Two cells' results swapped with their digests, a checkpoint step folder renamed, a
cell's checkpoints moved to another cell without their file lists (a raw traceback from
the method's state check), a wall time published after the wall times were dropped, and
``deephash_map``'s silent 0 when no query has a relevant item.
"""

import json
import shutil
import time

import jax
import numpy as np
import pytest

import _experiment_runs as runs
from experiments import _workdir
from experiments import harness
from experiments import report
from jhash import metrics


_edit = runs.edit_json


def _run(path):
  ran = []
  with harness.Workdir(path, {"seed": 0}) as wd:
    out = harness.run_cells(
      [(c, lambda c=c, v=v: ran.append(c) or {"map": v}) for c, v in (("itq", 0.7), ("lsh", 0.4))],
      wd,
      progress=False,
    )
    harness.write_results(wd, {"seed": 0}, out, time.time(), extra={"table": "| t |"})
  return ran, out


def test_two_cells_swapped_with_their_digests_are_damage(tmp_path):
  _run(tmp_path)

  def swap(p):
    for key in ("cells", "digests"):
      p[key]["itq"], p[key]["lsh"] = p[key]["lsh"], p[key]["itq"]

  _edit(tmp_path / "progress.json", swap)  # was: itq published with lsh's mAP
  with pytest.raises(
    harness.WorkdirError, match=r"the result of cell 'itq' differs from the digest"
  ):
    _run(tmp_path)


def test_wall_times_dropped_as_damaged_are_published_as_unknown(tmp_path):
  _run(tmp_path)
  _edit(
    tmp_path / "progress.json",
    lambda p: [p.pop(k) for k in ("seconds", "wall_time_s", "time_digest")],
  )
  ran, _ = _run(tmp_path)  # the remedy for damaged wall times
  results = json.loads((tmp_path / "results.json").read_text())
  assert ran == [] and results["wall_time_s"] is None  # was: this rerun's 2 s as the run's
  assert "wall time unknown" in report.page([tmp_path])
  _run(tmp_path)  # and stays unknown
  assert json.loads((tmp_path / "results.json").read_text())["wall_time_s"] is None


def _saved(tmp_path, cell="itq/32", state=None):
  state = {"w": np.arange(4.0)} if state is None else state
  with harness.Workdir(tmp_path, {"seed": 0}) as wd:
    wd.save_state(cell, 5, state, {"loss": [1.0]})
    wd.save_state(cell, 10, state, {"loss": [1.0, 0.5]})
  return tmp_path / "checkpoints" / _workdir._safe(cell)  # pylint: disable=protected-access


def _load(tmp_path, cell, template):
  with harness.Workdir(tmp_path, {"seed": 0}) as wd, pytest.raises(harness.WorkdirError) as error:
    wd.load_state(cell, template)
  return str(error.value)


def test_a_renamed_step_folder_is_refused(tmp_path, capsys):
  folder = _saved(tmp_path)
  (folder / "10").rename(folder / "15")  # was: resumed at step 15 from step 10's state
  template = jax.eval_shape(lambda: {"w": np.arange(4.0)})
  message = _load(tmp_path, "itq/32", template)
  assert (
    "at step 15 is unusable: it was saved at step 10 (its folder was renamed or copied)" in message
  )
  assert (
    f"delete {folder / '15'} and run again: the cell resumes from its checkpoint at " in message
  )
  # Without the file lists, the steps cannot be checked: not used (the cell starts again).
  for step in (5, 15):
    (folder / str(step) / "jhash_files.json").unlink()
  with harness.Workdir(tmp_path, {"seed": 0}) as wd:
    assert wd.load_state("itq/32", template) is None
  assert "step(s) 15, 5 of cell 'itq/32' have no jhash_files.json" in capsys.readouterr().out


def test_a_cell_moved_is_named_even_where_its_file_list_records_no_cell(tmp_path):
  folder = _saved(tmp_path, "itq/32", {"pca": np.zeros((6, 2), np.float32)})
  for step in (5, 10):  # file lists as jhash wrote them before they recorded the cell
    _edit(folder / str(step) / "jhash_files.json", lambda m: m.pop("cell"))
  shutil.move(folder, folder.with_name("itq_64"))
  same = jax.eval_shape(lambda: {"pca": np.zeros((6, 2), np.float32)})  # would restore
  message = _load(tmp_path, "itq/64", same)  # was: resumed itq/32's training
  assert "checkpoint of cell 'itq/64' at step 10 is unusable" in message, message
  assert "it was saved by another cell (its folder was moved or copied here)" in message
  # A state of other shapes (another cell's or version's): named (was the method's raw
  # ValueError when fit checked the restored state).
  template = jax.eval_shape(lambda: {"pca": np.zeros((6, 4), np.float32)})
  _saved(tmp_path / "old", "c", {"pca": np.zeros((6, 2), np.float32)})
  message = _load(tmp_path / "old", "c", template)
  assert "it holds an array float32 (6, 2) where this cell's state has float32 (6, 4)" in message


def test_deephash_map_warns_when_no_query_has_a_relevant_item(rng):
  q, db = (np.where(rng.random((n, 16)) < 0.5, 1, -1) for n in (4, 12))
  labels = np.eye(3, dtype=bool)[np.arange(12) % 3]
  with pytest.warns(RuntimeWarning, match="deephash_map is 0: no query has a relevant item"):
    assert metrics.deephash_map(q, db, np.zeros((4, 3), bool), labels, 5) == 0.0


def test_round_21_a_foreign_cell_and_a_later_version_are_named(tmp_path):
  _run(tmp_path)
  text = (tmp_path / "progress.json").read_text()
  _edit(tmp_path / "progress.json", lambda p: p["cells"].update({"pca": {"map": 0.99}}))
  with pytest.raises(harness.WorkdirError) as error:  # was: kept, and the wall time unknown
    _run(tmp_path)
  message = str(error.value)
  assert "it holds a result for cell 'pca', which this config does not run" in message
  assert "delete the entry 'pca' from its 'cells' and 'digests'" in message, message
  _edit(tmp_path / "progress.json", lambda p: p["cells"].pop("pca"))  # as the message says
  ran, _ = _run(tmp_path)
  assert ran == [] and json.loads((tmp_path / "results.json").read_text())["wall_time_s"] > 0
  (tmp_path / "progress.json").write_text(text)
  _edit(tmp_path / "progress.json", lambda p: p.update(version=harness.PROGRESS_VERSION + 1))
  with pytest.raises(harness.WorkdirError, match=r"a later jhash wrote it, or it was edited"):
    _run(tmp_path)  # was: blamed on an earlier jhash


def test_round_22_a_result_or_checkpoint_of_another_configs_run_is_refused(tmp_path):
  # A cell's result copied with its own digest from another config's run (was: published),
  # a checkpoint folder copied from it (was: resumed), and its results.json (was: the
  # report published it under this folder's name).
  other, mine = tmp_path / "other", tmp_path / "mine"
  for path, config in ((other, {"seed": 1}), (mine, {"seed": 0})):
    with harness.Workdir(path, config) as wd:
      out = harness.run_cells(
        [("a", lambda s=config["seed"]: {"map": 0.5 + s / 10})], wd, progress=False
      )
      harness.write_results(wd, config, out, time.time(), extra={"table": "| t |"})
      wd.save_state("b", 5, {"w": np.arange(4.0)}, {"loss": [1.0]})
  theirs = json.loads((other / "progress.json").read_text())
  _edit(
    mine / "progress.json",
    lambda p: (
      p["cells"].update(a=theirs["cells"]["a"]),
      p["digests"].update(a=theirs["digests"]["a"]),
    ),
  )
  with (
    harness.Workdir(mine, {"seed": 0}) as wd,
    pytest.raises(harness.WorkdirError, match="cell 'a' differs from the digest"),
  ):
    harness.run_cells([("a", lambda: {"map": 0.5})], wd, progress=False)
  shutil.rmtree(mine / "checkpoints" / "b")
  shutil.copytree(other / "checkpoints" / "b", mine / "checkpoints" / "b")
  message = _load(mine, "b", jax.eval_shape(lambda: {"w": np.arange(4.0)}))
  assert "it was saved by a run of another config (its folder was copied here)" in message
  shutil.copy(other / "results.json", mine / "results.json")
  with pytest.raises(ValueError, match=r"holds files of two runs"):
    report.load(mine)


def test_a_workdir_that_cannot_be_listed_is_named_without_a_promise(tmp_path, monkeypatch):
  """Round 22: ``--workdir /proc/1`` gave the errno text and "finished cells are kept"."""
  (tmp_path / "cwd").mkdir()

  def denied(path):
    raise PermissionError(13, "Permission denied", str(path / "cwd"))

  monkeypatch.setattr(_workdir, "_check_entries", denied)
  with pytest.raises(harness.WorkdirError, match=r"cannot be read: Permission denied \(.*cwd\)"):
    harness.Workdir(tmp_path, {"seed": 0})
