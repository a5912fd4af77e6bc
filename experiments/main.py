"""Run one experiment: ``python -m experiments.main --config FILE[:ARG] --workdir DIR``.

The config file (a path, relative to the current directory or absolute) defines
``get_config(arg)`` (``arg`` is the text after ``:``, e.g. ``quick``) returning a locked
``ml_collections.ConfigDict`` whose ``trainer`` names the module that holds
``train_and_evaluate(config, workdir)``. Any key can be overridden on the command line,
nested ones too: ``--config.seed=3``, ``--config.methods.itq.num_iters=20``; a key the
config does not have is an error. Rerunning with the same config and workdir resumes;
another config on that workdir is refused.

Over several processes (hosts): start the same command in each with
``JHASH_COORDINATOR_ADDRESS``, ``JHASH_NUM_PROCESSES`` and ``JHASH_PROCESS_ID`` set
(``experiments/_processes.py``; docs/scaling.md).
"""

from __future__ import annotations

from experiments import _stop

if __name__ == "__main__":  # first: a stop while Python starts waits for the imports
  _stop.install()  # (_stop.arm); not when imported (a test's Ctrl-C stays pytest's)

import difflib
import importlib
import importlib.machinery
import importlib.util
import pathlib
import re
import sys

from absl import flags
from absl import logging
from ml_collections import config_flags

from experiments import _cli

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Config file, optionally FILE:ARG (e.g. baselines.py:quick).", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (resumed if it exists).")
flags.mark_flags_as_required(["config", "workdir"])


def _config_keys(spec: str, path: tuple[str, ...]) -> list[str]:
  """The keys of the config ``spec`` (FILE[:ARG]) at ``path`` (empty: the top level)."""
  file, _, arg = spec.partition(":")
  node = _load_module(pathlib.Path(file), "_config").get_config(arg or None)
  for name in path:
    node = node[name]
  return sorted(node.keys()) if hasattr(node, "keys") else []


def _load_module(path: pathlib.Path, name: str):
  """The Python file ``path`` run as a module (any suffix: ml_collections reads a config
  file whatever its name)."""
  loader = importlib.machinery.SourceFileLoader(name, str(path))
  module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader))
  loader.exec_module(module)
  return module


def _config_spec(args: list[str]) -> str | None:
  """The FILE[:ARG] of ``--config=SPEC`` or ``--config SPEC`` in ``args``, or None."""
  spec = next((a.split("=", 1)[1] for a in args if a.startswith("--config=")), None)
  if spec is None and "--config" in args[:-1]:
    spec = args[args.index("--config") + 1]
  return spec


def _check_config_file(spec: str) -> None:
  """Exit with one ``error:`` line when the config file ``spec`` (FILE[:ARG]) cannot be
  loaded: it does not compile or fails on import, has no ``get_config``, or its
  ``get_config(ARG)`` fails or returns something other than a ``ConfigDict``. (Run
  before absl parses the flags, whose errors here are tracebacks or misleading.)"""
  import ml_collections

  file, _, arg = spec.partition(":")
  if not file:
    return
  path = pathlib.Path(file)
  where = f"--config {spec}"
  if not path.is_file() and pathlib.Path(spec).is_file():
    sys.exit(
      f"error: {where}: the config file's name holds ':', which separates the file from "
      "its argument (FILE:ARG); rename the file."
    )
  if not path.is_file():
    return  # absl's own message names a missing file or a folder
  try:
    module = _load_module(path, "_config_check")
  except SyntaxError as error:
    sys.exit(f"error: {where}: {file} is not valid Python ({error.msg}, line {error.lineno}).")
  except Exception as error:
    sys.exit(f"error: {where}: importing {file} failed ({type(error).__name__}: {error}).")
  get_config = getattr(module, "get_config", None)
  if not callable(get_config):
    sys.exit(f"error: {where}: {file} defines no function get_config(arg).")
  try:
    config = get_config(arg or None)
  except SystemExit as error:
    sys.exit(f"error: {where}: get_config({arg or None!r}) of {file} exited ({error.code!r}).")
  except Exception as error:
    sys.exit(
      f"error: {where}: get_config({arg or None!r}) of {file} failed "
      f"({type(error).__name__}: {_last_line(error).rstrip('.')})."
    )
  if not isinstance(config, ml_collections.ConfigDict):
    sys.exit(
      f"error: {where}: get_config({arg or None!r}) of {file} must return an "
      f"ml_collections.ConfigDict; got {type(config).__name__}."
    )
  _check_trainer(config, where)


