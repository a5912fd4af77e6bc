"""Slow NumPy references for the toolbox presets of ``jhash evaluate``, one query at a time.

Each restates, in plain loops, what a toolbox's evaluation function computes, with the
same NumPy calls where the result depends on them (the dtype of the distances and the
argsort that orders tied items), so that on codes with ties a preset must reproduce the
toolbox's own order, not only its rule. ``argsort_kind="stable"`` orders ties by index
instead, which is what ``jhash.metrics.mean_average_precision(ties="index", ...)`` does.

DeepHash-pytorch's ``CalcTopMap`` is ``_metrics_reference.deephash_calc_top_map``.
"""

from __future__ import annotations

import numpy as np


def as_multi_hot(query_labels, db_labels) -> tuple[np.ndarray, np.ndarray]:
  """Class ids [n] as one-hot float32 rows (the toolboxes' label layout); multi-hot as float32."""
  q, d = np.asarray(query_labels), np.asarray(db_labels)
  if q.ndim == 1:
    eye = np.eye(int(max(q.max(), d.max())) + 1, dtype=np.float32)
    return eye[q], eye[d]
  return q.astype(np.float32), d.astype(np.float32)


def _argsort(keys, kind, axis=-1):
  return np.argsort(keys, axis=axis) if kind is None else np.argsort(keys, axis=axis, kind=kind)


def hashnet_map(query_codes, db_codes, query_labels, db_labels, R: int, argsort_kind=None):
  """thuml/HashNet ``pytorch/src/test.py`` ``mean_average_precision(params, R)``.

  Codes float32 (``torch.sign`` of float32 outputs), labels float32 rows. The items are
  ranked by argsort of minus the inner products [n, q], along axis 0 (one column per
  query). A query's label row with 0 turned into -1 matches a database row where both
  hold a 1, i.e. where they share a label. AP over the first R items divides by the
  relevant items among them; a query with none is not counted at all.
  """
  qB = np.asarray(query_codes, np.float32)
  rB = np.asarray(db_codes, np.float32)
  qL, rL = as_multi_hot(query_labels, db_labels)
  inner = np.dot(rB, qB.T)
  ranking = _argsort(-inner, argsort_kind, axis=0)
  aps = []
  for i in range(qB.shape[0]):
    signed = np.where(qL[i] == 0, -1.0, qL[i])
    first = ranking[:R, i]
    match = np.sum(rL[first, :] == signed, axis=1) > 0
    found = int(match.sum())
    if found == 0:
      continue
    precision_at = np.cumsum(match) / np.arange(1, R + 1)
    aps.append(np.sum(precision_at * match) / found)
  return float(np.mean(aps)) if aps else float("nan")


def jiangqy_calc_map(query_codes, db_codes, query_labels, db_labels, argsort_kind=None):
  """Qing-Yuan Jiang's ``calc_map`` (jiangqy/DPSH-pytorch ``utils/CalcHammingRanking.py``
  ``CalcMap``; jiangqy/ADSH-AAAI2018 ``ADSH_pytorch/utils/calc_hr.py`` ``calc_map``).

  Codes float32 (DPSH's ``GenerateCode`` writes ``torch.sign`` into a float32 array), so
  the distances ``0.5 * (K - q . b)`` are float32. Relevance: the label rows share a
  label. Over the whole ranking, AP is the mean over the relevant items of (relevant
  items so far / position); a query with no relevant item adds 0 and still counts in the
  number of queries.
  """
  qB = np.asarray(query_codes, np.float32)
  rB = np.asarray(db_codes, np.float32)
  qL, rL = as_multi_hot(query_labels, db_labels)
  total = 0.0
  for i in range(qB.shape[0]):
    relevant = (np.dot(qL[i], rL.T) > 0).astype(np.float32)
    num_relevant = int(relevant.sum())
    if num_relevant == 0:
      continue
    distance = 0.5 * (rB.shape[1] - np.dot(qB[i], rB.T))
    ranked = relevant[_argsort(distance, argsort_kind)]
    positions = np.flatnonzero(ranked == 1) + 1.0
    total += np.mean(np.arange(1, num_relevant + 1) / positions)
  return float(total / qB.shape[0])
