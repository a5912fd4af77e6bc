"""A search prepared once per index: checks, plan and program fixed, one compiled call.

``bucket_search`` checks its arguments, plans and dispatches on every call; at radius 0
a call for 1,000 queries does well under a millisecond of work, so those fixed costs
decide the rate when queries arrive in many small calls. ``searcher`` does them once:
the index, radius, slots, ``num_wanted`` and tuning are checked and planned when it is
made; each call checks only its queries (dtype, width, padding bits) and runs one jitted
program that returns only the fields asked for (fewer arrays to copy back). NumPy queries
on the CPU skip JAX altogether (``_host_search``): the same native kernel is called
straight from NumPy, which saves JAX's dispatch (about 20 us a call) and returns NumPy
arrays.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Sequence

import jax
import numpy as np

from jhash import _checks
from jhash import codes as codes_lib
from jhash.index import _build
from jhash.index import _host_search
from jhash.index import _probe
from jhash.index import _search
from jhash.index import _search_checks
from jhash.index import _substrings

#: What a searcher returns unless told otherwise.
DEFAULT_OUTPUTS = ("item_ids", "num_found")


class Searcher(NamedTuple):
  """A prepared search of one index (``searcher``).

  ``search(query_packed)``: uint32 [q, W] packed queries -> a tuple of the arrays named
  in ``outputs`` (``SearchResults``' fields: int32 [q, max_results] for ``item_ids`` and
  ``radii``, int32 [q] for the others), equal to ``bucket_search``'s fields for the same
  arguments. It may be called inside ``jax.jit``. A NumPy array of queries, with the
  native kernels built and the index in the host's memory, is searched without JAX
  (its host path) and gives NumPy arrays; anything else runs the compiled program.
  """

  search: Callable[[Any], tuple]
  outputs: tuple[str, ...]


def _check_outputs(outputs: Any) -> tuple[str, ...]:
  fields = _search.SearchResults._fields
  if isinstance(outputs, str) or not isinstance(outputs, Sequence):
    raise ValueError(
      f"outputs must be a sequence of SearchResults' field names, some of {fields}; "
      f"got {_checks.describe(outputs)}."
    )
  outputs = tuple(outputs)
  unknown = [name for name in outputs if name not in fields]
  if not outputs or unknown or len(set(outputs)) != len(outputs):
    raise ValueError(f"outputs must name one or more of {fields}, each once; got {outputs!r}.")
  return outputs


def searcher(
  index: _build.BucketIndex,
  *,
  max_radius: int,
  max_results: int,
  num_wanted: int | None = None,
  outputs: Sequence[str] = DEFAULT_OUTPUTS,
  probes_per_block: int | None = None,
  searchsorted_method: str | None = None,
  use_substrings: bool | None = None,
) -> Searcher:
  """``bucket_search`` of ``index`` prepared once, for many calls with new queries.

  Args:
    index: a ``BucketIndex``.
    max_radius: largest radius searched, 0 to K.
    max_results: result slots per query (in [1, 2**31 - 1]).
    num_wanted: stop a query after the first radius where it has this many items
      (int >= 1); default None: no early stop (every item within ``max_radius``).
    outputs: the ``SearchResults`` fields each call returns, in this order; default
      ``("item_ids", "num_found")``.
    probes_per_block, searchsorted_method, use_substrings: ``bucket_search``'s tuning
      knobs (speed only, never results).
  Returns:
    A ``Searcher``; its ``search(query_packed)`` returns a tuple of the ``outputs``.
  """
  _probe.check_index(index)
  max_radius = _search_checks.check_radius(index, max_radius, "max_radius")
  max_results = _search_checks.check_max_results(max_results)
  wanted = _search_checks.check_num_wanted(
    index.num_items + 1 if num_wanted is None else num_wanted
  )
  if not _checks.is_concrete(wanted):
    raise TypeError("num_wanted of a searcher is fixed when it is made: give a Python int.")
  outputs = _check_outputs(outputs)
  setup = _search._setup(
    index, max_radius, max_results, probes_per_block, searchsorted_method, use_substrings
  )
  plan = setup.plan if setup.plan is None else setup.plan._replace(hits=_substrings.HITS)

  @jax.jit
  def run(index, query_packed):
    num_q = query_packed.shape[0]  # static: one program per query count
    probes = setup.probes
    results, _ = _search._bucket_search(
      index,
      query_packed,
      setup.chunks,
      wanted,
      block_size=1 if plan is None else max(1, min(num_q, probes // plan.hits)),
      flip_block_size=max(1, min(num_q, probes // setup.per_query)),
      plan=plan,
      fall_back=plan is not None,  # one program: the substring search falls back itself
      **setup.static,
    )
    return tuple(getattr(results, name) for name in outputs)

  prepared = setup.index
  on_host = _host_search.host_search(
    prepared,
    max_radius=max_radius,
    max_results=max_results,
    num_wanted=wanted,
    num_substrings=0 if plan is None else len(plan.layout),
    flips=0 if plan is None else plan.flips,
    fields=tuple(_search.SearchResults._fields.index(name) for name in outputs),
  )
  words, num_bits = prepared.keys.shape[1], prepared.num_bits
  padded = num_bits % 32 != 0  # else no padding bits to check
  check_padding = functools.partial(codes_lib.check_padding, num_bits=num_bits, name="query_packed")

  most_queries = _checks.memory_bytes() // (8 * max_results)  # their results fit

  def search(query_packed):
    if (
      type(query_packed) is np.ndarray
      and query_packed.dtype == np.uint32
      and query_packed.ndim == 2
      and query_packed.shape[1] == words
    ):
      if padded:
        check_padding(query_packed)
      if query_packed.shape[0] > most_queries:
        _search_checks.check_slots(query_packed.shape[0], max_results)
      if on_host is not None:  # NumPy in, NumPy out: no JAX dispatch
        return on_host(query_packed)
    else:
      _probe.check_queries(prepared, query_packed)
    if query_packed.shape[0] > most_queries:
      _search_checks.check_slots(query_packed.shape[0], max_results)
    return run(prepared, query_packed)

  return Searcher(search, outputs)
