"""HBMP with learned hash functions on Fashion-MNIST (single label), beside ITQ and LSH.

Each cell fits one method at one code length on the training images and ranks the whole
database for every query. HBMP cells run the pursuit on the 10 classes and then the hash
functions (``hbmp(..., hash_function=...)``, one ``jhash.fit``); their codes come from
the images alone. Writes ``results.json``, ``map_vs_bits.png`` (weighted and plain
Hamming ranking for HBMP, plain for the baselines) and ``training.png`` (fraction of
mismatched training bits per epoch), and prints the mAP table.
"""

from __future__ import annotations

import pathlib
import time

import jax

from experiments import harness
from experiments import plots
from experiments import hbmp_common


def train_and_evaluate(config, workdir) -> dict:
  started = time.time()
  workdir = pathlib.Path(workdir)
  ckpt = harness.Checkpointer(workdir, config)
  key = jax.random.PRNGKey(config.seed)
  batches = hbmp_common.fashion_batches(config.dataset, config.seed)
  print(f"fashion-mnist: {batches[0]['labels'].shape[0]} train, "
        f"{batches[1]['labels'].shape[0]} queries, {batches[2]['labels'].shape[0]} database "
        "items", flush=True)
  cells = []
  for b_index, bits in enumerate(config.bits):
    for f_index, kind in enumerate(config.hash_functions):
      cell = f"hbmp-{kind}/{bits}"
      # The same key for every hash function: they fit the same target codes.
      cells.append((cell, lambda c=cell, b=bits, k=kind, ck=harness.cell_key(key, b_index):
                    hbmp_common.hbmp_cell(
                        ckpt, c, hbmp_common.hbmp_method(b, k, config, num_items=10,
                                                         step_size=config.step_size),
                        ck, batches, config.checkpoint_every)))
    for m_index, (name, kwargs) in enumerate(config.baselines.items()):
      cell = f"{name}/{bits}"
      cells.append((cell, lambda c=cell, b=bits, n=name, kw=kwargs,
                    ck=harness.cell_key(key, b_index, 100 + m_index):
                    hbmp_common.baseline_cell(ckpt, c, n, b, ck, batches, dict(kw),
                                              config.checkpoint_every)))
  results = harness.run_cells(cells, ckpt)
  table = summarise(config, results)
  print(table)
  make_plots(config, results, workdir)
  harness.write_results(workdir, config, results, started, extra={"table": table})
  return results


def method_names(config) -> list[str]:
  return [f"hbmp-{k}" for k in config.hash_functions] + list(config.baselines)


def summarise(config, results) -> str:
  rows = []
  for name in method_names(config):
    cells = [results[f"{name}/{b}"] for b in config.bits]
    rows.append([name, "Hamming"] + [c["map"] for c in cells])
    if name.startswith("hbmp"):
      rows.append([name, "weighted"] + [c["map_weighted"] for c in cells])
      rows.append([name, "query bit error"] + [c["query_bit_error"] for c in cells])
  header = ["method", "ranking"] + [f"mAP@{b} bits" for b in config.bits]
  return harness.format_table(rows, header)


def make_plots(config, results, workdir) -> None:
  bits = list(config.bits)
  series = []
  for name in method_names(config):
    series.append({"label": name, "x": bits, "y": [results[f"{name}/{b}"]["map"] for b in bits],
                   "style": "s--" if name.startswith("hbmp") else "o-"})
    if name.startswith("hbmp"):
      series.append({"label": f"{name} (weighted)", "x": bits,
                     "y": [results[f"{name}/{b}"]["map_weighted"] for b in bits]})
  plots.panels([{"title": "Fashion-MNIST, whole-database mAP", "xlabel": "bits",
                       "ylabel": "mAP (tie-aware)", "series": series}],
                     workdir / "map_vs_bits.png")
  panels = []
  for b in bits:
    panels.append({"title": f"{b} bits", "xlabel": "epoch",
                   "ylabel": "mismatched training bits", "series": [
                       {"label": kind, "x": list(range(1, len(curve) + 1)), "y": curve,
                        "style": "-"}
                       for kind in config.hash_functions
                       for curve in [results[f"hbmp-{kind}/{b}"]["epoch_bit_error"]]]})
  plots.panels(panels, workdir / "training.png",
                     title="Hash-function training (Figure 1(f)-style)")
