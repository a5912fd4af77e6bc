"""An experiment run over several processes: who writes, and what each process holds.

``python -m experiments.main`` joins a run of several processes when the environment
says so (``JHASH_NUM_PROCESSES`` > 1, with ``JHASH_COORDINATOR_ADDRESS`` and
``JHASH_PROCESS_ID``: ``jhash.distributed.initialize``). Every process runs the same
cells in the same order from the same workdir (on a file system they share); each loads
the whole data set. Training is data-parallel over every process's devices (``fit`` on
a ``"data"`` mesh); the trained state comes back to each process as NumPy, so coding,
search and metrics run in each process, to the same result. Process 0 alone writes the
workdir's files; checkpoints are written through orbax, which every process calls (its
primary process writes them) and every process restores.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import jax
import numpy as np

#: The environment variable that makes ``experiments.main`` join a run of processes.
NUM_PROCESSES_ENV = "JHASH_NUM_PROCESSES"


def join_if_asked() -> int:
  """``jhash.distributed.initialize()`` when ``JHASH_NUM_PROCESSES`` asks for more than
  one process (before any other JAX call); returns the number of processes."""
  value = os.environ.get(NUM_PROCESSES_ENV, "1").strip()
  if value in ("", "1"):
    return 1
  from jhash import distributed  # pylint: disable=import-outside-toplevel

  distributed.initialize()  # checks the variables, naming the one that is wrong
  return int(value)


def several() -> bool:
  """Whether this run spans more than one process."""
  return jax.distributed.is_initialized() and jax.process_count() > 1


def writes() -> bool:
  """Whether this process writes the workdir's files (process 0 of the run; the only
  process of a run of one)."""
  return not jax.distributed.is_initialized() or jax.process_index() == 0


def stop(error: BaseException, workdir: str) -> None:
  """End this process of a run over several after ``error`` (most often another process
  died: a collective lost its peer): one ``error:`` line, then exit at once, without the
  shutdown barrier that would wait for the dead process until its heartbeat times out."""
  first = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
  print(
    f"error: process {jax.process_index()} of {jax.process_count()} stopped "
    f"({type(error).__name__}: {first}). When one process of the run stops, the others "
    f"do too: find the first error among the processes' logs, then start every process "
    f"again with the same commands; finished cells are kept in {workdir}, and a cell in "
    "progress resumes from its last checkpoint.",
    file=sys.stderr,
    flush=True,
  )
  sys.stdout.flush()
  os._exit(1)  # pylint: disable=protected-access


def data_mesh():
  """A 1-D ``"data"`` mesh over every process's devices (``jhash.fit``'s ``mesh=``), or
  None in a run of one process (which trains as it always has)."""
  if not several():
    return None
  from jhash import distributed  # pylint: disable=import-outside-toplevel

  return distributed.process_mesh("data")


def _local(x: Any) -> Any:
  if isinstance(x, jax.Array) and not x.is_fully_addressable:
    if not x.is_fully_replicated:
      raise ValueError(
        f"a state leaf of shape {x.shape} is split over processes; expected a copy on each."
      )
    return np.asarray(x.addressable_data(0))
  return np.asarray(x) if isinstance(x, jax.Array) else x


def host(tree: Any) -> Any:
  """``tree`` with each array as this process's NumPy copy (a state replicated over the
  processes' devices, as ``fit`` over a mesh returns it)."""
  return jax.tree.map(_local, tree)


def restore_target(template: Any) -> Any:
  """What orbax restores ``template`` (``jax.eval_shape`` of a state) into: itself in a
  run of one process; NumPy arrays of its shapes over several (every process restores
  its own host copy)."""
  if not several():
    return template
  return jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), template)


class NoCurves:
  """The curve writer of a process that writes no files (``add_scalar``, ``flush`` and
  ``close`` do nothing)."""

  def add_scalar(self, *args, **kwargs) -> None:
    del args, kwargs

  def flush(self) -> None:
    pass

  def close(self) -> None:
    pass
