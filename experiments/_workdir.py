"""The run directory: its lock, config, finished cells, checkpoints and curves (``Workdir``).

How a run keeps its work is told in ``experiments.harness``'s docstring; this module holds
the directory and the checks that find it damaged, moved or of another run; its cells'
checkpoints are ``experiments._checkpoints``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pathlib
import sys
from typing import Any, Callable, Iterable, Mapping, NamedTuple

import jax
import numpy as np

from experiments import _processes
from experiments import _stop
from experiments._checkpoints import Checkpoints
from experiments._checkpoints import _safe
from experiments._records import _EDITED
from experiments._records import PROGRESS_VERSION
from experiments._records import WorkdirError
from experiments._records import _is_seconds
from experiments._records import atomic_write_json
from experiments._records import cell_digest
from experiments._records import config_differences
from experiments._records import config_fingerprint
from experiments._records import jsonable
from experiments._records import read_json
from experiments._records import times_digest


#: What a run writes in a workdir before any work: removed again when the run stops with
#: an error in a workdir it made (``Workdir.close``).
_BARE = {".lock", "config.json"}


def _lock(path: pathlib.Path) -> int:
  fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except BlockingIOError:
    os.close(fd)
    raise WorkdirError(
      f"{path.parent} is in use by another run (it holds the lock "
      f"{path.name}); wait for it to finish or use another workdir."
    ) from None
  return fd


#: What a run writes in its workdir: files, and folders (each holding a folder a cell).
_WORKDIR_FILES = ("progress.json", "config.json", "results.json", ".lock")
_WORKDIR_FOLDERS = ("checkpoints", "tensorboard")
#: The suffixes of the other files a run writes (tables, plots, the report).
_WRITTEN_SUFFIXES = (".json", ".png", ".md", ".txt", ".csv")


def _check_entries(path: pathlib.Path) -> None:
  """A ``WorkdirError`` naming the first entry of a workdir that is of the wrong kind: a
  folder where a run writes a file, a file where it keeps folders."""
  if not path.is_dir():
    return
  wrong = None
  for entry in sorted(path.iterdir()):
    name = entry.name
    if entry.is_dir() and (name in _WORKDIR_FILES or entry.suffix in _WRITTEN_SUFFIXES):
      wrong = (entry, "a folder", "a file")
    elif name in _WORKDIR_FOLDERS and not entry.is_dir():
      wrong = (entry, "a file", "a folder")
    elif name in _WORKDIR_FOLDERS:
      inner = next((e for e in sorted(entry.iterdir()) if not e.is_dir()), None)
      wrong = None if inner is None else (inner, "a file", "a folder (one a cell)")
    if wrong is not None:
      where, got, want = wrong
      raise WorkdirError(
        f"{where} is {got}, where a run keeps {want}; something other than jhash made it. "
        "Move it out of the workdir (or delete it) and run again; the run's other work "
        "is kept."
      )


class Workdir(Checkpoints):
  """One run directory: its lock, config, finished cells, checkpoints and curves.

  Use as a context manager (the lock is released on exit, or when the process dies).
  """

  def __init__(self, workdir, config):
    self.path = pathlib.Path(workdir)
    self._lock_fd = None
    try:
      self._check_place()
    except OSError as error:  # e.g. a folder of the system's that cannot be listed
      raise WorkdirError(
        f"workdir {str(self.path)!r} cannot be read: {error.strerror or error}"
        f"{f' ({error.filename})' if error.filename else ''}. Give a folder of your own."
      ) from None
    if not _processes.writes():  # another process of the run writes (and locks) it
      self._made = []
    else:
      self._make_and_lock()
    self.progress_path = self.path / "progress.json"
    self.fingerprint = config_fingerprint(config)
    try:
      self.progress = read_json(
        self.progress_path,
        {"cells": {}, "seconds": {}},
        remedy="It holds the results of the finished cells: restore it from a copy, or "
        "delete it and run again to train those cells again (same seeds, same results; "
        "checkpoints of a cell in progress are kept).",
      )
      self._check_progress()
      self._claim(config)
    except BaseException:
      self.close(failed=True)
      raise
    self._managers: dict[str, Any] = {}
    self._saves = 0

  def _check_place(self) -> None:
    """Refuse a workdir that is (or sits under) a file, or holds entries of the wrong kind;
    note the folders this run makes (the workdir and missing parents), removed again by a
    run that stops with an error before writing anything but config.json and the lock."""
    blocking = next((p for p in (self.path, *self.path.parents) if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
      raise WorkdirError(
        f"workdir {str(self.path)!r} must be a directory (new or a run's); "
        f"{str(blocking)!r} is a file. Move or delete that file, or give another workdir."
      )
    self._made = [p for p in (self.path, *self.path.parents) if not p.exists()]
    _check_entries(self.path)

  def _make_and_lock(self) -> None:
    try:
      self.path.mkdir(parents=True, exist_ok=True)
      self._lock_fd = _lock(self.path / ".lock")
    except OSError as error:
      raise WorkdirError(
        f"workdir {str(self.path)!r} cannot be created or written: {error.strerror or error}."
      ) from None

  def _check_progress(self) -> None:
    """Refuse a ``progress.json`` that is JSON but not what a run writes (an object of
    ``cells`` and ``seconds``, each an object keyed by cell, a cell's result an object)."""
    progress = self.progress
    problem = None
    if not isinstance(progress, dict):
      problem = f"it holds a {type(progress).__name__}, not an object of cells and seconds"
    else:
      progress.setdefault("seconds", {})  # runs before wall times were kept have none
      for key in ("cells", "seconds"):
        if not isinstance(progress.get(key), dict):
          got = "no such key" if key not in progress else type(progress[key]).__name__
          problem = f"its {key!r} must be an object keyed by cell; got {got}"
          break
      else:
        bad = next((c for c, r in progress["cells"].items() if not isinstance(r, dict)), None)
        if bad is not None:
          problem = f"the result of cell {bad!r} is not an object"
        # A new workdir's (no file yet) takes this version; a file without it was written
        # before results carried digests (or the version was removed): its results cannot
        # be checked, so they are not taken.
        if not self.progress_path.exists():
          progress.update(version=PROGRESS_VERSION, digests={})
        digests = progress.get("digests")
        if problem is not None:
          pass  # named above
        elif progress.get("version") != PROGRESS_VERSION:
          version = progress.get("version")
          later = isinstance(version, int) and version > PROGRESS_VERSION
          got = repr(version) if "version" in progress else "none"
          problem = f"its 'version' must be {PROGRESS_VERSION}; got {got} " + (
            "(a later jhash wrote it, or it was edited: run that version of jhash on it)"
            if later
            else "(an earlier jhash, whose digests do not cover what this one checks, wrote "
            "it, or it was edited), so its results cannot be checked"
          )
        elif not isinstance(digests, dict) or not all(isinstance(d, str) for d in digests.values()):
          problem = "its 'digests' must be an object of strings keyed by cell"
        if problem is None:
          self._check_times()
    if problem is not None:
      raise WorkdirError(
        f"{self.progress_path} is damaged ({problem}); jhash writes it, so something else "
        "changed it. It holds the results of the finished cells: restore it from a copy, or "
        "delete it and run again to train those cells again."
      )

  def _check_times(self) -> None:
    """Refuse wall times that are not seconds >= 0, or that differ from the digest written
    with them; dropping them loses no result."""
    progress = self.progress
    seconds = progress["seconds"]
    bad = next((c for c, v in seconds.items() if not _is_seconds(v)), None)
    if bad is not None:
      what = (
        f"its 'seconds' of cell {bad!r} is {json.dumps(seconds[bad])[:40]}; expected seconds >= 0"
      )
    elif progress.get("wall_time_s") is not None and not _is_seconds(progress["wall_time_s"]):
      what = (
        f"its 'wall_time_s' is {json.dumps(progress['wall_time_s'])[:40]}; expected seconds >= 0"
      )
    elif progress.get("time_digest") != times_digest(progress) and (
      seconds or "wall_time_s" in progress or "time_digest" in progress  # none: unknown
    ):
      self._refuse_edited_cells()  # cells edited with their times: name the cells first
      what = (
        "its wall times ('seconds' and 'wall_time_s') differ from the digest jhash wrote with them"
        if "time_digest" in progress
        else "its wall times ('seconds' and 'wall_time_s') have lost their digest "
        "('time_digest' was removed, they were not)"
      )
    else:
      return
    raise WorkdirError(
      f"{self.progress_path} is damaged: {what}. jhash writes it, so something else changed "
      "it. To go on, delete its keys 'seconds' (every cell's), 'wall_time_s' and "
      "'time_digest' and run again (the cells' results are kept; their wall times are "
      "then unknown)."
    )

  def _refuse_edited_cells(self) -> None:
    """Refuse ``progress.json`` when finished cells' results differ from their digests,
    naming them all (their wall times are damaged too: both go)."""
    digests = self.progress.get("digests")
    digests = digests if isinstance(digests, dict) else {}
    edited = [
      cell
      for cell, result in self.progress["cells"].items()
      if digests.get(cell) not in (None, cell_digest(cell, result, self.fingerprint))
    ]
    if edited:
      names = ", ".join(repr(c) for c in edited)
      raise WorkdirError(
        f"{self.progress_path} is damaged: the results of cells {names} differ from the "
        "digests jhash wrote with them (a value, a curve or a history was changed or lost, "
        "or the entries are another run's), "
        "and so do its wall times; jhash writes it, so something else changed it. To go "
        f"on, delete the entries {names} from its 'cells', and its keys 'seconds' (every "
        "cell's), 'wall_time_s' and 'time_digest', and run again: those cells train again "
        "(same seeds, same results; the wall times are then unknown)."
      )

  def write_progress(self) -> None:
    """Write ``progress.json`` (atomically) in this version's layout, its wall times under
    their digest."""
    self.progress["version"] = PROGRESS_VERSION
    self.progress["fingerprint"] = self.fingerprint  # which config made the cells
    self.progress["time_digest"] = times_digest(self.progress)
    atomic_write_json(self.progress_path, self.progress)

  def _claim(self, config) -> None:
    """Write ``config.json`` before any work; refuse a config other than the one whose
    work (finished cells, checkpoints, results) the workdir holds.

    The fingerprint is also kept in ``progress.json`` and ``results.json``: a workdir
    whose ``config.json`` is gone resumes only a config of the fingerprint they record,
    and one holding work that records none (checkpoints only, an older run) is refused.
    """
    path = self.path / "config.json"
    holds_work = self._holds_work()
    recorded = self._recorded_fingerprints()
    if recorded or not holds_work:
      remedy = (
        "To go on, delete it and run again: the run's own config writes it again and keeps "
        "the run's work, which records the config's fingerprint (another config is refused)."
      )
    else:
      remedy = self._restore_remedy()
    saved = read_json(path, remedy=remedy)
    if saved is not None and not (
      isinstance(saved, dict)
      and isinstance(saved.get("fingerprint"), str)
      and isinstance(saved.get("config"), dict)
    ):
      raise WorkdirError(
        f"{path} is damaged (it must be an object with a 'fingerprint' string and a "
        f"'config' object; got {json.dumps(saved)[:80]}); jhash writes it, so something "
        f"else changed it. {remedy}"
      )
    if saved is not None and config_fingerprint(saved["config"]) != saved["fingerprint"]:
      raise WorkdirError(
        f"{path} is damaged: its 'config' and its 'fingerprint' {saved['fingerprint']} "
        f"disagree (one of them was changed); jhash writes it, so something else changed "
        f"it. {remedy}"
      )
    if saved is None and holds_work:
      self._check_recorded(recorded, config)
    elif saved is not None and saved["fingerprint"] != self.fingerprint and holds_work:
      mine = sorted(n for n, f in recorded.items() if f == self.fingerprint)
      if mine and len(mine) < len(recorded):  # some of the work is this config's, some not
        self._refuse_mixed(saved, recorded, config)
      if recorded and set(recorded.values()) == {self.fingerprint}:
        raise WorkdirError(
          f"{path} is damaged: it records fingerprint {saved['fingerprint']}, but the "
          f"run's {' and '.join(sorted(recorded))} record this config's ({self.fingerprint}); "
          "jhash writes it, so something else changed it. To go on, delete it and run "
          "again: the run's own config writes it again and keeps the run's work."
        )
      self._refuse_other_config(saved["fingerprint"], saved["config"], config)
    elif saved is not None:  # the work must be this config's too (not copied in)
      foreign = sorted(n for n, f in recorded.items() if f != self.fingerprint)
      if foreign and saved["fingerprint"] == self.fingerprint:
        self._refuse_copied(foreign, recorded)
      for name in foreign:
        self._refuse_other_config(recorded[name], None, config, name)
    if saved is None or saved["fingerprint"] != self.fingerprint:
      atomic_write_json(path, {"fingerprint": self.fingerprint, "config": config})

  def _refuse_copied(self, foreign: list[str], recorded: dict) -> None:
    """``config.json`` records this config, but the work in ``foreign`` (progress.json,
    results.json) records another: name them all, and what deleting them costs."""
    one = len(foreign) == 1
    lost = (
      ("its" if one else "progress.json's") + " finished cells train again"
      if "progress.json" in foreign
      else "it is written again from progress.json, nothing trained again"
    )
    each = " and ".join(str(self.path / n) for n in foreign)
    prints = ", ".join(f"{n} {recorded[n]}" for n in foreign)
    raise WorkdirError(
      f"{each} {'is' if one else 'are'} damaged or another run's: "
      f"{'it records fingerprint ' + recorded[foreign[0]] if one else 'they record ' + prints}"
      f", but config.json records this config's ({self.fingerprint}). Restore "
      f"{'it' if one else 'them'} from a copy, or delete {'it' if one else 'them'} and run "
      f"again ({lost})."
    )

  def _refuse_mixed(self, saved: dict, recorded: dict, config) -> None:
    """``config.json`` and some of the work record another config, and the rest of the
    work records this one: name the files that are another run's and how to go on."""
    foreign = ["config.json"] + sorted(n for n, f in recorded.items() if f != self.fingerprint)
    mine = sorted(n for n, f in recorded.items() if f == self.fingerprint)
    diff = "; ".join(config_differences(saved["config"], config)[:8])
    lost = (
      "the cells progress.json held train again"
      if "progress.json" in foreign
      else "results.json is written again from progress.json, nothing trained again"
    )
    raise WorkdirError(
      f"{self.path} mixes two runs' files: {' and '.join(foreign)} record fingerprint "
      f"{saved['fingerprint']} (another config{': ' + diff if diff else ''}), but "
      f"{' and '.join(mine)} {'records' if len(mine) == 1 else 'record'} this config's "
      f"({self.fingerprint}). If this folder is this config's run, those files were copied "
      f"in: delete {' and '.join(foreign)} and run again ({lost}). Otherwise use a fresh "
      "workdir."
    )

  def _restore_remedy(self) -> str:
    return (
      f"config.json alone records which config made the work in {self.path}: restore "
      "config.json from a copy; or use a new workdir, or delete this one, to start over."
    )

  def _check_recorded(self, recorded: dict, config) -> None:
    """``config.json`` is missing from a workdir that holds work: go on only when the
    work records this config's fingerprint (``recorded``: file name -> fingerprint)."""
    if not recorded:
      raise WorkdirError(
        f"{self.path} holds a run's work (finished cells, checkpoints or results) but no "
        f"config.json, and the work records no config, so it may be another config's. "
        f"{self._restore_remedy()}"
      )
    for name, fingerprint in recorded.items():
      if fingerprint != self.fingerprint:
        old = None  # the config that made the work, for the keys that differ
        if recorded.get("results.json") == fingerprint:
          old = read_json(self.path / "results.json").get("config")
        self._refuse_other_config(fingerprint, old, config, name)

  def _refuse_other_config(self, fingerprint, old, config, source="config.json") -> None:
    diff = "" if not isinstance(old, dict) else "; ".join(config_differences(old, config)[:8])
    raise WorkdirError(
      f"{self.path} holds a run of a different config (its {source} records fingerprint "
      f"{fingerprint}, this config {self.fingerprint}{'; ' + diff if diff else ''}). Use a "
      f"fresh workdir, or delete this one to start over."
    )

  def _holds_work(self) -> bool:
    checkpoints = self.path / "checkpoints"
    return (
      (self.path / "progress.json").exists()
      or (self.path / "results.json").exists()
      or (checkpoints.is_dir() and any(checkpoints.iterdir()))
    )

  def _recorded_fingerprints(self) -> dict[str, str]:
    """The config fingerprints ``progress.json`` and ``results.json`` record (a file
    without one, or damaged, records none)."""
    out = {}
    for name in ("progress.json", "results.json"):
      with contextlib.suppress(OSError, ValueError):
        record = json.loads((self.path / name).read_text())
        if isinstance(record, dict) and isinstance(record.get("fingerprint"), str):
          out[name] = record["fingerprint"]
    return out

  def __enter__(self):
    return self

  def __exit__(self, kind, *exc):
    self.close(failed=kind is not None)

  def close(self, failed: bool = False) -> None:
    """Release the lock; after an error (``failed``), a workdir this run made that holds
    nothing but ``config.json`` and the lock (a config or data check failed before any
    work) is removed again, so the error leaves nothing behind."""
    for manager in getattr(self, "_managers", {}).values():
      manager.close()
    unused = failed and self._made and self.path.is_dir()
    unused = unused and {p.name for p in self.path.iterdir()} <= _BARE
    if unused:
      for name in _BARE:
        (self.path / name).unlink(missing_ok=True)
    if self._lock_fd is not None:
      os.close(self._lock_fd)  # releases the flock
      self._lock_fd = None
    if unused:
      for folder in self._made:  # innermost first; a folder something else wrote to stays
        with contextlib.suppress(OSError):
          folder.rmdir()
      self._made = []

  # --- finished cells -------------------------------------------------------
  def done(self, cell: str) -> dict | None:
    return self.progress["cells"].get(cell)

  def finish(self, cell: str, result: dict, seconds: float) -> None:
    """Record a cell's result (and its wall time, kept apart from the metrics)."""
    self.progress["cells"][cell] = jsonable(result)
    self.progress["digests"][cell] = cell_digest(
      cell, self.progress["cells"][cell], self.fingerprint
    )
    self.progress["seconds"][cell] = seconds
    self.write_progress()
    self.remove_state(cell)
    self._after_save()

  def check_done(self, cells: Iterable[str], check: Callable[[str, dict], str | None]) -> None:
    """Refuse a finished cell of ``cells`` whose result differs from the digest written
    with it (a hand-edited or damaged ``progress.json``), naming the cell, what
    ``check(cell, result)`` finds wrong (if anything; without a digest, a run before
    digests were kept, only that), and how to go on."""
    problems = {}
    for cell in cells:
      result = self.done(cell)
      digest = self.progress["digests"].get(cell)
      if result is None:
        continue
      if digest is None:
        problems[cell] = check(cell, result) or "has no digest (jhash writes one with every result)"
      elif digest != cell_digest(cell, result, self.fingerprint):
        found = check(cell, result)
        problems[cell] = _EDITED + (f"; it {found}" if found else "")
    if not problems:
      return
    cell, problem = next(iter(problems.items()))
    others = ", ".join(repr(c) for c in problems if c != cell)
    also = f" (so does the result of {others})" if others else ""
    several = len(problems) > 1
    raise WorkdirError(
      f"{self.progress_path} is damaged: the result of cell {cell!r} {problem}{also}; jhash "
      "writes it, so something else changed it. To go on, delete the "
      f"entr{'ies' if several else 'y'} {', '.join(repr(c) for c in problems)} from its "
      f"'cells' and run again: {'those cells train' if several else 'that cell trains'} "
      "again (same seed, same result)."
    )

  # --- states inside a cell (orbax) -------------------------------------------
  # --- curves -------------------------------------------------------------------
  def curve_writer(self, cell: str, start_step: int = 0):
    """A tensorboardX ``SummaryWriter`` for ``cell``; steps after ``start_step`` that an
    earlier, killed run wrote are purged (hidden) by TensorBoard."""
    if not _processes.writes():
      return _processes.NoCurves()
    writer = summary_writer_class()
    return writer(
      str(self.path / "tensorboard" / _safe(cell)),
      purge_step=start_step + 1 if start_step else None,
    )

  # --- training -----------------------------------------------------------------
  def fit(
    self,
    cell: str,
    method,
    key,
    batch,
    *,
    checkpoint_every: int,
    num_steps: int | None = None,
    progress: bool = True,
  ):
    """``jhash.fit`` that checkpoints every ``checkpoint_every`` steps (at the first host
    round trip after them: minibatch phases come back once per epoch), resumes from the
    last checkpoint, and writes the scalar metrics of every step as a training curve.
    ``batch``: the training batch, or a ``Streamed`` set (its minibatches from the
    resumed step; its trained state is saved at the end too, so that a failure while it
    is coded, which reads the files again, loses no training).

    Returns ``(state, history)``: the history covers every step, resumed ones included.
    """
    import jhash  # local: keeps this module importable without initialising jhash

    streamed = isinstance(batch, Streamed)
    mesh = _processes.data_mesh()  # over several processes: data-parallel over them all
    if streamed and mesh is not None:
      raise WorkdirError(
        f"cell {cell!r}: a set streamed from its files does not train over several "
        "processes in the experiment runner yet; run it in one process, or hold the set in "
        "memory (stream=False)."
      )
    n = batch.num_items if streamed else jhash.num_items(batch)
    sample, sized = (batch.sample, {"num_items": n}) if streamed else (batch, {})
    total = jhash.schedule(method, n, num_steps=num_steps)
    template = jax.eval_shape(lambda k: jhash.init(method, k, sample, **sized), key)
    start, state, history = self.load_state(cell, template) or (0, None, {})
    collected = {k: [v] for k, v in history.items()}
    last_save = start
    writer = self.curve_writer(cell, start)

    def on_step(step, st, metrics):
      nonlocal last_save
      _stop.check()  # a signal whose first stop was dropped (experiments/_stop.py)
      write_curves(writer, metrics, step)
      for name, value in metrics.items():
        collected.setdefault(name, []).append(np.asarray(value))
      if checkpoint_every and step - last_save >= checkpoint_every and step < total:
        writer.flush()
        self.save_state(cell, step, st, {k: np.concatenate(v) for k, v in collected.items()})
        last_save = step

    data = batch.at(method, key, start) if streamed else batch
    try:
      state, _ = jhash.fit(
        method,
        key,
        data,
        total,
        state=state,
        start_step=start,
        progress=progress,
        on_step=on_step,
        mesh=mesh,
        **sized,
      )
      state = _processes.host(state)  # each process codes and scores with its own copy
    finally:
      writer.close()
    history = {k: np.concatenate(v) for k, v in collected.items()}
    if streamed and last_save < total:
      self.save_state(cell, total, state, history)
    return state, history


class Streamed(NamedTuple):
  """A training set read from its files as it trains (``Workdir.fit``).

  Attributes:
    sample: a batch of a few of its items, read as training reads them (shapes and dtypes
      for the state's template).
    num_items: the set's size.
    at: ``at(method, key, start_step)``: the iterable of the run's minibatches from
      ``start_step`` on (``jhash.training_pipeline``).
  """

  sample: dict
  num_items: int
  at: Callable


def summary_writer_class():
  """tensorboardX's ``SummaryWriter``, imported without PyTorch.

  tensorboardX imports torch whenever it is installed (to accept torch tensors), which
  costs 4-6 s per process; runs here log Python floats only, so torch is hidden from that
  one import (``sys.modules["torch"] = None`` makes ``import torch`` fail) and restored.
  """
  hide = "tensorboardX" not in sys.modules and "torch" not in sys.modules
  if hide:
    sys.modules["torch"] = None
  try:
    from tensorboardX import SummaryWriter
  finally:
    if hide:
      del sys.modules["torch"]
  return SummaryWriter


def write_curves(writer, metrics: Mapping, step: int) -> None:
  """Write each scalar metric's values of the steps up to ``step`` (one entry per step)."""
  for name, values in metrics.items():
    values = np.asarray(values)
    if values.ndim != 1 or not np.issubdtype(values.dtype, np.number):
      continue  # per-bit vectors and flags stay in the history only
    first = step - values.shape[0] + 1
    for i, v in enumerate(values):
      if np.isfinite(v):
        writer.add_scalar(name, float(v), global_step=first + i)
