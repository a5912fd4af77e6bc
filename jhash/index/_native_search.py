"""Hash-bucket search by the native CPU kernel (``jhash.native``), ``bucket_search``'s contract.

One call for all queries, spread over XLA's intra-op thread pool: per query the
buckets within reach are found (through the substring tables when the plan uses
them, else by every flip mask), put in visit order, and their items visited with
the first-visit test and the widening-radius stop: the same results, in the same
order, as the array code, with no result-slot limit on the buckets within reach.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jhash.index import _build


def search(
  index: _build.BucketIndex,
  query_packed: jax.Array,
  num_wanted,
  *,
  max_radius: int,
  max_results: int,
  num_substrings: int,
  flips: int,
):
  """``SearchResults`` fields (ids, radii [q, R]; found, visited, nonempty, radius [q]).

  ``num_substrings`` > 0 searches through the index's substring tables with
  ``flips`` flipped bits per substring lookup (``_substrings.SubstringPlan``); 0
  probes every flip mask of 0..max_radius bits.
  """
  q = query_packed.shape[0]
  if num_substrings:
    sub_offsets = index.substring_offsets
    sub_buckets = index.substring_buckets.reshape(-1)
  else:
    sub_offsets = sub_buckets = jnp.zeros((1,), jnp.int32)
  slots = jax.ShapeDtypeStruct((q, max_results), jnp.int32)
  per_query = jax.ShapeDtypeStruct((q,), jnp.int32)
  call = jax.ffi.ffi_call(
    "jhash_bucket_search", (slots, slots) + (per_query,) * 4, vmap_method="sequential"
  )
  return call(
    jnp.asarray(query_packed, jnp.uint32),
    index.keys,
    index.offsets,
    index.bucket_items,
    index.item_ids,
    index.item_codes,
    index.item_code_mask,
    index.directory,
    sub_offsets,
    sub_buckets,
    jnp.asarray(num_wanted, jnp.int32),
    num_bits=np.int64(index.num_bits),
    max_radius=np.int64(max_radius),
    directory_bits=np.int64(index.directory_bits),
    num_substrings=np.int64(num_substrings),
    flips=np.int64(flips),
  )


def lookup(index: _build.BucketIndex, query_packed: jax.Array):
  """``lookup``'s ``(start, count)``, int32 [q] each, by the native kernel (CPU only)."""
  per_query = jax.ShapeDtypeStruct((query_packed.shape[0],), jnp.int32)
  call = jax.ffi.ffi_call("jhash_lookup", (per_query, per_query), vmap_method="sequential")
  return call(
    jnp.asarray(query_packed, jnp.uint32),
    index.keys,
    index.offsets,
    index.directory,
    num_bits=np.int64(index.num_bits),
    directory_bits=np.int64(index.directory_bits),
  )
