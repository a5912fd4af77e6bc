"""Hash-bucket search with a widening Hamming radius (MCH's Algorithm 1).

For ``r = 0, 1, 2, ...`` up to ``max_radius``, every bucket at Hamming distance
exactly ``r`` from the query is probed: the query XOR each of the ``C(K, r)``
flip masks of ``r`` set bits. The items of the buckets that exist are
collected; the search stops after the first radius at which at least
``num_wanted`` distinct items have been found ("Multiple Code Hashing for
Efficient Image Retrieval" (MCH), Algorithm 1, the general hash-bucket search
procedure that paper cites). Radius 0 reads the query's own bucket directly.

On the CPU the whole search is one call of a native kernel (``_native_search``,
``jhash.native``) when the kernels are built, with the same results in the same
order; what follows describes the array code, which runs elsewhere (and on the
CPU with ``JHASH_NATIVE=0``).

Order of the results: by radius; inside radius ``r``, in the order the buckets
are visited, which is increasing flip mask read as an integer (equivalently,
increasing ``query XOR bucket key``; for ``r = 1`` this is bit 0, bit 1, ...);
inside a bucket, by increasing item id.

Items with several codes are returned once, at the first visit of any of their
codes' buckets: that is at radius ``d_min``, their nearest code's distance, and
in the bucket with the smallest ``query XOR code`` among the codes at ``d_min``.
Each candidate (item, bucket) is tested against the item's own codes, so no
per-query "seen" table over the database is needed.

Vectorisation: the flip masks of radii 1..max_radius are cut into chunks of
``_CHUNK`` masks, each chunk inside one radius (the last chunk of a radius is
padded with masks marked invalid). A block of queries probes a whole chunk at
once with one batched directory search (``_probe.find_buckets``); the buckets'
items are written into fixed-size result rows by rank (a batched
``searchsorted`` over the per-query running counts), a window of ranks at a
time, so the work follows the number of hits; nothing is sorted. One
``lax.while_loop`` runs over the chunks: it ends after the last chunk or once
every query of the block has enough. A query's stop is checked only after the
last chunk of a radius, so a query that is done takes nothing from later radii.
One loop body serves every radius, so the compiled program does not grow with
``max_radius``. Blocks of queries run one after the other (``lax.map``) so the
working arrays stay in cache (``default_probes_per_block()`` probes per chunk and
block). Both tuning knobs, the block size and the ``searchsorted`` method, are
keyword arguments of ``bucket_search``: they change the speed, never the results.

With the index's substring tables, when they are cheaper, radii 0..max_radius
are searched through them instead, with the same results (``_substrings``).

Per-call costs, which dominate radius 0 (under a millisecond for 1,000 queries): the
index and NumPy queries go to one jitted call as they are, ``num_wanted`` as a NumPy
scalar (creating a device scalar cost more than the search). The query's own
bucket (radius 0) is found with the index's step count read once per index: a
directory run of at most 16 keys is read in one gather and the bucket's bounds in
another (on the CPU each gather from a large table is one parallel task, a fixed
cost), instead of 4 dependent gathers and 2 more.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jhash import _checks
from jhash import native
from jhash.index import _build
from jhash.index import _native_search
from jhash.index import _probe
from jhash.index import _search_checks
from jhash.index import _substrings
from jhash.index import _visit

# Probes per block of queries and chunk of masks. Measured with 1,000 queries x
# 2,081 probes (64 bits, radius <= 2) on 2 shared CPU cores: blocks of 17 k / 83 k /
# 416 k / 2.1 M probes took 0.15 / 0.11 / 0.25 / 0.54 s (cache effects).
_PROBES_PER_BLOCK = {"cpu": 1 << 16}
# Elsewhere (GPU, TPU) one block should fill the device; not measured yet (run
# ``python benchmarks/bench_index.py --sweep`` there to choose).
_PROBES_PER_BLOCK_ACCELERATOR = 1 << 22
# Flip masks per chunk (radii >= 1). Padding wastes at most one partial chunk per radius.
_CHUNK = 128
# Candidates (ranks) examined per step of the result fill. Hits are usually sparse
# (about one per 2,000 probes on random 64-bit codes), so a step wider than that
# mostly does wasted work: on 1M random codes, radius 2, 256 slots, windows of
# 16 ran about 2x faster than 128; on dense clustered codes (200 found per query)
# 16 and 32 were best.
_WINDOW = 16
# First guess of result slots in radius_search.
_RADIUS_SLOTS = 64
#: jnp.searchsorted's methods, any of which bucket_search accepts.
SEARCHSORTED_METHODS = ("scan", "scan_unrolled", "sort", "compare_all")


class SearchResults(NamedTuple):
  """Results of ``bucket_search`` / ``radius_search`` for ``q`` queries.

  ``max_results`` slots per query; found items past the last slot are counted
  in ``num_found`` but not returned.
  """

  item_ids: jax.Array  # int32 [q, max_results]: item ids, -1 in empty slots.
  radii: jax.Array  # int32 [q, max_results]: radius each was found at, -1 if empty.
  num_found: jax.Array  # int32 [q]: distinct items within radius_reached.
  buckets_visited: jax.Array  # int32 [q]: buckets probed, sum_{i <= radius_reached} C(K, i).
  buckets_nonempty: jax.Array  # int32 [q]: probed buckets that exist in the index.
  radius_reached: jax.Array  # int32 [q]: the last radius searched.


def default_searchsorted_method() -> str:
  """Default ``jnp.searchsorted`` method for the rank-to-probe step of the result fill.

  Each query looks up a few ranks in the running counts of one chunk (128
  probes). On the CPU, over 1,000,000 codes at radius 2, ``"scan"`` was as fast
  as ``"compare_all"`` with 16 result slots and 3x faster with 256, and
  ``"sort"`` was 2-5x slower (``python benchmarks/bench_index.py --sweep``).
  Accelerators were not measured yet; ``"scan"`` is used there too.
  """
  return "scan"


def default_probes_per_block() -> int:
  """Default probes (queries x masks) handled at once, by backend: small on the CPU so
  the working arrays stay in cache, large on accelerators so one step fills the chip."""
  return _PROBES_PER_BLOCK.get(jax.default_backend(), _PROBES_PER_BLOCK_ACCELERATOR)


@functools.lru_cache(maxsize=32)
def _device_chunks(num_bits: int, max_radius: int, chunk: int):
  """``mask_chunks`` as device arrays, made once per setting. Made eagerly even when the
  first call is inside a traced function (``bucket_search`` under ``jax.jit``): a cached
  tracer would break every later call."""
  with jax.ensure_compile_time_eval():
    return tuple(jnp.asarray(a) for a in mask_chunks(num_bits, max_radius, chunk))


@functools.lru_cache(maxsize=32)
def mask_chunks(num_bits: int, max_radius: int, chunk: int):
  """Flip masks of radii 1..max_radius in visit order, cut into chunks of one radius.

  Returns NumPy arrays: masks uint32 [n, chunk, W], valid bool [n, chunk],
  radius int32 [n], ends_radius bool [n] (the chunk is its radius's last).
  """
  masks, valid, radius, ends = [], [], [], []
  for r in range(1, max_radius + 1):
    m = _probe.flip_masks(num_bits, r)
    count = -(-m.shape[0] // chunk)
    padded = np.zeros((count * chunk, m.shape[1]), np.uint32)
    padded[: m.shape[0]] = m
    masks.append(padded.reshape(count, chunk, -1))
    valid.append((np.arange(count * chunk) < m.shape[0]).reshape(count, chunk))
    radius.append(np.full((count,), r, np.int32))
    ends.append(np.arange(count) == count - 1)
  w = -(-num_bits // 32)
  if not masks:
    return (
      np.zeros((0, chunk, w), np.uint32),
      np.zeros((0, chunk), bool),
      np.zeros((0,), np.int32),
      np.zeros((0,), bool),
    )
  return (
    np.concatenate(masks),
    np.concatenate(valid),
    np.concatenate(radius),
    np.concatenate(ends),
  )


def _probe_chunk(
  index, queries, num_wanted, window, method, state, masks, valid, radius, ends_radius
):
  """Probe one chunk of flip masks (all of one radius) for a block of queries. The
  binary search stays a loop here: unrolled it ran 1.4x slower (1M codes, radius 2)."""
  probes = queries[:, None, :] ^ masks[None, :, :]
  start, count, exists = _probe.bucket_ranges(index, probes)
  exists &= valid[None, :]
  return _visit.visit(
    index,
    queries,
    num_wanted,
    window,
    method,
    state,
    start,
    jnp.where(exists, count, 0),
    exists,
    lambda probe: masks[probe],
    radius,
    jnp.sum(valid, dtype=jnp.int32),
    ends_radius,
  )


def _probe_own_bucket(index, queries, num_wanted, steps, state):
  """Radius 0: the query's own bucket, whose items are all first visits (distance 0,
  and an item is stored once per bucket), read straight from its range."""
  start, count, exists = _probe.bucket_ranges(index, queries, steps, scan=True)
  num_slots = state.items.shape[1]
  ranks = jnp.arange(num_slots, dtype=jnp.int32)[None, :]
  take = state.active[:, None] & (ranks < count[:, None])
  entry = jnp.where(take, start[:, None] + ranks, 0)  # empty slots all read one line
  act = state.active
  found = jnp.where(act, count, 0)
  return _visit.State(
    items=jnp.where(take, index.bucket_items[entry], state.items),
    radii=jnp.where(take, 0, state.radii),
    found=found,
    visited=jnp.where(act, 1, 0),
    nonempty=jnp.where(act, exists.astype(jnp.int32), 0),
    radius=jnp.zeros_like(state.radius),
    active=act & (found < num_wanted),
  )


def _probe_flip_masks(index, chunks, num_wanted, window, method, queries, state):
  """Radii 1..max_radius by flip masks: one ``lax.while_loop`` step per chunk."""
  probe = functools.partial(_probe_chunk, index, queries, num_wanted, window, method)
  masks, valid, radius, ends = chunks
  num_chunks = masks.shape[0]

  def more(carry):
    i, state = carry
    return (i < num_chunks) & jnp.any(state.active)

  def step(carry):
    i, state = carry
    return i + 1, probe(state, masks[i], valid[i], radius[i], ends[i])

  return lax.while_loop(more, step, (jnp.int32(0), state))[1]


# Blocks of queries ------------------------------------------------------------------------


def _in_blocks(run, queries, live, block_size):
  """``run((queries, live)) -> _visit.State`` over blocks of ``block_size`` queries, one
  block after the other (``lax.map``), so each block's working arrays stay in cache."""
  num_q, num_words = queries.shape
  num_blocks = -(-num_q // block_size)
  if num_blocks == 1:
    return run((queries, live))
  pad = num_blocks * block_size - num_q
  queries = jnp.concatenate([queries, jnp.zeros((pad, num_words), jnp.uint32)])
  live = jnp.concatenate([live, jnp.zeros((pad,), bool)])
  state = lax.map(
    run, (queries.reshape(num_blocks, block_size, num_words), live.reshape(num_blocks, block_size))
  )
  return jax.tree.map(lambda a: a.reshape(num_blocks * block_size, *a.shape[2:])[:num_q], state)


def _search_by_flip_masks(
  index, chunks, num_wanted, window, method, steps, num_slots, max_radius, block
):
  """Radius 0 from the query's own bucket, then radii 1..max_radius by flip masks."""
  queries, live = block
  state = _probe_own_bucket(
    index, queries, num_wanted, steps, _visit.empty_state(queries.shape[0], num_slots, live)
  )
  if max_radius == 0:
    return state
  return _probe_flip_masks(index, chunks, num_wanted, window, method, queries, state)


def _flips_in_blocks(by_flip_masks, block_size, block):
  return _in_blocks(by_flip_masks, *block, block_size)


@functools.partial(
  jax.jit,
  static_argnames=(
    "max_radius",
    "max_results",
    "block_size",
    "flip_block_size",
    "window",
    "method",
    "steps",
    "plan",
    "fall_back",
    "use_native",
  ),
)
def _bucket_search(
  index,
  query_packed,
  chunks,
  num_wanted,
  *,
  max_radius,
  max_results,
  block_size,
  flip_block_size,
  window,
  method,
  steps,
  plan,
  fall_back,
  use_native,
):
  """The search; also returns the most buckets within reach of one query through the
  substring tables (0 without them, and from the native kernel, which needs no second
  run), to tell an eager caller to run again. ``use_native``: on the CPU, the kernel of
  ``_native_search`` (the same results). Padding bits of traced queries are ignored
  (``_probe.clear_padding``; concrete ones were refused)."""
  query_packed = _probe.clear_padding(query_packed, index.num_bits)
  array_code = functools.partial(
    _array_search,
    max_radius=max_radius,
    max_results=max_results,
    block_size=block_size,
    flip_block_size=flip_block_size,
    window=window,
    method=method,
    steps=steps,
    plan=plan,
    fall_back=fall_back,
  )
  if not use_native:
    return array_code(index, query_packed, chunks, num_wanted)

  def native_kernel(index, query_packed, chunks, num_wanted):
    del chunks
    out = _native_search.search(
      index,
      query_packed,
      num_wanted,
      max_radius=max_radius,
      max_results=max_results,
      num_substrings=0 if plan is None else len(plan.layout),
      flips=0 if plan is None else plan.flips,
    )
    return SearchResults(*out), jnp.int32(0)

  return native.on_cpu(native_kernel, array_code, index, query_packed, chunks, num_wanted)


def _array_search(
  index,
  query_packed,
  chunks,
  num_wanted,
  *,
  max_radius,
  max_results,
  block_size,
  flip_block_size,
  window,
  method,
  steps,
  plan,
  fall_back,
):
  live = jnp.ones((query_packed.shape[0],), bool)
  by_flip_masks = functools.partial(
    _search_by_flip_masks, index, chunks, num_wanted, window, method, steps, max_results, max_radius
  )
  most = jnp.int32(0)
  if plan is None:
    state = _in_blocks(by_flip_masks, query_packed, live, flip_block_size)
  else:
    flips_in_blocks = None
    if fall_back:
      flips_in_blocks = functools.partial(_flips_in_blocks, by_flip_masks, flip_block_size)
    run = functools.partial(
      _substrings.search_by_substrings,
      index,
      num_wanted,
      max_results,
      max_radius,
      plan,
      flips_in_blocks,
    )
    state, count = _in_blocks(run, query_packed, live, block_size)
    most = jnp.max(count, initial=0)
  ids = jnp.where(state.items >= 0, index.item_ids[jnp.maximum(state.items, 0)], -1)
  return SearchResults(
    item_ids=ids,
    radii=state.radii,
    num_found=state.found,
    buckets_visited=state.visited,
    buckets_nonempty=state.nonempty,
    radius_reached=state.radius,
  ), most


def _check_tuning(probes_per_block: Any, searchsorted_method: Any) -> tuple[int, str]:
  """The tuning knobs, checked, or the backend's defaults where ``None``."""
  if probes_per_block is None:
    probes_per_block = default_probes_per_block()
  probes_per_block = _checks.positive_int(probes_per_block, "probes_per_block")
  if searchsorted_method is None:
    searchsorted_method = default_searchsorted_method()
  if searchsorted_method not in SEARCHSORTED_METHODS:
    raise ValueError(
      f"searchsorted_method must be one of {SEARCHSORTED_METHODS}; got {searchsorted_method!r}."
    )
  return probes_per_block, searchsorted_method


def bucket_search(
  index: _build.BucketIndex,
  query_packed: jax.Array,
  *,
  num_wanted: Any,
  max_radius: int,
  max_results: int,
  probes_per_block: int | None = None,
  searchsorted_method: str | None = None,
  use_substrings: bool | None = None,
) -> SearchResults:
  """Hash-bucket search with a widening radius (MCH, Algorithm 1), batched and jitted.

  For ``r = 0, 1, ..., max_radius`` every bucket at Hamming distance exactly
  ``r`` from the query is probed (``C(K, r)`` of them); a query stops after the
  first radius at which it has found at least ``num_wanted`` distinct items.
  Items are returned once, at their first visit, in radius order, then bucket
  visit order (increasing ``query XOR key``), then increasing item id.

  Cost: ``sum_{r <= max_radius} C(K, r)`` probes per query in the worst case
  (2,081 at K = 64, radius 2; 43,745 at radius 3); with the index's substring tables
  a few lookups per query instead (``use_substrings``). Called eagerly, the
  substring search reads back one scalar (the most buckets within reach of a query)
  to decide whether to run again with more slots.

  Args:
    index: a ``BucketIndex``.
    query_packed: uint32 [q, W] packed query codes.
    num_wanted: int >= 1 (may be a traced scalar): stop once this many are found.
    max_radius: largest radius searched, 0 to K (Python int; sets shapes).
    max_results: result slots per query (Python int in [1, 2**31 - 1]; the [q, max_results]
      results must fit in memory).
    probes_per_block: tuning only (the results do not change): probes (queries x
      flip masks) handled at once, which sets how many queries form a block. Default
      ``default_probes_per_block()``: 65,536 on the CPU (the working arrays stay in
      cache), 4,194,304 on accelerators.
    searchsorted_method: tuning only: ``jnp.searchsorted``'s method for finding the
      probe of each result rank, one of ``SEARCHSORTED_METHODS``. Default
      ``default_searchsorted_method()`` (``"scan"``). Both knobs are swept by
      ``python benchmarks/bench_index.py --sweep``.
    use_substrings: tuning only: find the buckets of radii >= 1 through the index's
      substring tables (multi-index hashing; ``build_index(num_substrings=...)``)
      instead of probing every flip mask. Default ``None``: when they are cheaper
      (``_substrings.substring_plan``, by the costs of the code that will run: the
      native kernel's on the CPU); ``False``: never; ``True``: whenever the index
      has them.
  Returns:
    ``SearchResults``: item ids and radii [q, max_results] (-1 padded), number
    found [q] (all distinct items within the final radius, even past
    ``max_results``), buckets visited [q] (every probed bucket, present or not:
    ``sum_{i <= radius_reached} C(K, i)``), non-empty buckets visited [q], and the
    final radius reached [q].
  """
  max_radius, max_results = _search_checks.check_search_args(
    index, query_packed, max_radius, max_results
  )
  num_wanted = _search_checks.check_num_wanted(num_wanted)
  setup = _setup(
    index, max_radius, max_results, probes_per_block, searchsorted_method, use_substrings
  )
  index, plan, probes, num_q = setup.index, setup.plan, setup.probes, query_packed.shape[0]
  # NumPy queries go to jit as they are: its dispatch copies them faster than jnp.asarray.
  search = functools.partial(
    _bucket_search,
    index,
    query_packed,
    setup.chunks,
    num_wanted,
    flip_block_size=max(1, min(num_q, probes // setup.per_query)),
    **setup.static,
  )
  if plan is None:
    return search(block_size=1, plan=None, fall_back=False)[0]
  traced = any(isinstance(x, jax.core.Tracer) for x in (query_packed, index.keys, num_wanted))
  return _search_by_substrings(search, plan, probes, num_q, traced)


class Setup(NamedTuple):
  """What ``_setup`` fixes for a search of one index with one set of options."""

  index: _build.BucketIndex  # without substring tables when the plan does not use them
  chunks: Any  # the device flip-mask chunks of radii 1..max_radius; None at radius 0
  plan: Any  # a _substrings.SubstringPlan, or None (flip masks)
  per_query: int  # probes one query takes per step
  probes: int  # probes per block of queries
  static: dict  # _bucket_search's static arguments but block sizes, plan and fall_back


def _setup(index, max_radius, max_results, probes_per_block, searchsorted_method, use_substrings):
  """What a search of ``index`` fixes before its queries come (``Setup``; the radius and
  slots checked by the caller, the tuning knobs here)."""
  probes, method = _check_tuning(probes_per_block, searchsorted_method)
  use_native = native.enabled()
  # The plan's costs are the kernel's where it will run (programs compiled for the CPU).
  plan = _substrings.substring_plan(
    index,
    max_radius,
    _search_checks.check_use_substrings(use_substrings),
    native_kernel=use_native and jax.default_backend() == "cpu",
  )
  if plan is None and index.num_substrings:
    index = index._replace(substring_offsets=None, substring_buckets=None)  # not passed in
  multi = index.max_codes_per_item > 1
  window = _WINDOW if multi else min(_WINDOW, 1 << (max_results - 1).bit_length())
  chunks, per_query = None, 1  # radius 0: one bucket per query, one block
  if max_radius:
    k = index.num_bits
    chunk = min(_CHUNK, max(math.comb(k, r) for r in range(1, max_radius + 1)))
    chunks = _device_chunks(k, max_radius, chunk)
    per_query = max(chunk, window * index.max_codes_per_item if multi else window)
  static = dict(
    max_radius=max_radius,
    max_results=max_results,
    window=window,
    method=method,
    steps=_probe.static_steps(index),
    use_native=use_native,
  )
  return Setup(index, chunks, plan, per_query, probes, static)


def _search_by_substrings(search, plan, probes, num_q, traced):
  """The substring search: eagerly, few slots first, more (then flip masks) only where
  some query needs them; inside a trace, one program that falls back on its own."""

  def run(hits, fall_back):
    # About ``hits`` buckets and a window of entries per query.
    return search(
      block_size=max(1, min(num_q, probes // hits)),
      plan=plan._replace(hits=hits),
      fall_back=fall_back,
    )

  if not traced:
    for hits in (_substrings.FEW_HITS, _substrings.HITS):
      res, most = run(hits, False)
      if isinstance(most, jax.core.Tracer):  # inside jit after all (all closed over)
        break
      if int(most) <= hits:
        return res
    else:
      return search(block_size=1, plan=None, fall_back=False)[0]
  return run(_substrings.HITS, True)[0]


def radius_search(index: _build.BucketIndex, query_packed: jax.Array, radius: int) -> SearchResults:
  """Every item within Hamming distance ``radius`` of each query, each once.

  The bucket search without early stop, with ``_RADIUS_SLOTS`` (64) result
  slots; when some query finds more, it runs again with the next power of two
  at or above the largest count, so nothing is cut off. For evaluation
  (precision / recall within radius r). Host-level (not jittable: the result
  width depends on the data).

  Args:
    index: a ``BucketIndex``.
    query_packed: uint32 [q, W].
    radius: Python int >= 0.
  Returns:
    ``SearchResults`` whose ``item_ids`` row ``i`` holds all ``num_found[i]``
    items within ``radius`` (then -1), in the order of ``bucket_search``.
  """
  _probe.check_queries(index, query_packed)
  radius = _search_checks.check_radius(index, radius, "radius")
  if any(isinstance(x, jax.core.Tracer) for x in (query_packed, index.keys)):
    raise TypeError(
      "radius_search is host-level (its result's width depends on the data), so it cannot "
      "run inside jit or vmap; inside a trace use bucket_search with a fixed max_results."
    )
  never = index.num_items + 1
  res = bucket_search(
    index, query_packed, num_wanted=never, max_radius=radius, max_results=_RADIUS_SLOTS
  )
  most = int(np.max(np.asarray(res.num_found), initial=0))
  if most <= _RADIUS_SLOTS:
    return res
  return bucket_search(
    index,
    query_packed,
    num_wanted=never,
    max_radius=radius,
    max_results=1 << (most - 1).bit_length(),
  )