def _check_trainer(config, where: str):
  """The trainer module that ``config.trainer`` names (exit with one ``error:`` line when
  the key is missing, not a module name, or the module has no ``train_and_evaluate``)."""
  name = config.get("trainer")
  if name is None:
    sys.exit(f"error: {where}: the config has no key 'trainer' (the module to run).")
  if not isinstance(name, str) or not name.strip() or name.startswith("."):
    sys.exit(f"error: {where}: config.trainer must name a module (a str); got {name!r}.")
  try:
    trainer = importlib.import_module(name)
  except ModuleNotFoundError as error:
    sys.exit(f"error: {where}: config.trainer {name!r}: no such module ({error}).")
  if not callable(getattr(trainer, "train_and_evaluate", None)):
    sys.exit(
      f"error: {where}: config.trainer {name!r} has no function "
      "train_and_evaluate(config, workdir)."
    )
  return trainer


def _parse_flags(argv: list[str]) -> list[str]:
  """absl's flag parsing, with a config override of a key the config does not have
  refused by a message naming the key and the keys there are (not a traceback)."""
  for flag in ("--config", "--workdir"):
    given = [a for a in argv[1:] if a == flag or a.startswith(flag + "=")]
    if len(given) > 1:
      sys.exit(f"error: {flag} is given {len(given)} times; give it once.")
  trainer = next((a for a in argv[1:] if a.split("=", 1)[0] == "--config.trainer"), None)
  if trainer is not None:
    sys.exit(
      f"error: {trainer}: a config file is written for its trainer (its keys are that "
      "trainer's); run another trainer with a config file of its own."
    )
  spec = _config_spec(argv[1:])
  if spec is not None and "--help" not in argv and "--helpfull" not in argv:
    _check_config_file(spec)
  for arg in argv[1:]:
    if arg.startswith("--config."):
      path = arg[len("--config.") :].split("=", 1)[0]
      parts = path.split(".")
      bad = [i for i, p in enumerate(parts) if not p.isidentifier() and "[" not in p]
      if bad:
        name = parts[bad[0]]
        sys.exit(
          f"error: {arg.split('=', 1)[0]}: {name!r} is not a Python name (an override's "
          f"path is read as Python){_python_name_hint(spec, parts[: bad[0]], name)}."
        )
  try:
    return flags.FLAGS(argv)
  except flags.Error as error:  # a flag's value (--config.seed=abc) or a missing flag
    sys.exit(f"error: {_last_line(error)}")
  except (AttributeError, KeyError, IndexError) as error:
    args = argv[1:]
    overrides = [a for a in args if a.startswith("--config.")]
    indexed = next((a for a in overrides if "[" in a.split("=", 1)[0]), None)
    if isinstance(error, IndexError) and indexed is not None:
      key = indexed[len("--config.") :].split("[", 1)[0]
      sys.exit(
        f"error: {indexed.split('=', 1)[0]}: config.{key} is a tuple, which cannot be "
        f"changed one entry at a time; give it whole, e.g. --config.{key}='(8, 16)'."
      )
    found = re.search(r"'([^'\\]+)", str(error))
    missing = found.group(1) if found else ""
    for override in overrides:
      dotted = override[len("--config.") :].split("=", 1)[0].split(".")
      if missing not in dotted or spec is None:
        continue
      at = dotted.index(missing)
      keys = _config_keys(spec, tuple(dotted[:at]))
      close = difflib.get_close_matches(missing, keys, n=1)
      hint = f" (did you mean {close[0]!r}?)" if close else ""
      where = ".".join(["config", *dotted[:at]])
      shown = f"its keys: {', '.join(keys)}" if keys else "it has no keys"
      sys.exit(f"error: {override}: {where} has no key {missing!r}{hint}; {shown}.")
    shown = " ".join(overrides) or "the overrides"
    sys.exit(
      f"error: {shown}: no such key in the config ({type(error).__name__}: {error}); an "
      "override names its key by dotted Python names, --config.datasets.NAME.root=..."
    )


