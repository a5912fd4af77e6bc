"""Ranking metrics of packed codes by the native CPU kernels (``jhash.native``).

Both kernels take a chunk of queries, the whole database and the chunk's
relevance, and compute each query's distances in one pass, with no sort:
``tie_groups`` counts items and relevant items at each distance 0..K (the
tie groups of ``_groups.groups_by_count``, the same integers), ``index_ap``
the AP sum of the ranking ordered by (distance, index) (``_ap._index_sum``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jhash.metrics import _groups


def tie_groups(query: jax.Array, db: jax.Array, relevant: jax.Array,
               num_bits: int) -> _groups.TieGroups:
  """Items and relevant items at each distance: TieGroups of int32 [c, K + 1]."""
  out = (jax.ShapeDtypeStruct((query.shape[0], num_bits + 1), jnp.int32),) * 2
  call = jax.ffi.ffi_call("jhash_tie_groups", out, vmap_method="sequential")
  size, hits = call(query, db, relevant.astype(bool), num_bits=np.int64(num_bits))
  return _groups.TieGroups(size, hits)


def index_ap(query: jax.Array, db: jax.Array, relevant: jax.Array, num_bits: int,
             top_k: int) -> tuple[jax.Array, jax.Array]:
  """``sum_{i<=k} rel_i precision@i`` and relevant items in the top k, ties by index: [c], [c]."""
  out = (jax.ShapeDtypeStruct((query.shape[0],), jnp.float32),) * 2
  call = jax.ffi.ffi_call("jhash_index_ap", out, vmap_method="sequential")
  return call(query, db, relevant.astype(bool), num_bits=np.int64(num_bits),
              top_k=np.int64(top_k))
