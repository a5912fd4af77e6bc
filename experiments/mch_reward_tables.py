"""The loss on codes MCH's reward reads, per base model: a plot of the five tables.

Command:  python -m experiments.mch_reward_tables [--bits 32] [--out runs/mch_reward_tables]
Runtime:  seconds (no training: the tables depend on the base's loss and, for ADSH, on the
          training labels' ratio of similar to dissimilar pairs).
Writes:   OUT/reward_tables.png: for each base (KSH, HashNet, ADSH, DCH, MMHH) the loss of
          one pair of codes against their Hamming distance d, similar and dissimilar pairs,
          as ``extras.code_loss`` gives it (each row less its value at d = 0). A crop's
          keep reward is the fall of this loss when an item is found at a smaller d, so a
          dissimilar row that rises anywhere (MMHH's at its margin, ADSH's past
          ``K (1 + r) / 2``) rewards bringing a dissimilar item nearer there. Also
          OUT/reward_tables.json, the tables.
Protocol: the labels of the ``scenes`` protocol's training scenes, seed 0 (for ADSH's r).
Errors:   a ``--bits`` that is not an int in [1, 2**31 - 1], or an ``--out`` that is empty
          (it would write into the current directory) or a file: one line, ``error: ...``,
          exit status 2, before any table is made.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import jax
import numpy as np

import jhash
from experiments import harness
from experiments import plots

BASES = ("ksh", "hashnet", "adsh", "dch", "mmhh")


def tables(bits: int, labels: np.ndarray) -> dict[str, np.ndarray]:
  """Base name -> float [2, bits + 1]: its loss on codes (row 0 dissimilar, row 1 similar)."""
  x = np.zeros((labels.shape[0], 4), np.float32)  # the tables do not read the features
  batch = {"views": (x,), "labels": labels}
  out = {}
  for name in BASES:
    method = jhash.methods.REGISTRY[name](bits)
    state = jhash.init(method, jax.random.key(0), batch)
    out[name] = np.asarray(method.extras.code_loss(state), np.float64)
  return out


def plot(found: dict[str, np.ndarray], path) -> None:
  """One panel per base: each row of its table less its value at d = 0."""
  panels = {}
  for name, table in found.items():
    d = np.arange(table.shape[1])
    panels[name] = {
      "similar": (d, table[1] - table[1, 0]),
      "dissimilar": (d, table[0] - table[0, 0]),
    }
  plots.lines(panels, path, xlabel="Hamming distance d", ylabel="loss(d) - loss(0)")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
  """The command's arguments (module docstring); a ValueError naming a bad one."""
  parser = harness.ArgumentParser(
    prog="python -m experiments.mch_reward_tables",
    description=__doc__,
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  parser.add_argument("--bits", type=int, default=32, help="code length (default 32)")
  parser.add_argument(
    "--out", default="runs/mch_reward_tables", help="output folder (default %(default)s)"
  )
  args = parser.parse_args(argv)
  if not 1 <= args.bits <= harness.INT_RANGE[1]:
    raise ValueError(
      f"--bits: expected a code length, an int in [1, {harness.INT_RANGE[1]}] (JAX's "
      f"int32); got {args.bits}."
    )
  if not args.out.strip():
    raise ValueError(
      f"--out: expected a folder for reward_tables.png and .json; got {args.out!r} (an "
      "empty path would write into the current directory)."
    )
  if pathlib.Path(args.out).exists() and not pathlib.Path(args.out).is_dir():
    raise ValueError(f"--out: {args.out!r} is a file; expected a folder.")
  return args


def main(argv: list[str] | None = None) -> int:
  """The command on ``argv`` (default ``sys.argv[1:]``); the exit status."""
  try:
    args = parse(argv)
    out = pathlib.Path(args.out)
    try:
      out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
      raise ValueError(f"--out: cannot make the folder {args.out!r} ({error}).") from None
  except ValueError as error:
    return harness.script_error(error)
  train, _, _ = jhash.data.load_protocol("scenes", 0)
  found = tables(args.bits, train["labels"])
  plot(found, out / "reward_tables.png")
  harness.atomic_write_json(out / "reward_tables.json", {k: v.tolist() for k, v in found.items()})
  for name, table in found.items():
    rises = np.flatnonzero(np.diff(table[0]) > 0)
    where = f"rises from d = {rises[0]}" if rises.size else "falls everywhere"
    print(f"{name}: dissimilar row {where}; similar row rises by {table[1, -1] - table[1, 0]:.3f}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
