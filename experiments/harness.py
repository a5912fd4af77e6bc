"""What every experiment shares: the run directory, resumable cells, checks, results files.

A trainer's ``train_and_evaluate(config, workdir)`` checks its config (``check_keys``,
``check_kwargs``, ``check_choice``: an unknown or misspelled key, method, protocol or
setting is a ``ConfigError`` before anything trains), then runs a grid of *cells* (data
set x method x code length x seed, say) in a ``Workdir``:

* The workdir is locked for the run (``fcntl.flock`` on ``workdir/.lock``): a second
  run on it stops with a ``WorkdirError`` instead of mixing its files with the first's.
* ``config.json`` (the config and its fingerprint) is written before any cell starts;
  a run of a different config on a workdir holding work (finished cells, checkpoints,
  results) stops with a ``WorkdirError`` naming the keys that differ, so a killed run
  is only ever resumed by its own config. ``progress.json`` and ``results.json`` record
  the fingerprint too: a workdir holding work but no ``config.json`` (deleted) resumes
  only the config they record, and is refused when they record none. A run that stops
  with an error before any work (a config or data check) removes the workdir it made.
* A finished cell's metrics go to ``progress.json``; a cell in progress saves its method
  state and metric history every ``checkpoint_every`` steps with orbax-checkpoint
  (``checkpoints/<cell>/<step>/``, written to a temporary directory and renamed when
  complete), restored into the structure of the method's state. A rerun skips finished
  cells and resumes the cell in progress; step ``s`` trains with ``fold_in(key, s + 1)``,
  so it ends with the results of a run never interrupted.
* Training curves are TensorBoard event files, one run directory per cell
  (``tensorboard/<cell>/``, tags = the method's metric names, step = training step):
  ``tensorboard --logdir WORKDIR/tensorboard`` shows every cell. A resumed cell's
  writer purges the steps after its checkpoint.
* Every file is written to a temporary name and renamed into place (``os.replace``),
  created with mode 0666 less the umask (0644 under the usual 022), so a run killed at
  any moment leaves the old or the new file, never a torn one.

A cell's key comes from its identity, never its position in the grid: ``cell_key(seed,
*identity)`` folds each part (an int as it is, a string by a stable hash) into
``jax.random.key(seed)``.

Fault injection for the resume tests: ``JHASH_KILL_AFTER_SAVES=N`` kills the process
(SIGKILL) right after its N-th save (a checkpoint or a finished cell).
"""

from __future__ import annotations

import argparse
import copy
import difflib
import inspect
import json
import math
import re
import sys
import time
from typing import Any, Callable, Iterable, Mapping

import jax
import numpy as np

from experiments import _stop

# The run directory and its records live in modules of their own; their public names are
# this module's too (trainers and scripts use ``harness.Workdir``, ``harness.read_json``...).
from experiments._records import ConfigError as ConfigError
from experiments._records import PROGRESS_VERSION as PROGRESS_VERSION
from experiments._records import WorkdirError as WorkdirError
from experiments._records import atomic_write_bytes as atomic_write_bytes
from experiments._records import atomic_write_json as atomic_write_json
from experiments._records import cell_digest as cell_digest
from experiments._records import command as command
from experiments._records import config_differences as config_differences
from experiments._records import config_fingerprint as config_fingerprint
from experiments._records import first_line as first_line
from experiments._records import jsonable as jsonable
from experiments._records import machine as machine
from experiments._records import package_versions as package_versions
from experiments._records import read_json as read_json
from experiments._records import result_digest as result_digest
from experiments._records import stable_hash as stable_hash
from experiments._records import times_digest as times_digest
from experiments._records import with_digest as with_digest
from experiments._records import _is_seconds
from experiments._checkpoints import CRASH_ENV as CRASH_ENV
from experiments._workdir import Streamed as Streamed
from experiments._workdir import Workdir as Workdir
from experiments._checkpoints import quiet_orbax_leftovers as quiet_orbax_leftovers
from experiments._workdir import summary_writer_class as summary_writer_class
from experiments._workdir import write_curves as write_curves


#: The seeds a config may hold (keys ``seed`` and ``seeds``): NumPy's generators take any
#: int >= 0, but ``jax.random.key`` takes an int64 (beyond it, an OverflowError) and, with
#: JAX's 64-bit mode off (the default), keeps only its low 32 bits: seeds 2**32 apart would
#: get the same key. So a seed is an int in [0, 2**32 - 1].
SEED_RANGE = (0, 2**32 - 1)
#: Any other int of a config (counts, sizes, classes, steps): JAX keeps ints as int32, so
#: one past int32 ends in an OverflowError (or a wrapped value) once training starts.
INT_RANGE = (-(2**31), 2**31 - 1)


