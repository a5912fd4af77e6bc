"""The prepared searcher's host path: the native bucket search called with NumPy buffers.

A jitted call costs JAX's dispatch (about 17-22 us on the CPU, measured on an EPYC Zen 2)
before any work, more than a whole search of 1,000 queries at radius 0 by FAISS's fixed
cost. ``host_search`` calls the same C++ search as the compiled program
(``jhash_bucket_search_host`` in ``jhash/native/kernels.cc``, the same code behind the
``jhash_bucket_search`` FFI target) straight from NumPy: the index's tables are described
once, each call passes its queries and one result buffer. The tasks run on OpenMP's
threads, one per core this process may use, where the library was built with OpenMP.
"""

from __future__ import annotations

import ctypes
import os
from typing import Callable

import jax
import numpy as np

from jhash import native
from jhash.index import _build

_P, _I = ctypes.c_void_p, ctypes.c_int64
_TABLES = (
  "keys",
  "offsets",
  "bucket_items",
  "item_ids",
  "item_codes",
  "code_mask",
  "directory",
  "sub_offsets",
  "sub_buckets",
)
_SIZES = (
  "w",
  "m",
  "num_keys",
  "num_bits",
  "directory_bits",
  "max_radius",
  "flips",
  "slots",
  "num_substrings",
  "num_wanted",
  "threads",
)


class _Index(ctypes.Structure):
  """``JhashBucketIndex`` of ``kernels.cc``: the tables' addresses and the sizes."""

  _fields_ = [(name, _P) for name in _TABLES] + [(name, _I) for name in _SIZES]


def _cores() -> int:
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # not on Linux
    return os.cpu_count() or 1


def _on_cpu(x) -> bool:
  return isinstance(x, np.ndarray) or all(d.platform == "cpu" for d in x.devices())


def host_search(
  index: _build.BucketIndex,
  *,
  max_radius: int,
  max_results: int,
  num_wanted: int,
  num_substrings: int,
  flips: int,
  fields: tuple[int, ...] = tuple(range(6)),
) -> Callable[[np.ndarray], tuple[np.ndarray, ...]] | None:
  """``search(query_packed)``: uint32 [q, W] NumPy queries (checked by the caller) -> the
  ``SearchResults`` fields numbered ``fields`` (default all six) as NumPy arrays, as the
  native kernel of the compiled search gives them; or None where the native kernels are
  off or the index is not in the host's memory (the caller then uses its compiled
  program).

  ``index`` as ``_search._setup`` prepared it (without substring tables when
  ``num_substrings`` is 0); the other arguments as ``_native_search.search`` takes them.
  """
  lib = native.host_library() if native.enabled() else None
  entry = getattr(lib, "jhash_bucket_search_host", None)
  if entry is None or not all(_on_cpu(x) for x in jax.tree.leaves(index)):
    return None
  entry.argtypes = [ctypes.POINTER(_Index), _P, _I] + [_P] * 6
  entry.restype = ctypes.c_int
  none = np.zeros(1, np.int32)
  tables = {
    "keys": np.ascontiguousarray(index.keys, np.uint32),
    "offsets": np.ascontiguousarray(index.offsets, np.int32),
    "bucket_items": np.ascontiguousarray(index.bucket_items, np.int32),
    "item_ids": np.ascontiguousarray(index.item_ids, np.int32),
    "item_codes": np.ascontiguousarray(index.item_codes, np.uint32),
    "code_mask": np.ascontiguousarray(index.item_code_mask, np.bool_),
    "directory": np.ascontiguousarray(index.directory, np.int32),
    "sub_offsets": none,
    "sub_buckets": none,
  }
  if num_substrings:
    tables["sub_offsets"] = np.ascontiguousarray(index.substring_offsets, np.int32)
    tables["sub_buckets"] = np.ascontiguousarray(index.substring_buckets, np.int32).reshape(-1)
  described = _Index(
    **{name: array.ctypes.data for name, array in tables.items()},
    w=tables["keys"].shape[1],
    m=tables["item_codes"].shape[1],
    num_keys=tables["keys"].shape[0],
    num_bits=index.num_bits,
    directory_bits=index.directory_bits,
    max_radius=max_radius,
    flips=flips,
    slots=max_results,
    num_substrings=num_substrings,
    num_wanted=num_wanted,
    threads=_cores(),
  )
  pointer = ctypes.byref(described)
  per_query = 2 * max_results + 4  # ids and radii, then the four counts

  def search(query_packed: np.ndarray) -> tuple[np.ndarray, ...]:
    q = query_packed.shape[0]
    out = np.empty(q * per_query, np.int32)
    at = out.ctypes.data
    slots = q * max_results * 4  # bytes of one [q, max_results] field
    counts = [at + 2 * slots + 4 * q * i for i in range(4)]
    queries = np.ascontiguousarray(query_packed)
    if entry(pointer, queries.ctypes.data, q, at, at + slots, *counts):
      raise RuntimeError("jhash_bucket_search_host: inconsistent index")  # checked at setup
    slotted = out[: 2 * q * max_results].reshape(2, q, max_results)
    rest = out[2 * q * max_results :].reshape(4, q)
    return tuple(slotted[i] if i < 2 else rest[i - 2] for i in fields)

  search.tables = tables  # kept alive with the function: ``described`` points into them
  return search
