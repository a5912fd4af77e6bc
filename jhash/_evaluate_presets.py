"""The conventions of widely used toolboxes' mAP as presets of ``jhash evaluate``."""

from __future__ import annotations

import math
import warnings
from typing import Callable, NamedTuple

import numpy as np

from jhash import metrics
from jhash.metrics import _inputs

from jhash._evaluate_files import _CHUNK_ELEMENTS
from jhash._evaluate_files import TOOLBOX_K

# ------------------------------------------------------------------------------------------
# Presets


def _shares_label(query_labels: np.ndarray, db_labels: np.ndarray) -> np.ndarray:
  """bool [q, n]: the items share a label with the query (class ids as one-hot rows)."""
  if query_labels.ndim == 1:
    return query_labels[:, None] == db_labels[None, :]
  return (query_labels.astype(np.float32) @ db_labels.astype(np.float32).T) > 0


def _hashnet_ap(hits: np.ndarray) -> float | None:
  """AP of one ranked relevance list [R] over the relevant items in it; None when none is."""
  found = int(hits.sum())
  if found == 0:
    return None
  precision = np.cumsum(hits) / np.arange(1, hits.size + 1, dtype=np.float64)
  return float(np.sum(precision * hits) / found)


def hashnet_map(query_codes, db_codes, query_labels, db_labels, top_k: int) -> float:
  """mAP@R as thuml/HashNet's PyTorch test script (``pytorch/src/test.py``,
  ``mean_average_precision(params, R)``) computes it.

  Per query: items ranked by ``np.argsort(-sim, axis=0)`` of the float32 inner products
  ``sim = db_codes @ query_codes.T`` [n, q] (its codes are float32 ``torch.sign``
  outputs); relevance = the labels share a label; AP = ``sum_{i<=R} rel_i P@i`` over the
  relevant items among the first R (``normalizer="retrieved"``); a query with none there
  is left out of the mean (``no_relevant="skip"``; NaN when every query is).

  Ties: NumPy's default (unstable) argsort orders tied items, as in the script, computed
  here with the installed NumPy (see ``jhash.metrics.deephash_map`` on why that order
  differs between NumPy builds and CPUs). With ties by index this is
  ``mean_average_precision(top_k=R, ties="index", relevance="share_label",
  normalizer="retrieved", no_relevant="skip")``.

  Args:
    query_codes, db_codes: {-1,+1} [q, K], [n, K].
    query_labels, db_labels: class ids [q] / [n] or multi-hot [q, C] / [n, C].
    top_k: R, an int in [1, n] (the script fails for R > n).
  Returns:
    mAP as a float; NaN, with a ``RuntimeWarning``, when no query has a relevant item
    among its first R. Host only: inside jit or vmap a TypeError names the traceable
    rule above.
  """
  if _inputs.traced(query_codes, db_codes, query_labels, db_labels):
    raise TypeError(
      "hashnet_map runs on the host with NumPy (its order of tied items is NumPy's "
      "argsort's), so it cannot run inside jit or vmap. Inside a traced function use "
      "mean_average_precision(..., top_k=R, ties='index', relevance='share_label', "
      "normalizer='retrieved', no_relevant='skip'): the same rule with ties broken by "
      "database index."
    )
  _inputs.check_codes_and_labels(query_codes, db_codes, query_labels, db_labels, db_ranks=2)
  q_b = np.asarray(query_codes, np.float32)
  r_b = np.asarray(db_codes, np.float32)
  top_k = _inputs.check_cutoff(top_k, "top_k", r_b.shape[0])
  q_l, r_l = np.asarray(query_labels), np.asarray(db_labels)
  chunk = max(1, min(len(q_b), _CHUNK_ELEMENTS // r_b.shape[0]))
  values = []
  for start in range(0, len(q_b), chunk):
    sim = r_b @ q_b[start : start + chunk].T  # [n, c], exact for +-1 codes
    order = np.argsort(-sim, axis=0)[:top_k]
    rel = _shares_label(q_l[start : start + chunk], r_l)
    values += [_hashnet_ap(rel[i][order[:, i]]) for i in range(rel.shape[0])]
  kept = [v for v in values if v is not None]
  if not kept:
    warnings.warn(
      f"hashnet_map is NaN: no query has a relevant item among its first top_k={top_k}, and "
      "HashNet's mAP leaves such queries out (as no_relevant='skip').",
      RuntimeWarning,
      stacklevel=2,
    )
  return float(np.mean(kept)) if kept else math.nan


class Preset(NamedTuple):
  """A convention of mAP: how to compute it, where it comes from, its usual cut-off."""

  name: str
  source: str
  summary: str
  default_k: int | None  # the cut-off the source uses (None: the whole ranking)
  options: dict  # mean_average_precision options of the same rule (ties by index for toolboxes)
  compute: Callable  # (query_codes, db_codes, query_labels, db_labels, top_k | None) -> float


def tie_aware(qc, dc, ql, dl, top_k, **options) -> float:
  return float(metrics.mean_average_precision(qc, dc, ql, dl, top_k=top_k, **options))


def _argsort_map(qc, dc, ql, dl, top_k) -> float:
  """``CalcTopMap`` / ``calc_topMap`` (``calc_map`` over the whole ranking)."""
  return float(metrics.deephash_map(qc, dc, ql, dl, top_k=len(dc) if top_k is None else top_k))


def _hashnet(qc, dc, ql, dl, top_k) -> float:
  return hashnet_map(qc, dc, ql, dl, top_k=len(dc) if top_k is None else top_k)


_TOOLBOX_OPTIONS = {"ties": "index", "relevance": "share_label", "normalizer": "retrieved"}
#: ``--preset`` name -> ``Preset``: jhash's tie-aware mAP and the toolboxes' (``PRESETS_DOC``).
PRESETS = {
  "tie-aware": Preset(
    "tie-aware",
    "jhash.metrics.mean_average_precision (He et al., CVPR 2018)",
    "expected AP over every order of tied items; AP over all relevant items",
    None,
    {"ties": "aware", "relevance": "auto", "normalizer": "relevant", "no_relevant": "zero"},
    tie_aware,
  ),
  "deephash": Preset(
    "deephash",
    "swuxyj/DeepHash-pytorch utils/tools.py CalcTopMap",
    "NumPy argsort order of ties; AP over relevant items retrieved; none retrieved: 0",
    TOOLBOX_K,
    {**_TOOLBOX_OPTIONS, "no_relevant": "zero"},
    _argsort_map,
  ),
  "hashnet": Preset(
    "hashnet",
    "thuml/HashNet pytorch/src/test.py mean_average_precision",
    "NumPy argsort of -inner product; AP over relevant items retrieved; none: skipped",
    TOOLBOX_K,
    {**_TOOLBOX_OPTIONS, "no_relevant": "skip"},
    _hashnet,
  ),
  "jiangqy": Preset(
    "jiangqy",
    "jiangqy/DPSH-pytorch utils/CalcHammingRanking.py CalcMap; "
    "jiangqy/ADSH-AAAI2018 ADSH_pytorch/utils/calc_hr.py calc_map",
    "whole ranking, NumPy argsort order of ties; AP over all relevant items; none: 0",
    None,
    {**_TOOLBOX_OPTIONS, "no_relevant": "zero"},
    _argsort_map,
  ),
}
PRESETS_DOC = """Presets (``--preset``), each mAP as its source computes it:

* ``tie-aware`` (the default): ``jhash.metrics.mean_average_precision`` with
  ``ties="aware"``: the expected AP over every order of tied items, normalised by all
  relevant items; a query with none counts 0.
* ``deephash``: DeepHash-pytorch's ``CalcTopMap`` (swuxyj/DeepHash-pytorch,
  ``utils/tools.py``), ``jhash.metrics.deephash_map``: ties in NumPy's default argsort
  order, AP@K over the relevant items retrieved, a query with none retrieved counts 0.
  Its ``topK`` is per dataset (5000 NUS-WIDE and MS-COCO, 1000 ImageNet, the whole
  ranking CIFAR-10); here 5000 unless ``--top-k``.
* ``hashnet``: HashNet's ``mean_average_precision`` (thuml/HashNet,
  ``pytorch/src/test.py``), ``hashnet_map``: ties in NumPy's argsort order of the negated
  inner products, AP@R over the relevant items retrieved, a query with none retrieved left
  out of the mean. R is 5000 (NUS-WIDE, MS-COCO; 1000 ImageNet) unless ``--top-k``.
* ``jiangqy``: Qing-Yuan Jiang's ``calc_map`` (jiangqy/DPSH-pytorch
  ``utils/CalcHammingRanking.py`` ``CalcMap``; jiangqy/ADSH-AAAI2018
  ``ADSH_pytorch/utils/calc_hr.py``): the whole ranking, ties in NumPy's argsort order of
  float32 distances (DPSH's codes are float32; ADSH's database codes are float64, the
  same ranking but for the order NumPy may give tied float64 keys), AP over all relevant
  items, a query with none counts 0 in the mean. That is ``CalcTopMap`` with the whole
  database as ``topk``, so this preset is ``deephash_map(top_k=n)``; with ``--top-k`` it is
  Jiang's ``calc_topMap``, which computes what ``CalcTopMap`` does.

A toolbox preset's cut-off larger than the database is clipped to it (the table says so);
an explicit ``--top-k`` must lie in [1, n].
"""
