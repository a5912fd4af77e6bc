"""Ground-truth similarity between two sets of labelled items (small, dense, NumPy)."""

from __future__ import annotations

from typing import Any

import numpy as np

from jhash import _checks
from jhash.data import _arguments

SIMILARITY_KINDS = ("same_class", "share_label", "graded")


def similarity(labels_a: Any, labels_b: Any, kind: str = "share_label") -> np.ndarray:
  """Which pairs of items are relevant to each other, from their labels.

  Both label arrays are class ids (int ``[n]``, each >= 0, as the metrics
  require) or both multi-hot (bool ``[n, C]`` with the same ``C``).

  * ``"same_class"``: bool; class ids equal, or identical label sets.
  * ``"share_label"``: bool; at least one label in common (the usual rule for
    multi-label data). For class ids this is ``"same_class"``.
  * ``"graded"``: int32, the number of labels in common (for class ids, 1 for
    the same class and 0 otherwise), the graded relevance NDCG-style metrics use.

  This is a dense ``[na, nb]`` helper for tests and small sets; ``jhash.metrics``
  computes relevance in blocks at scale.

  Args:
    labels_a: class ids ``[na]`` or multi-hot ``[na, C]``.
    labels_b: class ids ``[nb]`` or multi-hot ``[nb, C]``.
    kind: ``"same_class"``, ``"share_label"`` or ``"graded"``.
  Returns:
    bool ``[na, nb]``, or int32 ``[na, nb]`` for ``"graded"``.
  """
  if kind not in SIMILARITY_KINDS:
    raise ValueError(f"kind must be one of {SIMILARITY_KINDS}; got {kind!r}.")
  a, b = np.asarray(labels_a), np.asarray(labels_b)
  kind_a = _checks.label_array(a, "labels_a")
  kind_b = _checks.label_array(b, "labels_b")
  _arguments.nonneg_class_ids(a, "labels_a")
  _arguments.nonneg_class_ids(b, "labels_b")
  if kind_a != kind_b:
    raise ValueError(
      f"labels_a and labels_b must both be class ids or both multi-hot; got "
      f"labels_a: {_checks.describe(a)}, labels_b: {_checks.describe(b)}."
    )
  if kind_a == "class_ids":
    same = a[:, None] == b[None, :]
    return same.astype(np.int32) if kind == "graded" else same
  if a.shape[1] != b.shape[1]:
    raise ValueError(
      f"labels_a and labels_b must have the same number of label columns; "
      f"got {a.shape[1]} and {b.shape[1]}."
    )
  shared = a.astype(np.int32) @ b.astype(np.int32).T
  if kind == "same_class":  # equal sets: the overlap is as large as both sets
    return (shared == a.sum(axis=1)[:, None]) & (shared == b.sum(axis=1)[None, :])
  return shared if kind == "graded" else shared > 0
