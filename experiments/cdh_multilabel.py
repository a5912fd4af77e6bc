"""CDH against CDH-0 on two multi-label data sets cut into two views, over seeds.

On mfeat's ten clean classes the first sweep already gives one code per class, so
CDH's generative term has nothing left to decide; the paper's gains were on noisier
multi-label data. Two such sets, each cut into two views:

* ``canvases``: the multi-label Fashion-MNIST canvases (``load_protocol("canvases")``:
  1-3 items on a 2 x 2 grid of 28 x 28 cells, labels = the set of their classes), cut
  into halves by ``make_two_view`` (``split``; "halves": rows 0-27 and 28-55, 1,568
  pixels each), centred per pixel and scaled by the view's RMS (training statistics). A
  half shows 0-2 of a canvas's items, so a view often lacks labels the canvas carries,
  and an empty half shows nothing at all.
* ``yeast``: the 103 features (standardised with the training genes' statistics by
  ``load_protocol("yeast")``) cut at column ``cut``: columns 0 .. cut-1 and cut .. 102
  (with cut = 52, the file's Att1-Att52 and Att53-Att103). A cut of the columns in their
  order, not by what they measure.

One cell per data set, seed and code length. The seed draws the protocol's split (and,
for the canvases, the canvases themselves) and CDH's key. The protocol's held-out items
are cut at random into test queries and validation queries; the training items are the
database. CDH is fitted on the training items at ``gamma = 0`` (CDH-0) and at each value
of ``config.gamma_grid``, every fit from the cell's key (the same initial view models and
the same random draws in each sweep: ``jhash.cdh_select_gamma``), so CDH and CDH-0 differ
in gamma only. CDH is the grid value with the best validation mAP (mean of both
directions, validation queries against the training items). Both are scored on the test
queries: cross-view mAP in both directions ("a->b": query coded from view a alone,
database from view b alone) and against the learned codes ("a->B"); relevance = at least
one shared label; tie-aware mAP over the whole database. ``chance`` is the expected mAP of
a random ranking. The test-query mAP of every grid value is recorded too, never used to
choose.

Writes ``results.json`` (every cell; ``summary``: per data set, direction and length the
mean and std over seeds of CDH and CDH-0, the paired difference CDH - CDH-0 and the
number of seeds CDH wins), ``map_vs_bits.png``, and prints the table. A cell is the unit
of resumption: its fits are not checkpointed, so a killed run redoes at most one cell.
"""

from __future__ import annotations

import time

import numpy as np

import jhash
from jhash import data as jdata
from experiments import cdh_common as common
from experiments import harness
from experiments import plots

KEYS = ("trainer", "seeds", "bits", "datasets", "cdh", "gamma_grid")
DATASET_KEYS = {
  "canvases": (
    "num_items",
    "num_train",
    "num_queries",
    "num_validation",
    "grid",
    "num_objects",
    "split",
  ),
  "yeast": ("num_train", "num_queries", "num_validation", "cut"),
}


def train_and_evaluate(config, workdir) -> dict:
  check_config(config)
  started = time.time()
  loaded, protocol = {}, {}

  def data(name: str, seed: int) -> dict:  # the last data set drawn, kept for its cells
    if (name, seed) not in loaded:
      loaded.clear()
      loaded[(name, seed)] = load_data(name, config.datasets[name], seed)
      protocol.setdefault(name, common.protocol(loaded[(name, seed)]))
      print(f"{name}, seed {seed}: {common.describe(loaded[(name, seed)])}", flush=True)
    return loaded[(name, seed)]

  with harness.Workdir(workdir, config) as wd:
    cells = [
      (
        cell_name(name, seed, bits),
        lambda name=name, seed=seed, bits=bits: gamma_cell(
          config, harness.cell_key(seed, name, bits), data(name, seed), bits
        ),
      )
      for name in config.datasets
      for seed in config.seeds
      for bits in config.bits
    ]
    results = harness.run_cells(cells, wd)
    summary = summarise(config, results)
    table = summary_table(config, summary)
    print(table)
    map_plot(config, summary, wd.path / "map_vs_bits.png")
    for name in config.datasets:  # sizes and widths; the same for every seed
      if name not in protocol:
        protocol[name] = common.protocol(load_data(name, config.datasets[name], config.seeds[0]))
    harness.write_results(
      wd, config, results, started, extra={"table": table, "summary": summary, "protocol": protocol}
    )
  return results


