"""The arguments of a bucket search, checked: queries against the index, the radius,
result slots (and the memory they take), ``num_wanted`` and ``use_substrings``; shared by
``bucket_search``, ``radius_search`` and the prepared ``searcher``."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jhash import _checks
from jhash.index import _probe

INT32_MAX = int(np.iinfo(np.int32).max)


def check_search_args(index, query_packed, max_radius, max_results):
  _probe.check_queries(index, query_packed)
  max_radius = check_radius(index, max_radius, "max_radius")
  max_results = check_max_results(max_results)
  check_slots(int(query_packed.shape[0]), max_results)
  return max_radius, max_results


def check_slots(num_queries: int, max_results: int) -> None:
  """Refuse result arrays [q, max_results] (ids and radii) past the machine's memory."""
  _checks.fits_in_memory(
    {"item ids and radii": 8 * num_queries * max_results},
    f"max_results={max_results:,} slots for {num_queries:,} queries",
    "ask for fewer slots (num_found still counts every item found), or search the "
    "queries in batches",
  )


def check_max_results(max_results) -> int:
  """Result slots per query: a Python int in [1, 2**31 - 1] (slots hold int32 ids)."""
  max_results = _checks.positive_int(max_results, "max_results")
  if max_results > INT32_MAX:
    raise ValueError(
      f"max_results must be at most {INT32_MAX:,} (result slots hold int32 item ids); "
      f"got {max_results:,}."
    )
  return max_results


def check_radius(index, radius, name: str) -> int:
  """A Python int in [0, num_bits] (it sets the program's shapes: never traced)."""
  radius = _checks.nonneg_int(radius, name)
  if radius > index.num_bits:
    raise ValueError(f"{name} must be <= num_bits={index.num_bits}; got {radius}.")
  return radius


def check_num_wanted(num_wanted: Any) -> jax.Array | np.int32:
  if type(num_wanted) is int and num_wanted >= 1:  # the common case, quickly
    return np.int32(min(num_wanted, INT32_MAX))
  if (
    isinstance(num_wanted, (bool, np.bool_))
    or np.ndim(num_wanted) != 0
    or (np.dtype(getattr(num_wanted, "dtype", type(num_wanted))).kind not in "iu")
  ):
    raise ValueError(f"num_wanted must be an integer >= 1; got {_checks.describe(num_wanted)}.")
  if _checks.is_concrete(num_wanted):
    value = int(np.asarray(num_wanted))
    if value < 1:
      raise ValueError(f"num_wanted must be >= 1; got {value}.")
    # A NumPy scalar: jit's dispatch takes it far faster than a new device scalar.
    return np.int32(min(value, INT32_MAX))  # more than any index holds
  return jnp.asarray(num_wanted, jnp.int32)


def check_use_substrings(use_substrings: Any) -> bool | None:
  if use_substrings is not None and not isinstance(use_substrings, (bool, np.bool_)):
    raise ValueError(
      "use_substrings must be None (decide by cost), True or False; got "
      f"{_checks.describe(use_substrings)}."
    )
  return None if use_substrings is None else bool(use_substrings)
