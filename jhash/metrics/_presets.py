"""Presets reproducing the mAP of widely used toolboxes, quirks included."""

from __future__ import annotations

import numpy as np

from jhash.metrics import _ap


def deephash_map(query_codes, db_codes, query_labels, db_labels, top_k: int,
                 query_chunk=None) -> float:
  """mAP@top_k exactly as DeepHash-pytorch's ``CalcTopMap`` defines it.

  That formula, per query: relevance = labels share at least one label; items
  ranked by Hamming distance; AP = mean over the relevant items within the first
  ``top_k`` of (relevant seen so far / position), i.e. normalised by the relevant
  items *retrieved*; a query with none retrieved adds 0 but still counts in the
  divisor (the number of queries). Equivalent jhash conventions:
  ``ties="index", relevance="share_label", normalizer="retrieved", no_relevant="zero"``.

  Quirks kept: the cut-off is Python's slice ``[0:top_k]``, so ``top_k=-1`` drops
  the last database item and ``top_k`` larger than the database keeps all of it.
  Ties: ``CalcTopMap`` orders tied items with ``np.argsort``'s default quicksort,
  whose order of equal keys is an implementation detail of NumPy; this preset
  orders them by database index (``np.argsort(kind="stable")``), which equals the
  toolbox exactly whenever the top_k has no ties across its boundary.

  Args:
    query_codes, db_codes: {-1,+1} [q, K], [n, K].
    query_labels, db_labels: multi-hot [*, C] (or class ids, taken as one-hot).
    top_k: the toolbox's ``topk``.
  Returns:
    mAP as a float.
  """
  if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)):
    raise ValueError(f"top_k must be an int (Python slice semantics); got {top_k!r}.")
  n = int(np.shape(db_codes)[0])
  k = len(range(n)[0:int(top_k)])
  if k == 0:
    return 0.0
  return _ap.mean_average_precision(query_codes, db_codes, query_labels, db_labels, top_k=k,
                                    ties="index", relevance="share_label",
                                    normalizer="retrieved", no_relevant="zero",
                                    query_chunk=query_chunk)
