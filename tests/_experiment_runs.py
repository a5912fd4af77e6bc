"""Running an experiment's config in-process for the experiment tests, and reading its files.

Puts the repository root on ``sys.path`` when ``experiments`` is not importable (the
package runs from the repository, not from site-packages; a plain checkout run with
``python -m pytest`` from the root has it on the path already).
"""

import contextlib
import importlib
import importlib.util
import json
import pathlib
import struct
import sys

import jax

REPO = pathlib.Path(__file__).resolve().parents[1]
if importlib.util.find_spec("experiments") is None:
  sys.path.insert(0, str(REPO))

PNG = b"\x89PNG\r\n\x1a\n"
RESULT_KEYS = ("config", "seed", "versions", "wall_time_s", "table")


def load_config(name: str, arg: str | None = "quick"):
  """``get_config(arg)`` of ``experiments/configs/NAME.py`` (a locked ConfigDict)."""
  path = REPO / "experiments" / "configs" / f"{name}.py"
  spec = importlib.util.spec_from_file_location(f"_config_{name}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg)


def run_config(config, workdir, extra_keys=()) -> dict:
  """Run ``config`` with its trainer in ``workdir``; results.json as a dict, after
  checking it holds the harness's fields and ``extra_keys``."""
  trainer = importlib.import_module(config.trainer)
  trainer.train_and_evaluate(config, workdir)
  results = json.loads((pathlib.Path(workdir) / "results.json").read_text())
  for key in RESULT_KEYS + tuple(extra_keys):
    assert key in results, key
  return results


@contextlib.contextmanager
def xla_optimized():
  """XLA's optimizations on inside (the suite turns most off: ``tests/conftest.py``).

  For quick runs whose time is spent running, not compiling, programs: cdh_mfeat's SCM
  and CDH fits ran 2-7x faster optimized. The programs compute the same things.
  """
  before = jax.config.read("jax_disable_most_optimizations")
  jax.config.update("jax_disable_most_optimizations", False)
  try:
    yield
  finally:
    jax.config.update("jax_disable_most_optimizations", before)


def run(name: str, workdir, extra_keys=()) -> tuple:
  """Run the quick config of ``name`` in ``workdir``: (config, results.json as a dict)."""
  config = load_config(name)
  return config, run_config(config, workdir, extra_keys)


def assert_pngs(workdir, names) -> None:
  """Each file is a PNG of some substance (not an empty figure)."""
  for name in names:
    data = (pathlib.Path(workdir) / name).read_bytes()
    assert data[:8] == PNG and len(data) > 2000, name


def read_scalars(logdir) -> dict:
  """The scalars of every TensorBoard event file in ``logdir``: tag -> {step: value}.

  Event files are TFRecords (length uint64, its CRC, an ``Event`` proto, its CRC); the
  protos are tensorboardX's own, so no TensorFlow or TensorBoard is needed.
  """
  from experiments import harness

  harness.summary_writer_class()  # imports tensorboardX without PyTorch
  from tensorboardX.proto import event_pb2

  out = {}
  for path in sorted(pathlib.Path(logdir).glob("events.out.tfevents.*")):
    data = path.read_bytes()
    at = 0
    while at < len(data):
      (length,) = struct.unpack("<Q", data[at : at + 8])
      event = event_pb2.Event.FromString(data[at + 12 : at + 12 + length])
      at += 12 + length + 4
      for value in event.summary.value:
        out.setdefault(value.tag, {})[event.step] = value.simple_value
  return out


def edit_json(path, edit) -> None:
  """Apply ``edit`` (a function of the parsed JSON, changing it in place) to the file."""
  data = json.loads(pathlib.Path(path).read_text())
  edit(data)
  pathlib.Path(path).write_text(json.dumps(data))


#: The results of ``finish_cells``' cells: each a mAP plus a tenth of the config's seed.
CELL_MAPS = {"itq": 0.7, "lsh": 0.4, "pca": 0.2}


def finish_cells(path, config=None, cells=("itq", "lsh")) -> dict:
  """A run of ``cells`` (names of ``CELL_MAPS``) in the workdir ``path`` through the
  harness, without training: their results, ``results.json`` written; returns its
  metrics. ``config``: {"seed": 0} by default (its fingerprint is the run's)."""
  import time  # pylint: disable=import-outside-toplevel

  from experiments import harness  # pylint: disable=import-outside-toplevel

  config = {"seed": 0} if config is None else config
  offset = config.get("seed", 0) / 10
  with harness.Workdir(path, config) as wd:
    todo = [(c, lambda c=c: {"map": CELL_MAPS[c] + offset}) for c in cells]
    out = harness.run_cells(todo, wd, progress=False)
    harness.write_results(wd, config, out, time.time(), extra={"table": "| t |"})
  return json.loads((pathlib.Path(path) / "results.json").read_text())["metrics"]


def two_steps(path):
  """Checkpoints of cell "itq" at steps 4 (``w = arange(4)``) and 8 (``w + 1``) in the
  workdir ``path``: (the cell's checkpoint folder, the state's template)."""
  import numpy as np  # pylint: disable=import-outside-toplevel

  from experiments import _checkpoints  # pylint: disable=import-outside-toplevel
  from experiments import harness  # pylint: disable=import-outside-toplevel

  state = {"w": np.arange(4.0)}
  with harness.Workdir(path, {"seed": 0}) as wd:
    wd.save_state("itq", 4, state, {"loss": [1.0]})
    wd.save_state("itq", 8, {"w": np.arange(4.0) + 1}, {"loss": [1.0, 0.5]})
  folder = pathlib.Path(path) / "checkpoints" / _checkpoints._safe("itq")  # pylint: disable=protected-access
  return folder, jax.eval_shape(lambda: state)


def load_error(path, template, cell="itq") -> str:
  """The message of the ``WorkdirError`` that restoring ``cell`` in ``path`` raises."""
  import pytest  # pylint: disable=import-outside-toplevel

  from experiments import harness  # pylint: disable=import-outside-toplevel

  with harness.Workdir(path, {"seed": 0}) as wd, pytest.raises(harness.WorkdirError) as error:
    wd.load_state(cell, template)
  return str(error.value)
