"""CDH, CDH-0 and the baselines on CDH's own cross-view sets (Wiki, MIRFlickr, NUS-WIDE),
read from the user's ``.mat`` file (``jhash.data.load_protocol(name, seed, root=...)``,
``jhash.data.CROSS_VIEW_PRESETS``), with the file's database where it has one: the trainer
of ``configs/cdh_papers.py``. The cells and the table are ``cdh_common``'s.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from jhash import data as jdata
from experiments import cdh_common as common
from experiments import harness
from experiments.cdh_common import (
  centre_and_scale,
  chance_map,
  database_of,
  describe,
  map_plot,
  protocol,
  summarise,
  validate,
)


#: The keys of a config of CDH's cross-view sets (``configs/cdh_papers.py``), and of its
#: one data set.
PAPER_KEYS = (
  "trainer",
  "seed",
  "bits",
  "datasets",
  "gamma",
  "cdh",
  "baselines",
  "baseline_options",
  "checkpoint_every",
  "baseline_checkpoint_every",
)
PAPER_DATASET_KEYS = ("root", "database_limit")


def train_and_evaluate(config, workdir) -> dict:
  """CDH, CDH-0 and the baselines on one of CDH's cross-view sets, from the user's file.

  ``config.datasets`` names one set of ``jhash.data.CROSS_VIEW_PRESETS`` with its
  ``root`` (the ``.mat`` file or its folder) and ``database_limit``. Per code length: CDH
  at ``config.gamma`` and CDH-0 from one key, each baseline from its own
  (``cdh_common.method_cells``); image queries against the text database and text queries
  against the image database (``paper_data``). Writes ``results.json`` (the cells, the
  table, the protocol with the chance mAP) and ``map_vs_bits.png``; prints the table.
  """
  name = check_paper_config(config)
  started = time.time()
  data = paper_data(name, config.datasets[name], config.seed)
  print(f"{name}: {describe(data)}", flush=True)
  with harness.Workdir(workdir, config) as wd:
    cells = [cell for bits in config.bits for cell in common.method_cells(config, wd, data, bits)]
    results = harness.run_cells(cells, wd)
    table = summarise(config, results, data["names"])
    print(table)
    map_plot(config, results, data["names"], wd.path / "map_vs_bits.png", name)
    record = dict(protocol(data), dataset=name, map_at=data["map_at"], notes=data["notes"])
    record["chance"] = chance_map(data["query"]["labels"], database_of(data)["labels"])
    harness.write_results(wd, config, results, started, extra={"table": table, "protocol": record})
  return results


def check_paper_config(config) -> str:
  """The one data set ``config.datasets`` names; ``ConfigError`` for an unknown key, set,
  or setting."""
  validate(config, PAPER_KEYS)
  if len(config.datasets) != 1:
    raise harness.ConfigError(
      f"config.datasets: must name one set (a run is one table); got {list(config.datasets)}."
    )
  (name,) = config.datasets
  harness.check_choice(name, jdata.CROSS_VIEW_PRESETS, "config.datasets")
  harness.check_keys(config.datasets[name], PAPER_DATASET_KEYS, f"config.datasets.{name}")
  if "gamma" in config.cdh:
    raise harness.ConfigError("config.cdh: gamma is config.gamma; remove it.")
  gamma = config.gamma
  if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0 <= gamma < np.inf:
    raise harness.ConfigError(f"config.gamma: must be a finite number >= 0; got {gamma!r}.")
  if not config.bits:
    raise harness.ConfigError("config.bits must not be empty.")
  return name


def paper_data(name: str, spec, seed: int) -> dict:
  """Cross-view set ``name`` from ``spec.root`` (``jhash.data.load_protocol``): batches
  ``train``, ``query`` and ``database`` (the training batch itself where the file has no
  database split), each view centred and scaled with the training items' statistics
  (``centre_and_scale``); view ``names`` ("image", "text"); ``map_at``, the preset's K
  (None: the whole database); ``notes``, the loader's warnings (sizes unlike the preset's).

  A missing root or file, or one that is not the set's, is a ``ConfigError`` naming
  ``config.datasets.NAME``.
  """
  where = f"config.datasets.{name}"
  try:
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      train, query, database = jdata.load_protocol(
        name, seed, root=spec["root"], database_limit=spec["database_limit"]
      )
  except (TypeError, ValueError, OSError) as e:
    raise harness.ConfigError(f"{where}: {harness.first_line(e, 1000)}") from None
  notes = [str(w.message) for w in caught]
  for note in notes:
    print(f"warning: {note}", flush=True)
  for batch, what in ((train, "training"), (query, "query"), (database, "database")):
    if batch["labels"].shape[0] == 0:
      raise harness.ConfigError(f"{where}: the file's {what} split holds no item.")
  try:
    if same_items(train, database):
      train, query = centre_and_scale(train, query)
      database = train
    else:
      train, query, database = centre_and_scale(train, query, database)
  except ValueError as e:
    raise harness.ConfigError(f"{where}: {e}") from None
  return {
    "train": train,
    "query": query,
    "database": database,
    "names": ("image", "text"),
    "map_at": jdata.protocol_map_at(name),
    "notes": notes,
  }


def same_items(a: dict, b: dict) -> bool:
  """Whether batches ``a`` and ``b`` hold the same views and labels."""
  pairs = list(zip(a["views"], b["views"])) + [(a["labels"], b["labels"])]
  return all(x.shape == y.shape and np.array_equal(x, y) for x, y in pairs)
