"""Ranking metrics of packed codes by the native CPU kernels (``jhash.native``).

The kernels take a chunk of queries, the whole database (one code per item, or
several with a mask: the least distance counts) and the labels of both,
and compute each query's distances and relevance in one pass, with no sort and
no ``[c, n]`` array: ``tie_groups`` counts items and relevant items at each
distance 0..K (the tie groups of ``_groups.groups_by_count``, the same integers),
``index_ap`` the AP sum of the ranking ordered by (distance, index)
(``_ap._index_sum``), the relevant items in the top k and in all, ``grade_groups``
the items at each (distance, grade) for NDCG, ``index_dcg`` DCG@k of that ranking.
``weighted_ap`` gives ``index_ap``'s outputs, or the tie-aware sum, for the ranking by
weighted Hamming distance (one sort of each query's integer distances in weight units);
``weighted_ranked`` the tie groups of that ranking's first k positions with their summed
gains, and the items of each grade (precision / recall@k and NDCG@k).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jhash import native
from jhash.metrics import _groups


def label_words(labels: jax.Array, kind: str) -> tuple[jax.Array, bool]:
  """Labels as uint32 words [n, L] for the kernels, and whether relevance is overlap.

  Class ids [n] are one word each (relevant: equal). Multi-hot sets [n, C] are
  packed 32 labels to a word; "share_label" (and "graded", taken as relevant when
  the grade is above 0) is relevant when a bit is shared, "same_class" when every
  word is equal.
  """
  if labels.ndim == 1:
    return lax.bitcast_convert_type(labels.astype(jnp.int32), jnp.uint32)[:, None], False
  n, c = labels.shape
  bits = jnp.pad(labels.astype(bool), ((0, 0), (0, (-c) % 32))).astype(jnp.uint32)
  shifts = jnp.arange(32, dtype=jnp.uint32)
  words = jnp.sum(bits.reshape(n, -1, 32) << shifts[None, None, :], axis=-1, dtype=jnp.uint32)
  return words, kind in ("share_label", "graded")


def bind(corpus, setup):
  """``args(query, query_labels)``: the kernels' leading arguments for a corpus (the
  database's label words made once), through ``overlap``; for weighted Hamming
  ``weighted_ap``'s (the weights in units in place of the mask and code length)."""
  db_words, overlap = label_words(corpus.db_labels, setup.relevance)

  def args(query, query_labels):
    words, _ = label_words(query_labels, setup.relevance)
    if setup.kind == "weighted":
      return query, corpus.db, corpus.weights, words, db_words, overlap
    return query, corpus.db, corpus.db_mask, words, db_words, setup.num_bits, overlap

  return args


def tie_groups(
  query, db, db_mask, query_words, db_words, num_bits: int, overlap: bool
) -> tuple[_groups.TieGroups, jax.Array]:
  """Items and relevant items at each distance, TieGroups of int32 [c, K + 1], and the
  relevant items in all, int32 [c].

  ``db`` is uint32 [n, W], or [n, m, W] with ``db_mask`` bool [n, m] (an item's
  distance is the least over the codes it holds); ``db_mask`` None for [n, W]. An
  item holding no code (a mask not checked, inside jit) is in no group but counts
  as relevant in all, as in the array code: never retrieved.
  """
  out = (jax.ShapeDtypeStruct((query.shape[0], num_bits + 2), jnp.int32),) * 2
  call = jax.ffi.ffi_call("jhash_tie_groups", out, vmap_method="sequential")
  size, hits = call(
    query,
    db,
    native.held_codes(db_mask),
    query_words,
    db_words,
    num_bits=np.int64(num_bits),
    overlap=np.int64(overlap),
  )
  return _groups.TieGroups(size[:, :-1], hits[:, :-1]), jnp.sum(hits, axis=1)


def index_ap(query, db, db_mask, query_words, db_words, num_bits: int, overlap: bool, top_k: int):
  """Ties by index: ``sum_{i<=k} rel_i precision@i``, relevant items in the top k and in
  the whole database: float32 [c] each (``db`` and ``db_mask`` as in ``tie_groups``)."""
  out = (jax.ShapeDtypeStruct((query.shape[0],), jnp.float32),) * 3
  call = jax.ffi.ffi_call("jhash_index_ap", out, vmap_method="sequential")
  return call(
    query,
    db,
    native.held_codes(db_mask),
    query_words,
    db_words,
    num_bits=np.int64(num_bits),
    overlap=np.int64(overlap),
    top_k=np.int64(top_k),
  )


