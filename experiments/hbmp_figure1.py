"""HBMP's Figure 1(c-e): class-level vs instance-level binary inference on Fashion-MNIST labels.

For each repeat, 1,000 training images (100 per class) are drawn; the pursuit infers target
codes either for the 10 classes or for the 1,000 instances, one bit per step
(``jhash.fit`` of ``hbmp`` without hash functions), with each solver of
``config.solvers`` (the default: 4 power-iteration starts of up to 20 products and a
local search; "budget": one start of 8 products, no local search). Writes ``results.json``,
``residual.png`` (relative residual norm against bits), ``map.png`` (mAP of the target
codes against bits, weighted and plain Hamming ranking) and ``time.png`` (inference time
against bits, one call per step), and prints the table at the ``map_bits`` and the time
of the whole pursuit as one compiled call for each solver and level.
"""

from __future__ import annotations

import time

import jax
import numpy as np

import jhash
from jhash import data as jdata
from experiments import harness
from experiments import plots

LEVELS = ("class", "instance")
KEYS = (
  "trainer",
  "seed",
  "repeats",
  "num_classes",
  "instances_per_class",
  "num_queries",
  "max_bits",
  "map_bits",
  "step_size",
  "solvers",
)


FASHION_CLASSES = 10
FASHION_TRAIN_PER_CLASS = 7_000  # images a class (training and test sets pooled)


def validate(config) -> None:
  """Raise ``ConfigError`` for an unknown key or solver option, or ``map_bits`` past
  ``max_bits``."""
  harness.check_keys(config, KEYS)
  harness.check_counts(
    config, ("repeats", "num_classes", "instances_per_class", "num_queries", "max_bits")
  )
  harness.check_entries(config, ("map_bits",))
  if config.num_classes > FASHION_CLASSES:
    raise harness.ConfigError(
      f"config.num_classes: must be at most Fashion-MNIST's {FASHION_CLASSES} classes; got "
      f"{config.num_classes}."
    )
  if config.instances_per_class > FASHION_TRAIN_PER_CLASS:
    raise harness.ConfigError(
      f"config.instances_per_class: must be at most the {FASHION_TRAIN_PER_CLASS:,} images "
      f"of each Fashion-MNIST class; got {config.instances_per_class}."
    )
  total = config.num_classes * config.instances_per_class
  if config.num_queries >= total:
    raise harness.ConfigError(
      f"config.num_queries: must leave database items of the {total} (num_classes x "
      f"instances_per_class); got {config.num_queries}."
    )
  for solver, options in config.solvers.items():
    harness.check_kwargs(jhash.methods.hbmp, options, f"config.solvers.{solver}")
  try:
    build_methods(config)
  except (TypeError, ValueError) as e:
    raise harness.ConfigError(f"config.solvers / step_size: {e}") from None
  for b in config.map_bits:
    if not 1 <= b <= config.max_bits:
      raise harness.ConfigError(
        f"config.map_bits: {b} is not in [1, max_bits = {config.max_bits}]."
      )


def build_methods(config) -> dict:
  """One ``hbmp`` per solver and level (the pursuit alone, no hash functions), shared by
  the repeats: one compilation each."""
  methods = {}
  for solver, options in config.solvers.items():
    options = options.to_dict()
    methods[solver, "class"] = jhash.methods.hbmp(
      config.max_bits,
      level="class",
      num_items=config.num_classes,
      step_size=config.step_size,
      hash_function=None,
      **options,
    )
    methods[solver, "instance"] = jhash.methods.hbmp(
      config.max_bits, level="instance", step_size=config.step_size, hash_function=None, **options
    )
  return methods


def sample_instances(config, seed: int):
  """A batch of ``instances_per_class`` training images of each of the first
  ``num_classes`` classes (Fashion-MNIST's CIFAR-10 protocol, as pixel features), and
  the query and database positions within it."""
  # No queries; the database (every image) is not needed: a one-item stand-in.
  train, _, _ = jdata.load_protocol(
    "fashion-mnist",
    seed,
    query_per_class=0,
    train_per_class=config.instances_per_class,
    database_limit=1,
  )
  keep = np.flatnonzero(train["labels"] < config.num_classes)
  batch = {"views": (train["views"][0][keep],), "labels": train["labels"][keep]}
  order = np.random.default_rng(seed).permutation(keep.size)
  return batch, (np.sort(order[: config.num_queries]), np.sort(order[config.num_queries :]))


def pursuit_seconds(method, affinity, key) -> float:
  """Wall time of the whole pursuit of the method's bits as one compiled call
  (``extras.pursuit.run``, a ``lax.scan`` over bits), after a warm-up call:
  seconds, median of 3."""
  run = lambda: jax.block_until_ready(method.extras.pursuit.run(affinity, key))
  run()
  times = []
  for _ in range(3):
    start = time.perf_counter()
    run()
    times.append(time.perf_counter() - start)
  return float(np.median(times))


