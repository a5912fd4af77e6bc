"""The paper's Figure 1 on mfeat (pix, fou): active sets, mAP per sweep, mAP against gamma.

(a) For every bit update of every sweep (x axis: bit updates in order, sweep ``s``'s
    bit ``k`` at ``s K + k + 1``; dotted lines between sweeps), the size of the bit's
    active set ``I`` at its first inner update and the number of codes it flipped
    (``sum |F|`` over its inner updates), as fractions of ``n``: the method's per-bit
    metrics ``active_set_size`` and ``flipped``. (The library records one value per bit,
    not per inner update: the x axis is the bit update, not the inner iteration.)
(b) After each sweep (0: the initial codes), training mAP (``config.train_queries``
    random training items' learned codes against the learned ``B`` of every training
    item, the query itself included) and the cross-view query mAP.
(c) mAP against gamma over a grid including 0 (CDH-0), two sweeps, one key for all.

Each sweep of (a-b) is a cell: it loads the state saved after the previous sweep, runs
one sweep (``jhash.fit`` from ``start_step``, so the keys are those of one
uninterrupted fit) and saves its state, so an interrupted run resumes. Writes
``results.json`` and ``figure1.png`` and prints the tables.
"""

from __future__ import annotations

import time

import jax
import numpy as np

import jhash
from experiments import cdh_common as common
from experiments import harness
from experiments import plots

KEYS = (
  "trainer",
  "seed",
  "bits",
  "dataset",
  "gamma",
  "num_sweeps",
  "train_queries",
  "cdh",
  "gamma_grid",
  "gamma_sweeps",
)


def train_and_evaluate(config, workdir) -> dict:
  common.validate(config, KEYS)
  started = time.time()
  key = harness.cell_key(config.seed, config.bits)  # cdh_mfeat's key at this length
  data = common.mfeat_data(config.dataset, config.seed, select=False)
  n = data["train"]["labels"].shape[0]
  if config.train_queries > n:
    raise harness.ConfigError(
      f"config.train_queries: must be at most the {n} training items; got {config.train_queries}."
    )
  print(common.describe(data), flush=True)
  method = common.cdh_method(config.bits, config.cdh, config.gamma)
  with harness.Workdir(workdir, config) as wd:
    cells = [
      (f"sweep/{s}", lambda s=s: sweep_cell(wd, config, key, data, method, s))
      for s in range(config.num_sweeps + 1)
    ]
    cells.append(("gamma", lambda: gamma_cell(config, key, data)))
    results = harness.run_cells(cells, wd)
    for s in range(config.num_sweeps + 1):
      wd.remove_state(f"trajectory/{s}")
    summary = summarise(config, results, data)
    table = tables(config, summary, data["names"])
    print(table)
    plot(config, summary, data["names"], wd.path / "figure1.png")
    harness.write_results(
      wd,
      config,
      {"cells": results, "summary": summary},
      started,
      extra={"table": table, "protocol": common.protocol(data)},
    )
  return results


# ----------------------------------------------------------------------------- cells


def sweep_cell(wd, config, key, data, method, sweep: int) -> dict:
  """The state after ``sweep`` sweeps (from the saved state after ``sweep - 1``), scored.

  Returns the per-bit metrics of this sweep (``[K]`` lists; none for sweep 0), ``J``,
  the training mAP and the cross-view maps.
  """
  train = data["train"]
  out = {}
  if sweep == 0:
    state = jhash.init(method, key, train)
  else:
    template = jax.eval_shape(lambda k: jhash.init(method, k, train), key)
    before = wd.load_state(
      f"trajectory/{sweep - 1}",
      template,
      label=f"'trajectory/{sweep - 1}' (the state cell 'sweep/{sweep}' starts from)",
      restart=f"cell 'sweep/{sweep}' runs its sweeps from the start",
    )
    if before is None:  # its checkpoint is gone (deleted): the sweeps again from the start
      state, history = jhash.fit(method, key, train, sweep, progress=False)
    else:
      state, history = jhash.fit(
        method, key, train, sweep, state=before[1], start_step=sweep - 1, progress=False
      )
    out = {name: np.asarray(value[-1]).tolist() for name, value in history.items()}
  wd.save_state(f"trajectory/{sweep}", sweep, state, {})
  out["objective"] = float(jax.jit(method.extras.objective)(state, train))
  out["train_map"] = train_map(state.codes, train["labels"], config.train_queries, config.seed)
  out.update(
    common.cross_view_maps(method, state, data["query"], train, data["names"], learned=state.codes)
  )
  return out


def train_map(codes, labels, num_queries: int, seed: int) -> float:
  """mAP of ``num_queries`` random training items' codes against every training code."""
  pick = np.sort(np.random.default_rng(seed).permutation(labels.shape[0])[:num_queries])
  return common.mean_ap(np.asarray(codes)[pick], codes, labels[pick], labels)


