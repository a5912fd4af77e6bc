"""The retrieval trainer on list sets streamed from their files (``experiments.streaming``):
a cell killed mid-schedule resumes on the minibatches it would have read, and the
streaming keys are checked before anything trains. (The whole streamed run, MCH over DCH
on NUS-WIDE-shaped lists, learns in ``test_papers_configs.py``.)"""

import jax
import ml_collections
import numpy as np
import pytest

import _experiment_runs as runs
import jhash
from experiments import harness
from experiments import retrieval
from test_papers_configs import _write_tiny_nuswide
from test_pipeline import SMALL
from test_pipeline import _two_minibatch_phases
from test_pipeline import _write_images


class _Stop(Exception):
  pass


def _streamed(paths, labels):
  sample = next(
    iter(
      jhash.data.image_pipeline(
        paths, labels, batch_size=4, key=jax.random.key(0), train=False, **SMALL
      )
    )
  )
  sample.pop("index")
  at = lambda method, key, start: jhash.training_pipeline(
    method, paths, labels, key=key, start_step=start, **SMALL
  )
  return harness.Streamed(sample, len(paths), at)


def test_a_streamed_cell_killed_in_its_second_phase_resumes_on_the_same_minibatches(
  tmp_path, monkeypatch
):
  paths, labels = _write_images(tmp_path / "images")
  data = _streamed(paths, labels)
  method, key = _two_minibatch_phases(), jax.random.key(3)
  config = ml_collections.ConfigDict({"seed": 0})
  with harness.Workdir(tmp_path / "whole", config) as wd:
    want_state, want = wd.fit("cell", method, key, data, checkpoint_every=4)
  # Checkpoints at steps 5 (the first phase's end) and 11 (its next round trip, in the
  # second phase: an epoch of 6 steps); stopped right after the second.
  saves = []
  save = harness.Workdir.save_state

  def save_then_stop(self, cell, step, state, history):
    save(self, cell, step, state, history)
    saves.append(step)
    if len(saves) == 2:
      raise _Stop

  monkeypatch.setattr(harness.Workdir, "save_state", save_then_stop)
  with pytest.raises(_Stop), harness.Workdir(tmp_path / "killed", config) as wd:
    wd.fit("cell", method, key, data, checkpoint_every=4)
  monkeypatch.setattr(harness.Workdir, "save_state", save)
  assert saves == [5, 11]
  with harness.Workdir(tmp_path / "killed", config) as wd:
    state, history = wd.fit("cell", method, key, data, checkpoint_every=4)
    # The trained state is saved at the end too: coding the sets reads the files again,
    # and a failure there must not cost the training (a rerun starts at the end).
    template = jax.eval_shape(lambda k: jhash.init(method, k, data.sample, num_items=26), key)
    step, saved, _ = wd.load_state("cell", template)
    assert step == 17 and int(saved.total) == int(state.total)
  assert int(state.total) == int(want_state.total)
  for name in ("first", "second"):
    np.testing.assert_array_equal(history[name], want[name])
  # ... and both are the run in memory.
  in_memory = {"views": (np.zeros((26, 8, 8, 3), np.float32),), "labels": labels}
  memory_state, _ = jhash.fit(method, key, in_memory, progress=False)
  assert int(state.total) == int(memory_state.total)


def _config(root, **dataset):
  config = runs.load_config("mch_papers", "quick").unlock()
  entry = {**config.datasets.nuswide_21.to_dict(), "root": str(root), **dataset}
  config.datasets = {"nuswide_21": entry}  # anew: any value, as a config of one's own
  return config


@pytest.fixture(scope="module")
def lists(tmp_path_factory):
  root = tmp_path_factory.mktemp("nuswide")
  _write_tiny_nuswide(root, np.random.default_rng(0))
  return root


@pytest.mark.parametrize(
  "changes, message",
  [
    ({"stream": "yes"}, r"nuswide_21.stream: must be True or False; got 'yes'"),
    ({"resize": 40}, r"resize set how a streamed set is read; with stream=False .* change nothing"),
    ({"stream": True, "resize": 20}, r"image_size 28, the crop, is larger than resize 20, the"),
    (
      {"stream": True, "image_size": 300},
      r"larger than resize 256 \(the default, 256\).* at least 300",
    ),
    ({"stream": True, "eval_batch_size": 0}, r"eval_batch_size: must be an int >= 1; got 0"),
    ({"stream": True, "worker_count": -1}, r"worker_count: must be an int >= 0; got -1"),
  ],
)
def test_streaming_keys_are_checked_before_training(lists, changes, message):
  with pytest.raises(harness.ConfigError, match=message):
    retrieval.validate(_config(lists, **changes))


@pytest.mark.filterwarnings("ignore:nuswide_21")  # the lists are not NUS-WIDE's sizes
def test_what_cannot_stream_is_refused_before_any_cell_trains(lists, tmp_path):
  config = _config(lists, stream=True)
  config.evaluation.controls = True
  with pytest.raises(harness.ConfigError, match=r"controls read the database's pixels in memory"):
    retrieval.validate(config)
  config = _config(lists, stream=True)
  config.methods = {
    "adsh": {
      "method": "adsh",
      "batch_size": 32,
      "rounds": 1,
      "steps_per_round": 2,
      "num_samples": 50,
    }
  }
  config.tables = ("map",)
  config.plots.curves = {}
  config.evaluation.sweep = {}
  with pytest.raises(
    harness.ConfigError,
    match=r"adsh .* cannot train from a stream: adsh's phase 'codes' trains on the whole set",
  ):
    runs.run_config(config.lock(), tmp_path / "run")
  assert not (tmp_path / "run").exists()  # refused before the workdir kept anything
  cifar = runs.load_config("papers", "quick").unlock()
  cifar.datasets.cifar10.stream = True
  with pytest.raises(
    harness.ConfigError,
    match=r"stream: only the list sets .* take the streaming keys; protocol 'cifar10' is always",
  ):
    retrieval.validate(cifar)


@pytest.mark.parametrize(
  "name, arg", [("papers", "coco,stream"), ("mch_papers", "nuswide_21,stream")]
)
def test_the_papers_configs_stream_a_list_set_with_the_methods_that_can(name, arg):
  config = runs.load_config(name, arg)
  retrieval.validate(config)
  entry = next(iter(config.datasets.values()))
  assert entry.stream is True and entry.protocol == arg.split(",")[0]
  methods = {spec.get("base", spec.method) for spec in config.methods.values()}
  assert methods == {"ksh", "hashnet", "dch", "mmhh"}  # all but ADSH
  # ... each network reading the pipeline's per-channel normalised images as they come
  for spec in config.methods.values():
    assert spec.get("base_options", spec).standardize is False
  everything = runs.load_config(name, arg.split(",")[0])
  assert everything.datasets[next(iter(everything.datasets))].stream is False
  with pytest.raises(ValueError, match=r"',stream' streams a list set's image files; use it after"):
    runs.load_config("papers", "cifar10,stream")
  with pytest.raises(ValueError, match=r"',stream' is given twice"):  # was: "use it after"
    runs.load_config(name, arg + ",stream")
  # stream=False on the command line: the networks standardise again (was: kept False)
  config = runs.load_config(name, arg)
  next(iter(config.datasets.values())).stream = False
  for spec in config.methods.values():
    assert spec.get("base_options", spec).standardize is True
