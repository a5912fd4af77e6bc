"""The retrieval trainer: methods by registry name x data-set protocols x code lengths x seeds.

A cell trains one method (``jhash.methods.REGISTRY``) at one code length on the training
batch of one protocol (``jhash.data.load_protocol``) at one seed, codes the queries and
the database, and scores the ranking. Its key is ``cell_key(seed, protocol, method,
bits)``: the cell gives the same number alone or in any grid, and entries of the same
registry method (HBMP with linear, MLP and CNN hash functions, say) share it, so their
comparison is paired. Each seed draws its own split and keys.

Config keys (``experiments/configs/baselines.py`` is an example):

* ``trainer``: ``"experiments.retrieval"``.
* ``seed``, ``num_seeds``: the seeds ``seed .. seed + num_seeds - 1``.
* ``bits``: the code lengths.
* ``datasets``: label -> ``{"protocol": a jhash.data.PROTOCOLS name, **its options}``; a
  list set (NUS-WIDE, MS-COCO, ...) also takes ``stream`` (True: read from its files as
  the cells train and code, never held in memory) and the streaming options ``resize``,
  ``eval_batch_size``, ``worker_count`` (``experiments.streaming``).
* ``methods``: label -> ``{"method": a REGISTRY name, **its hyperparameters}``.
* ``evaluation``: ``map_ties`` (mAP conventions: ``"aware"`` gives ``map``, ``"index"``
  gives ``map_index_ties``), ``precision_at`` (ks of ``precision_at_K``), ``radius``
  (an int R or a tuple of them: ``precision_radius_R`` and ``recall_radius_R``, None:
  none), ``ndcg_at`` (k of
  ``ndcg_at_K``, graded by shared labels; None: none), ``weighted`` (for a method whose
  ``extras.weights(state)`` gives bit weights, HBMP's alphas: ``map_weighted`` and
  ``ndcg_at_K_weighted`` with weighted Hamming ranking). A method with several codes per
  item (``encode_multi``) also gets every Hamming metric with ``_multi``: the database
  coded by ``jhash.encode_multi``, an item's distance the minimum over its codes, and
  ``codes_per_item_multi``, the mean number of codes kept per database item. Optional:
  ``f1_buckets`` (True: at ``plots.f1_bucket_bits``, the F1-bucket curve, pooled F1
  within radius r against the buckets a lookup visits, of the single codes and of the
  multi-code database) and ``sweep`` (``{parameter: values}`` of a multi-code method's
  encoding, MCH's ``sigma`` and ``xi``: the trained state re-encoded with each value,
  reporting ``METRIC_multi@PARAMETER=VALUE`` for the metrics of ``SWEEP_METRICS``) and
  ``map_at`` (an int K, or ``"protocol"`` for each data set's preset K,
  ``jhash.data.protocol_map_at``, the whole database where it has none: ``map_at_k``,
  tie-aware mAP over each query's first K, with ``map_k`` the K used, clipped to the
  database) and ``topn`` (a tuple of N: at ``plots.pr_curve_bits``, the P@N and R@N
  curves, ``topn`` in the results and ``topn.png``; N clipped to the database; ``()``
  for none) and
  ``controls`` (True: MCH's controls beside it, ``experiments.mch_controls``:
  ``METRIC_multi@control=NAME`` and ``oracle_keep_fraction``) and ``diagnose`` (True,
  with ``controls``: ``mch_controls.agent_diagnosis``, whether the agent's keep
  probabilities and a supervised probe from its states find the oracle's crops).
* ``tables``: the metrics printed as tables (rows data set x method, columns bits).
* ``plots``: ``pr_curve_bits`` (precision-recall within Hamming radius at this length,
  ``pr_radius.png``; None, or 0 on the command line: none) and ``curves`` (name -> ``{"metric", "methods"}``: a
  training metric against the step, ``NAME.png``, one panel per data set and method,
  one line per code length); optional ``f1_bucket_bits`` (``f1_buckets.png``: F1 against
  buckets visited at this length, single codes solid, multi-code dashed).
* ``checkpoint_every``: steps between checkpoints inside a cell (saved at the first host
  round trip after them; a minibatch phase comes back once per epoch).
* ``pretrained`` (optional): a weights file (``jhash.coder.save_weights``, e.g. the
  pretraining run's ``backbone.npz``) that methods' ``init_variables`` (or MCH's
  ``base_options.init_variables``) name through a FieldReference, so one override moves
  them all; it must exist before the first cell trains.

Everything the config names is checked before the first cell trains. Writes
``results.json`` (per cell ``data/method/bits``: the mean over seeds of every number,
``std``, and ``per_seed``, the full results with the training history), one
``METRIC_vs_bits.png`` per table metric family, ``pr_radius.png``, the curve plots,
and the training curves as TensorBoard event files (``tensorboard/<cell>/``).
"""

from __future__ import annotations

import functools
import inspect
import pathlib
import time

import jax
import numpy as np

import jhash
from jhash import data as jdata
from experiments import harness
from experiments import plots
from experiments import streaming

