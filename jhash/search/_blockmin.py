"""Exact top-k search by Hamming distance (plain, weighted and multi-code).

The result is exact and deterministic: the ``k`` database items with the
smallest distance, sorted by ``(distance, database index)``, so ties always go
to the smaller index.

Algorithm: selection by block minima, with no data-dependent branch and no
buffer that can overflow. The database is cut into *sub-blocks* of 32
consecutive items and *super-blocks* of 8 consecutive sub-blocks (256 items).

1. One fused pass over the database (in blocks of about ``db_block`` items,
   ``query_chunk`` queries at a time) computes the minimum distance inside
   every sub-block, without materialising the ``[q, n]`` distances. The
   ``min(k, #super-blocks)`` best super-blocks by (minimum, index) are kept
   with ``lax.top_k``, merged group by group (about 32,768 sub-blocks a group,
   which bounds memory), each carrying the minima of its 8 sub-blocks.
2. Among the kept super-blocks' sub-blocks, ``lax.top_k`` keeps the best
   ``min(k, #sub-blocks)`` by (minimum, index).
3. Their 32 items each are gathered, their distances computed again, and
   ``lax.top_k`` picks the final ``k``.

Why the selections are exact: let ``x`` be one of the true top ``k`` items and
``s`` its group (sub- or super-block). If ``s`` were not kept, ``k`` kept groups
come before it: each holds an item ``y`` with ``d(y) = min <= min(s) <= d(x)``,
and when ``d(y) = d(x)`` its group precedes ``s``, so ``y`` has the smaller
index. Then ``k`` distinct items beat ``x``: a contradiction. Step 2 is the
same argument on the database restricted to the kept super-blocks.

Ties: ``lax.top_k`` returns equal keys lowest position first (documented, and
checked by the tests). Every selection runs over candidates laid out in
database-index order (kept entries before the new group, the kept lists sorted
by index before each refinement), so position order is index order. Keys are
negated distances as float32, exact for integers below ``2**24``.

Why this design (measured on 2 shared x86 cores, 1,000,000 codes, k = 100;
numbers in ``benchmarks/RESULTS.md``): ``lax.top_k`` on float32 costs about
3 ns per element plus 15-20 us per row of heap work on ``k`` (on int32 it is a
full sort, 100x slower), so a top-k over every distance is about 10x slower than
the distance pass. Selecting whole blocks by their minima cuts the input of
``lax.top_k`` 256-fold; the three selections then cost about 100 us per query
(20-35% on top of the fused distance pass). The alternative of a running k-th
distance threshold with a fixed candidate buffer was not taken: it needs a
compaction step (a cumulative sum, which XLA's CPU backend lowers to a
quadratic ``reduce_window``) and a fallback for overflow, and such a version
ran at about half the speed of the distance pass. The kernel of the pass is
written for XLA's CPU code generator: 8 sub-blocks side by side in vector
lanes (see ``_lanes_layout``) and a bit-sliced popcount for codes of 2 or more
words (``_swar_popcount_sum``).

Padding: the database is padded to whole blocks by repeating its last row, so
a partly filled sub-block keeps its true minimum; sub-blocks past the end get
the sentinel distance (larger than any real one) and padded items likewise,
so they are never returned while ``k <= n``.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax


SUB_BLOCK = 32  # items per sub-block (one minimum each)
SUPER_BLOCK = 8  # sub-blocks per super-block (the unit of the first selection)
MERGE_MINIMA = 32768  # sub-block minima per merge (bounds memory per query chunk)
DEFAULT_QUERY_CHUNK = 64
DEFAULT_DB_BLOCK = 16384


class _Plan(NamedTuple):
  """Static sizes of one search (Python ints)."""

  groups: int  # merges of the kept super-blocks with a group of blocks
  per_group: int  # blocks per group
  block: int  # items per block (whole super-blocks)
  group_subs: int  # sub-blocks per group (a multiple of SUPER_BLOCK)
  padded: int  # rows after padding: groups * per_group * block
  keep_supers: int  # super-blocks kept: min(k, super-blocks holding a real row)
  keep_subs: int  # sub-blocks kept: min(k, sub-blocks holding a real row)


def _plan(n: int, k: int, db_block: int) -> _Plan:
  """Blocks of whole super-blocks near ``db_block`` items, with the least padding."""
  unit = SUB_BLOCK * SUPER_BLOCK
  num_supers = -(-n // unit)
  target = max(1, round(n / max(db_block, unit)))
  per_group_max = max(1, MERGE_MINIMA // (SUPER_BLOCK * max(1, db_block // unit)))
  best = None
  for total in range(max(1, target * 4 // 5), target * 5 // 4 + 2):
    groups = -(-total // per_group_max)
    per_group = -(-total // groups)
    supers = -(-num_supers // (groups * per_group))
    rows = groups * per_group * supers * unit
    if best is None or (rows, abs(total - target)) < best[0]:
      best = ((rows, abs(total - target)), groups, per_group, supers)
  (rows, _), groups, per_group, supers = best
  return _Plan(
    groups,
    per_group,
    supers * unit,
    per_group * supers * SUPER_BLOCK,
    rows,
    min(k, num_supers),
    min(k, -(-n // SUB_BLOCK)),
  )


def neg_key(d: jax.Array) -> jax.Array:
  """float32 key whose descending order is ascending ``d`` (``-0.0`` folded into ``+0.0``)."""
  if jnp.issubdtype(d.dtype, jnp.integer):
    return (-d).astype(jnp.float32)  # exact below 2**24; integer -0 is +0
  neg = -d.astype(jnp.float32)
  return jnp.where(neg == 0, jnp.float32(0), neg)


def pad_rows(a: jax.Array, rows: int) -> jax.Array:
  extra = rows - a.shape[0]
  if extra == 0:
    return a
  return jnp.pad(a, [(0, extra)] + [(0, 0)] * (a.ndim - 1), mode="edge")


def _chunked(fn: Callable, queries: jax.Array, chunk: int):
  """``fn`` over query chunks of at most ``chunk`` rows with ``lax.map``; results concatenated.

  No queries give empty results ([0, ...], of ``fn``'s output shapes and dtypes).
  """
  q = queries.shape[0]
  if q == 0:
    out = jax.eval_shape(fn, jax.ShapeDtypeStruct((1, *queries.shape[1:]), queries.dtype))
    return jax.tree.map(lambda a: jnp.zeros((0, *a.shape[1:]), a.dtype), out)
  num = -(-q // min(chunk, q))
  chunk = -(-q // num)  # equal chunks: the least padding
  padded = pad_rows(queries, num * chunk)
  out = lax.map(fn, padded.reshape(num, chunk, *queries.shape[1:]))
  return jax.tree.map(lambda a: a.reshape(num * chunk, *a.shape[2:])[:q], out)


def _take_rows(a: jax.Array, pos: jax.Array) -> jax.Array:
  """``a[i, pos[i, j], ...]`` for a [c, m, ...] and pos [c, p]."""
  idx = pos.reshape(pos.shape + (1,) * (a.ndim - 2))
  return jnp.take_along_axis(a, idx, axis=1)


class _Search(NamedTuple):
  """What one search needs inside a query chunk (closed over by ``select``)."""

  plan: _Plan
  blocks: Any  # laid-out database: leaves [groups, per_group, ...]
  sub_tree: Any  # padded database by sub-block: leaves [padded / 32, 32, ...]
  block_minima: Callable
  candidate_distances: Callable
  sentinel: jax.Array  # a distance above every real one
  num_valid: Any  # int or traced int32: rows past it are padding


def _keep_super_blocks(sr: _Search, qc: jax.Array):
  """Step 1: the best super-blocks by (minimum, index), each with its 8 sub-block keys.

  Returns first sub-block ids int32 [c, g1] and sub-block keys float32 [c, g1, 8],
  in ``lax.top_k``'s order (equal keys in index order).
  """
  plan, c, sup = sr.plan, qc.shape[0], SUPER_BLOCK
  g1, subs_per_block = plan.keep_supers, plan.block // SUB_BLOCK
  valid_subs = (sr.num_valid + (SUB_BLOCK - 1)) // SUB_BLOCK
  far = neg_key(sr.sentinel)

  def add_block(keys, xs):
    first_sub, b, blk = xs
    ids = first_sub + b * subs_per_block + jnp.arange(subs_per_block, dtype=jnp.int32)
    minima = jnp.where(ids[None, :] < valid_subs, sr.block_minima(qc, blk), sr.sentinel)
    return lax.dynamic_update_slice(keys, neg_key(minima), (0, b * subs_per_block)), None

  def merge_group(carry, xs):
    best_key, best_first, best_subkeys = carry
    group_index, group_blocks = xs
    first_sub = group_index * plan.group_subs
    keys = jnp.zeros((c, plan.group_subs), jnp.float32)
    steps = (jnp.full((plan.per_group,), first_sub), jnp.arange(plan.per_group, dtype=jnp.int32))
    keys, _ = lax.scan(add_block, keys, steps + (group_blocks,))
    subkeys = keys.reshape(c, plan.group_subs // sup, sup)
    # The kept super-blocks precede this group's in index order.
    top, pos = lax.top_k(jnp.concatenate([best_key, jnp.max(subkeys, axis=2)], axis=1), g1)
    old, old_pos, new_pos = pos < g1, jnp.minimum(pos, g1 - 1), jnp.maximum(pos - g1, 0)
    first = jnp.where(old, _take_rows(best_first, old_pos), first_sub + sup * new_pos)
    chosen = jnp.where(
      old[:, :, None], _take_rows(best_subkeys, old_pos), _take_rows(subkeys, new_pos)
    )
    return (top, first, chosen), None

  total_subs = plan.padded // SUB_BLOCK  # "no super-block yet": an id past the end
  init = (
    jnp.full((c, g1), far, jnp.float32),
    jnp.full((c, g1), total_subs, jnp.int32),
    jnp.full((c, g1, sup), far, jnp.float32),
  )
  (_, first, subkeys), _ = lax.scan(
    merge_group, init, (jnp.arange(plan.groups, dtype=jnp.int32), sr.blocks)
  )
  return first, subkeys


def _keep_sub_blocks(sr: _Search, first: jax.Array, subkeys: jax.Array) -> jax.Array:
  """Step 2: the best sub-blocks of the kept super-blocks; ids int32 [c, g2] ascending."""
  sup, total_subs = SUPER_BLOCK, sr.plan.padded // SUB_BLOCK
  order = jnp.argsort(first, axis=1)  # index order, so top_k's tie order is index order
  first = jnp.take_along_axis(first, order, axis=1)
  subkeys = _take_rows(subkeys, order).reshape(first.shape[0], -1)
  _, pos = lax.top_k(subkeys, sr.plan.keep_subs)
  first, offset = _take_rows(first, pos // sup), pos % sup
  # Entries never filled (only when fewer real sub-blocks than kept exist) become
  # the id total_subs, whose items lie past the padding and are masked in step 3.
  kept = jnp.where(first < total_subs, first + offset, total_subs)
  return jnp.sort(kept, axis=1)


def _best_items(sr: _Search, qc: jax.Array, kept: jax.Array, k: int):
  """Step 3: the k best items of the kept sub-blocks (ids ascending) by (distance, index)."""
  s, total_subs = SUB_BLOCK, sr.plan.padded // SUB_BLOCK
  cand = jax.tree.map(lambda a: a[jnp.minimum(kept, total_subs - 1)], sr.sub_tree)
  d = sr.candidate_distances(qc, cand)
  items = kept[:, :, None] * s + jnp.arange(s, dtype=jnp.int32)[None, None, :]
  d = jnp.where(items < sr.num_valid, d, sr.sentinel).reshape(qc.shape[0], -1)
  _, pos = lax.top_k(neg_key(d), k)
  items = items.reshape(qc.shape[0], -1)
  return jnp.take_along_axis(d, pos, axis=1), jnp.take_along_axis(items, pos, axis=1)


def select(
  queries,
  db,
  k: int,
  *,
  layout: Callable,
  block_minima: Callable,
  candidate_distances: Callable,
  sentinel,
  num_valid=None,
  query_chunk: int = DEFAULT_QUERY_CHUNK,
  db_block: int = DEFAULT_DB_BLOCK,
):
  """Exact top-k by block minima, shared by the plain, weighted and multi-code searches.

  Args:
    queries: [q, ...] array, chunked along its first axis.
    db: pytree of arrays with a leading axis of n rows (the database).
    k: results per query, ``1 <= k <= n``.
    layout: padded db pytree ([padded, ...] leaves), number of blocks T and
      block size -> pytree of arrays with leading axis T (one entry per block).
    block_minima: (query chunk [c, ...], one laid-out block) -> [c, block / 32]
      minimum distance of each sub-block.
    candidate_distances: (query chunk, db pytree gathered as [c, G, 32, ...])
      -> [c, G, 32] distances, equal to what ``block_minima`` minimises.
    sentinel: a distance larger than any real one (scalar of the distance dtype).
    num_valid: rows at index >= num_valid are padding (a traced int32 is
      allowed, for shards); defaults to n. Rows past it must repeat row
      ``num_valid - 1`` up to the end of its sub-block.
  Returns:
    (distances [q, k], indices int32 [q, k]) sorted by (distance, index).
  """
  n = jax.tree.leaves(db)[0].shape[0]
  plan = _plan(n, k, db_block)
  padded = jax.tree.map(lambda a: pad_rows(a, plan.padded), db)
  blocks = layout(padded, plan.groups * plan.per_group, plan.block)
  blocks = jax.tree.map(lambda a: a.reshape(plan.groups, plan.per_group, *a.shape[1:]), blocks)
  sub_tree = jax.tree.map(
    lambda a: a.reshape(plan.padded // SUB_BLOCK, SUB_BLOCK, *a.shape[1:]), padded
  )
  sr = _Search(
    plan,
    blocks,
    sub_tree,
    block_minima,
    candidate_distances,
    jnp.asarray(sentinel),
    n if num_valid is None else num_valid,
  )

  def one_chunk(qc):
    first, subkeys = _keep_super_blocks(sr, qc)
    return _best_items(sr, qc, _keep_sub_blocks(sr, first, subkeys), k)

  return _chunked(one_chunk, queries, query_chunk)
