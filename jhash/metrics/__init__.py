"""Retrieval metrics with every convention explicit: mAP, precision/recall, NDCG, radius curves.

Code-level functions take {-1,+1} codes and labels and chunk over queries; the
chunk-level kernels (``average_precision``, ``ndcg``, ``hits_at_k``) take a
distance matrix and are jittable. Conventions (ties, normalisers, queries with
no relevant item, empty balls) are arguments, documented in each module.

Empty inputs: per-query results (``average_precisions`` and the chunk kernels)
are empty for no queries; a mean over queries (mAP, precision/recall@k, NDCG@k,
the radius curves, ``deephash_map``) needs at least one query, and every
code-level metric at least one database item, else a ValueError names the
empty argument. Cut-offs (``top_k``, ``k``, ``ks``) are ints in [1, n], n the
database size: a larger one is an error naming the cut-off, the database size
and the value, never silently the whole ranking (``deephash_map`` alone keeps
its toolbox's slice semantics).

Inside jit and vmap: every metric but ``deephash_map`` (a NumPy preset, host only) runs
with traced codes, labels, masks and weights, and returns JAX arrays where it returns
Python floats or NumPy arrays when called eagerly; checks of shapes, dtypes and options
are made at trace time, checks of values (codes in {-1, +1}, an item holding a code) only
on concrete arrays. Options (``top_k``, ``ks``, ``radius``, ``ties``, ...) stay Python
values. So an evaluation, encode + mAP, is one jitted function of a trained state.
"""

from jhash.metrics._ap import average_precision
from jhash.metrics._ap import average_precisions
from jhash.metrics._ap import mean_average_precision
from jhash.metrics._ap import ranked_positions
from jhash.metrics._groups import harmonic_difference
from jhash.metrics._presets import deephash_map
from jhash.metrics._radius import buckets_within
from jhash.metrics._radius import f1_bucket_curve
from jhash.metrics._radius import pr_curve_by_radius
from jhash.metrics._radius import precision_recall_at_radius
from jhash.metrics._ranking import hits_at_k
from jhash.metrics._ranking import ndcg
from jhash.metrics._ranking import ndcg_at_k
from jhash.metrics._ranking import precision_at_k
from jhash.metrics._ranking import recall_at_k
from jhash.metrics._relevance import relevance
from jhash.metrics._sharded import sharded_mean_average_precision
from jhash.metrics._sharded import sharded_pr_curve_by_radius
from jhash.metrics._weighted_map import weighted_mean_average_precision

__all__ = [
  "mean_average_precision",
  "sharded_mean_average_precision",
  "sharded_pr_curve_by_radius",
  "average_precisions",
  "average_precision",
  "ranked_positions",
  "weighted_mean_average_precision",
  "deephash_map",
  "precision_at_k",
  "recall_at_k",
  "ndcg_at_k",
  "ndcg",
  "hits_at_k",
  "precision_recall_at_radius",
  "pr_curve_by_radius",
  "f1_bucket_curve",
  "buckets_within",
  "relevance",
  "harmonic_difference",
]