KEYS = (
  "trainer",
  "seed",
  "num_seeds",
  "bits",
  "datasets",
  "methods",
  "evaluation",
  "tables",
  "plots",
  "checkpoint_every",
)
#: Optional top-level keys: ``pretrained``, a weights file (``jhash.coder.save_weights``)
#: that methods' ``init_variables`` name through a FieldReference, checked before training;
#: ``arch``, a network's name that methods' ``backbone`` names the same way.
OPTIONAL_KEYS = ("pretrained", "arch")
EVALUATION_KEYS = ("map_ties", "precision_at", "radius", "ndcg_at", "weighted")
EVALUATION_OPTIONAL = ("f1_buckets", "sweep", "controls", "diagnose", "map_at", "topn")
PLOT_KEYS = ("pr_curve_bits", "curves")
PLOT_OPTIONAL = ("f1_bucket_bits",)
# The multi-code numbers a sweep reports for each value of a swept encoding parameter.
SWEEP_METRICS = ("map", "precision_radius_0", "recall_radius_0", "codes_per_item")
MAP_NAMES = {"aware": "map", "index": "map_index_ties"}


# ----------------------------------------------------------------------------- config


def seeds(config) -> list[int]:
  return list(range(config.seed, config.seed + config.num_seeds))


def method_kwargs(config, label: str) -> dict:
  """The hyperparameters of method ``label`` (everything but ``method``)."""
  return {k: v for k, v in config.methods[label].to_dict().items() if k != "method"}


def radii(evaluation) -> list[int]:
  """The radii of ``evaluation.radius`` (None, an int or a tuple of ints) as a list."""
  r = evaluation.radius
  if r is None:
    return []
  return [r] if isinstance(r, int) else list(r)


def map_at(evaluation, protocol: str) -> int | None:
  """The K of ``map_at_k`` for a data set of ``protocol``: ``evaluation.map_at`` when an
  int, the protocol's preset K when ``"protocol"`` (``jhash.data.protocol_map_at``; None
  for a protocol scored over the whole database), None when absent."""
  spec = map_at_spec(evaluation)
  if spec == "protocol":
    return jdata.protocol_map_at(protocol)
  return spec


def map_at_spec(evaluation):
  """``evaluation.map_at`` as None, ``"protocol"`` or an int: on the command line a
  config's str key gives ``"5000"`` for K and ``"None"`` for none (both read so)."""
  spec = evaluation.get("map_at") if hasattr(evaluation, "get") else None
  if isinstance(spec, str) and spec.strip().isdigit():
    return int(spec)
  if isinstance(spec, str) and spec.strip() in ("None", "none", ""):
    return None
  return spec


def sweep(evaluation) -> dict:
  """``evaluation.sweep`` as ``{parameter: [values]}`` ({} when absent)."""
  spec = evaluation.get("sweep") if hasattr(evaluation, "get") else None
  return {} if spec is None else {k: list(v) for k, v in dict(spec).items()}


def metric_names(evaluation, weighted: bool = True, multi: bool = True) -> list[str]:
  """The names of the numbers a cell reports under ``evaluation``."""
  names = [MAP_NAMES[t] for t in evaluation.map_ties]
  if map_at_spec(evaluation) is not None:
    names += ["map_at_k", "map_k"]
  names += [f"precision_at_{k}" for k in evaluation.precision_at]
  for r in radii(evaluation):
    names += [f"precision_radius_{r}", f"recall_radius_{r}"]
  if evaluation.ndcg_at:
    names.append(f"ndcg_at_{evaluation.ndcg_at}")
  out = list(names)
  if weighted and evaluation.weighted:
    out += ["map_weighted"] + [f"{n}_weighted" for n in names if n.startswith("ndcg")]
  if multi:
    out += [f"{n}_multi" for n in names] + ["codes_per_item_multi"]
    out += [
      f"{m}_multi@{p}={v}"
      for p, values in sweep(evaluation).items()
      for v in values
      for m in SWEEP_METRICS
    ]
  return out


def validate(config) -> None:
  """Raise ``ConfigError`` (naming the key and the allowed values) for anything the
  config names that does not exist: keys, protocols and their options, methods and
  their hyperparameters, metric conventions, tables and plot settings."""
  harness.check_keys(config, KEYS + OPTIONAL_KEYS, required=KEYS)
  _check_pretrained(config)
  _check_arch(config)
  harness.check_keys(
    config.evaluation,
    EVALUATION_KEYS + EVALUATION_OPTIONAL,
    "config.evaluation",
    required=EVALUATION_KEYS,
  )
  harness.check_keys(config.plots, PLOT_KEYS + PLOT_OPTIONAL, "config.plots", required=PLOT_KEYS)
  _check_ints(config.bits, "config.bits", minimum=1)
  harness.check_distinct(config.bits, "config.bits")
  _check_int(config.seed, "config.seed", minimum=0)
  _check_int(config.num_seeds, "config.num_seeds", minimum=1)
  harness.check_int_ranges(config)
  if seeds(config)[-1] > harness.SEED_RANGE[1]:
    raise harness.ConfigError(
      f"config.seed, config.num_seeds: the last seed, {seeds(config)[-1]}, is past "
      f"2**32 - 1 = {harness.SEED_RANGE[1]} (jax.random.key keeps 32 bits of a seed)."
    )
  _check_int(config.checkpoint_every, "config.checkpoint_every", minimum=1)
  for label, spec in config.datasets.items():
    _check_dataset(label, spec)
    if spec.get("stream") and config.evaluation.get("controls"):
      raise harness.ConfigError(
        f"config.evaluation.controls: MCH's controls read the database's pixels in memory; "
        f"config.datasets.{label} streams its images (stream=True). Drop one of them."
      )
  for label in config.methods:
    _check_method(config, label)
  _check_evaluation(config)
  _check_plots(config)


