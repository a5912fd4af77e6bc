"""Running an experiment's config in-process for the experiment tests.

Puts the repository root on ``sys.path`` (the ``experiments`` package lives beside
``jhash``, not in it).
"""

import importlib
import importlib.util
import json
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
  sys.path.insert(0, str(REPO))

PNG = b"\x89PNG\r\n\x1a\n"
RESULT_KEYS = ("config", "seed", "versions", "wall_time_s", "table")


def load_config(name: str, arg: str | None = "quick"):
  """``get_config(arg)`` of ``experiments/configs/NAME.py``."""
  path = REPO / "experiments" / "configs" / f"{name}.py"
  spec = importlib.util.spec_from_file_location(f"_config_{name}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg)


def run(name: str, workdir, extra_keys=()) -> tuple:
  """Run the quick config of ``name`` in ``workdir``: (config, results.json as a dict),
  after checking the results file holds the harness's fields and ``extra_keys``."""
  config = load_config(name)
  trainer = importlib.import_module(config.trainer)
  trainer.train_and_evaluate(config, workdir)
  results = json.loads((pathlib.Path(workdir) / "results.json").read_text())
  for key in RESULT_KEYS + tuple(extra_keys):
    assert key in results, key
  return config, results


def assert_pngs(workdir, names) -> None:
  """Each file is a PNG of some substance (not an empty figure)."""
  for name in names:
    data = (pathlib.Path(workdir) / name).read_bytes()
    assert data[:8] == PNG and len(data) > 2000, name