# ----------------------------------------------------------------------------- scripts


class ArgumentParser(argparse.ArgumentParser):
  """argparse for the scripts that read or plot runs (``mch_verdict``,
  ``mch_reward_tables``): a bad argument raises a ``ValueError`` naming it, which the
  script's ``main`` turns into one line (``script_error``) instead of usage and a message."""

  def error(self, message):
    raise ValueError(f"{message} (see {self.prog} --help)")


def script_error(error: BaseException) -> int:
  """Print ``error`` as one line, ``error: MESSAGE``, on stderr; return the exit status 2
  (a bad argument or input, as ``experiments.report`` and ``jhash.evaluate`` give)."""
  print(f"error: {' '.join(str(error).split())}", file=sys.stderr)
  return 2


# ----------------------------------------------------------------------------- config checks


def _suggest(name: str, allowed: Iterable[str]) -> str:
  close = difflib.get_close_matches(name, list(allowed), n=1)
  return f" (did you mean {close[0]!r}?)" if close else ""


def check_keys(
  config, allowed: Iterable[str], where: str = "config", required: Iterable[str] | None = None
) -> None:
  """Raise ``ConfigError`` for a key of ``config`` not in ``allowed`` or a missing one.

  ``required`` defaults to ``allowed`` (every key must be given).
  """
  allowed = list(allowed)
  for key in config:
    if key not in allowed:
      raise ConfigError(
        f"{where}: unknown key {key!r}{_suggest(key, allowed)}; allowed keys: {', '.join(allowed)}."
      )
  for key in allowed if required is None else required:
    if key not in config:
      raise ConfigError(f"{where}: missing key {key!r}.")