def gamma_cell(config, key, data) -> dict:
  """CDH at each gamma of ``config.gamma_grid`` (one key), scored on the queries."""
  names, train = data["names"], data["train"]
  method = common.cdh_method(config.bits, config.cdh, 0.0)  # for encoding only
  maps = []

  def score(state):
    maps.append(
      common.cross_view_maps(method, state, data["query"], train, names, learned=state.codes)
    )
    return maps[-1][f"{names[0]}->{names[1]}"]

  options = dict(common.plain(config.cdh), num_sweeps=config.gamma_sweeps)
  sel = jhash.cdh_select_gamma(
    config.bits, key, train, list(config.gamma_grid), score=score, progress=True, **options
  )
  return {
    "grid": sel.gammas.tolist(),
    "maps": maps,
    "objective": sel.objective.tolist(),
    "semantic": sel.semantic.tolist(),
    "generative": sel.generative.tolist(),
  }


# ----------------------------------------------------------------------------- report


def summarise(config, results, data) -> dict:
  """The curves of the three panels from the cells."""
  n = data["train"]["labels"].shape[0]
  sweeps = [results[f"sweep/{s}"] for s in range(config.num_sweeps + 1)]
  active = np.concatenate([np.asarray(c["active_set_size"]) for c in sweeps[1:]]) / n
  flipped = np.concatenate([np.asarray(c["flipped"]) for c in sweeps[1:]]) / n
  protos = common.protocols(data["names"])
  objective = [c["objective"] for c in sweeps]
  return {
    "active_fraction": active.tolist(),
    "flipped_fraction": flipped.tolist(),
    "inner_steps": np.concatenate([c["inner_steps"] for c in sweeps[1:]]).tolist(),
    "objective": objective,
    "sweep_change": [abs(b - a) / abs(a) for a, b in zip(objective[:-1], objective[1:])],
    "train_map": [c["train_map"] for c in sweeps],
    "sweep_maps": {p: [c[p] for c in sweeps] for p in protos},
    "gamma": results["gamma"]["grid"],
    "gamma_maps": {p: [m[p] for m in results["gamma"]["maps"]] for p in protos},
  }


def tables(config, summary, names) -> str:
  protos = common.protocols(names)
  bits = config.bits
  rows = []
  for s in range(config.num_sweeps + 1):
    block = slice((s - 1) * bits, s * bits)
    active = float(np.mean(summary["active_fraction"][block])) if s else "-"
    flipped = float(np.mean(summary["flipped_fraction"][block])) if s else "-"
    rows.append(
      [s, summary["objective"][s], active, flipped, summary["train_map"][s]]
      + [summary["sweep_maps"][p][s] for p in protos]
    )
  first = harness.format_table(
    rows, ["sweep", "J", "active / n, bit mean", "flipped / n, bit mean", "train mAP"] + protos
  )
  rows = [
    [f"{g:g}"] + [summary["gamma_maps"][p][i] for p in protos]
    for i, g in enumerate(summary["gamma"])
  ]
  second = harness.format_table(rows, ["gamma"] + protos)
  return (
    f"(a, b) {bits} bits, gamma = {config.gamma}, per sweep\n{first}\n\n"
    f"(c) {bits} bits, {config.gamma_sweeps} sweeps, mAP against gamma\n{second}"
  )


def plot(config, summary, names, path) -> None:
  bits, sweeps = config.bits, config.num_sweeps
  x = list(range(1, bits * sweeps + 1))
  along = {
    "title": f"(a) active set and flips, {bits} bits",
    "xlabel": "bit update (sweep-major)",
    "ylabel": "fraction of n",
    "vlines": [bits * s + 0.5 for s in range(1, sweeps)],
    "series": [
      {
        "label": "|I| / n (first inner update)",
        "x": x,
        "y": summary["active_fraction"],
        "style": "-",
      },
      {"label": "flipped / n", "x": x, "y": summary["flipped_fraction"], "style": "-"},
    ],
  }
  s = list(range(sweeps + 1))
  direct, reverse = f"{names[0]}->{names[1]}", f"{names[1]}->{names[0]}"
  per_sweep = {
    "title": "(b) mAP after each sweep",
    "xlabel": "sweep (0: initial codes)",
    "ylabel": "mAP",
    "xticks": s,
    "series": [
      {"label": "training (B against B)", "x": s, "y": summary["train_map"]},
      {"label": f"query {direct}", "x": s, "y": summary["sweep_maps"][direct]},
      {"label": f"query {reverse}", "x": s, "y": summary["sweep_maps"][reverse], "style": "o--"},
    ],
  }
  g = list(range(len(summary["gamma"])))
  against = {
    "title": f"(c) mAP against gamma, {bits} bits",
    "xlabel": "gamma",
    "ylabel": "mAP",
    "xticks": g,
    "xticklabels": [f"{v:g}" for v in summary["gamma"]],
    "xtick_rotation": 45,
    "series": [
      {
        "label": p,
        "x": g,
        "y": summary["gamma_maps"][p],
        "style": "s--" if p.endswith("->B") else "o-",
      }
      for p in common.protocols(names)
    ],
  }
  plots.panels(
    [along, per_sweep, against],
    path,
    title=f"CDH on mfeat ({names[0]}, {names[1]}): the paper's Figure 1",
  )
