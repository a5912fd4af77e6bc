"""Metrics within a Hamming radius: precision/recall curves and F1 against buckets visited.

The ball of radius r around a query holds the items at Hamming distance ``<= r``
(for items with several codes, the nearest one). Two averages:

* ``average="query"``: the mean of per-query precision and recall. A query whose
  ball is empty has no precision: ``empty="zero"`` counts it as 0 (the common
  convention in hashing papers), ``"skip"`` leaves it out. A query with no
  relevant item has no recall: ``no_relevant`` does the same for recall.
* ``average="pooled"``: relevant items found over all queries divided by items
  found over all queries (precision), or by all relevant items (recall). When no query's
  ball holds an item, pooled precision is undefined: ``empty="zero"`` gives 0, ``"skip"``
  NaN; likewise recall with no relevant item at all and ``no_relevant``.

Hash-table lookup within radius r probes ``sum_{i<=r} C(K, i)`` buckets, so the
same counts give F1 against the number of buckets visited (MCH's F1-bucket curve).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jhash import _checks
from jhash.metrics import _groups
from jhash.metrics import _inputs
from jhash.metrics import _native_rank

AVERAGES = ("query", "pooled")


@_inputs.jit_static
def _ball_counts(corpus, setup, chunk, options):
  """Items and relevant items within each radius 0..K, int32 [q, K + 1], and relevant
  items in all, int32 [q]: cumulative tie groups (from the native kernel on the CPU)."""
  del options

  def kernel(d, rel):
    groups = _groups.groups_by_count(d, rel.astype(bool), setup.num_bits)
    return (
      jnp.cumsum(groups.size, axis=-1),
      jnp.cumsum(groups.hits, axis=-1),
      jnp.sum(rel.astype(bool), axis=1),
    )

  bound = _native_rank.bind(corpus, setup)

  def by_kernel(query, labels):
    groups, total = _native_rank.tie_groups(*bound(query, labels))
    return jnp.cumsum(groups.size, axis=-1), jnp.cumsum(groups.hits, axis=-1), total

  return _inputs.map_queries(kernel, corpus, setup, chunk, native_kernel=by_kernel)


def _pooled(numer, denom, rule: str):
  """``numer / denom``, and where ``denom`` is 0: 0 (``"zero"``) or NaN (``"skip"``)."""
  ratio = numer / jnp.maximum(denom, 1.0)
  return jnp.where(denom > 0, ratio, 0.0 if rule == "zero" else jnp.nan)


def _curve(found, hits, total, average, empty, no_relevant):
  found = found.astype(jnp.float32)
  hits = hits.astype(jnp.float32)
  total = total.astype(jnp.float32)
  if average == "pooled":
    precision = _pooled(jnp.sum(hits, 0), jnp.sum(found, 0), empty)
    recall = _pooled(jnp.sum(hits, 0), jnp.sum(total), no_relevant)
    return precision, recall
  prec_q = hits / jnp.maximum(found, 1.0)
  rec_q = hits / jnp.maximum(total, 1.0)[:, None]
  mean = jax.vmap(_inputs.mean_defined, in_axes=(1, 1, None))
  precision = mean(prec_q, found > 0, empty)
  recall = mean(rec_q, jnp.broadcast_to((total > 0)[:, None], rec_q.shape), no_relevant)
  return precision, recall


def pr_curve_by_radius(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  *,
  relevance="auto",
  average="query",
  empty="zero",
  no_relevant="zero",
  db_mask=None,
  query_chunk=None,
) -> dict:
  """Precision and recall within Hamming radius r, for every r = 0..K.

  Args:
    query_codes, db_codes, query_labels, db_labels, relevance, db_mask, query_chunk:
      as in ``mean_average_precision`` (no weights: the ball needs Hamming distance).
    average: "query" or "pooled" (module docstring).
    empty: "zero" or "skip", for queries whose ball is empty ("query" average), or for
      a radius at which every ball is empty ("pooled"). With "skip", a radius at which
      every ball is empty has NaN precision, and a ``RuntimeWarning`` names it.
    no_relevant: "zero" or "skip", for recall of queries with no relevant item, or of
      a corpus with none ("pooled"); NaN with a ``RuntimeWarning`` when "skip" leaves
      every query out, and a ``RuntimeWarning`` under "zero" when no query has a
      relevant item (recall 0 at every radius).
  Returns:
    dict of numpy arrays: ``radius`` int [K+1], ``precision`` and ``recall`` float [K+1]
    (inside jit / vmap: JAX arrays).
  """
  options = dict(relevance=relevance, average=average, empty=empty, no_relevant=no_relevant)
  curve, total = _pr_curve(
    query_codes, db_codes, query_labels, db_labels, db_mask, query_chunk, **options
  )
  warn_nan(curve, "pr_curve_by_radius", average, at=("radius", curve["radius"]))
  _inputs.warn_none_relevant(total > 0, "pr_curve_by_radius's recall", no_relevant)
  return curve


def _pr_curve(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  db_mask,
  query_chunk,
  *,
  relevance,
  average,
  empty,
  no_relevant,
) -> dict:
  """``pr_curve_by_radius`` without its warnings, and the relevant items of each query,
  int32 [q] (their count in all)."""
  _inputs.check_choice(average, "average", AVERAGES)
  _inputs.check_choice(empty, "empty", ("zero", "skip"))
  _inputs.check_choice(no_relevant, "no_relevant", ("zero", "skip"))
  corpus, setup = _inputs.prepare(
    query_codes, db_codes, query_labels, db_labels, relevance=relevance, db_mask=db_mask
  )
  chunk = _inputs.chunk_size(setup, query_chunk)
  found, hits, total = _ball_counts(corpus, setup, chunk, None)
  precision, recall = _curve(found, hits, total, average, empty, no_relevant)
  if _inputs.traced(precision, recall):
    curve = {"radius": jnp.arange(setup.num_bits + 1), "precision": precision, "recall": recall}
    return curve, total
  curve = {
    "radius": np.arange(setup.num_bits + 1),
    "precision": np.asarray(precision),
    "recall": np.asarray(recall),
  }
  return curve, total


def warn_nan(values: dict, name: str, average: str, at=None) -> None:
  """A ``RuntimeWarning`` for each of precision and recall that ``"skip"`` made NaN."""
  empty = "every query's ball is empty" + (" (average='pooled')" if average == "pooled" else "")
  _inputs.warn_nan(values["precision"], f"{name}'s precision", empty, "empty", at, stacklevel=4)
  why = "no query has a relevant item"
  _inputs.warn_nan(values["recall"], f"{name}'s recall", why, "no_relevant", at, stacklevel=4)


def precision_recall_at_radius(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  radius,
  *,
  relevance="auto",
  average="query",
  empty="zero",
  no_relevant="zero",
  db_mask=None,
  query_chunk=None,
):
  """(precision, recall) within Hamming radius ``radius`` (``d <= radius``), as floats
  (inside jit / vmap: float32 scalar arrays).

  Arguments as in ``pr_curve_by_radius``; ``radius`` an int in [0, K].
  """
  _inputs.check_codes_and_labels(query_codes, db_codes, query_labels, db_labels)  # codes first
  k = int(np.shape(query_codes)[-1])
  if isinstance(radius, bool) or not isinstance(radius, (int, np.integer)) or not 0 <= radius <= k:
    raise ValueError(
      f"radius must be a Python int in [0, {k}] (the code length); got "
      f"{_checks.static_value(radius)}."
    )
  options = dict(relevance=relevance, average=average, empty=empty, no_relevant=no_relevant)
  curve, total = _pr_curve(
    query_codes, db_codes, query_labels, db_labels, db_mask, query_chunk, **options
  )
  if _inputs.traced(curve):
    return curve["precision"][radius], curve["recall"][radius]
  values = {"precision": curve["precision"][radius], "recall": curve["recall"][radius]}
  name = f"precision_recall_at_radius (radius {radius})"
  warn_nan(values, name, average)
  _inputs.warn_none_relevant(total > 0, f"{name}'s recall", no_relevant)
  return float(values["precision"]), float(values["recall"])


def buckets_within(num_bits: int, radius: int) -> int:
  """Buckets probed by a lookup within ``radius``: ``sum_{i<=radius} C(num_bits, i)``."""
  num_bits = _checks.positive_int(num_bits, "num_bits")
  radius = _checks.nonneg_int(radius, "radius")
  return sum(math.comb(num_bits, i) for i in range(radius + 1))


def f1_bucket_curve(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  *,
  relevance="auto",
  db_mask=None,
  query_chunk=None,
) -> dict:
  """F1 of pooled precision and recall within radius r, against buckets visited.

  Returns:
    dict of numpy arrays over r = 0..K: ``radius``, ``buckets`` (``sum_{i<=r} C(K, i)``,
    as float64 since it exceeds int64 past K = 63), ``precision``, ``recall``, ``f1``
    (0 where precision + recall = 0). Inside jit / vmap: JAX arrays, ``f1`` in float32.
  """
  curve = pr_curve_by_radius(
    query_codes,
    db_codes,
    query_labels,
    db_labels,
    relevance=relevance,
    average="pooled",
    db_mask=db_mask,
    query_chunk=query_chunk,
  )
  xp = jnp if _inputs.traced(curve) else np  # inside jit / vmap: float32 arrays
  p = curve["precision"].astype(xp.float32 if xp is jnp else np.float64)
  r = curve["recall"].astype(p.dtype)
  f1 = xp.where(p + r > 0, 2 * p * r / xp.where(p + r > 0, p + r, 1.0), 0.0)
  k = len(p) - 1
  buckets = np.array([float(buckets_within(k, i)) for i in range(k + 1)])
  return {**curve, "buckets": buckets, "f1": f1}
