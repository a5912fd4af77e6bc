"""Run one experiment: ``python -m experiments.main --config FILE[:ARG] --workdir DIR``.

The config file (a path, relative to the current directory or absolute) defines
``get_config(arg)`` (``arg`` is the text after ``:``, e.g. ``quick``) returning a locked
``ml_collections.ConfigDict`` whose ``trainer`` names the module that holds
``train_and_evaluate(config, workdir)``. Any key can be overridden on the command line,
nested ones too: ``--config.seed=3``, ``--config.methods.itq.num_iters=20``; a key the
config does not have is an error. Rerunning with the same config and workdir resumes;
another config on that workdir is refused.
"""

from __future__ import annotations

import importlib
import sys

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Config file, optionally FILE:ARG (e.g. quickstart.py:quick).", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (resumed if it exists).")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  config = _CONFIG.value
  trainer = importlib.import_module(config.trainer)
  from experiments import harness  # after flag parsing: --help stays fast

  try:
    trainer.train_and_evaluate(config, _WORKDIR.value)
  except (harness.ConfigError, harness.WorkdirError) as e:
    sys.exit(f"error: {e}")


if __name__ == "__main__":
  app.run(main)
