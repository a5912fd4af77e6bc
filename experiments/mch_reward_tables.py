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
"""

from __future__ import annotations

import pathlib

import jax
import numpy as np
from absl import app
from absl import flags

import jhash
from experiments import harness
from experiments import plots

BASES = ("ksh", "hashnet", "adsh", "dch", "mmhh")
_BITS = flags.DEFINE_integer("bits", 32, "Code length.")
_OUT = flags.DEFINE_string("out", "runs/mch_reward_tables", "Output folder.")


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


def main(argv) -> None:
  del argv
  out = pathlib.Path(_OUT.value)
  out.mkdir(parents=True, exist_ok=True)
  train, _, _ = jhash.data.load_protocol("scenes", 0)
  found = tables(_BITS.value, train["labels"])
  plot(found, out / "reward_tables.png")
  harness.atomic_write_json(out / "reward_tables.json", {k: v.tolist() for k, v in found.items()})
  for name, table in found.items():
    rises = np.flatnonzero(np.diff(table[0]) > 0)
    where = f"rises from d = {rises[0]}" if rises.size else "falls everywhere"
    print(f"{name}: dissimilar row {where}; similar row rises by {table[1, -1] - table[1, 0]:.3f}")


if __name__ == "__main__":
  app.run(main)