def check_config(config) -> None:
  """Raise ``ConfigError`` for an unknown or missing key, data set or setting."""
  common.validate(config, KEYS)
  harness.check_keys(config.datasets, DATASET_KEYS, "config.datasets", required=())
  for name, spec in config.datasets.items():
    harness.check_keys(spec, DATASET_KEYS[name], f"config.datasets.{name}")
    _check_dataset(name, spec)
  if "gamma" in config.cdh:
    raise harness.ConfigError("config.cdh: gamma is chosen from config.gamma_grid; remove it.")
  if not config.gamma_grid or min(config.gamma_grid) <= 0:
    raise harness.ConfigError(
      f"config.gamma_grid must hold values > 0 (gamma = 0 is CDH-0, "
      f"fitted anyway); got {tuple(config.gamma_grid)!r}."
    )
  if not config.seeds or not config.bits or not config.datasets:
    raise harness.ConfigError("config.seeds, config.bits and config.datasets must not be empty.")


YEAST_GENES = 2417  # the yeast set's items (jhash.data.load_yeast)


def _check_dataset(name: str, spec) -> None:
  """The data set's sizes and options, before any data is made or any cell trains."""
  where = f"config.datasets.{name}"
  counts = ("num_train", "num_queries", "num_validation")
  harness.check_counts(spec, counts + (("num_items",) if name == "canvases" else ()), where=where)
  total = YEAST_GENES if name == "yeast" else spec.num_items
  used = sum(int(spec[c]) for c in counts)
  if used > total:
    raise harness.ConfigError(
      f"{where}: num_train + num_queries + num_validation = {used} exceeds the "
      f"{total:,} items of {name}{'' if name == 'yeast' else ' (num_items)'}; got "
      + ", ".join(f"{c}={spec[c]}" for c in counts)
      + "."
    )
  if name == "yeast":
    if isinstance(spec.cut, bool) or not isinstance(spec.cut, int) or not 1 <= spec.cut < 103:
      raise harness.ConfigError(
        f"{where}.cut: must be an int in [1, 102] (yeast's 103 features cut in two); got "
        f"{spec.cut!r}."
      )
    return
  harness.check_choice(spec.split, ("halves", "left_right"), f"{where}.split")
  grid, objects = spec.grid, spec.num_objects
  ints = lambda v: all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in v)
  if not isinstance(grid, (tuple, list)) or len(grid) != 2 or not ints(grid):
    raise harness.ConfigError(
      f"{where}.grid: must be (rows, columns), two ints >= 1; got {grid!r}."
    )
  pair = objects if isinstance(objects, (tuple, list)) else (objects, objects)
  if len(pair) != 2 or not ints(pair) or pair[0] > pair[1] or pair[1] > grid[0] * grid[1]:
    raise harness.ConfigError(
      f"{where}.num_objects: must be an int or a pair (fewest, most) of ints in [1, "
      f"{grid[0] * grid[1]}] (the grid's cells); got {objects!r}."
    )


def cell_name(dataset: str, seed: int, bits: int) -> str:
  return f"{dataset}/seed{seed}/{bits}"


# ----------------------------------------------------------------------------- data


def load_data(name: str, spec, seed: int) -> dict:
  """Batches ``train`` (= ``fit``, the database), ``query`` and ``validation``, and the
  view ``names``, of data set ``name`` (module docstring) for ``seed``."""
  return canvas_data(spec, seed) if name == "canvases" else yeast_data(spec, seed)