def check_int_ranges(config, where: str = "config") -> None:
  """Raise ``ConfigError`` naming the first int of ``config`` (nested dicts, lists and
  tuples too; outer keys first) out of its range: a seed (a key ``seed``, or an entry of
  ``seeds``) outside ``SEED_RANGE``, any other int outside ``INT_RANGE``. Run before
  anything is written or trained, so a value JAX cannot hold is refused at the door, not
  by an OverflowError."""
  queue = [(config, where, False)]
  while queue:
    value, path, seed = queue.pop(0)
    if hasattr(value, "items"):  # a dict or ConfigDict (items() resolves references)
      queue += [(v, f"{path}.{k}", str(k) in ("seed", "seeds")) for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
      queue += [(v, f"{path}[{i}]", seed) for i, v in enumerate(value)]
    elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
      low, high = SEED_RANGE if seed else INT_RANGE
      if not low <= value <= high:
        what = (
          "a seed must be an int in [0, 2**32 - 1] (jax.random.key keeps 32 bits)"
          if seed
          else f"an int must fit JAX's int32, [{low}, {high}]"
        )
        raise ConfigError(f"{path}: {what}; got {value}.")


def check_counts(config, keys: Iterable[str], minimum: int = 1, where: str = "config") -> None:
  """Raise ``ConfigError`` unless each of ``keys`` of ``config`` is an int >= ``minimum``
  (repeats, query counts, code lengths, checkpoint intervals)."""
  for key in keys:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
      raise ConfigError(f"{where}.{key}: must be an int >= {minimum}; got {value!r}.")


def check_entries(config, keys: Iterable[str], where: str = "config") -> None:
  """Raise ``ConfigError`` unless each of ``keys`` of ``config`` is a non-empty tuple whose
  entries are distinct (a table's rows or columns)."""
  for key in keys:
    values = config.get(key)
    if not isinstance(values, (tuple, list)) or not values:
      raise ConfigError(f"{where}.{key}: must be a non-empty tuple; got {values!r}.")
    check_distinct(values, f"{where}.{key}")


def check_distinct(values, where: str) -> None:
  """Raise ``ConfigError`` when ``values`` (a config's code lengths, say) repeat one: a
  table would hold the same column twice and the runs write one cell."""
  seen = [v for i, v in enumerate(values) if v in list(values)[:i]]
  if seen:
    raise ConfigError(f"{where}: each value once; {seen[0]!r} repeats in {tuple(values)!r}.")


def load_split(
  load: Callable[[], tuple],
  where: str,
  parts: Iterable[str],
  note: str = "",
  count: Callable | None = None,
) -> tuple:
  """``load()``, a data set's batches (one per name of ``parts``, e.g. "training items"),
  checked before any training: a setting its protocol refuses or files it cannot read,
  or a part without items, is a ``ConfigError`` naming ``where`` (``note``: e.g. the seed;
  ``count``: a part's items, ``jhash.num_items`` by default)."""
  import jhash  # local: keeps this module importable without initialising jhash

  count = jhash.num_items if count is None else count
  try:
    batches = load()
  except (TypeError, ValueError, OSError) as e:
    raise ConfigError(f"{where}: {first_line(e, 1000)}") from None
  for batch, what in zip(batches, parts):
    if count(batch) == 0:
      raise ConfigError(
        f"{where}: the split holds no {what}{note}; raise its per-class or total count."
      )
  return batches


def check_choice(value, allowed: Iterable, where: str) -> None:
  """Raise ``ConfigError`` unless ``value`` is one of ``allowed``."""
  allowed = list(allowed)
  if value not in allowed:
    hint = _suggest(value, map(str, allowed)) if isinstance(value, str) else ""
    if isinstance(value, str) and value.strip().startswith("("):
      hint += (
        "; a tuple of strings needs its strings quoted on the command line, e.g. "
        "--config.tables=\"('map',)\""
      )
    raise ConfigError(
      f"{where}: {value!r} is not allowed{hint}; allowed values: {', '.join(map(repr, allowed))}."
    )


def check_kwargs(factory: Callable, kwargs: Mapping, where: str, skip: int = 1) -> None:
  """Raise ``ConfigError`` for a keyword that ``factory`` does not take.

  ``skip``: leading positional parameters the caller passes itself (``num_bits``).
  """
  params = list(inspect.signature(factory).parameters.values())[skip:]
  if any(p.kind is p.VAR_KEYWORD for p in params):
    return
  names = [p.name for p in params if p.kind is not p.VAR_POSITIONAL]
  for key in kwargs:
    if key not in names:
      raise ConfigError(
        f"{where}: {getattr(factory, '__name__', factory)} takes no argument "
        f"{key!r}{_suggest(key, names)}; it takes: {', '.join(names)}."
      )


# ----------------------------------------------------------------------------- keys


def cell_key(seed: int, *identity) -> jax.Array:
  """The key of a cell: ``jax.random.key(seed)`` folded with each part of its identity.

  An int part (a code length, a repeat) is folded as it is; any other part (a data set,
  a method) by its ``stable_hash``. The key depends on what the cell is, never on where
  it stands in the config.
  """
  key = jax.random.key(int(seed))
  for part in identity:
    is_int = isinstance(part, (int, np.integer)) and not isinstance(part, bool)
    key = jax.random.fold_in(key, int(part) if is_int else stable_hash(part))
  return key


# ----------------------------------------------------------------------------- cells


def _note_dropped(workdir: Workdir, todo: list[str]) -> None:
  """Print a note when ``results.json`` (this config's) was written from finished cells
  of ``todo`` that ``progress.json`` no longer holds: they train again, and the user
  learns that ``progress.json`` was replaced or edited."""
  try:
    earlier = json.loads((workdir.path / "results.json").read_text())
  except (OSError, ValueError):
    return
  if not isinstance(earlier, dict) or earlier.get("fingerprint") != workdir.fingerprint:
    return
  written = earlier.get("cell_digests")
  dropped = [c for c in todo if isinstance(written, dict) and c in written]
  if dropped:
    print(
      f"note: results.json was written from {len(dropped)} finished cell(s) that "
      f"progress.json does not hold (e.g. {dropped[0]!r}): one of the two files was "
      "replaced or edited. Those cells train again (same seeds, same results) and "
      "results.json is written again.",
      flush=True,
    )


def run_cells(
  cells: list[tuple[str, Callable[[], dict]]],
  workdir: Workdir,
  progress: bool = True,
  check: Callable[[str, dict], str | None] | None = None,
) -> dict:
  """Run named cells in order, skipping finished ones; returns cell -> result.

  Prints one line per finished cell (its float metrics and wall time); a tqdm bar over
  the cells shows on a terminal only (``disable=None``). Every finished cell is checked
  before any cell runs (``Workdir.check_done``): against the digest written with its
  result, or, without one, by ``check(cell, result)`` (what is wrong with it, or None;
  default ``metric_problem``).
  """
  from tqdm.auto import tqdm

  names = [name for name, _ in cells]
  workdir.check_done(names, check or (lambda _, result: metric_problem(result)))
  foreign = sorted(set(workdir.progress["cells"]) - set(names))
  if foreign:
    raise WorkdirError(
      f"{workdir.progress_path} is damaged: it holds a result for cell {foreign[0]!r}, "
      f"which this config does not run (added by hand, or another run's). To go on, delete "
      f"the entry {foreign[0]!r} from its 'cells' and 'digests' and run again "
      "(the config's own cells are kept)."
    )

  todo = [name for name, _ in cells if workdir.done(name) is None]
  _note_dropped(workdir, todo)
  if todo and len(todo) < len(cells):
    print(
      f"{len(cells) - len(todo)} of {len(cells)} cells already done; running {len(todo)}.",
      flush=True,
    )
  bar = tqdm(total=len(todo), desc="cells", disable=None if progress else True, dynamic_ncols=True)
  out = {}
  for name, fn in cells:
    _stop.check()  # a signal whose first stop was dropped (experiments/_stop.py)
    result = workdir.done(name)
    if result is None:
      bar.set_postfix_str(name)
      started = time.time()
      result = jsonable(fn())
      seconds = time.time() - started
      workdir.finish(name, result, seconds)
      bar.update(1)
      bar.write(f"{name}: {summary_line(result)} ({seconds:.1f} s)")
    out[name] = copy.deepcopy(result)  # what a trainer does with it leaves progress as written
  bar.close()
  return out


def is_number(value) -> bool:
  """A number as ``jsonable`` writes one: an int or float, None (NaN), "inf" or "-inf"."""
  if isinstance(value, (int, float)):
    return not isinstance(value, bool)
  return value is None or value in ("inf", "-inf")


def metric_problem(result: Mapping, names: Iterable[str] = ()) -> str | None:
  """What is wrong with the numbers of a cell's result, in words, or None: each of
  ``names`` must be there and a number (``is_number``), and so must every other
  top-level value that is neither an object nor a list (curves, histories)."""
  names = list(names)
  for name in names:
    if name not in result:
      return f"has no {name!r} (expected a number)"
  for name, value in result.items():
    scalar = not isinstance(value, (dict, list))
    if (scalar or name in names) and not is_number(value):
      other = "" if name in names else " (or a list or object, as jhash wrote it)"
      return f"has {name!r} = {json.dumps(value)[:60]}; expected a number{other}"
    if isinstance(value, float) and math.isnan(value):  # jhash writes NaN as null
      return f"has {name!r} = NaN, which jhash writes as null"
    if _FRACTION.match(name) and isinstance(value, (int, float)) and not 0 <= value <= 1:
      return f"has {name!r} = {value!r}; a mAP, precision, recall or NDCG is in [0, 1]"
  return None


#: The names of a cell's numbers that are fractions in [0, 1] (not ``map_k``, the K): a
#: mAP, precision, recall or NDCG by name (``train_map`` too) and a cross-view mAP
#: (``"pix->fou"``).
_FRACTION = re.compile(r"^(?!map_k(_|$))((.*_)?(map|precision|recall|ndcg)(_|$)|.*->)")


def summary_line(result: Mapping) -> str:
  """``name=value`` for each float metric at the top level of a cell's result."""
  return ", ".join(f"{k}={v:.4f}" for k, v in result.items() if isinstance(v, float))


def write_results(
  workdir: Workdir, config, metrics: dict, started: float, extra: dict | None = None
) -> dict:
  """Write ``results.json``: metrics, config, seed, package versions, wall times.

  ``wall_time_s`` counts every run of this config in the workdir that wrote results (a
  rerun of a finished workdir adds its own seconds to the first run's), and is at least
  the finished cells' own seconds (a run killed before it wrote results, then resumed);
  None (unknown) once a finished cell's wall time was dropped as damaged."""
  elapsed = time.time() - started
  progress = workdir.progress
  earlier = progress.get("wall_time_s")  # checked with its digest
  # Unknown (None) once a finished cell's seconds are gone (dropped as damaged), or the
  # earlier runs' total was: a sum without them would understate the run.
  known = set(progress["cells"]) <= set(progress["seconds"])
  known = known and ("wall_time_s" not in progress or _is_seconds(earlier))
  cells = sum(v for v in progress["seconds"].values() if isinstance(v, (int, float)))
  total = elapsed + (earlier if _is_seconds(earlier) else 0.0)
  progress["wall_time_s"] = max(total, cells) if known else None
  workdir.write_progress()
  results = {
    "metrics": metrics,
    "config": jsonable(config),
    "seed": config.get("seed"),
    "versions": package_versions(),
    "machine": machine(),
    "command": command(),
    "wall_time_s": workdir.progress["wall_time_s"],
    "cell_seconds": workdir.progress["seconds"],
    "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "fingerprint": workdir.fingerprint,  # config.json's, so a lost config.json is noticed
    # The finished cells it was written from: experiments.report refuses it beside a
    # progress.json that does not hold them (results.json copied from another folder).
    "cell_digests": dict(workdir.progress.get("digests", {})),
  }
  results.update(extra or {})
  results = with_digest(results)  # experiments.report checks it
  atomic_write_json(workdir.path / "results.json", results)
  return results


def format_table(rows: list[list[Any]], header: list[str]) -> str:
  """A GitHub-markdown table; floats with four decimals."""
  cells = [[str(h) for h in header]] + [
    [f"{v:.4f}" if isinstance(v, float) else str(v) for v in row] for row in rows
  ]
  widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
  line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
  sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
  return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])
