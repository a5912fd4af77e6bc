"""A training set split over processes, each holding its own rows in memory.

``jhash.fit`` over a mesh that spans processes reads, from an iterable, each process's
rows of every global minibatch (``jhash._shards``). When a process holds only its own
rows of the training set (``jhash.distributed.row_range``), it can draw them from
nowhere else: ``local_minibatches`` draws each process's share of every minibatch from
its own rows, in the order ``jhash._order`` defines, with a key of its own
(``_order.process_key``). The global minibatch of a step is then the processes' shares
side by side: a run over P processes trains on the minibatches that one process would
read from the same iterable of global minibatches (tested), but not on the order
``fit`` draws from the whole set in memory (a process cannot draw another's rows); with
one process the order is exactly that one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

from jhash import _api
from jhash import _checks
from jhash import _fit
from jhash import _fit_checks
from jhash import _fit_pipeline
from jhash import _order
from jhash import _shards
from jhash import _stream_checks
from jhash import distributed
from jhash._loops import _split


class LocalMinibatches:
  """This process's share of each minibatch of a method's schedule (made by
  ``jhash.local_minibatches``): ``len(self)`` minibatch dicts, each with
  ``"index"``, int32 [rows], its items' positions in the whole training set.

  Attributes:
    num_steps: minibatches per iteration (the steps left of the schedule).
    made_for: ``RunOf(key_data, start_step, num_items)``: ``jhash.fit`` refuses it for
      another key, start step or training set size.
  """

  def __init__(self, local: dict, first_row: int, plan: list, num_steps: int, made_for):
    self._local, self._first_row, self._plan = local, first_row, plan
    self._rows = _api.batch_size_of(local)
    self.num_steps, self.made_for = num_steps, made_for

  def __len__(self) -> int:
    return self.num_steps

  def __iter__(self) -> Iterator[dict]:
    for key, rows, steps, at, phase in self._plan:
      for index in _order.minibatch_order(key, self._rows, rows, steps, at, phase):
        minibatch = _api.take(self._local, index)
        minibatch["index"] = (index + self._first_row).astype(np.int32)
        yield minibatch


def _local_rows_of(local: Any, num_items: int, mesh: Mesh) -> tuple[dict, int]:
  """``local`` checked as this process's ``row_range`` rows, as NumPy; its first row."""
  start, stop = distributed.row_range(num_items, mesh)
  rows = _checks.batch(local, "local")
  if rows != stop - start:
    raise ValueError(
      f"local must hold this process's rows {start} to {stop - 1} of the {num_items} "
      f"items ({stop - start} rows: jhash.distributed.row_range(num_items, mesh)); it "
      f"holds {rows}."
    )
  return jax.tree.map(np.asarray, dict(local)), start


def local_minibatches(
  method: _api.HashingMethod,
  local: dict,
  *,
  key: jax.Array,
  num_items: int,
  mesh: Mesh,
  start_step: int = 0,
  num_steps: int | None = None,
) -> LocalMinibatches:
  """This process's share of every minibatch of ``method``'s schedule, drawn from the
  rows of the training set it holds, for ``jhash.fit`` over a mesh spanning processes.

  ``fit(method, key, local_minibatches(method, mine, key=key, num_items=n, mesh=mesh),
  mesh=mesh, num_items=n)`` on each process trains on minibatches of which process ``p``
  gives the ``p``-th block (``batch_size / P`` rows a step, per phase) drawn from its own
  rows: an epoch of ``permutation(rows_p)`` with ``_order.process_key(key, p, P)``,
  reshuffled when it runs out (the module docstring). With one process it is the order
  ``fit`` draws in memory.

  Args:
    method: a ``HashingMethod`` trained on minibatches only (no full-batch phase, no
      ``bind``).
    local: this process's rows of the training set (a batch dict: ``views``, ``labels``
      ...): rows ``jhash.distributed.row_range(num_items, mesh)``.
    key: the PRNG key given to ``jhash.fit``.
    num_items: the items of the whole training set (over every process).
    mesh: the mesh given to ``jhash.fit``: 1-D, its axis ``"data"``, over every process's
      devices (``jhash.distributed.process_mesh("data")``).
    start_step: the (global) step to start at (resume with the state saved there).
    num_steps: the run's total steps, as ``fit``'s (default: the schedule's).
  Returns:
    A ``LocalMinibatches``: ``len()`` minibatch dicts of this process's rows.
  """
  _fit.check_method(method)
  _checks.prng_key(key)
  _fit_pipeline.check_no_bind(method, "process-local minibatches")
  num_items = _checks.positive_int(num_items, "num_items")
  _fit_checks.check_mesh(mesh, None)
  local, first = _local_rows_of(local, num_items, mesh)
  held = _checks.batch(local, "local")
  source = "process-local minibatches"
  spans, start = _fit_pipeline.minibatch_spans(method, num_items, num_steps, start_step, source)
  key_here = _order.process_key(key, jax.process_index(), jax.process_count())
  plan = []
  for span in spans:
    if span.stop <= start:
      continue
    size = span.phase.batch_size
    _fit_checks.check_mesh(mesh, size)
    rows = _shards.local_rows(_split(mesh), size)
    if rows > held:
      raise ValueError(
        f"{method.name}'s phase {span.phase.name!r} reads {rows} of each minibatch's "
        f"{size} items on this process, more than the {held} rows it holds: give the "
        "method a smaller batch size, or this process more rows."
      )
    at = max(start, span.start)
    plan.append((key_here, rows, span.stop - at, at - span.start, span.index))
  made_for = _stream_checks.RunOf(_stream_checks.key_words(key), start, num_items)
  return LocalMinibatches(local, first, plan, spans[-1].stop - start, made_for)
