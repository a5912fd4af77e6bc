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

from experiments import harness
from experiments import report
from jhash import metrics


def _edit(path, edit):
  data = json.loads(path.read_text())
  edit(data)
  path.write_text(json.dumps(data))


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
  return tmp_path / "checkpoints" / harness._safe(cell)  # pylint: disable=protected-access


def _load(tmp_path, cell, template):
  with harness.Workdir(tmp_path, {"seed": 0}) as wd, pytest.raises(harness.WorkdirError) as error:
    wd.load_state(cell, template)
  return str(error.value)


@pytest.mark.parametrize("file_list", [True, False])
def test_a_renamed_step_folder_is_refused(tmp_path, file_list):
  folder = _saved(tmp_path)
  if not file_list:
    for step in (5, 10):
      (folder / str(step) / "jhash_files.json").unlink()
  (folder / "10").rename(folder / "15")  # was: resumed at step 15 from step 10's state
  message = _load(tmp_path, "itq/32", jax.eval_shape(lambda: {"w": np.arange(4.0)}))
  assert "at step 15 is unusable: it was saved at step 10 (its folder was renamed)" in message
  assert f"delete {folder} and run again" in message, message


def test_a_cell_moved_without_its_file_lists_is_named_not_a_traceback(tmp_path):
  folder = _saved(tmp_path, "itq/32", {"pca": np.zeros((6, 2), np.float32)})
  for step in (5, 10):
    (folder / str(step) / "jhash_files.json").unlink()
  shutil.move(folder, folder.with_name("itq_64"))
  same = jax.eval_shape(lambda: {"pca": np.zeros((6, 2), np.float32)})  # would restore
  message = _load(tmp_path, "itq/64", same)
  assert "checkpoint of cell 'itq/64' at step 10 is unusable" in message, message
  assert "it was saved by another cell (its folder was moved or copied here)" in message
  template = jax.eval_shape(lambda: {"pca": np.zeros((6, 4), np.float32)})
  # A state of other shapes (a checkpoint of another cell or version): named as such.
  folder = _saved(tmp_path / "old", "c", {"pca": np.zeros((6, 2), np.float32)})
  with harness.Workdir(tmp_path / "old", {"seed": 0}) as wd:
    assert (
      wd.load_state("c", jax.eval_shape(lambda: {"pca": np.zeros((6, 2), np.float32)}))[0] == 10
    )
  message = _load(tmp_path / "old", "c", template)
  assert "it holds an array float32 (6, 2) where this cell's state has float32 (6, 4)" in message


def test_deephash_map_warns_when_no_query_has_a_relevant_item(rng):
  q, db = (np.where(rng.random((n, 16)) < 0.5, 1, -1) for n in (4, 12))
  labels = np.eye(3, dtype=bool)[np.arange(12) % 3]
  with pytest.warns(RuntimeWarning, match="deephash_map is 0: no query has a relevant item"):
    assert metrics.deephash_map(q, db, np.zeros((4, 3), bool), labels, 5) == 0.0
