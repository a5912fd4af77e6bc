"""The quickstart trainer: the retrieval trainer's Fashion-MNIST run and a cross-view CDH
run on mfeat, in subfolders of one workdir, summed up in one table and one bar plot.

Config keys (``experiments/configs/quickstart.py``):

* ``trainer``: ``"experiments.quickstart"``; ``seed`` and ``bits``, shared by both parts
  (the config file links the parts' own ``seed`` and ``bits`` to them).
* ``fashion``: an ``experiments.retrieval`` config, run in ``WORKDIR/fashion_mnist``.
* ``cross_view``: CDH and cross-view baselines on two views of mfeat, run here in
  ``WORKDIR/mfeat`` with the cells of ``experiments.cdh_mfeat`` (same keys: ``cell_key(seed,
  bits)`` for CDH, ``cell_key(seed, bits, name)`` for a baseline) but CDH at the fixed
  ``gamma`` instead of one chosen on held-out items. Keys: ``seed``, ``bits``, ``dataset``
  (``views``, ``query_per_class``, ``validation_per_class``: 0, none held out), ``cdh``
  (``jhash.methods.cdh`` options besides gamma), ``gamma``, ``baselines`` (of "cvh", "scm",
  "cmfh"), ``baseline_options``, ``checkpoint_every`` (CDH's sweeps),
  ``baseline_checkpoint_every``.

Both parts are checked before either trains, and each is resumable in its subfolder
(``experiments.harness``). The workdir gets the combined ``results.json`` (``table``: the
printed Markdown table, rows data set x method x what is measured, one column per code
length; ``metrics``: ``PART/METHOD/BITS`` -> ``{measure: value}`` and ``PART/chance``;
``parts``: each part's subfolder and config key) and ``map_bars.png``; each subfolder holds
its part's own ``results.json``, table and plots.
"""

from __future__ import annotations

import pathlib
import re
import time

import numpy as np

from experiments import cdh_common as common
from experiments import harness
from experiments import plots
from experiments import retrieval

KEYS = ("trainer", "seed", "bits", "fashion", "cross_view")
CROSS_VIEW_KEYS = (
  "seed",
  "bits",
  "dataset",
  "cdh",
  "gamma",
  "baselines",
  "baseline_options",
  "checkpoint_every",
  "baseline_checkpoint_every",
)
# Subfolders of the workdir.
FASHION_DIR, CROSS_VIEW_DIR = "fashion_mnist", "mfeat"
# How the table names the methods (registry name -> title).
TITLES = {
  "lsh": "LSH",
  "itq": "ITQ",
  "hbmp": "HBMP",
  "dch": "DCH",
  "cdh": "CDH",
  "scm": "SCM",
  "cvh": "CVH",
  "cmfh": "CMFH",
}
DEEP = ("ksh", "hashnet", "adsh", "dch", "mmhh")
DATASET_TITLES = {"fashion-mnist": "Fashion-MNIST", "mfeat": "mfeat"}


# ----------------------------------------------------------------------------- config


def validate(config) -> None:
  """Raise ``ConfigError`` for anything either part names that does not exist."""
  harness.check_keys(config, KEYS)
  check_shared(config)
  within("fashion", retrieval.validate, config.fashion)
  cv = config.cross_view
  within("cross_view", common.validate, cv, CROSS_VIEW_KEYS)
  within("cross_view", common.mfeat_data, cv.dataset, cv.seed, False)  # small: before training
  if isinstance(cv.gamma, bool) or not isinstance(cv.gamma, (int, float)) or cv.gamma < 0:
    raise harness.ConfigError(f"config.cross_view.gamma: must be a number >= 0; got {cv.gamma!r}.")
  if config.fashion.trainer != "experiments.retrieval":
    raise harness.ConfigError(
      "config.fashion.trainer: the quickstart runs its Fashion-MNIST part with "
      f"'experiments.retrieval'; got {config.fashion.trainer!r}."
    )
  if config.fashion.seed != config.seed or cv.seed != config.seed:
    raise harness.ConfigError(
      "config.fashion.seed and config.cross_view.seed must be config.seed (one table); "
      "set config.seed."
    )
  if list(config.fashion.bits) != list(config.bits) or list(cv.bits) != list(config.bits):
    raise harness.ConfigError(
      "config.fashion.bits and config.cross_view.bits must be config.bits (one table); "
      "set config.bits."
    )


SHARED = (
  "config.bits is shared: config.fashion.bits and config.cross_view.bits refer to it, so "
  "setting any of the three sets all"
)


