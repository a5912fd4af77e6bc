"""CDH at scale: Fashion-MNIST as two views (top and bottom image halves), chunked B-step.

The same cells and protocols as ``cdh_mfeat`` (cross-view "top->bottom" and
"bottom->top", and the database coded by the learned codes, "top->B" and
"bottom->B"), on the 60,000 training images as the training set and database, with
queries from the test images. CDH's B-step runs on chunks of ``config.cdh.chunk_size``
items (the paper's 10,000); ``gamma`` is fixed (from the mfeat experiment, see the
config). Writes ``results.json`` and ``map_vs_bits.png`` and prints the table, fit
times included.
"""

from __future__ import annotations

import time

import numpy as np

from jhash import data as jdata
from experiments import cdh_common as common
from experiments import harness

KEYS = (
  "trainer",
  "seed",
  "bits",
  "dataset",
  "gamma",
  "cdh",
  "baselines",
  "baseline_options",
  "checkpoint_every",
  "baseline_checkpoint_every",
)


def train_and_evaluate(config, workdir) -> dict:
  common.validate(config, KEYS)
  harness.check_keys(config.dataset, ("train_per_class", "query_per_class"), "config.dataset")
  started = time.time()
  try:
    data = fashion_data(config.dataset, config.seed)
  except ValueError as e:  # a split count the protocol cannot draw
    raise harness.ConfigError(f"config.dataset: {e}") from None
  print(common.describe(data), flush=True)
  with harness.Workdir(workdir, config) as wd:
    cells = []
    for bits in config.bits:
      cells += common.method_cells(config, wd, data, bits)
    results = harness.run_cells(cells, wd)
    table = common.summarise(config, results, data["names"])
    print(table)
    common.map_plot(
      config, results, data["names"], wd.path / "map_vs_bits.png", "Fashion-MNIST halves"
    )
    harness.write_results(
      wd, config, results, started, extra={"table": table, "protocol": common.protocol(data)}
    )
  return results


def fashion_data(spec: dict, seed: int) -> dict:
  """Two-view Fashion-MNIST: batches ``train`` (= the database) and ``query``, view ``names``.

  ``spec``: ``train_per_class`` (None: all 60,000 training images; else drawn per
  class), ``query_per_class`` (queries drawn per class from the 10,000 test images).
  Each view is centred per pixel and scaled by one number, its root mean square after
  centring, both from the training items (so the average pixel has unit variance and
  pixels keep their relative scales; no blow-up of near-constant border pixels).
  """
  train, test = jdata.load_fashion_mnist("train"), jdata.load_fashion_mnist("test")
  train_index = np.arange(train.labels.shape[0])
  if spec.get("train_per_class"):
    train_index = jdata.split_per_class(train.labels, 0, spec["train_per_class"], seed)["train"]
  query_index = jdata.split_per_class(test.labels, spec["query_per_class"], 0, seed)["query"]
  train_views = jdata.make_two_view(train.views[0][train_index], train.labels[train_index])
  query_views = jdata.make_two_view(test.views[0][query_index], test.labels[query_index])
  batch = lambda ds: {"views": ds.views, "labels": ds.labels.astype(np.int32)}
  train_batch, query_batch = common.centre_and_scale(batch(train_views), batch(query_views))
  return {"train": train_batch, "query": query_batch, "names": tuple(train_views.view_names)}