def _check_pretrained(config) -> None:
  path = config.get("pretrained")
  if path is not None:
    _check_some_network(config, "pretrained", "starts", "init_variables")
  if path is not None and not pathlib.Path(str(path)).is_file():
    raise harness.ConfigError(
      f"config.pretrained: no weights file at {str(path)!r}; make it with the pretraining "
      "run (python -m experiments.main --config experiments/configs/pretrain.py --workdir "
      "runs/pretrain) or point --config.pretrained at yours."
    )


def _check_arch(config) -> None:
  arch = config.get("arch")
  if arch is None:
    return
  names = (*jhash.models.RESNET_ARCHS, *jhash.models.CLASSIC_ARCHS)
  if arch not in names:
    raise harness.ConfigError(
      f"config.arch must be one of {', '.join(map(repr, names))}; got {arch!r}."
    )
  _check_some_network(config, "arch", "picks the network of", "backbone")


def _networks(config, key: str) -> list[str]:
  """The methods whose spec (or MCH's ``base_options``, or HBMP's ``hash_options``, where
  the network's kind is ``model``) sets ``key``: those a top-level ``config.arch`` or
  ``config.pretrained`` reaches."""
  out = []
  for label, spec in config.methods.items():
    hashing = spec.get("hash_options") or {}
    if (
      key in spec
      or key in (spec.get("base_options") or {})
      or {"backbone": "model"}.get(key, key) in hashing
    ):
      out.append(label)
  return out


def _check_some_network(config, name: str, does: str, key: str) -> None:
  if not _networks(config, key):
    raise harness.ConfigError(
      f"config.{name}={config.get(name)!r} {does} the deep methods, but this config's "
      f"methods ({', '.join(config.methods)}) train none: drop --config.{name} or use a "
      "config with deep methods."
    )


def _is_int(value, minimum: int) -> bool:
  return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _check_ints(values, where: str, minimum: int) -> None:
  if not len(values) or not all(_is_int(v, minimum) for v in values):
    raise harness.ConfigError(f"{where}: must be ints >= {minimum}; got {list(values)!r}.")


def _check_int(value, where: str, minimum: int) -> None:
  if not _is_int(value, minimum):
    raise harness.ConfigError(f"{where}: must be an int >= {minimum}; got {value!r}.")


def _check_dataset(label: str, spec) -> None:
  where = f"config.datasets.{label}"
  if "protocol" not in spec:
    raise harness.ConfigError(
      f"{where}: missing key 'protocol' (one of {', '.join(jdata.PROTOCOLS)})."
    )
  harness.check_choice(spec.protocol, jdata.PROTOCOLS, f"{where}.protocol")
  options = list(jdata.protocol_options(spec.protocol)) + list(streaming.KEYS)
  harness.check_keys(
    {k: v for k, v in spec.items() if k != "protocol"}, options, where, required=()
  )
  streaming.check_spec(label, spec)


def _check_method(config, label: str) -> None:
  where = f"config.methods.{label}"
  spec = config.methods[label]
  if "method" not in spec:
    raise harness.ConfigError(
      f"{where}: missing key 'method' (one of {', '.join(jhash.methods.REGISTRY)})."
    )
  harness.check_choice(spec.method, jhash.methods.REGISTRY, f"{where}.method")
  factory = jhash.methods.REGISTRY[spec.method]
  kwargs = method_kwargs(config, label)
  harness.check_kwargs(factory, kwargs, where)
  for bits in config.bits:
    try:
      factory(bits, **kwargs)
    except (TypeError, ValueError) as e:
      raise harness.ConfigError(f"{where} at {bits} bits: {e}") from None


