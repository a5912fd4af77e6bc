"""A cell's checkpoints in a run directory: saved with orbax-checkpoint, each step with its
file list, and checked when restored (damaged, renamed, moved, or another run's).

``Checkpoints`` is a part of ``experiments._workdir.Workdir``: it uses the workdir's
``path``, ``fingerprint``, ``progress``, ``progress_path``, ``_managers`` (cell -> orbax
manager) and ``_saves`` (saves so far).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import shutil
import signal
import sys
from typing import Any, Mapping

import jax
import numpy as np

from experiments import _processes
from experiments._records import WorkdirError
from experiments._records import first_line
from experiments._records import stable_hash
from jhash import files

CRASH_ENV = "JHASH_KILL_AFTER_SAVES"


def _safe(cell: str) -> str:
  return "".join(c if c.isalnum() or c in "-_.=" else "_" for c in cell)


class Checkpoints:
  """The checkpoints of a workdir's cells (``checkpoints/<cell>/<step>/``)."""

  def _manager(self, cell: str):
    import orbax.checkpoint as ocp  # local: imported only by runs that checkpoint

    if cell not in self._managers:
      options = ocp.CheckpointManagerOptions(
        max_to_keep=2, create=True, enable_async_checkpointing=False
      )
      self._managers[cell] = ocp.CheckpointManager(
        (self.path / "checkpoints" / _safe(cell)).absolute(), options=options
      )
    return self._managers[cell]

  def save_state(self, cell: str, step: int, state: Any, history: Mapping) -> None:
    """Save a method state (a pytree of arrays) and its metric history at ``step``."""
    import orbax.checkpoint as ocp

    # Where it belongs, checked when restored: a step folder renamed, or a cell's folder
    # moved to another cell, is refused even without its file list.
    where = {
      "_step": np.asarray(step),
      "_cell": np.asarray(stable_hash(cell), np.uint32),
      "_run": np.asarray(stable_hash(self.fingerprint), np.uint32),
    }
    history = {**{k: np.asarray(v) for k, v in history.items()}, **where}
    state = _processes.host(state)  # over processes: each its copy (orbax's primary writes)
    manager = self._manager(cell)
    if step in manager.all_steps():  # saved before (a rerun): replaced, never re-listed
      manager.delete(step)
    for leftover in self._cell_folder(cell).glob(f"{step}.orbax-checkpoint-tmp*"):
      if _processes.writes():  # a killed save's (orbax would remove it, and log it)
        shutil.rmtree(leftover, ignore_errors=True)
    manager.save(
      step,
      args=ocp.args.Composite(
        state=ocp.args.StandardSave(state), history=ocp.args.StandardSave(history)
      ),
    )
    if _processes.writes():
      record = {"cell": cell, "run": self.fingerprint, "step": step}
      files.write_manifest(self._cell_folder(cell) / str(step), **record)
    self._after_save()

  def _cell_folder(self, cell: str) -> pathlib.Path:
    return self.path / "checkpoints" / _safe(cell)

  def load_state(
    self, cell: str, template: Any, label: str | None = None, restart: str | None = None
  ):
    """``(step, state, history)`` of the last save of ``cell``, or None.

    ``template``: the state's structure (``jax.eval_shape(...)`` of its init); the state
    comes back in it, arrays and all. A damaged checkpoint (a file missing, truncated or
    changed since it was written) is a ``WorkdirError`` naming the file and saying how to
    go on; so is one that cannot be read as this version's state. ``label`` names the
    checkpoint there (default: "cell CELL"), ``restart`` says what deleting it does
    (default: the cell starts again from step 0).
    """
    import orbax.checkpoint as ocp

    folder = self._cell_folder(cell)
    if not folder.exists():
      return None
    with _quiet_orbax_log():  # what orbax logs of a damaged step, the message below says
      manager = self._manager(cell)
      steps = sorted(manager.all_steps(), reverse=True)
    # A step without its file list is a save cut short (killed between orbax's commit and
    # the list) or one whose list was removed: its files cannot be checked, so it is not
    # used; the cell resumes from the newest step that has its list (from 0 without one).
    listed = [s for s in steps if (folder / str(s) / files.MANIFEST).exists()]
    if listed[:1] != steps[:1]:
      skipped = [s for s in steps if s not in listed and (not listed or s > listed[0])]
      print(
        f"note: checkpoint step(s) {', '.join(map(str, skipped))} of cell {cell!r} have no "
        f"{files.MANIFEST} (a save cut short, or the list was removed), so they cannot be "
        f"checked and are not used; "
        + (f"resuming from step {listed[0]}." if listed else "the cell starts from step 0."),
        flush=True,
      )
    steps = listed
    if not steps:
      return None
    step = steps[0]
    damage = files.first_damage(folder / str(step))
    owner = files.manifest_record(folder / str(step)).get("cell", cell)
    if damage is None and owner != cell:  # would resume another cell's training
      what = f"it is the checkpoint of cell {owner!r}, moved or copied here"
      raise WorkdirError(self._damaged(cell, step, steps[1:], what, label, restart))
    if damage is not None:
      raise WorkdirError(self._damaged(cell, step, steps[1:], damage, label, restart))
    try:
      restored = manager.restore(
        step,
        args=ocp.args.Composite(
          state=ocp.args.StandardRestore(_processes.restore_target(template)),
          history=ocp.args.StandardRestore(),
        ),
      )
    except Exception as e:  # orbax / TensorStore: not this version's tree, or unreadable
      quiet_orbax_leftovers()
      what = (  # its files are as its list says (checked above)
        f"it cannot be restored as this cell's state "
        f"({type(e).__name__}: {first_line(e).split('. ')[0]}); its files are as written, "
        "so it was written for another cell or by another version of jhash"
      )
      raise WorkdirError(self._damaged(cell, step, [], what, label, restart)) from None
    what = _misplaced(restored, cell, step, template, self.fingerprint)
    if what is not None:  # an earlier step may be this cell's still (a folder renamed)
      raise WorkdirError(self._damaged(cell, step, steps[1:], what, label, restart))
    history = {k: np.asarray(v) for k, v in restored.history.items() if k not in _WHERE}
    return step, restored.state, history

  def _damaged(
    self, cell: str, step: int, earlier: list[int], what: str, label=None, restart=None
  ) -> str:
    """The message for a checkpoint of ``cell`` at ``step`` that cannot be used (``label``,
    ``restart``: as ``load_state``'s)."""
    folder = self._cell_folder(cell)
    mine = {"cell": cell, "run": self.fingerprint}  # lists before jhash kept these: mine
    intact = next(
      (
        s
        for s in earlier
        if files.first_damage(folder / str(s)) is None
        and all(files.manifest_record(folder / str(s)).get(k, v) == v for k, v in mine.items())
        and _recorded_step(folder, s) in (None, s)
      ),
      None,
    )
    renamed = sorted(  # a folder whose files are as its list says, of another step
      (s, _recorded_step(folder, s))
      for s in [step, *earlier]
      if _recorded_step(folder, s) not in (None, s) and files.first_damage(folder / str(s)) is None
    )
    # Renaming back undoes a rename or a swap, not a copy (the step's own folder is there).
    if any(
      _recorded_step(folder, r) in (None, r) and (folder / str(r)).exists() for _, r in renamed
    ):
      renamed = []
    checked = intact is not None and (folder / str(intact) / files.MANIFEST).exists()
    if intact is not None:
      way = (
        f"delete {folder / str(step)} and run again: the cell resumes from its checkpoint "
        f"at step {intact}, "
        + (
          "which is intact"
          if checked
          else f"whose files cannot be checked (its {files.MANIFEST} is missing); if that "
          f"fails too, delete {folder} to start the cell again from step 0"
        )
      )
    else:
      way = f"delete {folder} and run again: {restart or 'the cell starts again from step 0'}"
    return (
      f"the checkpoint of {label or f'cell {cell!r}'} at step {step} is unusable: {what}. "
      + (
        f"Finished cells are intact (their results are in {self.progress_path}). "
        if self.progress.get("cells")
        else ""
      )
      + f"To go on, {way}."
      + (
        " (Its step folders were renamed: "
        + ", ".join(f"{folder / str(s)} holds step {r}" for s, r in renamed)
        + "; renaming each back to the step it holds also works.)"
        if renamed
        else ""
      )
    )

  def remove_state(self, cell: str) -> None:
    """Delete the checkpoints of ``cell`` (results in ``progress.json`` are kept)."""
    manager = self._managers.pop(cell, None)
    if manager is not None:
      manager.close()
    if _processes.writes():
      shutil.rmtree(self._cell_folder(cell), ignore_errors=True)

  def _after_save(self) -> None:
    self._saves += 1
    limit = os.environ.get(CRASH_ENV)
    if limit is not None and self._saves >= int(limit):
      os.kill(os.getpid(), signal.SIGKILL)


