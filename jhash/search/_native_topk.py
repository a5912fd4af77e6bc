"""Hamming top-k by the native CPU kernel (``jhash.native``), same contract as ``_blockmin``.

One pass over the database per block of queries keeps every item under a
running k-th distance in a small buffer; the result is the k smallest by
``(distance, index)``, exactly as the array code returns them. Items may hold
several codes (``multi_code_topk``): the least distance over the held codes.
``weighted_topk`` is the same selection by weighted Hamming distance in weight units.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jhash import native


def topk(
  query_packed: jax.Array, db_packed: jax.Array, k: int, num_bits: int, num_valid=None, db_mask=None
) -> tuple[jax.Array, jax.Array]:
  """Distances int32 [q, k] and indices int32 [q, k] by the native kernel (CPU only).

  ``db_packed`` is uint32 [n, W], or [n, m, W] with ``db_mask`` bool [n, m] (an
  item's distance is the least over the codes it holds; ``num_bits + 1`` when it
  holds none). Rows at index >= ``num_valid`` are padding: never returned while
  there are k valid rows (else the last slots hold distance ``num_bits + 1``).
  """
  q, n = query_packed.shape[0], db_packed.shape[0]
  valid = jnp.asarray(n if num_valid is None else num_valid, jnp.int32)
  out = (jax.ShapeDtypeStruct((q, k), jnp.int32),) * 2
  call = jax.ffi.ffi_call("jhash_hamming_topk", out, vmap_method="sequential")
  return call(
    query_packed,
    db_packed,
    native.held_codes(db_mask),
    valid,
    k=np.int64(k),
    num_bits=np.int64(num_bits),
  )


def weighted_topk(
  query_packed: jax.Array, db_packed: jax.Array, units: jax.Array, k: int
) -> tuple[jax.Array, jax.Array]:
  """Weighted distances in weight units int32 [q, k] and indices int32 [q, k], sorted by
  (distance, index), by the native kernel (CPU only); ``units`` int32 [K] as
  ``_distance.weight_units`` gives them."""
  q = query_packed.shape[0]
  out = (jax.ShapeDtypeStruct((q, k), jnp.int32),) * 2
  call = jax.ffi.ffi_call("jhash_weighted_topk", out, vmap_method="sequential")
  return call(query_packed, db_packed, units.astype(jnp.int32), k=np.int64(k))