def _check_evaluation(config) -> None:
  ev = config.evaluation
  spec = map_at_spec(ev)
  if spec is not None and spec != "protocol":
    _check_int(spec, "config.evaluation.map_at (an int K, 'protocol' or None)", minimum=1)
  if not len(ev.map_ties):
    raise harness.ConfigError(
      f"config.evaluation.map_ties: must name at least one of {', '.join(map(repr, MAP_NAMES))} "
      "(the mAP's tie rules); got ()."
    )
  for ties in ev.map_ties:
    harness.check_choice(ties, MAP_NAMES, "config.evaluation.map_ties")
  harness.check_distinct(ev.map_ties, "config.evaluation.map_ties")
  _check_ints(list(ev.precision_at) or [1], "config.evaluation.precision_at", minimum=1)
  harness.check_distinct(ev.precision_at, "config.evaluation.precision_at")
  rs = ev.radius
  if isinstance(rs, (tuple, list)):
    harness.check_distinct(rs, "config.evaluation.radius")
  if rs is not None and (
    not isinstance(rs, (int, tuple, list))
    or isinstance(rs, bool)
    or any(
      isinstance(r, bool) or not isinstance(r, int) or not 0 <= r <= min(config.bits)
      for r in ([rs] if isinstance(rs, int) else rs)
    )
  ):
    raise harness.ConfigError(
      f"config.evaluation.radius: must be None, or an int or a tuple "
      f"of ints in [0, {min(config.bits)}] (the shortest code); got "
      f"{rs!r}. On the command line the key takes the form the config gives it (an int "
      "where the config's radius is an int, a tuple such as '(0, 2)' where it is a tuple)."
    )
  for param, values in sweep(ev).items():
    if not values:
      raise harness.ConfigError(f"config.evaluation.sweep.{param}: must hold at least one value.")
    harness.check_distinct(values, f"config.evaluation.sweep.{param}")
    if not any(param in _parameters(config, label) for label in config.methods):
      raise harness.ConfigError(
        f"config.evaluation.sweep.{param}: no method of config.methods takes {param!r} "
        "(a sweep re-encodes with an encoding parameter, e.g. MCH's sigma or xi)."
      )
    for label in config.methods:
      if param not in _parameters(config, label):
        continue
      for v in values:
        try:
          build_method(config, label, min(config.bits), **{param: v})
        except (TypeError, ValueError) as e:
          raise harness.ConfigError(
            f"config.evaluation.sweep.{param}: {v!r} for config.methods.{label}: {e}"
          ) from None
  if ev.ndcg_at is not None:
    _check_int(ev.ndcg_at, "config.evaluation.ndcg_at", minimum=1)
  if ev.get("topn") is not None:
    topn = ev.topn
    if not isinstance(topn, (tuple, list)):
      raise harness.ConfigError(
        f"config.evaluation.topn: must be a tuple of ints N >= 1 (P@N and R@N), or () for "
        f"none; got {topn!r}."
      )
    if topn:
      _check_ints(list(topn), "config.evaluation.topn", minimum=1)
    if list(topn) != sorted(set(topn)):
      raise harness.ConfigError(
        f"config.evaluation.topn: the N of P@N and R@N must increase, each once; got {topn!r}."
      )
  for flag in ("controls", "diagnose"):
    if not isinstance(ev.get(flag, False), bool):
      raise harness.ConfigError(
        f"config.evaluation.{flag}: must be True or False; got {ev.get(flag)!r}."
      )
  if ev.get("diagnose") and not ev.get("controls"):
    raise harness.ConfigError(
      "config.evaluation.diagnose: True needs config.evaluation.controls=True (the "
      "diagnosis reads the controls' oracle)."
    )
  for metric in config.tables:
    harness.check_choice(metric, metric_names(ev), "config.tables")
  harness.check_distinct(config.tables, "config.tables")
  bits = min(config.bits)
  reported = {n for label in config.methods for n in expected_metrics(config, label, bits)}
  for metric in config.tables:
    if metric not in reported:
      raise harness.ConfigError(
        f"config.tables: no method of config.methods reports {metric!r} (multi-code numbers "
        "come from MCH, weighted ones from methods with bit weights); its table would be "
        "empty."
      )
  if ev.get("controls") and not any(config.methods[m].method == "mch" for m in config.methods):
    raise harness.ConfigError(
      "config.evaluation.controls: True needs an MCH method in config.methods (the controls "
      "re-code MCH's crops); there is none."
    )


def _parameters(config, label: str) -> set[str]:
  """The keyword arguments a method's factory (or, for MCH, ``mch``) takes."""
  names = set(inspect.signature(jhash.methods.REGISTRY[config.methods[label].method]).parameters)
  if config.methods[label].method == "mch":
    names |= set(inspect.signature(jhash.methods.mch).parameters)
  return names


def pr_curve_bits(config) -> int | None:
  """``config.plots.pr_curve_bits``; None for no curves (0 says so on the command line,
  where an int key cannot be set to None)."""
  bits = config.plots.pr_curve_bits
  return (
    None
    if bits is None or (isinstance(bits, int) and not isinstance(bits, bool) and bits == 0)
    else bits
  )


def _check_plots(config) -> None:
  bits = pr_curve_bits(config)
  if bits is not None:
    harness.check_choice(
      bits, [*config.bits, 0], "config.plots.pr_curve_bits (one of bits, or 0 for no curves)"
    )
  f1_bits = config.plots.get("f1_bucket_bits")
  if config.evaluation.get("f1_buckets") and f1_bits is None:
    raise harness.ConfigError(
      "config.evaluation.f1_buckets needs config.plots.f1_bucket_bits (one of bits: the "
      "length whose F1-bucket curve is computed and drawn)."
    )
  if config.evaluation.get("topn") and bits is None and f1_bits is None:
    raise harness.ConfigError(
      "config.evaluation.topn needs config.plots.pr_curve_bits (one of bits: P@N and R@N are "
      "computed at the length whose curves are drawn); it is 0 or None."
    )
  if f1_bits is not None:
    harness.check_choice(f1_bits, list(config.bits), "config.plots.f1_bucket_bits (one of bits)")
    if not config.evaluation.get("f1_buckets"):
      raise harness.ConfigError(
        "config.plots.f1_bucket_bits needs config.evaluation.f1_buckets = True."
      )
  for name, spec in config.plots.curves.items():
    harness.check_keys(spec, ("metric", "methods"), f"config.plots.curves.{name}")
    if not spec.methods:
      raise harness.ConfigError(
        f"config.plots.curves.{name}.methods: must name at least one method (drop the "
        "curve to plot none)."
      )
    for label in spec.methods:
      harness.check_choice(label, list(config.methods), f"config.plots.curves.{name}.methods")
    harness.check_distinct(spec.methods, f"config.plots.curves.{name}.methods")