def _recorded_step(folder: pathlib.Path, step: int) -> int | None:
  """The step that the file list of ``folder/step`` records (None: none recorded)."""
  recorded = files.manifest_record(folder / str(step)).get("step")
  return recorded if isinstance(recorded, int) and not isinstance(recorded, bool) else None


#: The entries of a checkpoint's history that say where it belongs (``save_state``).
_WHERE = ("_step", "_cell", "_run")


def _misplaced(restored, cell: str, step: int, template, fingerprint: str) -> str | None:
  """What says a restored checkpoint is not ``cell``'s at ``step`` in a run of the config
  of ``fingerprint`` (its folder renamed, moved or copied from another run, or a state of
  other shapes), or None."""
  saved_run = restored.history.get("_run")  # checkpoints before jhash kept it have none
  if saved_run is not None and int(saved_run) != stable_hash(fingerprint):
    return "it was saved by a run of another config (its folder was copied here)"
  saved_step = restored.history.get("_step")
  if saved_step is not None and int(saved_step) != step:
    return f"it was saved at step {int(saved_step)} (its folder was renamed or copied)"
  saved_cell = restored.history.get("_cell")  # checkpoints before jhash kept it have none
  if saved_cell is not None and int(saved_cell) != stable_hash(cell):
    return "it was saved by another cell (its folder was moved or copied here)"
  got = jax.tree.leaves(restored.state)
  want = jax.tree.leaves(template)
  for a, b in zip(got, want):
    if tuple(np.shape(a)) != tuple(b.shape) or np.dtype(a.dtype) != np.dtype(b.dtype):
      return (
        f"it holds an array {np.dtype(a.dtype).name} {tuple(np.shape(a))} where this cell's "
        f"state has {np.dtype(b.dtype).name} {tuple(b.shape)} (another cell's, or another "
        "version's)"
      )
  return None


@contextlib.contextmanager
def _quiet_orbax_log():
  """Orbax's log lines (absl's logger) off inside the block."""
  logger = logging.getLogger("absl")
  level = logger.level
  logger.setLevel(logging.CRITICAL)
  try:
    yield
  finally:
    logger.setLevel(level)


def _orbax_leftover(unraisable) -> bool:
  """An error orbax's reads left behind when a restore failed: a coroutine of orbax that
  raised as it was collected, or asyncio's "Event loop is closed" while collecting one."""
  code = getattr(unraisable.object, "cr_code", None)
  if code is not None and f"{os.sep}orbax{os.sep}" in code.co_filename:
    return True
  exc = unraisable.exc_value
  return isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed"


def quiet_orbax_leftovers() -> None:
  """After a failed restore, drop the errors of orbax's abandoned reads that Python would
  print as they are collected (often at exit, hundreds of lines after jhash's one-line
  message naming the damaged checkpoint); other unraisable errors print as before."""
  before = sys.unraisablehook
  if getattr(before, "_jhash_quiet", False):
    return

  def hook(unraisable):
    if not _orbax_leftover(unraisable):
      before(unraisable)

  hook._jhash_quiet = True
  sys.unraisablehook = hook
