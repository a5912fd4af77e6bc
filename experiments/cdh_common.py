"""What the CDH experiments share: data, methods, cells, cross-view scores, table, plots.

Used by ``cdh_mfeat`` (the paper's table on UCI mfeat), ``cdh_fashion`` (the same at
scale, chunked), ``cdh_figure1`` and ``cdh_multilabel`` (CDH against CDH-0 on
multi-label data, over seeds). Cross-view retrieval: a query is coded from one
view only (``views=(x_pix, None)``), the database from the other view only: "a->b";
"a->B" ranks the database by the codes learned for it (CDH's ``B``, CMFH's
``sign(V)``; only where the database is the training set). Relevance is the same class
(multi-hot labels: at least one shared label); mAP (tie-aware) over the whole database,
or its first K where a protocol's preset says so.
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

import jhash
from jhash import data as jdata
from experiments import harness
from experiments import plots

# Query view -> database view, as indices into the views.
DIRECTIONS = ((0, 1), (1, 0))


# ----------------------------------------------------------------------------- data


def mfeat_data(spec, seed: int, select: bool = True) -> dict:
  """The mfeat split: batches ``train`` (= the database), ``query``, and for gamma
  selection ``fit`` and ``validation`` (held out of ``train``), plus view ``names``.

  ``select``: a run that chooses gamma on the validation items (``validation_per_class``
  in [1, the smallest class's training items - 1]); else none are held out (it must be 0:
  held-out items would leave the training set for nothing).

  ``spec``: ``views`` (two names), ``query_per_class`` (the other items of each class
  are the training set and database: ``load_protocol("mfeat")``), ``validation_per_class``
  (drawn from the training items; the rest of them are ``fit``).
  """
  views = tuple(spec["views"])
  if len(views) != 2:
    raise harness.ConfigError(
      f"config.dataset.views: must name two views (cross-view retrieval: a query's view "
      f"and the database's); got {views!r}."
    )
  try:
    train, query, _ = jdata.load_protocol(
      "mfeat", seed, views=views, query_per_class=spec["query_per_class"]
    )
  except (TypeError, ValueError) as e:
    raise harness.ConfigError(f"config.dataset: {harness.first_line(e)}") from None
  if len(query["labels"]) == 0:
    raise harness.ConfigError(
      "config.dataset.query_per_class: must be >= 1; the split has no queries."
    )
  per_class = int(np.min(np.bincount(train["labels"])))
  valid = spec["validation_per_class"]
  low, high = (1, per_class - 1) if select else (0, 0)
  if isinstance(valid, bool) or not isinstance(valid, int) or not low <= valid <= high:
    why = (
      "gamma is chosen on them, and the rest of the smallest class's training items fit"
      if select
      else "this run chooses no gamma: held-out items would leave the training set for nothing"
    )
    raise harness.ConfigError(
      f"config.dataset.validation_per_class: must be an int in [{low}, {high}] ({why}); "
      f"got {valid!r}."
    )
  inner = jdata.split_per_class(
    train["labels"],
    spec["validation_per_class"],
    per_class - spec["validation_per_class"],
    seed=seed + 1,
  )
  subset = lambda index: jax.tree.map(lambda x: x[index], train)
  return {
    "train": train,
    "query": query,
    "fit": subset(inner["train"]),
    "validation": subset(inner["query"]),
    "names": views,
  }


def validate(config, keys) -> None:
  """Raise ``ConfigError`` for an unknown key, CDH option, baseline or baseline option."""
  harness.check_keys(config, keys)
  harness.check_kwargs(jhash.methods.cdh, config.cdh, "config.cdh")
  sweeps = config.cdh.get("num_sweeps", 1)
  if isinstance(sweeps, bool) or not isinstance(sweeps, int) or sweeps < 1:
    raise harness.ConfigError(
      f"config.cdh.num_sweeps: must be an int >= 1 (the runs score the codes of the last "
      f"sweep); got {sweeps!r}."
    )
  bits = config.get("bits", ())
  lengths = list(bits) if isinstance(bits, (tuple, list)) else [bits]  # cdh_figure1: an int
  if any(
    isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= jhash.methods.MAX_NUM_BITS
    for b in lengths
  ):
    raise harness.ConfigError(
      f"config.bits: code lengths must be ints in [1, {jhash.methods.MAX_NUM_BITS}]; got {bits!r}."
    )
  harness.check_distinct(lengths, "config.bits")
  for key in ("seeds", "baselines", "gamma_grid"):
    if isinstance(config.get(key), (tuple, list)):
      harness.check_distinct(config.get(key), f"config.{key}")
  gamma = config.get("gamma")
  if gamma is not None and (
    isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0 <= gamma < np.inf
  ):
    raise harness.ConfigError(f"config.gamma: must be a finite number >= 0; got {gamma!r}.")
  select = config.get("select_bits")
  if select is not None and (  # 0: gamma chosen at each code length
    isinstance(select, bool) or not isinstance(select, int) or not 0 <= select <= 65536
  ):
    raise harness.ConfigError(
      f"config.select_bits: must be 0 (choose at each length) or a code length; got {select!r}."
    )
  # Intervals and counts (cdh_figure1's sweeps and queries among them).
  for key in (
    "checkpoint_every",
    "baseline_checkpoint_every",
    "num_sweeps",
    "gamma_sweeps",
    "train_queries",
  ):
    every = config.get(key, 1)
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
      raise harness.ConfigError(f"config.{key}: must be an int >= 1; got {every!r}.")
  grid = config.get("gamma_grid")
  if grid is not None and (
    not len(grid)
    or any(isinstance(g, bool) or not isinstance(g, (int, float)) for g in grid)
    or not all(0 <= g < float("inf") for g in grid)
  ):
    raise harness.ConfigError(
      f"config.gamma_grid: must be a non-empty tuple of finite numbers >= 0; got {grid!r}."
    )
  for name in config.get("baselines", ()):
    harness.check_choice(name, ("cvh", "scm", "cmfh"), "config.baselines")
  for name, options in config.get("baseline_options", {}).items():
    if name not in config.baselines:
      runs = ", ".join(config.baselines) or "none"
      raise harness.ConfigError(
        f"config.baseline_options.{name}: options for a baseline config.baselines does not "
        f"run (it runs {runs}); add {name!r} to config.baselines or drop its options."
      )
    harness.check_kwargs(jhash.methods.REGISTRY[name], options, f"config.baseline_options.{name}")
  _check_builds(config, min(lengths, default=8))


def _check_builds(config, bits: int) -> None:
  """Every method the config names built once (its options checked) before any data is
  read: a ``ConfigError`` naming ``config.cdh`` or ``config.baseline_options.NAME``."""
  try:
    cdh_method(bits, config.cdh, 0.0)
  except (TypeError, ValueError) as e:
    raise harness.ConfigError(f"config.cdh: {e}") from None
  for name in config.get("baselines", ()):
    options = config.get("baseline_options", {}).get(name, {})
    try:
      baseline_method(name, bits, options)
    except (TypeError, ValueError) as e:
      raise harness.ConfigError(f"config.baseline_options.{name}: {e}") from None


def database_of(data) -> dict:
  """The database batch of ``data``: ``data["database"]``, else the training set."""
  return data.get("database", data["train"])


def protocol(data) -> dict:
  """Item counts and feature widths of each batch of ``data``."""
  database = database_of(data)
  out = {
    "views": list(data["names"]),
    "dims": [int(x.shape[1]) for x in data["train"]["views"]],
    "database": (
      "the training set" if database is data["train"] else int(database["labels"].shape[0])
    ),
  }
  for part in ("train", "query", "fit", "validation"):
    if part in data:
      out[part] = int(data[part]["labels"].shape[0])
  return out


def describe(data) -> str:
  p = protocol(data)
  database = (
    "(= database)" if p["database"] == "the training set" else f"+ {p['database']} database"
  )
  text = (
    f"views {'/'.join(p['views'])} (dims {p['dims']}): {p['train']} training items "
    f"{database}, {p['query']} queries"
  )
  if p.get("validation"):
    text += f"; gamma chosen on {p['validation']} validation queries against {p['fit']} items"
  return text


def centre_and_scale(train: dict, *others: dict) -> tuple[dict, ...]:
  """``train`` and ``others`` with each view centred per column and divided by one
  number, the root mean square of the centred view, both from ``train``'s items.

  The average column then has unit variance and the columns keep their relative
  scales (near-constant border pixels are not blown up); the scaling of
  ``cdh_fashion.fashion_data``. Returns the batches in the order given, views float32.
  """
  stats = []
  for i, x in enumerate(train["views"]):
    mean = x.mean(axis=0)
    stats.append((mean, float(np.sqrt(np.mean((x - mean) ** 2)))))
    if not stats[-1][1] > 0:
      raise ValueError(
        f"view {i} is the same for every one of the {x.shape[0]} training items (spread 0): "
        "it cannot be scaled, and codes from it could not tell items apart."
      )
  scale = lambda batch: {
    **batch,
    "views": tuple(((x - m) / s).astype(np.float32) for x, (m, s) in zip(batch["views"], stats)),
  }
  return tuple(scale(batch) for batch in (train,) + others)


# ----------------------------------------------------------------------------- methods


def plain(options) -> dict:
  """A config's options as a plain dict (``ConfigDict`` or dict)."""
  return options.to_dict() if hasattr(options, "to_dict") else dict(options)


@functools.lru_cache(maxsize=32)
def _cdh_base(bits: int, options: tuple) -> jhash.methods.HashingMethod:
  return jhash.methods.cdh(bits, **dict(options))


def cdh_method(bits: int, options: dict, gamma: float) -> jhash.methods.HashingMethod:
  """``cdh(bits, gamma=gamma, **options)`` sharing one compiled sweep across gammas.

  ``gamma`` lives in the state (as in ``cdh_select_gamma``): every gamma of a code
  length uses the same ``update`` function, so ``jhash.fit`` compiles it once, and
  only ``init`` (which sets ``gamma``) differs.
  """
  base = _cdh_base(bits, tuple(sorted(plain(options).items())))
  base_init = base.init

  def init(key, batch):
    return base_init(key, batch)._replace(gamma=jnp.asarray(gamma, jnp.float32))

  return base._replace(init=init)


def baseline_method(name: str, bits: int, options: dict) -> jhash.methods.HashingMethod:
  return jhash.methods.REGISTRY[name](bits, **plain(options))


def only_view(batch: dict, view: int) -> dict:
  """``batch`` with every view but ``view`` unobserved (``None``)."""
  return {"views": tuple(x if i == view else None for i, x in enumerate(batch["views"]))}


def single_view_codes(method, state, batch) -> list:
  """Codes from each view alone: per view int8 [m, K]."""
  return [jhash.encode(method, state, only_view(batch, v)) for v in range(len(batch["views"]))]


def mean_ap(query_codes, db_codes, query_labels, db_labels, top_k: int | None = None) -> float:
  """Tie-aware mAP over the first ``top_k`` database items (None: all of them)."""
  return float(
    jhash.metrics.mean_average_precision(
      query_codes, db_codes, query_labels, db_labels, top_k=top_k
    )
  )


def cross_view_maps(method, state, query, database, names, learned=None, top_k=None) -> dict:
  """mAP of each direction ``"a->b"`` (query from view a, database from view b) and,
  given ``learned`` (int8 [n, K], the codes learned for the database items), of
  ``"a->B"`` (query from view a, database coded by ``learned``); over the first ``top_k``
  database items (None: all)."""
  q_codes = single_view_codes(method, state, query)
  db_codes = single_view_codes(method, state, database)
  score = lambda q, db: mean_ap(q, db, query["labels"], database["labels"], top_k)
  out = {}
  for a, b in DIRECTIONS:
    out[f"{names[a]}->{names[b]}"] = score(q_codes[a], db_codes[b])
  if learned is not None:
    for a, _ in DIRECTIONS:
      out[f"{names[a]}->B"] = score(q_codes[a], learned)
  return out


def chance_map(query_labels, db_labels, num_bits: int = 1) -> float:
  """The tie-aware mAP of codes that tie every database item: the expected AP of a
  random ranking (about the fraction of the database relevant to a query).

  ``num_bits``: the length of those (all-ones) codes; any gives the same value, and the
  length of the scores beside it reuses their compiled metric.
  """
  ones = lambda labels: np.ones((np.shape(labels)[0], num_bits), np.int8)
  return mean_ap(ones(query_labels), ones(db_labels), query_labels, db_labels)


def learned_codes(name: str, state):
  """The codes a method learned for its training items (int8 [n, K]), or None."""
  if name == "cdh":
    return state.codes
  if name == "cmfh":  # CMFH's unified codes of the training items: sign(V)
    return jnp.where(state.latent >= 0, 1, -1).astype(jnp.int8)
  return None


# ----------------------------------------------------------------------------- cells


def select_cell(config, key, data, bits: int) -> dict:
  """Fit CDH on ``fit`` at each gamma of ``config.gamma_grid``; keep the best validation
  mAP (mean of both directions, the validation queries against the ``fit`` items)."""
  names, fit, validation = data["names"], data["fit"], data["validation"]
  method = cdh_method(bits, config.cdh, 0.0)  # for encoding only
  per_gamma = []

  def score(state):
    maps = cross_view_maps(method, state, validation, fit, names)
    per_gamma.append(maps)
    return float(np.mean(list(maps.values())))

  sel = jhash.cdh_select_gamma(
    bits, key, fit, list(config.gamma_grid), score=score, progress=True, **plain(config.cdh)
  )
  return {
    "gamma": float(sel.gamma),
    "grid": sel.gammas.tolist(),
    "validation_map": sel.scores.tolist(),
    "validation_maps": per_gamma,
    "objective": sel.objective.tolist(),
    "semantic": sel.semantic.tolist(),
    "generative": sel.generative.tolist(),
    "paper_rule_gamma": float(sel.gammas[int(np.argmax(sel.objective))]),
  }


def cdh_cell(
  workdir: harness.Workdir, cell: str, config, key, data, bits: int, gamma: float
) -> dict:
  """Fit CDH (resumable) on ``data["train"]`` and score both protocols (against the
  learned codes only where the database is the training set).

  Returns the mAPs (``cross_view_maps``), ``gamma``, the objective after each sweep,
  ``second_sweep_change`` ``|J_2 - J_1| / |J_1|``, per-sweep totals of the active sets
  and flips, and the fit time.
  """
  method = cdh_method(bits, config.cdh, gamma)
  train = data["train"]
  started = time.time()
  state, history = workdir.fit(cell, method, key, train, checkpoint_every=config.checkpoint_every)
  jax.block_until_ready(state)
  fit_seconds = time.time() - started
  result = scores(method, state, data, state.codes)
  objective = np.asarray(history["objective"], np.float64)
  result.update(
    {
      "gamma": float(gamma),
      "objective": objective.tolist(),
      "objective_before": np.asarray(history["objective_before"], np.float64).tolist(),
      "objective_after_bstep": np.asarray(history["objective_after_bstep"], np.float64).tolist(),
      "second_sweep_change": second_sweep_change(objective),
      "second_sweep_change_vs_first": second_sweep_change_vs_first(
        history["objective_before"][0], objective
      ),
      "active_fraction": (
        np.sum(history["active_set_size"], axis=1) / train["labels"].shape[0]
      ).tolist(),
      "flipped_fraction": (np.sum(history["flipped"], axis=1) / train["labels"].shape[0]).tolist(),
      "fit_seconds": fit_seconds,
    }
  )
  return result


def scores(method, state, data, learned) -> dict:
  """``cross_view_maps`` of ``data``'s queries against its database (``database_of``) at
  its ``map_at`` (None: the whole database); ``learned`` (the codes learned for the
  training items) scored only where the database is the training set."""
  database = database_of(data)
  learned = learned if database is data["train"] else None
  return cross_view_maps(
    method, state, data["query"], database, data["names"], learned, data.get("map_at")
  )


def second_sweep_change(objective) -> float:
  """``|J_2 - J_1| / |J_1|`` from ``J`` after each sweep (NaN with fewer than two)."""
  objective = np.asarray(objective, np.float64)
  if objective.size < 2:
    return float("nan")
  return float(abs(objective[1] - objective[0]) / abs(objective[0]))


def second_sweep_change_vs_first(initial: float, objective) -> float:
  """``|J_2 - J_1| / |J_1 - J_0|``: the second sweep's gain against the first's (``J_0``
  the initial objective). Unlike ``|J_2 - J_1| / |J_1|`` it does not grow when the
  semantic (negative) and generative (positive) terms nearly cancel in ``J_1``."""
  objective = np.asarray(objective, np.float64)
  if objective.size < 2:
    return float("nan")
  return float(abs(objective[1] - objective[0]) / abs(objective[0] - float(initial)))


def max_baseline_bits(name: str, data) -> int | None:
  """CVH gives one bit per canonical pair: at most the smallest view width."""
  if name == "cvh":
    return min(int(x.shape[1]) for x in data["train"]["views"])
  return None


def baseline_cell(
  workdir: harness.Workdir, cell: str, name: str, bits: int, key, data, config
) -> dict:
  """Fit a baseline (resumable) on ``data["train"]`` and score both protocols (as
  ``cdh_cell``)."""
  limit = max_baseline_bits(name, data)
  if limit is not None and bits > limit:
    return {"skipped": f"{name} gives at most {limit} bits here"}
  method = baseline_method(name, bits, config.baseline_options.get(name, {}))
  started = time.time()
  state, _ = workdir.fit(
    cell, method, key, data["train"], checkpoint_every=config.baseline_checkpoint_every
  )
  jax.block_until_ready(state)
  fit_seconds = time.time() - started
  result = scores(method, state, data, learned_codes(name, state))
  result["fit_seconds"] = fit_seconds
  return result


# ----------------------------------------------------------------------------- report


def method_names(config) -> list[str]:
  return ["cdh", "cdh-0"] + list(config.baselines)


def protocols(names) -> list[str]:
  return [f"{names[a]}->{names[b]}" for a, b in DIRECTIONS] + [
    f"{names[a]}->B" for a, _ in DIRECTIONS
  ]


def summarise(config, results, names) -> str:
  """Rows method x protocol (and CDH's gamma, convergence, fit time); columns bits."""
  bits = list(config.bits)
  rows = []
  for method in method_names(config):
    cells = [results[f"{method}/{b}"] for b in bits]
    for proto in protocols(names):
      if any(proto in c for c in cells):
        rows.append([method, proto] + [c.get(proto, "n/a") for c in cells])
  for method in ("cdh", "cdh-0"):
    cells = [results[f"{method}/{b}"] for b in bits]
    rows.append([method, "|J2-J1|/|J1|"] + [c["second_sweep_change"] for c in cells])
    rows.append([method, "|J2-J1|/|J1-J0|"] + [c["second_sweep_change_vs_first"] for c in cells])
    rows.append([method, "sweep-2 flips / n"] + [c["flipped_fraction"][1] for c in cells])
  cdh = [results[f"cdh/{b}"] for b in bits]
  rows.append(["cdh", "gamma"] + [c["gamma"] for c in cdh])
  selections = [results.get(f"select/{config.get('select_bits') or b}") for b in bits]
  if all(s is not None for s in selections):
    rows.append(["cdh", "gamma (paper: max J)"] + [s["paper_rule_gamma"] for s in selections])
  for method in method_names(config):
    cells = [results[f"{method}/{b}"] for b in bits]
    rows.append([method, "fit seconds"] + [c.get("fit_seconds", "n/a") for c in cells])
  return harness.format_table(rows, ["method", "protocol"] + [f"{b} bits" for b in bits])


def map_plot(config, results, names, path, dataset: str) -> None:
  """mAP against bits, one panel per direction; CDH's learned-B protocol dashed."""
  bits = list(config.bits)
  panels = []
  for a, b in DIRECTIONS:
    series = []
    for method in method_names(config):
      proto = f"{names[a]}->{names[b]}"
      x, y = _defined(bits, [results[f"{method}/{k}"].get(proto) for k in bits])
      series.append({"label": method, "x": x, "y": y})
    x, y = _defined(bits, [results[f"cdh/{k}"].get(f"{names[a]}->B") for k in bits])
    if x:  # only where the database is the training set
      series.append({"label": "cdh (database: learned B)", "x": x, "y": y, "style": "s--"})
    panels.append(
      {
        "title": f"{dataset}: {names[a]} -> {names[b]}",
        "xlabel": "bits",
        "ylabel": "mAP (tie-aware)",
        "series": series,
        "logx": True,
        "xticks": bits,
      }
    )
  plots.panels(panels, path)


def _defined(x, y):
  keep = [i for i, v in enumerate(y) if v is not None]
  return [x[i] for i in keep], [y[i] for i in keep]


def method_cells(config, wd, data, bits: int, gamma=None) -> list:
  """The cells of one code length: CDH at ``gamma()`` (default ``config.gamma``; called
  when the cell runs, so it may read a cell run before) and CDH-0 from one key, so the
  same initial weights, and each baseline from its own key."""
  gamma = gamma or (lambda: config.gamma)
  key = harness.cell_key(config.seed, bits)
  cdh = lambda label, g: (
    f"{label}/{bits}",
    lambda: cdh_cell(wd, f"{label}/{bits}", config, key, data, bits, g()),
  )
  cells = [cdh("cdh", gamma), cdh("cdh-0", lambda: 0.0)]
  for name in config.baselines:
    cells.append(
      (
        f"{name}/{bits}",
        lambda n=name: baseline_cell(
          wd, f"{n}/{bits}", n, bits, harness.cell_key(config.seed, bits, n), data, config
        ),
      )
    )
  return cells
