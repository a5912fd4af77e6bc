"""The ``jhash`` command (console script ``jhash = "jhash._cli:main"``): ``jhash SUBCOMMAND``.

Subcommands:

* ``evaluate``: exact retrieval metrics of codes saved as ``.npy`` or ``.mat`` files
  (``jhash.evaluate``; ``jhash evaluate --help``).
"""

from __future__ import annotations

import argparse
import sys

COMMANDS = {
  "evaluate": "exact retrieval metrics (mAP under several conventions, precision@k, "
  "precision/recall within a Hamming radius) of codes saved as .npy or .mat files",
}


def _evaluate(argv: list[str]) -> int:
  from jhash import evaluate  # here: `jhash --help` stays quick

  return evaluate.main(argv, prog="jhash evaluate")


_RUN = {"evaluate": _evaluate}


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
    prog="jhash",
    description="jhash: learning to hash in JAX. Run `jhash COMMAND --help` for a command.",
  )
  commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
  for name, summary in COMMANDS.items():
    commands.add_parser(name, help=summary, add_help=False)
  return parser


def main(argv=None) -> int:
  """Run ``jhash`` on ``argv`` (default ``sys.argv[1:]``); return the exit status.

  ``jhash evaluate ...`` hands everything after ``evaluate`` to that command; anything else
  (``--help``, no command, an unknown one) is answered by the top-level parser.
  """
  argv = list(sys.argv[1:] if argv is None else argv)
  if argv and argv[0] in _RUN:
    return _RUN[argv[0]](argv[1:])
  _parser().parse_args(argv)  # prints help (exit 0) or the error (exit 2)
  return 2


if __name__ == "__main__":
  sys.exit(main())
