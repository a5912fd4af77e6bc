"""Slow, obviously correct NumPy references for Hamming search, shared by the tests."""

from __future__ import annotations

import numpy as np


def np_topk(dist, k):
  """First k of each row by (distance, index): (distances, indices) [q, k]."""
  order = np.stack([np.lexsort((np.arange(row.shape[0]), row))[:k] for row in dist])
  return np.take_along_axis(dist, order, axis=1), order


def np_popcount_dist(q_packed, db_packed):
  """Hamming distances int64 [q, n] of packed uint32 codes [q, W] and [n, W]."""
  return np.bitwise_count(q_packed[:, None, :] ^ db_packed[None, :, :]).sum(-1).astype(np.int64)


def random_codes(rng, n, words, pool=None, mask=0xFFFFFFFF):
  """n random packed codes; drawn from a pool of `pool` codes (many exact duplicates) when
  given; each word ANDed with `mask`."""
  size = n if pool is None else pool
  table = rng.integers(0, 2**32, size=(size, words), dtype=np.uint64).astype(np.uint32)
  table &= np.uint32(mask)
  return table if pool is None else table[rng.integers(0, pool, size=n)]
