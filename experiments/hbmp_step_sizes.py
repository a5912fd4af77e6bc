"""HBMP's step-size rules on the class-level Fashion-MNIST setting.

Residual curves come from the pursuit alone on the 10-class affinity, all bits as one
compiled call (``extras.pursuit.run``; the rule is data in the pursuit's state, so
one compilation serves the three rules and every seed); mAP from class-level HBMP with
learned hash functions, per rule and code length, ranked with the alphas and with plain
Hamming distance. The HBMP cells' key is ``cell_key(seed, "fashion-mnist", "hbmp",
bits)``, the retrieval trainer's: the ``regress`` cells equal the single-label table's
cells of the same hash functions. Writes ``results.json``, ``residual.png`` and
``map_vs_bits.png``, and prints the tables.
"""

from __future__ import annotations

import time

import numpy as np

import jhash
from jhash import data as jdata
from experiments import harness
from experiments import hbmp_common
from experiments import plots

NUM_CLASSES = 10
KEYS = (
  "trainer",
  "seed",
  "step_sizes",
  "max_bits",
  "repeats",
  "bits",
  "hash_function",
  "hash_options",
  "dataset",
  "checkpoint_every",
)


def validate(config) -> None:
  """Raise ``ConfigError`` for an unknown key, protocol option, rule or hash function."""
  harness.check_keys(config, KEYS)
  harness.check_counts(config, ("repeats", "max_bits", "checkpoint_every"))
  harness.check_entries(config, ("step_sizes", "bits"))
  try:
    jhash.methods.hbmp(config.max_bits, num_items=NUM_CLASSES, hash_function=None)
  except ValueError as e:
    raise harness.ConfigError(f"config.max_bits: {e}") from None
  for rule in config.step_sizes:
    harness.check_choice(rule, jhash.methods.hbmp_parts.STEP_SIZES, "config.step_sizes")
  harness.check_choice(config.hash_function, list(config.hash_options), "config.hash_function")
  try:
    jdata.check_protocol("fashion-mnist", config.dataset)
    for rule in config.step_sizes:
      for bits in config.bits:
        hbmp_common.hbmp_method(
          bits, config.hash_function, config, num_items=NUM_CLASSES, step_size=rule
        )
  except (KeyError, TypeError, ValueError) as e:
    raise harness.ConfigError(f"config: {e}") from None


def load_data(config):
  """(train, query, database) of Fashion-MNIST as ``config.dataset`` asks, before any
  cell trains: a setting the protocol refuses, or a split without queries or training
  items, is a ``ConfigError`` naming ``config.dataset``."""
  return harness.load_split(
    lambda: jdata.load_protocol(
      "fashion-mnist", config.seed, images=True, **config.dataset.to_dict()
    ),
    "config.dataset",
    ("training items", "queries", "database items"),
  )


def residual_curves(config) -> dict:
  """Relative residual norm per bit, per rule: mean, min and max over seeds."""
  affinity = hbmp_common.class_affinity(NUM_CLASSES, config.max_bits)
  methods = {
    rule: jhash.methods.hbmp(
      config.max_bits, num_items=NUM_CLASSES, step_size=rule, hash_function=None
    )
    for rule in config.step_sizes
  }
  out = {}
  for rule, method in methods.items():
    runs = []
    for r in range(config.repeats):
      state = method.extras.pursuit.run(affinity, harness.cell_key(config.seed, "residual", r))
      runs.append(np.asarray(state.residual_norms) / float(state.initial_norm))
    runs = np.array(runs)
    out[rule] = {
      "mean": runs.mean(0).tolist(),
      "min": runs.min(0).tolist(),
      "max": runs.max(0).tolist(),
    }
  return out


def train_and_evaluate(config, workdir) -> dict:
  validate(config)
  started = time.time()
  batches = load_data(config)
  with harness.Workdir(workdir, config) as wd:
    cells = [("residual", lambda: residual_curves(config))]
    for bits in config.bits:
      # One key per code length: the rules differ only in their step sizes.
      key = harness.cell_key(config.seed, "fashion-mnist", "hbmp", bits)
      for rule in config.step_sizes:
        cell = f"{rule}/{bits}"
        cells.append(
          (
            cell,
            lambda c=cell, b=bits, r=rule, k=key: hbmp_common.hbmp_cell(
              wd,
              c,
              hbmp_common.hbmp_method(
                b, config.hash_function, config, num_items=NUM_CLASSES, step_size=r
              ),
              k,
              batches,
              config.checkpoint_every,
            ),
          )
        )
    results = harness.run_cells(cells, wd)
    table = summarise(config, results)
    print(table)
    make_plots(config, results, wd.path)
    harness.write_results(wd, config, results, started, extra={"table": table})
  return results


def summarise(config, results) -> str:
  marks = [b for b in (8, 16, 24, 32, 40, 48, 64) if b <= config.max_bits]
  rows = [
    [rule] + [results["residual"][rule]["mean"][b - 1] for b in marks] for rule in config.step_sizes
  ]
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
  plots.panels(
    [
      {
        "title": "10-class affinity",
        "xlabel": "bits",
        "ylabel": "||Q_t||_F / ||Q_0||_F",
        "series": [
          {
            "label": rule,
            "x": bits,
            "y": curves[rule]["mean"],
            "band": (curves[rule]["min"], curves[rule]["max"]),
            "style": "-",
          }
          for rule in config.step_sizes
        ],
      }
    ],
    workdir / "residual.png",
  )
  code_bits = list(config.bits)
  plots.panels(
    [
      {
        "title": f"Fashion-MNIST, {config.hash_function} hash functions",
        "xlabel": "bits",
        "ylabel": "mAP (tie-aware)",
        "series": [
          {
            "label": f"{rule}, {name}",
            "x": code_bits,
            "y": [results[f"{rule}/{b}"][key] for b in code_bits],
            "style": "o-" if key == "map_weighted" else "s--",
          }
          for rule in config.step_sizes
          for key, name in (("map_weighted", "weighted"), ("map", "Hamming"))
        ],
      }
    ],
    workdir / "map_vs_bits.png",
  )
