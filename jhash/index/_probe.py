"""Finding buckets: the directory slot of a key, then a short binary search.

All functions here are jit-compatible array code over any batch shape of
probes; ``lookup`` is the checked, jitted public entry point (radius 0).
"""

from __future__ import annotations

import functools
import itertools
import math
import weakref

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jhash import _checks
from jhash import codes as codes_lib
from jhash import native
from jhash.index import _build
from jhash.index import _native_search


def key_less(a: jax.Array, b: jax.Array) -> jax.Array:
  """``a < b`` for keys as packed words [..., W] (W <= 2), word W-1 most significant."""
  if a.shape[-1] == 1:
    return a[..., 0] < b[..., 0]
  return (a[..., 1] < b[..., 1]) | ((a[..., 1] == b[..., 1]) & (a[..., 0] < b[..., 0]))


def key_equal(a: jax.Array, b: jax.Array) -> jax.Array:
  return jnp.all(a == b, axis=-1)


def key_prefix(probes: jax.Array, num_bits: int, prefix_bits: int) -> jax.Array:
  """Top ``prefix_bits`` bits of each K-bit key [..., W] -> int32 [...]."""
  if probes.shape[-1] == 1:
    return (probes[..., 0] >> (num_bits - prefix_bits)).astype(jnp.int32)
  high_bits = num_bits - 32  # valid bits in word 1
  hi, lo = probes[..., 1], probes[..., 0]
  if prefix_bits <= high_bits:
    return (hi >> (high_bits - prefix_bits)).astype(jnp.int32)
  from_lo = prefix_bits - high_bits  # 1..31
  return ((hi << from_lo) | (lo >> (32 - from_lo))).astype(jnp.int32)


# A directory run of at most 2**_SCAN_STEPS keys can be read whole, in one gather.
_SCAN_STEPS = 4


# id(search_steps) -> (weak reference to it, its value): read once per index, not per call.
_STEPS_SEEN: dict[int, tuple[weakref.ref, int]] = {}


def static_steps(index: _build.BucketIndex) -> int | None:
  """``index.search_steps`` as a Python int when the index is concrete, else None."""
  steps = index.search_steps
  seen = _STEPS_SEEN.get(id(steps))
  if seen is not None and seen[0]() is steps:
    return seen[1]
  try:
    value = int(steps)
  except TypeError:  # traced (jax.errors.ConcretizationTypeError is a TypeError)
    return None
  if len(_STEPS_SEEN) >= 64:
    _STEPS_SEEN.clear()
  try:
    _STEPS_SEEN[id(steps)] = (weakref.ref(steps), value)
  except TypeError:  # not weakly referenceable (a NumPy scalar)
    pass
  return value


def pairs(index_array: jax.Array) -> jax.Array:
  """``[..., 2]``: each index and the next, so one gather reads both."""
  return jnp.stack([index_array, index_array + 1], axis=-1)


def find_buckets(
  index: _build.BucketIndex, probes: jax.Array, steps: int | None = None, scan: bool = False
):
  """Position of each probe key among the sorted bucket keys.

  The directory gives the run of keys sharing the probe's top bits; a binary
  search of ``index.search_steps`` halvings finds the lower bound in it (unrolled
  when ``steps``, the same number as a Python int, is given). The
  bounds are unsigned and halved with a shift: on the CPU this ran 1.8-2.7x
  faster than signed ``(lo + hi) // 2``, which XLA rounds toward minus infinity
  with extra instructions. With ``scan`` and ``steps <= 4`` the whole run
  (at most ``2**steps`` keys) is read in one gather and compared at once instead:
  each gather of a large table is one parallel task on the CPU, a fixed cost that
  dominates small batches (radius 0), while the binary search (and separate
  gathers of the run's two bounds) ran faster for large batches of probes.

  Args:
    index: a ``BucketIndex``.
    probes: uint32 [..., W] keys.
    steps: optional ``int(index.search_steps)``, known when the index is concrete.
    scan: read each run whole when ``steps`` is known and at most 4.
  Returns:
    ``(position, found)``: int32 [...] in ``[0, B]``, the number of bucket keys
    below the probe (the probe's bucket when found), and bool [...].
  """
  keys = index.keys
  num_keys = keys.shape[0]
  slot = key_prefix(probes, index.num_bits, index.directory_bits)
  if scan and steps is not None and steps <= _SCAN_STEPS:
    bounds = index.directory[pairs(slot)]
    lo, hi = bounds[..., 0], bounds[..., 1]
    ranks = jnp.arange(1 << steps, dtype=jnp.int32).reshape((1,) * lo.ndim + (-1,))
    run = keys[jnp.minimum(lo[..., None] + ranks, num_keys - 1)]  # [..., run, W]
    in_run = ranks < (hi - lo)[..., None]
    below = in_run & key_less(run, probes[..., None, :])
    found = jnp.any(in_run & key_equal(run, probes[..., None, :]), axis=-1)
    return lo + jnp.sum(below, axis=-1, dtype=jnp.int32), found
  lo = index.directory[slot].astype(jnp.uint32)
  hi = index.directory[slot + 1].astype(jnp.uint32)

  def halve(_, bounds):
    # Invariant: keys before lo are below the probe, keys from hi on are not. An
    # empty range at the very end can push lo to num_keys + 1; it is clipped below.
    lo, hi = bounds
    mid = (lo + hi) >> 1
    go_right = key_less(keys[jnp.minimum(mid, num_keys - 1)], probes)
    return jnp.where(go_right, mid + 1, lo), jnp.where(go_right, hi, mid)

  if steps is None:
    lo, _ = lax.fori_loop(0, index.search_steps, halve, (lo, hi))
  else:
    for i in range(steps):
      lo, hi = halve(i, (lo, hi))
  position = jnp.minimum(lo, num_keys).astype(jnp.int32)
  found = key_equal(keys[jnp.minimum(position, num_keys - 1)], probes) & (position < num_keys)
  return position, found


