"""CDH on UCI mfeat, views pix and fou (the paper's Table 1), beside CDH-0, CVH, SCM and CMFH.

Cross-view retrieval: a query is coded from one view only (``views=(x_pix, None)``),
the database from the other view only (``(None, x_fou)``): "pix->fou", and the reverse
"fou->pix". The database is the training set, so the paper's second protocol, the
database coded by the codes learned for it (CDH's ``B``; CMFH's ``sign(V)``), costs
no more than a lookup: the rows "pix->B" and "fou->B". Relevance is the same class,
mAP (tie-aware) over the whole database.

CDH's ``gamma`` is chosen per code length (or once, at ``config.select_bits``) on a
validation split held out of the training set: CDH fits the rest at each grid value,
and the value with the highest validation mAP (mean of both directions) wins. The
paper's rule, the highest training objective, is recorded beside it: with ``J``
normalised as in ``jhash.methods.cdh`` its generative term is never negative, so that
rule picks the largest grid value.
"""

from __future__ import annotations

import pathlib
import time

import jax

from experiments import cdh_common as common
from experiments import harness


def train_and_evaluate(config, workdir) -> dict:
  started = time.time()
  workdir = pathlib.Path(workdir)
  ckpt = harness.Checkpointer(workdir, config)
  key = jax.random.PRNGKey(config.seed)
  data = common.mfeat_data(config.dataset, config.seed)
  print(common.describe(data), flush=True)
  cells = [(f"select/{b}",
            lambda b=b: common.select_cell(config, harness.cell_key(key, b), data, b))
           for b in selection_bits(config)]
  for bits in config.bits:
    cells += method_cells(config, ckpt, key, data, bits)
  results = harness.run_cells(cells, ckpt)
  table = common.summarise(config, results, data["names"])
  print(table)
  common.map_plot(config, results, data["names"], workdir / "map_vs_bits.png", "mfeat")
  harness.write_results(workdir, config, results, started,
                        extra={"table": table, "protocol": common.protocol(data)})
  return results


def selection_bits(config) -> list[int]:
  """The code lengths at which gamma is chosen: each, or ``config.select_bits`` alone."""
  return [config.select_bits] if config.get("select_bits") else list(config.bits)


def method_cells(config, ckpt, key, data, bits: int) -> list:
  """The cells of one code length: CDH (gamma from its ``select`` cell, run before),
  CDH-0 and the baselines."""
  cells = []
  ck = harness.cell_key(key, bits)
  chosen = lambda: ckpt.done(f"select/{config.get('select_bits') or bits}")["gamma"]
  cells.append((f"cdh/{bits}", lambda: common.cdh_cell(
      ckpt, f"cdh/{bits}", config, ck, data, bits, chosen())))
  cells.append((f"cdh-0/{bits}", lambda: common.cdh_cell(
      ckpt, f"cdh-0/{bits}", config, ck, data, bits, 0.0)))
  for index, name in enumerate(config.baselines):
    cells.append((f"{name}/{bits}", lambda n=name, i=index: common.baseline_cell(
        ckpt, f"{n}/{bits}", n, bits, harness.cell_key(key, bits, 100 + i), data, config)))
  return cells
