"""Bad input, round 26: the misleading messages a fourth confirmation probe found (it found
no silent answer and no traceback).

The report's remedy for an edited results.json failed when the fingerprint was the field
edited; the runner's note blamed progress.json when results.json was the file copied in; a
cell entry copied from another config's run, its result unchanged, was said to be edited;
a copied step folder was called renamed, with a rename-back that could not be done;
"finished cells are intact" was said with none finished; non-whole float labels were told
to become ints.
"""

import json
import shutil

import numpy as np
import pytest

import _experiment_runs as runs
import jhash
from experiments import harness
from experiments import report


def _run(path, config=None, cells=("itq", "lsh")):
  return runs.finish_cells(path, config, cells)


def test_the_reports_remedy_for_an_edited_results_json_works_as_written(tmp_path):
  want = _run(tmp_path)
  runs.edit_json(tmp_path / "results.json", lambda r: r.update(fingerprint="0123456789abcdef"))
  with pytest.raises(ValueError, match=r"Delete it and run the experiment again"):
    report.load(tmp_path)  # was: "run the experiment again", which the runner refused
  (tmp_path / "results.json").unlink()
  assert _run(tmp_path) == want


def test_the_runners_note_does_not_say_which_of_two_disagreeing_files_changed(tmp_path, capsys):
  done, partial = tmp_path / "done", tmp_path / "partial"
  want = _run(done)
  _run(partial, cells=("itq",))
  shutil.copy(done / "results.json", partial / "results.json")  # results.json copied in
  capsys.readouterr()
  assert _run(partial) == want
  note = capsys.readouterr().out
  assert "one of the two files was replaced or edited" in note  # was: blamed progress.json


def test_a_cell_entry_of_another_config_with_the_same_result_is_named_as_possibly_foreign(
  tmp_path,
):
  mine, other = tmp_path / "mine", tmp_path / "other"
  _run(mine)
  _run(other, {"seed": 0, "iters": 11})  # the same results, another config
  theirs = json.loads((other / "progress.json").read_text())
  runs.edit_json(
    mine / "progress.json", lambda p: p["digests"].update(lsh=theirs["digests"]["lsh"])
  )
  with pytest.raises(harness.WorkdirError, match=r"or the entry is another run's"):
    _run(mine)  # was: only "a value, a curve or a history was changed or lost"


def test_a_copied_step_folder_is_not_offered_a_rename_back(tmp_path):
  folder, template = runs.two_steps(tmp_path)
  shutil.rmtree(folder / "8")
  shutil.copytree(folder / "4", folder / "8")
  message = runs.load_error(tmp_path, template)
  assert "saved at step 4 (its folder was renamed or copied)" in message
  assert "renaming each back" not in message  # was: offered, and step 4's folder is there
  assert "resumes from its checkpoint at step 4, which is intact" in message


def test_finished_cells_are_not_said_to_be_intact_when_there_are_none(tmp_path):
  folder, template = runs.two_steps(tmp_path)
  (folder / "8" / "jhash_files.json").write_text("{}")
  with harness.Workdir(tmp_path, {"seed": 0}) as wd:
    wd.write_progress()  # a progress.json with no finished cell
  assert "Finished cells are intact" not in runs.load_error(tmp_path, template)


def test_labels_that_are_not_whole_numbers_are_not_told_to_become_ints():
  images = np.zeros((10, 4, 4), np.uint8)
  with pytest.raises(ValueError, match=r"not all whole numbers") as error:
    jhash.data.make_canvas_dataset(images, np.arange(10) % 2 + 0.5)
  assert "astype(np.int32)" not in str(error.value)  # was: 1.5 would silently become 1
  with pytest.raises(ValueError, match=r"pass labels.astype\(np.int32\)"):
    jhash.data.make_canvas_dataset(images, (np.arange(10) % 2).astype(float))  # whole: fine