def check_trainable(config, batches_of) -> None:
  """Trace ``init`` and every phase's ``update`` of every method on every data set (first
  seed, shortest code; no compilation): a method that cannot train on a data set, a cut-off
  past the database, or a curve metric a method does not report fails here, before any
  cell trains."""
  bits = min(config.bits)
  reported = {}
  for dataset in reversed(list(config.datasets)):  # the first cells' data set stays cached
    train, query, database = load_split(batches_of, dataset, seeds(config)[0])
    _check_cutoffs(config.evaluation, streaming.num_items(database), dataset)
    for label, spec in config.methods.items():
      try:
        method = build_method(config, label, bits)
        streaming.check_streamable(method, train)
        reported[label] = reported_metrics(method, streaming.sample(train))
      except (TypeError, ValueError) as e:
        raise harness.ConfigError(
          f"config.methods.{label} ({spec.method}) cannot train on config.datasets.{dataset}: {e}"
        ) from None
  for name, spec in config.plots.curves.items():
    for label in spec.methods:
      harness.check_choice(
        spec.metric,
        sorted(reported[label]),
        f"config.plots.curves.{name}.metric (reported by {label})",
      )


def load_split(batches_of, dataset: str, seed: int):
  """``batches_of(dataset, seed)``, (train, query, database); a setting the data set's
  protocol refuses, data files it cannot read (a root that is missing or lacks files), or
  a split with no query or no training item, is a ``ConfigError`` naming
  ``config.datasets.DATASET``."""
  return harness.load_split(
    lambda: batches_of(dataset, seed),
    f"config.datasets.{dataset}",
    ("training items", "queries", "database items"),
    note=f" (seed {seed})",
    count=streaming.num_items,
  )


def _check_cutoffs(evaluation, num_items: int, dataset: str) -> None:
  cutoffs = [(k, "precision_at") for k in evaluation.precision_at]
  for k, key in cutoffs + [(evaluation.ndcg_at or 1, "ndcg_at")]:
    if k > num_items:
      raise harness.ConfigError(
        f"config.evaluation.{key}: the cut-off {k} exceeds the {num_items} "
        f"database items of config.datasets.{dataset}."
      )


def reported_metrics(method, train) -> set[str]:
  """The names of the metrics a method's phases report on ``train`` (shapes only)."""
  key = jax.random.key(0)
  state = jax.eval_shape(lambda k: jhash.init(method, k, train), key)
  if method.bind is not None:
    method = method.bind(train) or method
  names = set()
  for phase in method.phases:
    batch = train
    if phase.batch_size is not None:
      size = min(phase.batch_size, jhash.num_items(train))
      batch = next(jhash.minibatches(train, size, key, 1))
    names |= set(jax.eval_shape(phase.update, state, batch, key)[1])
  return names


# ----------------------------------------------------------------------------- cells


def expected_metrics(config, label: str, bits: int) -> list[str]:
  """The numbers ``run_cell`` reports for method ``label`` at ``bits``: ``metric_names``,
  the weighted ones only for a method with bit weights, the multi-code ones only for a
  method with several codes per item."""
  method = build_method(config, label, bits)
  weighted = getattr(method.extras, "weights", None) is not None
  return metric_names(config.evaluation, weighted=weighted, multi=method.encode_multi is not None)


def cell_check(config):
  """``check(cell, result)`` for ``harness.run_cells``: what is wrong with a finished
  cell's result in ``progress.json`` (a number missing or not a number), or None."""
  labels = {
    cell_name(d, m, b, s): (m, b)
    for s in seeds(config)
    for d in config.datasets
    for m in config.methods
    for b in config.bits
  }
  expected = functools.lru_cache(maxsize=None)(functools.partial(expected_metrics, config))
  return lambda cell, result: harness.metric_problem(result, expected(*labels[cell]))


def results_problem(metrics) -> str | None:
  """What is wrong with the ``metrics`` of a ``results.json`` this trainer wrote (cell ->
  means, ``std`` and ``per_seed``, as ``aggregate`` makes them), in words, or None."""
  if not isinstance(metrics, dict):
    return f"its 'metrics' must be an object keyed by cell; got {type(metrics).__name__}"
  for cell, entry in metrics.items():
    for where, part in _entry_parts(entry):
      problem = harness.metric_problem(part) if isinstance(part, dict) else "is not an object"
      if problem is not None:
        return f"cell {cell!r}{where} {problem}"
  return None


def _entry_parts(entry) -> list[tuple[str, object]]:
  """An aggregated cell's parts that hold numbers: the means, ``std``, each seed's result."""
  if not isinstance(entry, dict):
    return [("", entry)]
  per_seed = entry.get("per_seed", {})
  per_seed = per_seed if isinstance(per_seed, dict) else {}
  return [("", entry), (" std", entry.get("std", {}))] + [
    (f" per_seed {seed}", result) for seed, result in per_seed.items()
  ]


def build_method(config, label: str, bits: int, **overrides) -> jhash.HashingMethod:
  factory = jhash.methods.REGISTRY[config.methods[label].method]
  return factory(bits, **{**method_kwargs(config, label), **overrides})