def check_shared(config) -> None:
  """``config.bits`` (shared by both parts) first, named as the user set it, and the
  Fashion part's curve length among them."""
  bits = config.bits
  if (
    not isinstance(bits, (tuple, list))
    or not bits
    or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in bits)
  ):
    raise harness.ConfigError(
      f"config.bits: must be a tuple of ints >= 1 ({SHARED}); got {bits!r}."
    )
  curve = config.fashion.plots.get("pr_curve_bits")
  if curve not in (None, 0, *bits):
    raise harness.ConfigError(
      f"config.fashion.plots.pr_curve_bits: {curve} is not one of config.bits {tuple(bits)} "
      f"({SHARED}); set it to one of them, or 0 for no curves."
    )


def within(part: str, check, *args) -> None:
  """``check(*args)`` for the part ``config.PART``; its ``ConfigError`` names the keys
  from the quickstart's config (``config.fashion.methods.itq``, not ``config.methods.itq``)."""
  try:
    check(*args)
  except harness.ConfigError as error:
    raise harness.ConfigError(re.sub(r"\bconfig(?=[.:])", f"config.{part}", str(error))) from None


# ----------------------------------------------------------------------------- the parts


def cross_view(config, workdir) -> dict:
  """CDH at ``config.gamma`` and the baselines on two mfeat views (cdh_mfeat's cells and
  keys, no gamma selection), resumable in ``workdir``; writes its results.json and table.

  Returns cell (``METHOD/BITS``) -> result (``cdh_common.cdh_cell``, ``baseline_cell``).
  """
  started = time.time()
  data = common.mfeat_data(config.dataset, config.seed, select=False)
  print(f"mfeat {common.describe(data)}", flush=True)
  with harness.Workdir(workdir, config) as wd:
    cells = []
    for bits in config.bits:
      cells += cross_view_cells(config, wd, data, bits)
    results = harness.run_cells(cells, wd)
    table = cross_view_table(config, results, data["names"])
    print(table, flush=True)
    chance = common.chance_map(data["query"]["labels"], data["train"]["labels"])
    harness.write_results(
      wd,
      config,
      results,
      started,
      extra={"table": table, "protocol": common.protocol(data), "chance_map": chance},
    )
  return {"cells": results, "chance": chance, "names": data["names"]}


def cross_view_cells(config, wd, data, bits: int) -> list:
  """The cells of one code length: CDH at the fixed gamma, then each baseline."""
  name = f"cdh/{bits}"
  key = harness.cell_key(config.seed, bits)
  cells = [(name, lambda: common.cdh_cell(wd, name, config, key, data, bits, config.gamma))]
  for baseline in config.baselines:
    cell = f"{baseline}/{bits}"
    cells.append(
      (
        cell,
        lambda n=baseline, c=cell: common.baseline_cell(
          wd, c, n, bits, harness.cell_key(config.seed, bits, n), data, config
        ),
      )
    )
  return cells


def cross_view_table(config, results: dict, names) -> str:
  """Rows method x protocol (both directions, and the learned database codes), columns bits."""
  rows = []
  for method in ["cdh", *config.baselines]:
    cells = [results[f"{method}/{b}"] for b in config.bits]
    for proto in common.protocols(names):
      if any(proto in c for c in cells):
        rows.append([method, proto] + [c.get(proto, "n/a") for c in cells])
  return harness.format_table(rows, ["method", "protocol"] + [f"{b} bits" for b in config.bits])


def fashion_chance(config) -> dict:
  """Per data set of the Fashion part: the mAP of a random ranking (``chance_map``)."""
  from jhash import data as jdata

  out = {}
  for label, spec in config.datasets.items():
    spec = spec.to_dict()
    _, query, database = jdata.load_protocol(spec.pop("protocol"), config.seed, **spec)
    out[label] = common.chance_map(query["labels"], database["labels"])
  return out


# ----------------------------------------------------------------------------- the table


def method_title(spec, images: bool) -> str:
  """``LSH``, ``HBMP (linear)``, ``DCH (small CNN)``: the method and its network (a deep
  method's default network on 28 x 28 images is the small CNN)."""
  title = TITLES.get(spec.method, spec.method)
  if spec.method == "hbmp":
    return f"{title} ({spec.get('hash_function', 'linear')})"
  if spec.method in DEEP and images and spec.get("backbone") is None:
    return f"{title} (small CNN)"
  return title


def fashion_rows(config, metrics: dict, chance: dict) -> list[dict]:
  """Table rows of the Fashion part: chance, then each method's mAP per code length."""
  rows = []
  for label, spec in config.fashion.datasets.items():
    title = DATASET_TITLES.get(spec.protocol, label)
    every = {b: chance[label] for b in config.bits}
    rows.append(_row(title, "chance", "mAP", "-", f"{label}/chance", every))
    for m in sorted(config.fashion.methods, key=_order(config.fashion.methods)):
      mspec = config.fashion.methods[m]
      values = {b: metrics[retrieval.cell_name(label, m, b)]["map"] for b in config.bits}
      name = method_title(mspec, bool(spec.get("images")))
      rows.append(_row(title, name, "mAP", f"fashion.methods.{m}", label, values, m))
  return rows


