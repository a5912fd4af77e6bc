"""Run one experiment: ``python -m experiments.main --config PATH[:ARG] --workdir DIR``.

The config file defines ``get_config(arg)`` (``arg`` is the text after ``:``,
e.g. ``quick``) returning a config whose ``trainer`` names the module that holds
``train_and_evaluate(config, workdir)``. Rerunning with the same workdir resumes.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import pathlib
import sys


def load_config(spec: str):
  """Load ``path/to/config.py[:arg]`` and call its ``get_config(arg)``."""
  path, _, arg = spec.partition(":")
  file = pathlib.Path(path)
  if not file.is_file():
    raise SystemExit(f"--config: no config file at {path!r}")
  module_spec = importlib.util.spec_from_file_location(f"_config_{file.stem}", file)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  return module.get_config(arg or None)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", required=True, help="config file, optionally :arg (e.g. :quick)")
  parser.add_argument("--workdir", required=True, help="run directory (resumed if it exists)")
  args = parser.parse_args(argv)
  config = load_config(args.config)
  trainer = importlib.import_module(config.trainer)
  trainer.train_and_evaluate(config, args.workdir)
  return 0


if __name__ == "__main__":
  sys.exit(main())