def canvas_data(spec, seed: int) -> dict:
  """The canvases protocol's training and held-out canvases, each cut into two views."""
  train, held_out, _ = jdata.load_protocol(
    "canvases",
    seed,
    num_items=spec["num_items"],
    num_train=spec["num_train"],
    num_queries=spec["num_queries"] + spec["num_validation"],
    grid=tuple(spec["grid"]),
    num_objects=tuple(spec["num_objects"]),
    images=True,
  )
  cut = lambda batch: jdata.make_two_view(
    batch["views"][0], batch["labels"], spec["split"], scale=1.0
  )  # the protocol's pixels are in [0, 1]
  train, held_out = cut(train), cut(held_out)
  names = tuple(train.view_names)
  train, held_out = common.centre_and_scale(train.batch(), held_out.batch())
  return with_validation(train, held_out, spec["num_validation"], seed, names)


def yeast_data(spec, seed: int) -> dict:
  """The yeast protocol's training and held-out genes, features cut at ``spec.cut``."""
  train, held_out, _ = jdata.load_protocol(
    "yeast",
    seed,
    num_train=spec["num_train"],
    num_queries=spec["num_queries"] + spec["num_validation"],
  )
  cut, width = spec["cut"], train["views"][0].shape[1]
  halves = lambda batch: {
    "views": (batch["views"][0][:, :cut], batch["views"][0][:, cut:]),
    "labels": batch["labels"],
  }
  names = (f"att1-{cut}", f"att{cut + 1}-{width}")
  return with_validation(halves(train), halves(held_out), spec["num_validation"], seed, names)


def with_validation(
  train: dict, held_out: dict, num_validation: int, seed: int, names: tuple
) -> dict:
  """``held_out`` cut at random into ``num_validation`` validation queries and the test
  queries; the training items are also the database (``fit``: gamma is chosen on them)."""
  n = held_out["labels"].shape[0]
  split = jdata.split_random(n, num_validation, 0, seed=seed)
  take = lambda index: {
    "views": tuple(x[index] for x in held_out["views"]),
    "labels": held_out["labels"][index],
  }
  return {
    "train": train,
    "fit": train,
    "query": take(split["database"]),
    "validation": take(split["query"]),
    "names": names,
  }


# ----------------------------------------------------------------------------- cells


def gamma_cell(config, key, data, bits: int) -> dict:
  """Fit CDH at gamma 0 and at each grid value (one key); CDH = the grid value with the
  best validation mAP. Scores CDH and CDH-0 on the test queries (``cross_view_maps``).

  Returns ``cdh`` and ``cdh-0`` (the mAPs), the chosen ``gamma``, ``chance``,
  ``difference`` (CDH - CDH-0, mean of the two cross-view directions), and per grid point
  (gamma 0 first) the validation and test-query mAPs and ``J`` with its two terms.
  """
  names, train = data["names"], data["train"]
  grid = [0.0] + [float(g) for g in config.gamma_grid]
  method = common.cdh_method(bits, config.cdh, 0.0)  # for encoding only
  validation_maps = []

  def score(state):
    maps = common.cross_view_maps(method, state, data["validation"], train, names)
    validation_maps.append(maps)
    return float(np.mean(list(maps.values())))

  started = time.time()
  sel = jhash.cdh_select_gamma(bits, key, train, grid, score=score, **common.plain(config.cdh))
  select_seconds = time.time() - started
  chosen = 1 + int(np.argmax(sel.scores[1:]))  # gamma > 0 only; gamma = 0 is CDH-0
  query_maps = [
    common.cross_view_maps(method, state, data["query"], train, names, learned=state.codes)
    for state in sel.states
  ]
  cross = [f"{names[a]}->{names[b]}" for a, b in common.DIRECTIONS]
  cdh, zero = query_maps[chosen], query_maps[0]
  return {
    "names": list(names),
    "gamma": grid[chosen],
    "cdh": cdh,
    "cdh-0": zero,
    "difference": float(np.mean([cdh[p] - zero[p] for p in cross])),
    "chance": common.chance_map(data["query"]["labels"], train["labels"], bits),
    "grid": grid,
    "validation_map": sel.scores.tolist(),
    "validation_maps": validation_maps,
    "query_maps": query_maps,
    "objective": sel.objective.tolist(),
    "semantic": sel.semantic.tolist(),
    "generative": sel.generative.tolist(),
    "select_seconds": select_seconds,
  }


# ----------------------------------------------------------------------------- report


