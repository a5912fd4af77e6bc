"""HBMP with learned hash functions on yeast (multi-label), beside ITQ and LSH.

The pursuit fits the affinity of the training set's unique label sets; each training gene
is given its label set's code, and the hash functions map the 103 features onto it.
Writes ``results.json``, ``map_vs_bits.png`` and ``ndcg_vs_bits.png``, and prints the
table.
"""

from __future__ import annotations

import pathlib
import time

import jax
import numpy as np

from jhash import data as jdata
from experiments import harness
from experiments import plots
from experiments import hbmp_common


def yeast_batches(config):
  """(train, query, database) batches; train is the database, features standardised."""
  ds = jdata.load_yeast()
  split = jdata.split_random(ds.num_items, config.num_queries,
                             ds.num_items - config.num_queries, seed=config.seed)
  x = ds.views[0].astype(np.float32)
  train_x = x[split["train"]]
  x = (x - train_x.mean(0)[None, :]) / np.maximum(train_x.std(0), 1e-6)[None, :]
  take = lambda idx: {"views": (x[idx],), "labels": ds.labels[idx]}
  return take(split["train"]), take(split["query"]), take(split["database"])


def train_and_evaluate(config, workdir) -> dict:
  started = time.time()
  workdir = pathlib.Path(workdir)
  ckpt = harness.Checkpointer(workdir, config)
  key = jax.random.PRNGKey(config.seed)
  batches = yeast_batches(config)
  num_sets = hbmp_common.unique_label_set_count(batches[0]["labels"])
  print(f"yeast: {batches[0]['labels'].shape[0]} train ({num_sets} label sets), "
        f"{batches[1]['labels'].shape[0]} queries, {batches[2]['labels'].shape[0]} database "
        "items", flush=True)
  cells = []
  for b_index, bits in enumerate(config.bits):
    for kind in config.hash_functions:
      cell = f"hbmp-{kind}/{bits}"
      cells.append((cell, lambda c=cell, b=bits, k=kind, ck=harness.cell_key(key, b_index):
                    hbmp_common.hbmp_cell(
                        ckpt, c, hbmp_common.hbmp_method(
                            b, k, config, level="label_sets", metric=config.metric,
                            num_items=num_sets, step_size=config.step_size),
                        ck, batches, config.checkpoint_every, ndcg_k=config.ndcg_k)))
    for m_index, (name, kwargs) in enumerate(config.baselines.items()):
      cell = f"{name}/{bits}"
      cells.append((cell, lambda c=cell, b=bits, n=name, kw=kwargs,
                    ck=harness.cell_key(key, b_index, 100 + m_index):
                    hbmp_common.baseline_cell(ckpt, c, n, b, ck, batches, dict(kw),
                                              config.checkpoint_every, ndcg_k=config.ndcg_k)))
  results = harness.run_cells(cells, ckpt)
  table = summarise(config, results)
  print(table)
  make_plots(config, results, workdir)
  harness.write_results(workdir, config, results, started,
                        extra={"table": table, "num_label_sets": num_sets})
  return results


def method_names(config) -> list[str]:
  return [f"hbmp-{k}" for k in config.hash_functions] + list(config.baselines)


def summarise(config, results) -> str:
  rows = []
  for name in method_names(config):
    cells = [results[f"{name}/{b}"] for b in config.bits]
    rankings = [("Hamming", "")] + ([("weighted", "_weighted")] if name.startswith("hbmp")
                                    else [])
    for ranking, suffix in rankings:
      rows.append([name, ranking] + [c["map" + suffix] for c in cells]
                  + [c["ndcg" + suffix] for c in cells])
  header = (["method", "ranking"] + [f"mAP@{b}" for b in config.bits]
            + [f"NDCG@{config.ndcg_k}, {b} bits" for b in config.bits])
  return harness.format_table(rows, header)


def make_plots(config, results, workdir) -> None:
  bits = list(config.bits)
  for metric, label, path in (("map", "mAP (share a label)", "map_vs_bits.png"),
                              ("ndcg", f"NDCG@{config.ndcg_k} (shared labels)",
                               "ndcg_vs_bits.png")):
    series = []
    for name in method_names(config):
      series.append({"label": name, "x": bits,
                     "y": [results[f"{name}/{b}"][metric] for b in bits],
                     "style": "s--" if name.startswith("hbmp") else "o-"})
      if name.startswith("hbmp"):
        series.append({"label": f"{name} (weighted)", "x": bits,
                       "y": [results[f"{name}/{b}"][metric + "_weighted"] for b in bits]})
    plots.panels([{"title": "yeast", "xlabel": "bits", "ylabel": label,
                         "series": series}], workdir / path)