def run_level(config, method, key, batch, positions) -> dict:
  """One pursuit: per-bit residuals and cumulative step times; mAP at ``map_bits``;
  the time of the same pursuit as one compiled call."""
  query, database = positions
  labels = np.asarray(batch["labels"])
  alphas_at, times = {}, []
  # Warm-up: compile init and the step (the jit cache is keyed on method.update).
  jhash.fit(method, key, batch, 1, progress=False)
  started = time.perf_counter()

  def on_step(step, state, metrics):
    jax.block_until_ready(state.pursuit.step)
    times.append(time.perf_counter() - started)
    if step in config.map_bits:
      alphas_at[step] = np.asarray(state.pursuit.alphas)[:step].copy()

  state, history = jhash.fit(method, key, batch, progress=False, on_step=on_step)
  codes = np.asarray(method.extras.encode_targets(state, batch))
  maps = {}
  for b in config.map_bits:
    q, db = codes[query, :b], codes[database, :b]
    maps[str(b)] = {
      "map": jhash.metrics.mean_average_precision(q, db, labels[query], labels[database]),
      "map_weighted": jhash.metrics.mean_average_precision(
        q, db, labels[query], labels[database], weights=alphas_at[b]
      ),
    }
  return {
    "residual": (history["residual_norm"] / float(state.pursuit.initial_norm)).tolist(),
    "step_seconds": times,
    "maps": maps,
    "pursuit_seconds": pursuit_seconds(method, state.affinity, key),
    "degenerate": np.asarray(history["degenerate"]).astype(int).tolist(),
  }


def train_and_evaluate(config, workdir) -> dict:
  validate(config)
  started = time.time()
  methods = build_methods(config)
  with harness.Workdir(workdir, config) as wd:
    cells = []
    for r in range(config.repeats):
      batch, positions = sample_instances(config, config.seed + r)
      for solver in config.solvers:
        for level in LEVELS:
          key = harness.cell_key(config.seed, "fashion-mnist", "hbmp", r, solver, level)
          cells.append(
            (
              f"{solver}/{level}/{r}",
              lambda m=methods[solver, level], b=batch, p=positions, k=key: run_level(
                config, m, k, b, p
              ),
            )
          )
    results = harness.run_cells(cells, wd)
    summary = summarise(config, results)
    table = format_table(config, summary)
    print(table)
    make_plots(config, summary, wd.path)
    harness.write_results(
      wd, config, {"cells": results, "summary": summary}, started, extra={"table": table}
    )
  return summary


def summarise(config, results) -> dict:
  """Mean and spread over repeats, per solver and level."""
  out = {}
  for solver in config.solvers:
    for level in LEVELS:
      runs = [results[f"{solver}/{level}/{r}"] for r in range(config.repeats)]
      residual = np.array([run["residual"] for run in runs])
      seconds = np.array([run["step_seconds"] for run in runs])
      maps = {
        str(b): {
          k: float(np.mean([run["maps"][str(b)][k] for run in runs]))
          for k in ("map", "map_weighted")
        }
        for b in config.map_bits
      }
      out[f"{solver}/{level}"] = {
        "residual_mean": residual.mean(0).tolist(),
        "residual_min": residual.min(0).tolist(),
        "residual_max": residual.max(0).tolist(),
        "seconds_mean": seconds.mean(0).tolist(),
        "maps": maps,
        "seconds_per_bit": float(seconds[:, -1].mean() / config.max_bits),
        "pursuit_seconds": float(np.mean([run["pursuit_seconds"] for run in runs])),
      }
  for solver in config.solvers:
    c, i = out[f"{solver}/class"], out[f"{solver}/instance"]
    c["instance_over_class_time"] = i["pursuit_seconds"] / c["pursuit_seconds"]
  return out


def format_table(config, summary) -> str:
  rows = []
  for name, s in summary.items():
    for b in config.map_bits:
      m = s["maps"][str(b)]
      rows.append(
        [name, b, m["map_weighted"], m["map"], s["residual_mean"][b - 1], s["seconds_mean"][b - 1]]
      )
  header = [
    "solver/items",
    "bits",
    "mAP (weighted)",
    "mAP (Hamming)",
    "residual / initial",
    "time (s)",
  ]
  timing = [[name, s["pursuit_seconds"] * 1e3] for name, s in summary.items()]
  ratio = lambda solver: summary[f"{solver}/class"]["instance_over_class_time"]
  ratios = "; ".join(
    f"{solver}: instance / class = {ratio(solver):.0f}x" for solver in config.solvers
  )
  return (
    harness.format_table(rows, header)
    + "\n\n"
    + harness.format_table(timing, ["solver/items", f"whole pursuit, {config.max_bits} bits (ms)"])
    + "\n"
    + ratios
  )


def make_plots(config, summary, workdir) -> None:
  bits = list(range(1, config.max_bits + 1))
  label = lambda name: name.replace("/class", f": {config.num_classes} classes").replace(
    "/instance", f": {config.num_classes * config.instances_per_class} instances"
  )
  series = lambda key, band=None: [
    {
      "label": label(name),
      "x": bits,
      "y": s[key],
      "band": None if band is None else (s[band[0]], s[band[1]]),
    }
    for name, s in summary.items()
  ]
  plots.panels(
    [
      {
        "title": "Figure 1(c): residual",
        "xlabel": "bits",
        "ylabel": "||Q_t||_F / ||Q_0||_F",
        "series": series("residual_mean", ("residual_min", "residual_max")),
      }
    ],
    workdir / "residual.png",
  )
  map_bits = list(config.map_bits)
  plots.panels(
    [
      {
        "title": "Figure 1(d): mAP of the target codes",
        "xlabel": "bits",
        "ylabel": "mAP (tie-aware)",
        "series": [
          {
            "label": f"{label(name)}, {kind}",
            "x": map_bits,
            "y": [s["maps"][str(b)][key] for b in map_bits],
            "style": "o-" if key == "map_weighted" else "s--",
          }
          for name, s in summary.items()
          for key, kind in (("map_weighted", "weighted"), ("map", "Hamming"))
        ],
      }
    ],
    workdir / "map.png",
  )
  plots.panels(
    [
      {
        "title": "Figure 1(e): inference time",
        "xlabel": "bits",
        "ylabel": "seconds (cumulative)",
        "series": series("seconds_mean"),
      }
    ],
    workdir / "time.png",
  )