def cell_name(dataset: str, method: str, bits: int, seed: int | None = None) -> str:
  name = f"{dataset}/{method}/{bits}"
  return name if seed is None else f"{name}/seed={seed}"


def method_weights(method, state):
  """The bit weights of a method that ranks by weighted Hamming distance, else None."""
  fn = getattr(method.extras, "weights", None)
  return None if fn is None else np.asarray(fn(state))


def hamming_metrics(
  q_codes, db_codes, q_labels, db_labels, evaluation, curve: bool, db_mask=None, top_k=None
) -> dict:
  """mAP (each tie convention), mAP@K (``top_k``: ``map_at_k``, tie-aware, K clipped to
  the database, the K used as ``map_k``), P@k, precision/recall within the radii, NDCG@k
  and, for ``curve``, the PR curve over every radius (and the F1-bucket curve with
  ``evaluation.f1_buckets``); ``db_mask`` for multi-code databases."""
  args = (q_codes, db_codes, q_labels, db_labels)
  kw = {} if db_mask is None else {"db_mask": db_mask}
  out = {
    MAP_NAMES[t]: jhash.metrics.mean_average_precision(*args, ties=t, **kw)
    for t in evaluation.map_ties
  }
  if map_at_spec(evaluation) is not None:
    k = len(db_labels) if top_k is None else min(int(top_k), len(db_labels))
    out["map_at_k"] = jhash.metrics.mean_average_precision(*args, top_k=k, **kw)
    out["map_k"] = k
  if evaluation.precision_at:
    ks = tuple(evaluation.precision_at)
    values = np.asarray(jhash.metrics.precision_at_k(*args, ks, **kw))
    out.update({f"precision_at_{k}": float(v) for k, v in zip(ks, values)})
  if radii(evaluation) or curve:
    pr = jhash.metrics.pr_curve_by_radius(*args, **kw)
    for r in radii(evaluation):
      out[f"precision_radius_{r}"] = float(pr["precision"][r])
      out[f"recall_radius_{r}"] = float(pr["recall"][r])
    if curve:
      out["pr_radius"] = {k: np.asarray(v).tolist() for k, v in pr.items()}
  if curve and evaluation.get("topn"):
    ns = tuple(min(int(n), len(db_labels)) for n in evaluation.topn)
    out["topn"] = {
      "n": list(ns),
      "precision": np.asarray(jhash.metrics.precision_at_k(*args, ns, **kw)).tolist(),
      "recall": np.asarray(jhash.metrics.recall_at_k(*args, ns, **kw)).tolist(),
    }
  if curve and evaluation.get("f1_buckets"):
    f1 = jhash.metrics.f1_bucket_curve(*args, **kw)
    out["f1_buckets"] = {k: np.asarray(v).tolist() for k, v in f1.items()}
  if evaluation.ndcg_at:
    out[f"ndcg_at_{evaluation.ndcg_at}"] = jhash.metrics.ndcg_at_k(*args, evaluation.ndcg_at, **kw)
  return out


def weighted_metrics(q_codes, db_codes, q_labels, db_labels, weights, evaluation) -> dict:
  """Tie-aware mAP (and NDCG@k) ranked by the weighted Hamming distance."""
  args = (q_codes, db_codes, q_labels, db_labels)
  out = {"map_weighted": jhash.metrics.weighted_mean_average_precision(*args, weights)}
  if evaluation.ndcg_at:
    out[f"ndcg_at_{evaluation.ndcg_at}_weighted"] = jhash.metrics.ndcg_at_k(
      *args, evaluation.ndcg_at, weights=weights
    )
  return out


def evaluate(method, state, query, database, evaluation, curve: bool, top_k=None) -> dict:
  """Every metric of ``evaluation`` for a trained method (module docstring); ``top_k``:
  the K of ``map_at_k`` (``map_at``)."""
  q_codes = streaming.encode(method, state, query)
  db_codes = streaming.encode(method, state, database)
  labels = (streaming.labels(query), streaming.labels(database))
  out = hamming_metrics(q_codes, db_codes, *labels, evaluation, curve, top_k=top_k)
  weights = method_weights(method, state)
  if weights is not None and evaluation.weighted:
    out.update(weighted_metrics(q_codes, db_codes, *labels, weights, evaluation))
    out["weights"] = weights.tolist()
  if method.encode_multi is not None:
    codes, mask = streaming.encode_multi(method, state, database)
    multi = hamming_metrics(q_codes, codes, *labels, evaluation, curve, db_mask=mask, top_k=top_k)
    multi["codes_per_item"] = float(np.mean(np.sum(np.asarray(mask), axis=1)))
    out.update({f"{k}_multi": v for k, v in multi.items()})
  return out


def sweep_metrics(rebuild, state, query, database, evaluation) -> dict:
  """The multi-code metrics of ``SWEEP_METRICS`` with each swept encoding parameter set
  in turn (``rebuild(**{parameter: value})`` gives the method; the state is reused)."""
  out = {}
  single = None
  for param, values in sweep(evaluation).items():
    for v in values:
      method = rebuild(**{param: v})
      if single is None:
        single = streaming.encode(method, state, query)
      codes, mask = streaming.encode_multi(method, state, database)
      args = (single, codes, streaming.labels(query), streaming.labels(database))
      pr = jhash.metrics.pr_curve_by_radius(*args, db_mask=mask)
      got = {
        "map": jhash.metrics.mean_average_precision(*args, db_mask=mask),
        "precision_radius_0": float(pr["precision"][0]),
        "recall_radius_0": float(pr["recall"][0]),
        "codes_per_item": float(np.mean(np.sum(np.asarray(mask), axis=1))),
      }
      out.update({f"{m}_multi@{param}={v}": float(got[m]) for m in SWEEP_METRICS})
  return out


