"""Tie-aware mAP of weighted Hamming ranking: a shorthand kept for HBMP's experiments.

It is ``mean_average_precision(..., weights=w)`` (ties aware, the whole database,
queries with no relevant item counted as 0), which on the CPU runs a native kernel
(``jhash.native``: per query, weighted distances from a table per code byte and one
radix sort of the integer distances) and elsewhere the array code; the same value.
"""

from __future__ import annotations

import jax
import numpy as np

from jhash.metrics import _ap


def weighted_mean_average_precision(
  query_codes, db_codes, query_labels, db_labels, weights, *, relevance: str = "auto"
) -> float | jax.Array:
  """Tie-aware mAP of ranking by the weighted Hamming distance ``sum_k w_k [q_k != b_k]``.

  Args:
    query_codes: [q, K] in {-1,+1}.
    db_codes: [n, K] in {-1,+1}.
    query_labels, db_labels: class ids int [q] / [n], or multi-hot bool [q, C] / [n, C].
    weights: float [K], the bit weights (HBMP's alphas; any sign), summed exactly after
      rounding to ``jhash.search.weight_units``.
    relevance: "auto", "same_class" or "share_label".
  Returns:
    mAP as a Python float (inside jit / vmap: a float32 scalar array).

  Example:
    >>> import numpy as np, jhash
    >>> codes = np.array([[1, 1], [1, -1], [-1, -1]], np.int8)
    >>> labels = np.array([0, 0, 1])
    >>> jhash.metrics.weighted_mean_average_precision(codes, codes, labels, labels,
    ...                                               np.array([2.0, 0.5], np.float32))
    1.0
  """
  if np.ndim(db_codes) != 2:
    raise ValueError(
      f"db_codes must be [n, K] (one code per item); got shape {tuple(np.shape(db_codes))}."
    )
  if weights is None:
    raise ValueError(
      "weights must be the bit weights, float [K]; got None (the unweighted mAP is "
      "jhash.metrics.mean_average_precision)."
    )
  return _ap.mean_average_precision(
    query_codes, db_codes, query_labels, db_labels, weights=weights, relevance=relevance
  )