def spread(values) -> dict:
  """Mean and std (ddof 1; 0 for one value) of ``values``, and the values."""
  values = np.asarray(values, np.float64)
  std = float(np.std(values, ddof=1)) if values.size > 1 else 0.0
  return {"mean": float(np.mean(values)), "std": std, "values": values.tolist()}


def summarise(config, results) -> dict:
  """Per data set: ``directions`` (cross-view, then against the learned codes) and per
  direction and length (a string) ``cdh``, ``cdh-0`` and ``difference`` (CDH - CDH-0,
  seed by seed) as ``spread``, ``wins`` (seeds where CDH is higher); ``gamma`` (the
  chosen value per seed) and ``chance`` per length."""
  out = {}
  for name in config.datasets:
    cells = {(s, b): results[cell_name(name, s, b)] for s in config.seeds for b in config.bits}
    names = cells[(config.seeds[0], config.bits[0])]["names"]
    entry = {"directions": common.protocols(names), "gamma": {}, "chance": {}}
    for b in config.bits:
      column = [cells[(s, b)] for s in config.seeds]
      entry["gamma"][str(b)] = [c["gamma"] for c in column]
      entry["chance"][str(b)] = spread([c["chance"] for c in column])
    for proto in entry["directions"]:
      entry[proto] = {}
      for b in config.bits:
        cdh = np.asarray([cells[(s, b)]["cdh"][proto] for s in config.seeds])
        zero = np.asarray([cells[(s, b)]["cdh-0"][proto] for s in config.seeds])
        entry[proto][str(b)] = {
          "cdh": spread(cdh),
          "cdh-0": spread(zero),
          "difference": spread(cdh - zero),
          "wins": int(np.sum(cdh > zero)),
        }
    out[name] = entry
  return out


def summary_table(config, summary) -> str:
  """Rows data set x direction x (CDH, CDH-0, paired difference with wins); columns bits."""
  bits = [str(b) for b in config.bits]
  seeds = len(config.seeds)
  pm = lambda s, sign="": f"{s['mean']:{sign}.4f} ± {s['std']:.4f}"
  rows = []
  for name, entry in summary.items():
    for proto in entry["directions"]:
      cells = [entry[proto][b] for b in bits]
      rows.append([name, "CDH", proto] + [pm(c["cdh"]) for c in cells])
      rows.append([name, "CDH-0", proto] + [pm(c["cdh-0"]) for c in cells])
      rows.append(
        [name, "CDH - CDH-0 (wins)", proto]
        + [f"{pm(c['difference'], '+')} ({c['wins']}/{seeds})" for c in cells]
      )
    rows.append([name, "chance", "any"] + [pm(entry["chance"][b]) for b in bits])
    rows.append(
      [name, "CDH gamma per seed", ""]
      + [", ".join(f"{g:g}" for g in entry["gamma"][b]) for b in bits]
    )
  return harness.format_table(
    rows, ["data set", "method", "direction"] + [f"{b} bits" for b in bits]
  )


def map_plot(config, summary, path) -> None:
  """Cross-view mAP against bits, one panel per data set and direction: CDH and CDH-0
  (mean, shaded +- one std over seeds) and chance."""
  bits = list(config.bits)
  panels = []
  for name, entry in summary.items():
    chance = [entry["chance"][str(b)]["mean"] for b in bits]
    for proto in entry["directions"][: len(common.DIRECTIONS)]:
      series = []
      for method in ("cdh", "cdh-0"):
        stats = [entry[proto][str(b)][method] for b in bits]
        mean = np.asarray([s["mean"] for s in stats])
        std = np.asarray([s["std"] for s in stats])
        series.append(
          {
            "label": method.upper(),
            "x": bits,
            "y": mean.tolist(),
            "band": ((mean - std).tolist(), (mean + std).tolist()),
          }
        )
      series.append({"label": "chance", "x": bits, "y": chance, "style": "k:"})
      panels.append(
        {
          "title": f"{name}: {proto}",
          "xlabel": "bits",
          "ylabel": "mAP (tie-aware)",
          "series": series,
          "logx": True,
          "xticks": bits,
        }
      )
  plots.panels(panels, path, title=f"mean and std over {len(config.seeds)} seeds")