def run_cell(config, workdir, batches, dataset: str, label: str, bits: int, seed: int) -> dict:
  """Train (resumably) and evaluate one cell."""
  train, query, database = batches
  method = build_method(config, label, bits)
  key = harness.cell_key(
    seed, config.datasets[dataset].protocol, config.methods[label].method, bits
  )
  state, history = workdir.fit(
    cell_name(dataset, label, bits, seed),
    method,
    key,
    streaming.training_data(train),
    checkpoint_every=config.checkpoint_every,
  )
  curve = bits in (pr_curve_bits(config), config.plots.get("f1_bucket_bits"))
  top_k = map_at(config.evaluation, config.datasets[dataset].protocol)
  result = evaluate(method, state, query, database, config.evaluation, curve=curve, top_k=top_k)
  if method.encode_multi is not None and sweep(config.evaluation):
    rebuild = lambda **o: build_method(
      config, label, bits, **{k: v for k, v in o.items() if k in _parameters(config, label)}
    )
    result.update(sweep_metrics(rebuild, state, query, database, config.evaluation))
  if config.evaluation.get("controls") and getattr(method.extras, "crop_codes", None):
    result.update(controls(config, dataset, method, state, batches, seed))
  result["history"] = {k: v.tolist() for k, v in history.items()}
  return result


def controls(config, dataset: str, method, state, batches, seed: int) -> dict:
  """MCH's controls on the cell's trained state (``experiments.mch_controls``); on the
  ``scenes`` protocol also the positive control, the database's objects coded alone."""
  from experiments import mch_controls

  train, query, database = batches
  spec = config.datasets[dataset].to_dict()
  items = counts = None
  if spec.pop("protocol") == "scenes":
    ds, split = jdata.scene_split(seed, **spec)
    items = jdata.scene_items_alone(ds, split["database"])
    counts = ds.extras["num_objects"][split["query"]]
  key = harness.cell_key(seed, dataset, "controls")
  diagnose = bool(config.evaluation.get("diagnose", False))
  return mch_controls.control_metrics(
    method, state, train, query, database, key, items, counts, diagnose=diagnose
  )


def train_and_evaluate(config, workdir) -> dict:
  """Run every cell of ``config`` in ``workdir`` (resumable); write results and plots."""
  validate(config)
  started = time.time()

  @functools.lru_cache(maxsize=1)  # one data set in memory at a time
  def batches_of(dataset: str, seed: int):
    options, stream = streaming.split_options(config.datasets[dataset].to_dict())
    protocol = options.pop("protocol")
    if stream is None:
      out = jdata.load_protocol(protocol, seed, **options)
    else:
      jdata.check_protocol(protocol, options)
      out = streaming.load(protocol, seed, options, stream)
    sizes = ", ".join(
      f"{streaming.num_items(b)} {n}" for b, n in zip(out, ("train", "queries", "database items"))
    )
    print(f"{dataset} (seed {seed}){' streamed' if stream else ''}: {sizes}", flush=True)
    return out

  with harness.Workdir(workdir, config) as wd:
    check_trainable(config, batches_of)
    cells = [
      (
        cell_name(d, m, b, s),
        lambda d=d, m=m, b=b, s=s: run_cell(config, wd, batches_of(d, s), d, m, b, s),
      )
      for s in seeds(config)
      for d in config.datasets
      for m in config.methods
      for b in config.bits
    ]
    results = harness.run_cells(cells, wd, check=cell_check(config))
    metrics = aggregate(config, results)
    table = tables(config, metrics)
    print(table, flush=True)
    make_plots(config, metrics, wd.path)
    harness.write_results(
      wd, config, metrics, started, extra={"table": table, "seeds": seeds(config)}
    )
  return metrics


# ----------------------------------------------------------------------------- report


def _numbers(result: dict) -> list[str]:
  return [k for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]


def aggregate(config, results: dict) -> dict:
  """Per ``data/method/bits``: the mean over seeds of every number, ``std``, ``per_seed``."""
  out = {}
  for d in config.datasets:
    for m in config.methods:
      for b in config.bits:
        per_seed = {str(s): results[cell_name(d, m, b, s)] for s in seeds(config)}
        names = _numbers(next(iter(per_seed.values())))
        values = {k: np.array([r[k] for r in per_seed.values()], np.float64) for k in names}
        entry = {k: float(v.mean()) for k, v in values.items()}
        entry["std"] = {k: float(v.std()) for k, v in values.items()}
        entry["per_seed"] = per_seed
        out[cell_name(d, m, b)] = entry
  return out


def tables(config, metrics: dict) -> str:
  """One markdown table per metric of ``config.tables``: mean (± std over seeds)."""
  out = []
  for metric in config.tables:
    rows = []
    for d in config.datasets:
      for m in config.methods:
        cells = [metrics[cell_name(d, m, b)] for b in config.bits]
        if any(metric in c for c in cells):
          rows.append([d, m] + [_mean_std(c, metric) for c in cells])
    header = ["dataset", "method"] + [f"{metric}@{b} bits" for b in config.bits]
    out.append(harness.format_table(rows, header))
  return "\n\n".join(out)