def grade_width(labels) -> int:
  """G, the grades ``grade_groups`` counts: 2 for class ids [n], 32 x label words + 1 for
  multi-hot label sets [n, C] (the shared labels, up to C)."""
  return 2 if np.ndim(labels) == 1 else 32 * -(-np.shape(labels)[1] // 32) + 1


def grades(query_words, overlap: bool) -> jax.Array:
  """The grades the kernels count, 0..G-1: int32 [G] (G as in ``grade_width``, from the
  label words: 32 per word + 1 with ``overlap``, else 2)."""
  return jnp.arange(32 * query_words.shape[1] + 1 if overlap else 2)


def grade_groups(
  query, db, db_mask, query_words, db_words, num_bits: int, overlap: bool
) -> jax.Array:
  """Items at each (distance, grade): int32 [c, K + 2, G], distances 0..K then the items
  holding no code; grades 0..G-1 are the labels shared with the query (``overlap``,
  multi-hot words) or 1 for the same class id (G: ``grade_width``)."""
  width = grades(query_words, overlap).shape[0]
  out = jax.ShapeDtypeStruct((query.shape[0], num_bits + 2, width), jnp.int32)
  call = jax.ffi.ffi_call("jhash_grade_groups", out, vmap_method="sequential")
  return call(
    query,
    db,
    native.held_codes(db_mask),
    query_words,
    db_words,
    num_bits=np.int64(num_bits),
    overlap=np.int64(overlap),
  )


def index_dcg(
  query, db, db_mask, query_words, db_words, num_bits: int, overlap: bool, gains, k: int
) -> tuple[jax.Array, jax.Array]:
  """DCG@k of the ranking ordered by (distance, index), float32 [c], and the items of each
  grade in all, int32 [c, G] (``gains`` float32 [G]: the gain of each grade; ``db`` and
  ``db_mask`` as in ``tie_groups``; an item holding no code is never retrieved)."""
  out = (
    jax.ShapeDtypeStruct((query.shape[0],), jnp.float32),
    jax.ShapeDtypeStruct((query.shape[0], gains.shape[0]), jnp.int32),
  )
  call = jax.ffi.ffi_call("jhash_index_dcg", out, vmap_method="sequential")
  return call(
    query,
    db,
    native.held_codes(db_mask),
    query_words,
    db_words,
    gains.astype(jnp.float32),
    num_bits=np.int64(num_bits),
    overlap=np.int64(overlap),
    k=np.int64(k),
  )


def weighted_ap(query, db, units, query_words, db_words, overlap: bool, top_k: int, aware: bool):
  """AP by weighted Hamming distance (``units`` [K]: ``jhash.search``'s weight units):
  the sum of precisions (tie-aware: its expectation over orders of ties; else ties by
  index), relevant items in the top k (0 when ``aware``) and in all: float32 [c] each."""
  out = (jax.ShapeDtypeStruct((query.shape[0],), jnp.float32),) * 3
  call = jax.ffi.ffi_call("jhash_weighted_ap", out, vmap_method="sequential")
  return call(
    query,
    db,
    units.astype(jnp.int32),
    query_words,
    db_words,
    overlap=np.int64(overlap),
    top_k=np.int64(top_k),
    aware=np.int64(aware),
  )


def weighted_ranked(
  query, db, units, query_words, db_words, overlap: bool, gains, k: int, aware: bool
) -> tuple[_groups.TieGroups, jax.Array]:
  """The first k positions of the ranking by weighted Hamming distance as tie groups.

  Returns TieGroups of int32 sizes and float32 summed gains [c, k] (the groups starting
  before position k, in ranking order, zero past them; ``aware``: items of equal
  distance, else one position each, ties by index), and the items of each grade in all,
  int32 [c, G]. ``gains`` float32 [G] is the gain of each grade (``grade_width``).
  """
  c, width = query.shape[0], gains.shape[0]
  out = (
    jax.ShapeDtypeStruct((c, k), jnp.int32),
    jax.ShapeDtypeStruct((c, k), jnp.float32),
    jax.ShapeDtypeStruct((c, width), jnp.int32),
  )
  call = jax.ffi.ffi_call("jhash_weighted_ranked", out, vmap_method="sequential")
  size, value, per_grade = call(
    query,
    db,
    units.astype(jnp.int32),
    query_words,
    db_words,
    gains.astype(jnp.float32),
    overlap=np.int64(overlap),
    k=np.int64(k),
    aware=np.int64(aware),
  )
  return _groups.TieGroups(size, value), per_grade