def bucket_ranges(
  index: _build.BucketIndex, probes: jax.Array, steps: int | None = None, scan: bool = False
):
  """``(start, count, found)`` of the bucket of each probe: int32, int32, bool [...].

  When the bucket is absent ``count`` is 0 and ``start`` the insertion point, so
  ``bucket_items[start:start + count]`` is always the (maybe empty) bucket.
  ``steps`` and ``scan`` as for ``find_buckets``; with ``scan`` each bucket's bounds
  are read in one gather too (for many probes, two gathers ran faster).
  """
  position, found = find_buckets(index, probes, steps, scan)
  last = index.keys.shape[0]
  if scan:
    ends = index.offsets[jnp.minimum(pairs(position), last)]
    start, end = ends[..., 0], ends[..., 1]
  else:
    start, end = index.offsets[position], index.offsets[jnp.minimum(position + 1, last)]
  return start, jnp.where(found, end - start, 0), found


def flip_masks(num_bits: int, radius: int) -> np.ndarray:
  """All packed codes with exactly ``radius`` of ``num_bits`` bits set, increasing.

  Returns:
    uint32 [C(num_bits, radius), W], sorted by value as integers (which is the
    co-lexicographic order of the set bit positions).
  Raises:
    ValueError: bad sizes, or masks that would not fit in memory (it names their
      count, ``C(num_bits, radius)``), before any is made.
  """
  num_bits = _checks.positive_int(num_bits, "num_bits")
  radius = _checks.nonneg_int(radius, "radius")
  return _flip_masks(num_bits, radius)


@functools.lru_cache(maxsize=32)  # of checked Python ints: a list would not hash
def _flip_masks(num_bits: int, radius: int) -> np.ndarray:
  if num_bits > 64 or radius > num_bits:
    raise ValueError(
      f"flip_masks needs 1 <= num_bits <= 64 (the index's codes) and radius <= num_bits; got "
      f"num_bits={num_bits}, radius={radius}."
    )
  w = -(-num_bits // 32)
  if radius == 0:
    return np.zeros((1, w), np.uint32)
  count = math.comb(num_bits, radius)
  # The combinations (int64 [count, radius]), their values (uint64, sorted) and the masks.
  _checks.fits_in_memory(
    {"the bit positions": count * radius * 8, "the values": count * 16, "the masks": count * w * 4},
    f"flip_masks(num_bits={num_bits}, radius={radius}): its {count:,} masks",
    "lower radius",
  )
  combos = np.fromiter(
    itertools.chain.from_iterable(itertools.combinations(range(num_bits), radius)), np.int64
  ).reshape(-1, radius)
  value = np.bitwise_or.reduce(np.uint64(1) << combos.astype(np.uint64), axis=1)
  value = np.sort(value)
  words = [(value & np.uint64(0xFFFFFFFF)).astype(np.uint32)]
  if w == 2:
    words.append((value >> np.uint64(32)).astype(np.uint32))
  masks = np.stack(words, axis=1)
  masks.setflags(write=False)
  return masks


def clear_padding(query_packed, num_bits: int):
  """``query_packed`` with its bits past ``num_bits`` cleared. Concrete queries are checked
  instead (``check_queries``: such bits are an error); traced ones cannot be, and the
  kernels must never read a key past the index's bits (the native kernel's directory
  lookup would read out of bounds), so inside jit they are ignored."""
  if num_bits % codes_lib.WORD_BITS == 0:
    return query_packed
  return jnp.bitwise_and(query_packed, jnp.asarray(~codes_lib.padding_mask(num_bits))[None, :])


@functools.partial(jax.jit, static_argnames=("steps", "use_native"))
def _lookup(index, query_packed, steps, use_native):
  query_packed = clear_padding(query_packed, index.num_bits)

  def array_code(index, query_packed):
    start, count, _ = bucket_ranges(index, query_packed, steps, scan=True)
    return start, count

  if not use_native:
    return array_code(index, query_packed)
  return native.on_cpu(_native_search.lookup, array_code, index, query_packed)


def check_index(index) -> None:
  if not isinstance(index, _build.BucketIndex):
    raise ValueError(
      f"index must be a BucketIndex from jhash.index.build_index; got {_checks.describe(index)}."
    )


def check_queries(index: _build.BucketIndex, query_packed, name: str = "query_packed"):
  check_index(index)
  k = index.num_bits
  codes_lib.check_packed(query_packed, name)
  if query_packed.shape[1] != index.keys.shape[1]:
    raise ValueError(
      f"{name} must have {index.keys.shape[1]} words per code, as the index (num_bits={k}); "
      f"got shape {tuple(query_packed.shape)}."
    )
  codes_lib.check_padding(query_packed, k, name)


def lookup(index: _build.BucketIndex, query_packed: jax.Array):
  """Exact-match (radius 0) bucket lookup for a batch of queries.

  Args:
    index: a ``BucketIndex`` from ``build_index``.
    query_packed: uint32 [q, W] packed query codes.
  Returns:
    ``(start, count)``, int32 [q] each: the query's bucket is
    ``index.bucket_items[start:start + count]`` (item numbers; ``index.item_ids``
    maps them to ids). ``count`` is 0 when no stored code equals the query.
  """
  check_queries(index, query_packed)
  return _lookup(index, query_packed, static_steps(index), native.enabled())
