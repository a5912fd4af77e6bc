"""Bad input, round 23: what a confirmation probe of the public surface still found.

``experiments.report`` blamed results.json (and advised a rerun the runner refuses) when
progress.json was another run's, or when results.json was; ``make_canvas_dataset`` took
channels-first images as [n, H, W, C] and drew nonsense. Messages: two cells swapped with
their wall times named only the times, a checkpoint step of another cell or run sent the
cell back to step 0 though an earlier step was intact, one ``--title`` for two run
directories was taken, a scalar count was shown as a list.
"""

import warnings
import shutil

import jax
import numpy as np
import pytest

import _experiment_runs as runs
import jhash
from experiments import _workdir
from experiments import harness
from experiments import report
from experiments import retrieval


def _run(path, seed=0, cells=("itq", "lsh")):
  return runs.finish_cells(path, {"seed": seed}, cells)


@pytest.mark.parametrize("name", ["progress.json", "results.json"])
def test_a_file_of_another_run_is_named_and_its_remedy_works(tmp_path, name):
  mine, other = tmp_path / "mine", tmp_path / "other"
  want = _run(mine)
  _run(other, seed=1)
  (mine / name).write_bytes((other / name).read_bytes())
  with pytest.raises(ValueError, match=r"holds files of two runs .*runner, which knows its"):
    report.load(mine)  # was: results.json blamed whichever file came from elsewhere
  with pytest.raises(harness.WorkdirError, match=rf"{name} is damaged or another run's"):
    _run(mine)  # the runner knows the config: it names the file
  (mine / name).unlink()  # the remedy
  assert _run(mine) == want and "| t |" in report.page([mine])


def test_the_report_takes_one_title_per_run_directory(tmp_path):
  _run(tmp_path / "a")
  _run(tmp_path / "b")
  with pytest.raises(ValueError, match=r"--title is given 1 time\(s\) for 2 run directories"):
    report.page([tmp_path / "a", tmp_path / "b"], ["A"])
  assert report.page([tmp_path / "a", tmp_path / "b"], ["A", "B"]).count("## ") == 2


def test_cells_swapped_with_their_wall_times_are_named_first(tmp_path):
  want = _run(tmp_path)

  def swap(p):
    for key in ("cells", "digests", "seconds"):
      p[key]["itq"], p[key]["lsh"] = p[key]["lsh"], p[key]["itq"]

  runs.edit_json(tmp_path / "progress.json", swap)
  with pytest.raises(harness.WorkdirError, match=r"the results of cells 'itq', 'lsh' differ"):
    _run(tmp_path)  # was: only the wall times, with "the cells' results are kept"

  def remedy(p):
    for key in ("seconds", "wall_time_s", "time_digest"):
      p.pop(key)
    p["cells"].clear()

  runs.edit_json(tmp_path / "progress.json", remedy)
  assert _run(tmp_path) == want


@pytest.mark.parametrize("how", ["another cell", "another run"])
def test_a_foreign_last_step_offers_the_intact_step_before_it(tmp_path, how):
  state = {"w": np.arange(4.0)}
  mine, other = tmp_path / "mine", tmp_path / "other"
  source = ("lsh", {"seed": 0}) if how == "another cell" else ("itq", {"seed": 1})
  for path, cell, config in ((mine, "itq", {"seed": 0}), (other, *source)):
    with harness.Workdir(path, config) as wd:
      wd.save_state(cell, 5, state, {"loss": [1.0]})
      wd.save_state(cell, 10, state, {"loss": [1.0, 0.5]})
  folder = mine / "checkpoints" / _workdir._safe("itq")  # pylint: disable=protected-access
  theirs = other / "checkpoints" / _workdir._safe(source[0])  # pylint: disable=protected-access
  template = jax.eval_shape(lambda: state)

  def message():
    with harness.Workdir(mine, {"seed": 0}) as wd, pytest.raises(harness.WorkdirError) as error:
      wd.load_state("itq", template)
    return str(error.value)

  shutil.rmtree(folder / "10")
  shutil.copytree(theirs / "10", folder / "10")
  assert (
    f"delete {folder / '10'} and run again: the cell resumes from its checkpoint at step 5"
    in (message())
  )  # was: delete the whole folder, from step 0
  shutil.rmtree(folder / "5")  # step 5 of the same foreign kind: no step to offer
  shutil.copytree(theirs / "5", folder / "5")
  assert f"delete {folder} and run again: the cell starts again from step 0" in message()


def test_channels_first_images_are_refused_by_the_canvas_builders():
  rng = np.random.default_rng(0)
  images = rng.integers(0, 256, (40, 3, 8, 8), dtype=np.uint8)
  labels = np.arange(40) % 4
  for build in (jhash.data.make_canvas_dataset, jhash.data.make_two_view):
    with pytest.raises(ValueError, match=r"channels first .* images.transpose\(0, 2, 3, 1\)"):
      build(images, labels)  # was: a (40, 6, 16, 8) canvas of 3-pixel-high images
  canvas = jhash.data.make_canvas_dataset(images.transpose(0, 2, 3, 1), labels)
  assert canvas.views[0].shape == (40, 16, 16, 3)
  gray = rng.integers(0, 256, (40, 3, 8), dtype=np.uint8)  # [n, H, W] with H = 3: fine
  assert jhash.data.make_canvas_dataset(gray, labels).views[0].shape == (40, 6, 16)


def test_a_scalar_count_is_shown_as_given():
  config = retrieval_config()
  config.num_seeds = 0
  with pytest.raises(harness.ConfigError, match=r"config.num_seeds: must be an int >= 1; got 0\."):
    retrieval.validate(config)


def retrieval_config():
  from experiments.configs import baselines  # pylint: disable=import-outside-toplevel

  config = baselines.get_config("tiny")
  config.unlock()
  return config


def test_the_radius_curves_warn_when_no_query_has_a_relevant_item(rng):
  """Left over from round 19: mAP, NDCG and recall@k warned under "zero"; the radius
  curves gave recall 0 at every radius without a word."""
  q = np.where(rng.random((5, 16)) < 0.5, -1, 1).astype(np.int8)
  db = np.where(rng.random((30, 16)) < 0.5, -1, 1).astype(np.int8)
  other, same = np.zeros(5, int), np.ones(5, int)  # 0-based against 1-based, say
  calls = {
    "pr_curve_by_radius's recall": lambda ql: jhash.metrics.pr_curve_by_radius(
      q, db, ql, np.ones(30, int)
    ),
    r"precision_recall_at_radius \(radius 3\)'s recall": (
      lambda ql: jhash.metrics.precision_recall_at_radius(q, db, ql, np.ones(30, int), 3)
    ),
  }
  for name, call in calls.items():
    with pytest.warns(RuntimeWarning, match=rf"{name} is 0: no query has a relevant item"):
      call(other)
    with warnings.catch_warnings():
      warnings.simplefilter("error")
      call(same)  # a relevant item somewhere: no warning
