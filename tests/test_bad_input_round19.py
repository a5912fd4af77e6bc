"""Bad input, round 19: what a second probe of the issue's families still found.

A hand-edited ``results.json`` published by ``experiments.report``, a ``progress.json``
whose fingerprint was edited blamed on another config, a checkpoint moved to another
cell blamed on another version, all-zero scores when no query has a relevant item, and
messages that blamed the data for a wrong argument.
"""

import shutil
import time
import warnings

import numpy as np
import pytest

import jhash
import _experiment_runs as runs
from experiments import harness
from experiments import plots
from experiments import report
from jhash import codes as codes_lib
from jhash import metrics


def _finished(path, config=None):
  config = config or {"seed": 0}
  with harness.Workdir(path, config) as wd:
    out = harness.run_cells([("a", lambda: {"map": 0.377})], wd, progress=False)
    harness.write_results(wd, config, out, time.time(), extra={"table": "| a | 0.3770 |"})


_edit = runs.edit_json


def test_report_refuses_a_results_json_changed_after_it_was_written(tmp_path):
  _finished(tmp_path)
  assert "0.3770" in report.page([tmp_path])  # as written
  _edit(
    tmp_path / "results.json",
    lambda r: (r["metrics"]["a"].update(map=0.9999), r.update(table="| a | 0.9999 |")),
  )
  with pytest.raises(ValueError, match="differs from the digest jhash wrote with it") as error:
    report.page([tmp_path])  # was: published 0.9999
  assert "Delete it and run the experiment again on its run directory" in str(error.value)
  _edit(tmp_path / "results.json", lambda r: r.pop("digest"))
  with pytest.raises(ValueError, match="has no digest"):
    report.page([tmp_path])
  # As the message says: the same run again writes it again, nothing trained again.
  _finished(tmp_path)
  assert "0.3770" in report.page([tmp_path])
  # A folder that holds no run is not called an unfinished run.
  (tmp_path / "empty").mkdir()
  with pytest.raises(ValueError, match="is not a run directory: it holds no results.json"):
    report.load(tmp_path / "empty")


def test_a_progress_fingerprint_edited_under_an_agreeing_config_json_names_that_file(tmp_path):
  _finished(tmp_path)
  _edit(tmp_path / "progress.json", lambda p: p.update(fingerprint="0123456789abcdef"))
  with pytest.raises(harness.WorkdirError) as error:
    _finished(tmp_path)
  message = str(error.value)  # was: "a different config ... delete this one", losing the cells
  assert (
    "progress.json is damaged or another run's: it records fingerprint 0123456789abcdef" in message
  )
  assert "delete it and run again (its finished cells train again)" in message, message
  _edit(tmp_path / "results.json", lambda r: r.update(fingerprint="0123456789abcdef"))
  _edit(
    tmp_path / "progress.json",
    lambda p: p.update(fingerprint=harness.config_fingerprint({"seed": 0})),
  )
  with pytest.raises(
    harness.WorkdirError, match=r"results.json is damaged .*nothing trained again"
  ):
    _finished(tmp_path)
  (tmp_path / "results.json").unlink()
  _finished(tmp_path)


def test_a_checkpoint_moved_to_another_cell_is_named_as_that_cells(tmp_path):
  state = {"w": np.arange(4.0)}
  with harness.Workdir(tmp_path, {"seed": 0}) as wd:
    wd.save_state("itq/32", 5, state, {"loss": [1.0]})
    wd.save_state("itq/32", 10, state, {"loss": [1.0, 0.5]})
  folder = tmp_path / "checkpoints"
  shutil.move(folder / "itq_32", folder / "itq_64")  # the same shapes: it would restore
  with harness.Workdir(tmp_path, {"seed": 0}) as wd, pytest.raises(harness.WorkdirError) as error:
    wd.load_state("itq/64", jax_template(state))
  message = str(error.value)  # was: resumed from itq/32's state (or "another version")
  assert "it is the checkpoint of cell 'itq/32', moved or copied here" in message, message
  assert f"delete {folder / 'itq_64'} and run again: the cell starts again from step 0" in message
  # A size edited in the file list names the list, not the intact file.
  _edit(
    folder / "itq_64" / "10" / "jhash_files.json",
    lambda m: m["files"]["_CHECKPOINT_METADATA"].__setitem__(0, 1),
  )
  with harness.Workdir(tmp_path, {"seed": 0}) as wd, pytest.raises(harness.WorkdirError) as error:
    wd.load_state("itq/64", jax_template(state))
  assert "bytes where jhash_files.json lists 1" in str(error.value), error.value


def jax_template(state):
  import jax  # pylint: disable=import-outside-toplevel

  return jax.eval_shape(lambda: state)


def test_no_relevant_item_anywhere_warns_under_zero_as_under_skip(rng):
  q, db = (np.where(rng.random((n, 16)) < 0.5, 1, -1) for n in (6, 20))
  labels = np.arange(20) % 3
  with pytest.warns(RuntimeWarning, match="mean_average_precision is 0: no query has a relevant"):
    assert metrics.mean_average_precision(q, db, np.full(6, 9), labels) == 0.0
  with pytest.warns(RuntimeWarning, match="recall_at_k is 0: no query has a relevant"):
    metrics.recall_at_k(q, db, np.full(6, 9), labels, ks=(5,))
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # one query with a relevant item: no warning
    metrics.mean_average_precision(q, db, np.array([0, 9, 9, 9, 9, 9]), labels)


def test_messages_that_blamed_the_data_for_an_argument(tmp_path):
  packed = codes_lib.pack_bits(np.ones((3, 40), np.int8))
  with pytest.raises(
    ValueError, match=r"or num_bits is shorter than the length they were packed at"
  ):
    codes_lib.unpack_bits(packed, 33)
  images = np.zeros((30, 8, 8), np.uint8)
  with pytest.raises(ValueError) as error:  # was: advised .astype(bool), which failed next
    jhash.data.make_canvas_dataset(images, np.eye(3, dtype=int)[np.arange(30) % 3], num_items=4)
  assert "labels must be integer class ids [30]" in str(error.value)
  assert "astype(bool)" not in str(error.value), error.value
  # A curve panel of no steps (ITQ with num_iters=0): a note, not matplotlib's warning.
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    plots.panels([{"title": "loss", "series": []}], tmp_path / "empty.png")
  assert (tmp_path / "empty.png").read_bytes()[:4] == b"\x89PNG"