def _python_name_hint(spec: str | None, parent: list[str], name: str) -> str:
  """For an override path's part ``name`` that is not a Python name: the config's key at
  ``parent`` it most likely means, else ``name`` with each other character as ``_``."""
  keys: list[str] = []
  if spec is not None:
    try:
      keys = _config_keys(spec, tuple(parent))
    except Exception:  # a parent that is not in the config: no keys to offer
      keys = []
  plain = re.sub(r"\W", "_", name.strip().strip("'\"")) or "_"
  plain = f"_{plain}" if plain[0].isdigit() else plain
  close = difflib.get_close_matches(plain, keys, n=1, cutoff=0.5)
  if close:
    return f"; did you mean {close[0]!r}? (its keys there: {', '.join(keys)})"
  return f"; the configs name their keys with _ for other characters ({plain!r})"


def _last_line(error: BaseException) -> str:
  """The last line of an error's message (ml_collections puts the cause there)."""
  lines = [line.strip() for line in str(error).splitlines() if line.strip()]
  return lines[-1] if lines else type(error).__name__


def main(argv) -> None:
  if len(argv) > 1:
    sys.exit(
      f"error: unexpected arguments: {' '.join(argv[1:])} (the flags are --config FILE[:ARG], "
      "--workdir DIR and --config.KEY=VALUE overrides)."
    )
  logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  from experiments import _processes

  try:  # a run over several processes (JHASH_NUM_PROCESSES > 1): join it first
    _processes.join_if_asked()
  except (ValueError, RuntimeError) as error:
    sys.exit(f"error: {error}")
  try:
    config = _CONFIG.value
    config.get("trainer")  # ml_collections reports a failed load on first use
  except (OSError, ValueError) as error:  # a config file missing, or its get_config failing
    sys.exit(f"error: --config: {_last_line(error)}")
  trainer = _check_trainer(config, "--config")
  workdir = _WORKDIR.value
  if not workdir.strip():
    sys.exit(
      f"error: --workdir {workdir!r}: expected a directory path; got an empty one "
      "(the run would write into the current directory)."
    )
  from experiments import harness  # after flag parsing: --help stays fast
  from jhash import data as jdata

  _stop.arm()  # imports done: a stop raises where it arrives (one before it, here)

  try:
    harness.check_int_ranges(config)  # before the workdir: a seed or count JAX cannot hold
    trainer.train_and_evaluate(config, workdir)
  except (harness.ConfigError, harness.WorkdirError) as e:
    sys.exit(f"error: {e}")
  except (jdata.DataFormatError, OSError) as e:  # a file that went bad or away mid-run
    sys.exit(
      f"error: {harness.first_line(e, 1000)}\nFix it and run the same command again: "
      f"finished cells are kept in {workdir}, and a cell in progress resumes from its last "
      "checkpoint."
    )
  except KeyboardInterrupt:
    sys.exit(
      f"interrupted: the run stopped. Run the same command again to go on: finished cells "
      f"are kept in {workdir}, and a cell in progress resumes from its last checkpoint."
    )
  except Exception as e:  # pylint: disable=broad-except
    if not _processes.several():
      raise
    _processes.stop(e, workdir)


if __name__ == "__main__":
  _cli.run(main, flags_parser=_parse_flags)
