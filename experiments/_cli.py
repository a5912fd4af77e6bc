"""The absl entry of the experiment scripts (``experiments.main``, ``mch_crop_rewards``), with
the conventions of the argparse ones: ``--help`` prints the script's docstring and flags
and exits 0; a flag absl refuses is one ``error:`` line (status 2); Ctrl-C that the
script's ``main`` does not handle itself (one while its flags are read, too) is one line,
not a traceback."""

from __future__ import annotations

import sys
from typing import Callable

from absl import app
from absl import flags


def parse_flags(argv: list[str]) -> list[str]:
  """absl's flag parsing, a refused flag as one ``error:`` line and status 2."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as error:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    print(f"error: {lines[-1] if lines else error}", file=sys.stderr)
    sys.exit(2)


def run(main: Callable, flags_parser: Callable = parse_flags) -> None:
  """``app.run(main)`` with the conventions of the module docstring."""
  if any(a in ("--help", "-h", "--helpshort", "--helpfull") for a in sys.argv[1:]):
    doc = (sys.modules["__main__"].__doc__ or "").strip()
    print(doc + "\n\nflags:\n" + flags.FLAGS.main_module_help())
    sys.exit(0)
  from experiments import _stop  # pylint: disable=import-outside-toplevel

  try:
    app.run(main, flags_parser=flags_parser)
  except KeyboardInterrupt:
    sys.exit("interrupted: the script stopped (Ctrl-C or a signal) before it finished.")
  except Exception:  # an import cut short by the signal fails as an ImportError
    if _stop.asked():
      sys.exit("interrupted: the script stopped (Ctrl-C or a signal) before it finished.")
    raise
