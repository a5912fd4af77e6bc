"""Quickstart: unsupervised baselines (LSH, ITQ) on real data, mAP by code length.

Writes ``results.json``, ``map_vs_bits.png``, ``pr_radius.png`` and
``itq_loss.png`` into the workdir and prints the mAP table.
"""

from __future__ import annotations

import pathlib
import time

import jax
import numpy as np

import jhash
from jhash import data as jdata
from experiments import harness
from experiments import plots


def load_dataset(name: str, spec: dict, seed: int):
  """(train batch, query batch, database batch) of one dataset under its protocol."""
  if name == "mfeat":
    ds = jdata.load_mfeat()
    views = ds.views
  elif name == "fashion-mnist":
    train, test = jdata.load_fashion_mnist("train"), jdata.load_fashion_mnist("test")
    images = np.concatenate([train.views[0], test.views[0]])
    views = (images.reshape(images.shape[0], -1).astype(np.float32) / 255.0,)
    ds = train._replace(views=views, labels=np.concatenate([train.labels, test.labels]))
  else:
    raise ValueError(f"unknown dataset {name!r}")
  split = jdata.split_per_class(ds.labels, spec["query_per_class"], spec["train_per_class"],
                                seed=seed)
  database = split["database"]
  if spec.get("database_limit"):
    keep = np.random.default_rng(seed).permutation(database.size)[:spec["database_limit"]]
    database = np.sort(database[keep])
  train = split["train"] if spec.get("train_per_class") else database
  take = lambda idx: {"views": tuple(v[idx] for v in views), "labels": ds.labels[idx]}
  return take(train), take(split["query"]), take(database)


def evaluate_cell(config, method_name, bits, key, batches, ckpt, cell):
  train, query, database = batches
  factory = jhash.methods.REGISTRY[method_name]
  method = factory(bits, **config.method_kwargs.get(method_name, {}))
  state, history = harness.fit_resumable(ckpt, cell, method, key, train, None,
                                         config.checkpoint_every)
  q_codes = jhash.encode(method, state, query)
  db_codes = jhash.encode(method, state, database)
  args = (q_codes, db_codes, query["labels"], database["labels"])
  result = {
      "map": jhash.metrics.mean_average_precision(*args, ties=config.map_ties),
      "map_index_ties": jhash.metrics.mean_average_precision(*args, ties="index"),
      "precision_at_100": float(jhash.metrics.precision_at_k(*args, 100)[0]),
      "history": {k: v.tolist() for k, v in history.items()},
  }
  if bits == config.pr_curve_bits:
    curve = jhash.metrics.pr_curve_by_radius(*args)
    result["pr_radius"] = {k: v.tolist() for k, v in curve.items()}
  return result


def train_and_evaluate(config, workdir) -> dict:
  started = time.time()
  workdir = pathlib.Path(workdir)
  ckpt = harness.Checkpointer(workdir, config)
  key = jax.random.PRNGKey(config.seed)
  results = {}
  for d_index, (dname, spec) in enumerate(config.datasets.items()):
    batches = load_dataset(dname, spec, config.seed)
    print(f"{dname}: {batches[0]['labels'].shape[0]} train, {batches[1]['labels'].shape[0]} "
          f"queries, {batches[2]['labels'].shape[0]} database items", flush=True)
    cells = []
    for m_index, mname in enumerate(config.methods):
      for bits in config.bits:
        cell = f"{dname}/{mname}/{bits}"
        cell_key = jax.random.fold_in(key, hash((d_index, m_index, bits)) % (2**31))
        cells.append((cell, lambda c=cell, m=mname, b=bits, k=cell_key:
                      evaluate_cell(config, m, b, k, batches, ckpt, c)))
    results.update(harness.run_cells(cells, ckpt))
  table = summarise(config, results)
  print(table)
  make_plots(config, results, workdir)
  harness.write_results(workdir, config, results, started, extra={"table": table})
  return results


def summarise(config, results) -> str:
  rows = []
  for dname in config.datasets:
    for mname in config.methods:
      rows.append([dname, mname] + [results[f"{dname}/{mname}/{b}"]["map"] for b in config.bits])
  header = ["dataset", "method"] + [f"mAP@{b} bits" for b in config.bits]
  return harness.format_table(rows, header)


def make_plots(config, results, workdir) -> None:
  bits = list(config.bits)
  panels = {d: {m: (bits, [results[f"{d}/{m}/{b}"]["map"] for b in bits]) for m in config.methods}
            for d in config.datasets}
  plots.lines(panels, workdir / "map_vs_bits.png", xlabel="bits", ylabel="mAP (tie-aware)")
  pr = {}
  for d in config.datasets:
    pr[d] = {}
    for m in config.methods:
      curve = results[f"{d}/{m}/{config.pr_curve_bits}"].get("pr_radius")
      if curve:
        pr[d][m] = (curve["recall"], curve["precision"])
  plots.lines(pr, workdir / "pr_radius.png", xlabel="recall", ylabel="precision",
              title=f"Precision-recall within Hamming radius r = 0..{config.pr_curve_bits}")
  if "itq" in config.methods:
    loss = {d: {f"{b} bits": (None, None) for b in bits} for d in config.datasets}
    for d in config.datasets:
      for b in bits:
        y = results[f"{d}/itq/{b}"]["history"]["quantization_loss"]
        loss[d][f"{b} bits"] = (list(range(1, len(y) + 1)), y)
    plots.lines(loss, workdir / "itq_loss.png", xlabel="iteration",
                ylabel="quantisation loss / n", marker="")
