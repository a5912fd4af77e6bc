"""HBMP's step-size rules on the class-level Fashion-MNIST setting.

Residual curves come from ``infer_codes`` on the 10-class affinity (the rule is data in
the pursuit's state, so one compilation serves the three rules and every seed); mAP from
class-level HBMP with learned hash functions, per rule and code length, ranked with the
alphas and with plain Hamming distance. Writes ``results.json``, ``residual.png`` and
``map_vs_bits.png``, and prints the tables.
"""

from __future__ import annotations

import pathlib
import time

import jax
import numpy as np

from jhash.methods import _hbmp as hb
from experiments import harness
from experiments import plots
from experiments import hbmp_common

NUM_CLASSES = 10


def residual_curves(config, key) -> dict:
  """Relative residual norm per bit, per rule: mean, min and max over seeds."""
  affinity = hb.class_affinity(NUM_CLASSES, config.max_bits)
  out = {}
  for rule in config.step_sizes:
    runs = []
    for r in range(config.repeats):
      res = hb.infer_codes(affinity, config.max_bits, jax.random.fold_in(key, r),
                           step_size=rule)
      runs.append(np.asarray(res.residual_norms) / float(res.initial_norm))
    runs = np.array(runs)
    out[rule] = {"mean": runs.mean(0).tolist(), "min": runs.min(0).tolist(),
                 "max": runs.max(0).tolist()}
  return out


def train_and_evaluate(config, workdir) -> dict:
  started = time.time()
  workdir = pathlib.Path(workdir)
  ckpt = harness.Checkpointer(workdir, config)
  key = jax.random.PRNGKey(config.seed)
  batches = hbmp_common.fashion_batches(config.dataset, config.seed)
  cells = [("residual", lambda: residual_curves(config, jax.random.fold_in(key, 1000)))]
  for b_index, bits in enumerate(config.bits):
    for rule in config.step_sizes:
      cell = f"{rule}/{bits}"
      # One key per code length: the rules differ only in their step sizes.
      cells.append((cell, lambda c=cell, b=bits, r=rule, ck=harness.cell_key(key, b_index):
                    hbmp_common.hbmp_cell(
                        ckpt, c, hbmp_common.hbmp_method(
                            b, config.hash_function, config, num_items=NUM_CLASSES,
                            step_size=r),
                        ck, batches, config.checkpoint_every)))
  results = harness.run_cells(cells, ckpt)
  table = summarise(config, results)
  print(table)
  make_plots(config, results, workdir)
  harness.write_results(workdir, config, results, started, extra={"table": table})
  return results


def summarise(config, results) -> str:
  marks = [b for b in (8, 16, 24, 32, 40, 48, 64) if b <= config.max_bits]
  rows = [[rule] + [results["residual"][rule]["mean"][b - 1] for b in marks]
          for rule in config.step_sizes]
  residual = harness.format_table(rows, ["rule"] + [f"residual@{b}" for b in marks])
  rows = []
  for rule in config.step_sizes:
    cells = [results[f"{rule}/{b}"] for b in config.bits]
    rows.append([rule, "weighted"] + [c["map_weighted"] for c in cells])
    rows.append([rule, "Hamming"] + [c["map"] for c in cells])
  maps = harness.format_table(rows, ["rule", "ranking"] + [f"mAP@{b} bits" for b in config.bits])
  return residual + "\n\n" + maps


def make_plots(config, results, workdir) -> None:
  bits = list(range(1, config.max_bits + 1))
  curves = results["residual"]
  plots.panels([{"title": "10-class affinity", "xlabel": "bits",
                       "ylabel": "||Q_t||_F / ||Q_0||_F", "series": [
                           {"label": rule, "x": bits, "y": curves[rule]["mean"],
                            "band": (curves[rule]["min"], curves[rule]["max"]), "style": "-"}
                           for rule in config.step_sizes]}],
                     workdir / "residual.png")
  code_bits = list(config.bits)
  plots.panels([{"title": f"Fashion-MNIST, {config.hash_function} hash functions",
                       "xlabel": "bits", "ylabel": "mAP (tie-aware)", "series": [
                           {"label": f"{rule}, {name}", "x": code_bits,
                            "y": [results[f"{rule}/{b}"][key] for b in code_bits],
                            "style": "o-" if key == "map_weighted" else "s--"}
                           for rule in config.step_sizes
                           for key, name in (("map_weighted", "weighted"), ("map", "Hamming"))]}],
                     workdir / "map_vs_bits.png")