def _mean_std(cell: dict, metric: str):
  if metric not in cell:
    return "-"
  if len(cell["per_seed"]) == 1:
    return cell[metric]
  return f"{cell[metric]:.4f} ± {cell['std'][metric]:.4f}"


def make_plots(config, metrics: dict, workdir: pathlib.Path) -> None:
  """``METRIC_vs_bits.png`` per table metric family, ``pr_radius.png``, the curves."""
  bits = list(config.bits)
  families = {}
  for metric in config.tables:
    families.setdefault(metric.replace("_weighted", "").replace("_multi", ""), []).append(metric)
  for family, members in families.items():
    panels = []
    for d in config.datasets:
      series = []
      for m in config.methods:
        for i, metric in enumerate(members):
          cells = [metrics[cell_name(d, m, b)] for b in bits]
          if all(metric in c for c in cells):
            series.append(
              {
                "label": m if i == 0 else f"{m} ({metric})",
                "x": bits,
                "y": [c[metric] for c in cells],
                "style": "o-" if i == 0 else "s--",
              }
            )
      panels.append({"title": d, "xlabel": "bits", "ylabel": family, "series": series})
    plots.panels(panels, workdir / f"{family}_vs_bits.png")
  if pr_curve_bits(config) is not None:
    pr_plot(config, metrics, workdir / "pr_radius.png")
  if config.plots.get("f1_bucket_bits") is not None:
    f1_plot(config, metrics, workdir / "f1_buckets.png")
  if pr_curve_bits(config) is not None and config.evaluation.get("topn"):
    topn_plot(config, metrics, workdir / "topn.png")
  for name, spec in config.plots.curves.items():
    curve_plot(config, metrics, spec, workdir / f"{name}.png")


def pr_plot(config, metrics: dict, path) -> None:
  """Precision against recall within Hamming radius 0..K, mean over seeds."""
  bits = pr_curve_bits(config)
  panels = []
  for d in config.datasets:
    series = []
    for m in config.methods:
      curves = [r["pr_radius"] for r in metrics[cell_name(d, m, bits)]["per_seed"].values()]
      mean = lambda k: np.mean([c[k] for c in curves], axis=0).tolist()
      series.append({"label": m, "x": mean("recall"), "y": mean("precision")})
    panels.append({"title": d, "xlabel": "recall", "ylabel": "precision", "series": series})
  plots.panels(panels, path, title=f"Precision-recall within Hamming radius r = 0..{bits}")


def topn_plot(config, metrics: dict, path) -> None:
  """P@N and R@N against N (the first N items of the Hamming ranking, tie-aware), mean over
  seeds, at ``plots.pr_curve_bits``: two panels per data set."""
  bits = pr_curve_bits(config)
  panels = []
  for d in config.datasets:
    for key, name in (("precision", "P@N"), ("recall", "R@N")):
      series = []
      for m in config.methods:
        curves = [r["topn"] for r in metrics[cell_name(d, m, bits)]["per_seed"].values()]
        y = np.mean([c[key] for c in curves], axis=0).tolist()
        series.append({"label": m, "x": curves[0]["n"], "y": y})
      panels.append({"title": f"{d}: {name}", "xlabel": "N", "ylabel": name, "series": series})
  plots.panels(panels, path, title=f"Precision and recall of the first N items, {bits} bits")


def f1_plot(config, metrics: dict, path) -> None:
  """F1 within radius r against buckets visited (log scale), single codes solid,
  multi-code dashed, first seed; one panel per data set."""
  bits = config.plots.f1_bucket_bits
  panels = []
  for d in config.datasets:
    series = []
    for m in config.methods:
      result = metrics[cell_name(d, m, bits)]["per_seed"][str(config.seed)]
      for key, style, suffix in (("f1_buckets", "o-", ""), ("f1_buckets_multi", "s--", " (multi)")):
        if key in result:
          series.append(
            {
              "label": m + suffix,
              "x": result[key]["buckets"],
              "y": result[key]["f1"],
              "style": style,
            }
          )
    panels.append(
      {"title": d, "xlabel": "buckets visited", "ylabel": "F1", "logx": True, "series": series}
    )
  plots.panels(panels, path, title=f"F1 against buckets visited, {bits} bits")


def curve_plot(config, metrics: dict, spec, path) -> None:
  """A training metric against the step (first seed): a panel per data set and method."""
  panels = []
  for d in config.datasets:
    for m in spec.methods:
      series = []
      for b in config.bits:
        history = metrics[cell_name(d, m, b)]["per_seed"][str(config.seed)]["history"]
        if not history.get(spec.metric):  # no step ran (num_epochs = 0): nothing to draw
          continue
        y = [np.nan if v is None else v for v in history[spec.metric]]  # NaN: no value
        series.append({"label": f"{b} bits", "x": list(range(1, len(y) + 1)), "y": y, "style": "-"})
      panels.append(
        {"title": f"{d}: {m}", "xlabel": "step", "ylabel": spec.metric, "series": series}
      )
  plots.panels(panels, path)
