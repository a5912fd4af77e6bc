"""Bad input, round 24: what the second confirmation probe found.

A Ctrl-C that Python dropped (raised inside JAX's garbage-collection callback) let the
run go on to the end; a folder holding another config's config.json and results.json
beside this run's progress.json got the remedy "use a fresh workdir" (and the report
blamed progress.json); a results.json copied from another folder of the same config into
an unfinished run was published; two step folders swapped sent the cell to an "intact"
step that was not; a partly followed wall-time remedy was blamed on a digest no longer
there; two cells' results swapped were named one per run; ``report --out`` wrote the
page over a run's plot.
"""

import gc
import shutil
import signal
import sys

import numpy as np
import pytest

import _experiment_runs as runs
from experiments import _stop
from experiments import harness
from experiments import report


def _run(path, seed=0, cells=("itq", "lsh")):
  return runs.finish_cells(path, {"seed": seed}, cells)


def test_a_stop_python_dropped_stops_the_run_at_the_next_cell(tmp_path, monkeypatch):
  seen = []  # what reaches the hook Python prints with ("Exception ignored in ...")
  monkeypatch.setattr(sys, "unraisablehook", seen.append)
  monkeypatch.setattr(_stop, "_asked", False)
  monkeypatch.setattr(_stop, "_armed", True)
  handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
  try:
    _stop.install()
    fired = []

    def callback(phase, info):  # where JAX's gc callback took the signal's raise
      if not fired:
        fired.append(phase)
        _stop._handler(signal.SIGINT, None)  # pylint: disable=protected-access

    gc.callbacks.append(callback)
    try:
      gc.collect()
    finally:
      gc.callbacks.remove(callback)
    assert fired and _stop.asked()
    assert seen == []  # was: "Exception ignored ... KeyboardInterrupt" and its traceback
    gc.callbacks.append(lambda phase, info: 1 / 0)  # any other error still reaches it
    try:
      gc.collect()
    finally:
      gc.callbacks.pop()
    assert seen and {type(u.exc_value) for u in seen} == {ZeroDivisionError}  # start, stop
    ran = []
    with harness.Workdir(tmp_path, {"seed": 0}) as wd, pytest.raises(KeyboardInterrupt):
      harness.run_cells([("a", lambda: ran.append(1) or {"map": 0.5})], wd, progress=False)
    assert ran == []  # was: every cell trained and the results written
  finally:
    signal.signal(signal.SIGINT, handlers[0])
    signal.signal(signal.SIGTERM, handlers[1])


@pytest.mark.parametrize(
  "copied", [("config.json", "results.json"), ("config.json", "progress.json")]
)
def test_a_folder_mixing_two_runs_is_named_with_a_remedy_that_works(tmp_path, copied):
  mine, other = tmp_path / "mine", tmp_path / "other"
  want = _run(mine)
  _run(other, seed=1)
  for name in copied:
    shutil.copy(other / name, mine / name)
  with pytest.raises(ValueError, match=r"holds files of two runs"):
    report.load(mine)  # was: progress.json, the genuine file, blamed
  with pytest.raises(harness.WorkdirError, match=r"mixes two runs' files") as error:
    _run(mine)  # was: "use a fresh workdir, or delete this one"
  assert f"delete {' and '.join(copied)} and run again" in str(error.value)
  for name in copied:
    (mine / name).unlink()
  assert _run(mine) == want


def test_a_results_json_of_another_folder_beside_an_unfinished_run_is_refused(tmp_path):
  done, partial = tmp_path / "done", tmp_path / "partial"
  want = _run(done)
  _run(partial, cells=("itq",))  # the same config, one cell finished (results of one)
  shutil.copy(done / "results.json", partial / "results.json")
  with pytest.raises(ValueError, match=r"1 of its 2 cells \(e.g. 'lsh'\) are not finished"):
    report.load(partial)  # was: published the other folder's table
  (partial / "results.json").unlink()
  assert _run(partial) == want


def test_step_folders_swapped_are_named_and_no_step_is_offered_as_intact(tmp_path):
  folder, template = runs.two_steps(tmp_path)
  (folder / "4").rename(folder / "x")
  (folder / "8").rename(folder / "4")
  (folder / "x").rename(folder / "8")
  message = runs.load_error(tmp_path, template)
  assert "resumes from its checkpoint at step 4" not in message  # was: "which is intact"
  assert f"{folder / '4'} holds step 8, {folder / '8'} holds step 4" in message
  (folder / "4").rename(folder / "x")  # the remedy it names: rename them back
  (folder / "8").rename(folder / "4")
  (folder / "x").rename(folder / "8")
  with harness.Workdir(tmp_path, {"seed": 0}) as wd:
    step, restored, _ = wd.load_state("itq", template)
  assert step == 8 and np.array_equal(restored["w"], np.arange(4.0) + 1)


def test_a_wall_time_remedy_followed_in_part_is_named_for_what_it_is(tmp_path):
  _run(tmp_path)

  def partly(p):  # the entry of one cell from 'seconds', the other two keys whole
    p["seconds"].pop("itq")
    p.pop("wall_time_s")
    p.pop("time_digest")

  runs.edit_json(tmp_path / "progress.json", partly)
  with pytest.raises(harness.WorkdirError, match=r"have lost their digest") as error:
    _run(tmp_path)  # was: "differ from the digest jhash wrote", the digest gone
  assert "delete its keys 'seconds' (every cell's), 'wall_time_s'" in str(error.value)


def test_every_cell_whose_result_was_changed_is_named_at_once(tmp_path):
  want = _run(tmp_path, cells=("itq", "lsh", "pca"))

  def swap(p):
    p["cells"]["itq"], p["cells"]["lsh"] = p["cells"]["lsh"], p["cells"]["itq"]

  runs.edit_json(tmp_path / "progress.json", swap)
  with pytest.raises(harness.WorkdirError, match=r"delete the entries 'itq', 'lsh' from"):
    _run(tmp_path, cells=("itq", "lsh", "pca"))  # was: 'itq', then on the next run 'lsh'
  runs.edit_json(tmp_path / "progress.json", lambda p: [p["cells"].pop(c) for c in ("itq", "lsh")])
  assert _run(tmp_path, cells=("itq", "lsh", "pca")) == want


def test_the_report_writes_only_a_markdown_name(tmp_path, capsys):
  _run(tmp_path)
  plot = tmp_path / "pr_radius.png"
  plot.write_bytes(b"\x89PNG")
  assert report.main([str(tmp_path), "--out", str(plot)]) == 2  # was: overwrote the plot
  assert "the page is Markdown; expected a name ending in .md" in capsys.readouterr().err
  assert plot.read_bytes() == b"\x89PNG"
  assert report.main([str(tmp_path), "--out", str(tmp_path / "page.md")]) == 0
