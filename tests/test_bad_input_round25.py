"""Bad input, round 25: what the third confirmation probe found.

The report told to delete results.json when progress.json beside it was the file
replaced or edited; a results.json whose cells progress.json no longer held was dropped
by the rerun without a word; a file list copied from another step was called a renamed
folder, with a renaming that failed; two files copied from another run were named one per
run, the second with a cost that no longer held.
"""

import shutil

import pytest

import _experiment_runs as runs

from experiments import harness
from experiments import report


def _run(path, seed=0, cells=("itq", "lsh")):
  return runs.finish_cells(path, {"seed": seed}, cells)


def test_a_replaced_progress_json_is_not_blamed_on_results_json(tmp_path, capsys):
  done, partial = tmp_path / "done", tmp_path / "partial"
  want = _run(done)
  _run(partial, cells=("itq",))
  shutil.copy(partial / "progress.json", done / "progress.json")  # an unfinished run's
  with pytest.raises(ValueError, match=r"results.json and the progress.json beside it") as error:
    report.load(done)
  assert "Run the experiment's own command" in str(error.value)
  assert "Delete it" not in str(error.value)  # was: delete the intact results.json
  capsys.readouterr()
  assert _run(done) == want  # the command it names
  note = capsys.readouterr().out  # was: the cells trained again without a word
  assert "note: results.json was written from 1 finished cell(s) that progress.json" in note


def test_a_file_list_copied_from_another_step_is_not_called_a_rename(tmp_path):
  folder, template = runs.two_steps(tmp_path)
  shutil.copy(folder / "4" / "jhash_files.json", folder / "8" / "jhash_files.json")
  message = runs.load_error(tmp_path, template)
  assert "resumes from its checkpoint at step 4, which is intact" in message
  assert "renamed" not in message  # was: "folder 8 holds step 4; renaming ... also works"


def test_two_files_of_another_run_are_named_at_once(tmp_path):
  mine, other = tmp_path / "mine", tmp_path / "other"
  want = _run(mine)
  _run(other, seed=1)
  for name in ("progress.json", "results.json"):
    shutil.copy(other / name, mine / name)
  with pytest.raises(harness.WorkdirError) as error:
    _run(mine)
  message = str(error.value)
  assert "progress.json" in message and "results.json are damaged or another run's" in message
  assert "progress.json's finished cells train again" in message  # was: "nothing trained"
  for name in ("progress.json", "results.json"):
    (mine / name).unlink()
  assert _run(mine) == want