def _order(methods):
  """Sort key: the baselines first, as ``TITLES`` lists the methods (the config's
  ``ConfigDict`` iterates its keys alphabetically)."""
  rank = {name: i for i, name in enumerate(TITLES)}
  return lambda label: (rank.get(methods[label].method, len(rank)), label)


def cross_view_rows(config, part: dict) -> list[dict]:
  """Table rows of the cross-view part: chance, then each method in both directions."""
  names = part["names"]
  title = f"mfeat {names[0]}/{names[1]}"
  directions = [f"{names[a]}->{names[b]}" for a, b in common.DIRECTIONS]
  every = {b: part["chance"] for b in config.bits}
  rows = [_row(title, "chance", "mAP", "-", f"{CROSS_VIEW_DIR}/chance", every)]
  sources = {"cdh": "cross_view.cdh, .gamma"}
  for method in [*config.cross_view.baselines, "cdh"]:
    source = sources.get(method, f"cross_view.baseline_options.{method}")
    for d in directions:
      values = {b: part["cells"][f"{method}/{b}"].get(d) for b in config.bits}
      rows.append(
        _row(title, TITLES[method], f"mAP {d}", source, CROSS_VIEW_DIR, values, method, d)
      )
  return rows


def _row(dataset, method, measured, source, part, values, label=None, measure="map") -> dict:
  """One table row; ``values``: bits -> number (None: not run); ``label`` None: chance."""
  return {
    "dataset": dataset,
    "method": method,
    "measured": measured,
    "config": source,
    "part": part,
    "label": label,
    "measure": measure,
    "values": values,
  }


def format_rows(config, rows: list[dict]) -> str:
  """The Markdown table: a column per code length (chance: the same in each)."""
  header = ["data set", "method", "measured", "config"] + [f"{b} bits" for b in config.bits]
  body = [
    [r["dataset"], r["method"], r["measured"], r["config"]]
    + ["n/a" if r["values"][b] is None else float(r["values"][b]) for b in config.bits]
    for r in rows
  ]
  return harness.format_table(body, header)


def combined_metrics(config, rows: list[dict]) -> dict:
  """``PART/METHOD/BITS`` -> ``{measure: value}``; ``PART/chance`` -> ``{"map": value}``."""
  out = {}
  for r in rows:
    if r["label"] is None:
      out[r["part"]] = {"map": r["values"][config.bits[0]]}
      continue
    for b, v in r["values"].items():
      out.setdefault(f"{r['part']}/{r['label']}/{b}", {})[r["measure"]] = v
  return out


def bar_plot(config, rows: list[dict], path) -> None:
  """``map_bars.png``: a panel per data set, a bar per method (and direction) and code
  length, chance as a dotted line."""
  panels = []
  for dataset in dict.fromkeys(r["dataset"] for r in rows):
    chance = next(r for r in rows if r["dataset"] == dataset and not r["label"])
    mine = [r for r in rows if r["dataset"] == dataset and r["label"]]
    labels = [r["method"] + r["measured"][len("mAP") :] for r in mine]
    series = [
      {
        "label": f"{b} bits",
        "values": [np.nan if r["values"][b] is None else r["values"][b] for r in mine],
      }
      for b in config.bits
    ]
    panels.append(
      {
        "title": dataset,
        "xlabel": "mAP (tie-aware)",
        "labels": labels,
        "series": series,
        "vlines": [chance["values"][config.bits[0]]],
      }
    )
  bits = f", {config.bits[0]} bits" if len(config.bits) == 1 else ""
  title = f"Quickstart: mAP over the whole database{bits} (dotted: chance)"
  plots.bars(panels, path, title=title)


# ----------------------------------------------------------------------------- the run


def train_and_evaluate(config, workdir) -> dict:
  """Run both parts in subfolders of ``workdir`` (resumable); print the combined table;
  write ``results.json`` and ``map_bars.png``."""
  validate(config)
  started = time.time()
  root = pathlib.Path(workdir)
  with harness.Workdir(root, config) as wd:
    fashion = retrieval.train_and_evaluate(config.fashion, root / FASHION_DIR)
    part = cross_view(config.cross_view, root / CROSS_VIEW_DIR)
    rows = fashion_rows(config, fashion, fashion_chance(config.fashion)) + cross_view_rows(
      config, part
    )
    table = format_rows(config, rows)
    print(f"\nQuickstart (seed {config.seed}):\n{table}", flush=True)
    bar_plot(config, rows, root / "map_bars.png")
    metrics = combined_metrics(config, rows)
    parts = {
      "fashion": f"{FASHION_DIR}/results.json",
      "cross_view": f"{CROSS_VIEW_DIR}/results.json",
    }
    harness.write_results(
      wd, config, metrics, started, extra={"table": table, "parts": parts, "seeds": [config.seed]}
    )
  return metrics
