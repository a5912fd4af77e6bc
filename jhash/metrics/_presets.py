"""Presets reproducing the mAP of widely used toolboxes, quirks included.

A preset exists to compare with published numbers, so it computes what the
toolbox computes, the order of tied items included, on the host with NumPy:
AP@k depends on the order of the tied items inside the top k, not only on
which items make the cut, so no tie rule of jhash's own gives the toolbox's
number on codes with ties.
"""

from __future__ import annotations

import numpy as np

from jhash import _checks
from jhash.metrics import _inputs

# Elements of a [chunk, n] distance matrix kept at once (float32: 32 MB).
_CHUNK_ELEMENTS = 1 << 23


def _toolbox_relevance(query_labels: np.ndarray, db_labels: np.ndarray) -> np.ndarray:
  """``gnd``: the labels share at least one label (class ids as one-hot rows): bool [q, n]."""
  if query_labels.ndim == 1:
    return query_labels[:, None] == db_labels[None, :]
  shared = query_labels.astype(np.float32) @ db_labels.astype(np.float32).T
  return shared > 0


def _toolbox_ap(hamm: np.ndarray, gnd: np.ndarray, top_k: int) -> float:
  """One query's AP as ``CalcTopMap`` computes it; 0 when nothing relevant is retrieved.

  Args:
    hamm: float32 [n], the toolbox's distances ``0.5 * (K - <q, b>)``.
    gnd: bool [n] relevance.
    top_k: the toolbox's ``topk`` (a Python slice bound).
  """
  # NumPy's default argsort (not a stable one): the toolbox's order of tied items.
  tgnd = gnd[np.argsort(hamm)][0:top_k]
  tsum = int(np.sum(tgnd))
  if tsum == 0:
    return 0.0
  count = np.linspace(1, tsum, tsum)
  tindex = np.asarray(np.where(tgnd)) + 1.0
  return float(np.mean(count / tindex))


def deephash_map(
  query_codes, db_codes, query_labels, db_labels, top_k: int, query_chunk=None
) -> float:
  """mAP@top_k exactly as DeepHash-pytorch's ``CalcTopMap`` (utils/tools.py) computes it.

  Per query: relevance ``gnd`` = the labels share at least one label; distances
  ``hamm = 0.5 * (K - <q, b>)`` in float32 (the toolbox's codes are the float32
  ``torch.sign`` of the network outputs); items ordered by NumPy's default
  ``np.argsort(hamm)``; ``tgnd = gnd[order][0:top_k]``; AP = mean over the
  relevant items of ``tgnd`` of (relevant seen so far / position), i.e.
  normalised by the relevant items *retrieved*; a query with none retrieved adds
  0 but still counts in the divisor (the number of queries).

  Ties: the order of items at equal distance is the one NumPy's default
  (unstable, introsort) argsort gives, computed here with the installed NumPy
  exactly as the toolbox does, so the result equals ``CalcTopMap`` run with the
  same NumPy, ties included. That order is an implementation detail of NumPy
  (it changed with the SIMD sorts of NumPy 1.25 and 2.x and depends on the CPU's
  instruction set), so on codes with ties the toolbox's own numbers can differ
  between installations. Breaking ties by database index instead gives
  ``mean_average_precision(ties="index", relevance="share_label",
  normalizer="retrieved", no_relevant="zero")`` with ``top_k`` as below.

  Quirks kept: the cut-off is Python's slice ``[0:top_k]``, so ``top_k=-1`` drops
  the last database item and ``top_k`` larger than the database keeps all of it.
  A ``top_k`` that keeps no item (0, or ``<= -n``) is refused: its mAP is 0 by
  construction.

  Args:
    query_codes, db_codes: {-1,+1} [q, K], [n, K] (q, n >= 1).
    query_labels, db_labels: multi-hot ``[*, C]`` (or class ids, taken as one-hot).
    top_k: the toolbox's ``topk`` (any int that keeps an item: not 0, not ``<= -n``).
    query_chunk: queries whose distances are computed at once (memory only;
      default: about 32 MB of distances).
  Returns:
    mAP as a float. Host only: inside jit or vmap it raises a TypeError that names the
    traceable rule above.
  """
  if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)):
    raise ValueError(f"top_k must be an int (Python slice semantics); got {top_k!r}.")
  if _inputs.traced(query_codes, db_codes, query_labels, db_labels):
    raise TypeError(
      "deephash_map runs on the host with NumPy (its order of tied items is NumPy's "
      "argsort's), so it cannot run inside jit or vmap. Inside a traced function use "
      "mean_average_precision(..., top_k=k, ties='index', relevance='share_label', "
      "normalizer='retrieved'): the same rule with ties broken by database index."
    )
  num_bits, q, n = _inputs.check_codes_and_labels(
    query_codes, db_codes, query_labels, db_labels, db_ranks=2
  )
  if top_k == 0 or top_k <= -n:
    raise ValueError(
      f"top_k={top_k} keeps no database item (the toolbox's slice [0:top_k] of the {n} "
      f"items is empty, so the mAP would be 0 whatever the codes); pass top_k >= 1."
    )
  if query_chunk is None:
    chunk = max(1, min(q, _CHUNK_ELEMENTS // n))
  else:
    chunk = _checks.positive_int(query_chunk, "query_chunk")
  q_b = np.asarray(query_codes, np.float32)
  r_b = np.asarray(db_codes, np.float32)
  q_l, r_l = np.asarray(query_labels), np.asarray(db_labels)
  total, any_relevant = 0.0, False
  for start in range(0, q, chunk):
    # Sums of +-1 are exact in float32: the distances are the toolbox's, bit for bit.
    hamm = 0.5 * (num_bits - q_b[start : start + chunk] @ r_b.T)
    gnd = _toolbox_relevance(q_l[start : start + chunk], r_l)
    any_relevant = any_relevant or bool(np.any(gnd))
    for h, g in zip(hamm, gnd):
      total = total + _toolbox_ap(h, g, int(top_k))
  _inputs.warn_none_relevant(np.array([any_relevant]), "deephash_map", "zero")
  return total / q
