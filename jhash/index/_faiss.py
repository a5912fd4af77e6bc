"""Export packed codes to FAISS binary indexes (FAISS is optional).

FAISS binary indexes take codes as bytes with ``d`` a multiple of 8, bit ``j``
being bit ``j % 8`` of byte ``j // 8``: exactly ``jhash.codes.to_bytes``. A code
length ``K`` that is not a multiple of 8 is padded with zero bits up to
``d = 8 * ceil(K / 8)``; the padding is zero in every code, so Hamming
distances are unchanged.

FAISS's ``range_search(x, radius)`` is strict: it returns codes at distance
``< radius``. The ball of radius ``r`` (distance ``<= r``, what
``jhash.index.radius_search`` returns) is ``range_search(x, r + 1)``; on an
``IndexBinaryHash`` also set ``index.nflip = r`` (the largest number of flipped
hash bits it probes; with the default 0 it only looks in the query's own
bucket). ``faiss_range_search`` does both.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jhash import _checks
from jhash import codes as codes_lib


def _import_faiss():
  try:
    import faiss  # pylint: disable=import-outside-toplevel
  except ImportError as err:
    raise ImportError(
      "FAISS export needs the faiss package: pip install faiss-cpu (or faiss-gpu)."
    ) from err
  return faiss


def _faiss_bytes(packed: Any, num_bits: int, name: str) -> np.ndarray:
  """Packed uint32 [n, W] -> uint8 [n, ceil(K / 8)] in FAISS's layout."""
  codes_lib.check_packed(packed, name, codes_lib.num_words(num_bits))
  codes_lib.check_padding(packed, num_bits, name)
  return np.ascontiguousarray(codes_lib.to_bytes(packed)[:, : -(-num_bits // 8)])


def faiss_dimension(num_bits: int) -> int:
  """FAISS's ``d`` for K-bit codes: K rounded up to a multiple of 8 (zero padding)."""
  return 8 * -(-_checks.positive_int(num_bits, "num_bits") // 8)


def to_faiss_flat(packed: Any, num_bits: int):
  """A ``faiss.IndexBinaryFlat`` holding the codes (exhaustive Hamming search).

  Args:
    packed: uint32 [n, W] packed codes (``jhash.codes.pack_bits``).
    num_bits: code length K; ``d = 8 * ceil(K / 8)`` (zero-padded).
  Returns:
    ``faiss.IndexBinaryFlat`` with the n codes added in row order (FAISS ids
    are row numbers).
  """
  data = _faiss_bytes(packed, num_bits, "packed")
  faiss = _import_faiss()
  index = faiss.IndexBinaryFlat(faiss_dimension(num_bits))
  index.add(data)
  return index


def to_faiss_hash(packed: Any, num_bits: int, b: int | None = None):
  """A ``faiss.IndexBinaryHash`` (buckets keyed by the first ``b`` bits).

  Args:
    packed: uint32 [n, W] packed codes.
    num_bits: code length K.
    b: bits of the hash key, 1 to ``min(K, 64)`` (FAISS keys are 64-bit);
      default ``min(K, 64)``, which makes FAISS's buckets jhash's buckets.
  Returns:
    ``faiss.IndexBinaryHash`` with the codes added in row order. For range
    search use ``faiss_range_search`` (or ``nflip = r`` and radius ``r + 1``).
  """
  num_bits = _checks.positive_int(num_bits, "num_bits")
  if b is None:
    b = min(num_bits, 64)
  b = _checks.positive_int(b, "b")
  if b > min(num_bits, 64):
    raise ValueError(f"b must be <= min(num_bits, 64) = {min(num_bits, 64)}; got {b}.")
  data = _faiss_bytes(packed, num_bits, "packed")
  faiss = _import_faiss()
  index = faiss.IndexBinaryHash(faiss_dimension(num_bits), b)
  index.add(data)
  return index


def faiss_range_search(index, query_packed: Any, num_bits: int, radius: int):
  """All codes within Hamming distance ``radius`` (inclusive) on a FAISS binary index.

  Passes ``radius + 1`` to FAISS's strict ``range_search`` and, on an
  ``IndexBinaryHash``, sets ``nflip = radius`` first.

  Args:
    index: a FAISS binary index (e.g. from ``to_faiss_flat`` / ``to_faiss_hash``).
    query_packed: uint32 [q, W] packed queries.
    num_bits: code length K.
    radius: Python int >= 0.
  Returns:
    FAISS's ``(lims, distances, ids)``: query ``i``'s hits are
    ``ids[lims[i]:lims[i + 1]]``.
  """
  radius = _checks.nonneg_int(radius, "radius")
  num_bits = _checks.positive_int(num_bits, "num_bits")
  queries = _faiss_bytes(query_packed, num_bits, "query_packed")
  faiss = _import_faiss()
  if not isinstance(index, faiss.IndexBinary):
    raise TypeError(
      f"index must be a FAISS binary index (to_faiss_flat / to_faiss_hash); got "
      f"{_checks.describe(index)}."
    )
  if index.d != faiss_dimension(num_bits):
    raise ValueError(
      f"index holds codes of FAISS dimension d={index.d}; num_bits={num_bits} gives "
      f"d={faiss_dimension(num_bits)}: search it with queries of its own code length."
    )
  if isinstance(index, faiss.IndexBinaryHash):
    index.nflip = radius
  return index.range_search(queries, radius + 1)
