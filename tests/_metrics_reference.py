"""Slow NumPy references for ``jhash.metrics``, written from the definitions.

They favour being evidently right over being fast: one query at a time, float64,
and the tie-aware metrics stated twice, once by enumerating every order of the
tied items (``*_by_enumeration``, tiny cases only) and once as a sum over ranks
of per-rank expectations (``ties="aware"``). The tests check the two against
each other and against cases worked by hand, then the library against both.

Conventions (the library's, restated):

* A ranking sorts the database by ascending distance. ``ties="index"`` orders
  equal distances by database index; ``ties="aware"`` takes the expected value
  of the metric over all orders of the items within each group of equal
  distance, each order equally likely (He, Cakir, Bargal, Sclaroff, "Hashing as
  Tie-Aware Learning to Rank", CVPR 2018).
* AP over the first ``k`` ranks (``top_k=None``: all ``n``) is
  ``sum_{i <= k} rel_i * precision@i`` over a normaliser: ``"relevant"`` (R, the
  relevant items in the database), ``"min"`` (``min(R, k)``) or ``"retrieved"``
  (relevant items in the first ``k``); with the whole ranking all three are R.
  Tie-aware AP is the expected sum over the (order-independent) normaliser.
* A query whose normaliser is 0 is undefined: ``no_relevant="zero"`` counts it as
  0 in the mean, ``"skip"`` leaves it out (mean of nothing: NaN).
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

# ------------------------------------------------------------------------------------------
# Distances and relevance


def distances(query_codes, db_codes, weights=None, db_mask=None) -> np.ndarray:
  """Distances [q, n] between {-1,+1} codes.

  Hamming (``weights=None``, int64) counts the bits that differ; weighted Hamming
  (float64) sums ``weights[k]`` over the bits ``k`` that differ. With ``db_codes``
  [n, m, K] and ``db_mask`` [n, m], an item's distance is the minimum over its
  valid codes.
  """
  q = np.asarray(query_codes)
  b = np.asarray(db_codes)
  multi = b.ndim == 3
  if not multi:
    b = b[:, None, :]
  differ = q[:, None, None, :] != b[None, :, :, :]  # [q, n, m, K]
  if weights is None:
    per_code = differ.sum(axis=-1).astype(np.float64)
  else:
    per_code = (differ * np.asarray(weights, np.float64)).sum(axis=-1)
  if multi:
    mask = np.ones(b.shape[:2], bool) if db_mask is None else np.asarray(db_mask, bool)
    per_code = np.where(mask[None], per_code, np.inf)
  d = per_code.min(axis=-1)
  if weights is None:
    return d.astype(np.int64)
  return d


def shared_labels(query_labels, db_labels) -> np.ndarray:
  """Number of labels each query shares with each item [q, n]; class ids share 1 or 0."""
  ql = np.asarray(query_labels)
  dl = np.asarray(db_labels)
  if ql.ndim == 1:
    return (ql[:, None] == dl[None, :]).astype(np.int64)
  return (ql[:, None, :].astype(bool) & dl[None, :, :].astype(bool)).sum(axis=-1)


def relevance(query_labels, db_labels, kind: str = "auto") -> np.ndarray:
  """Relevance [q, n]: bool for "same_class" / "share_label", int for "graded"."""
  if kind == "auto":
    kind = "same_class" if np.ndim(query_labels) == 1 else "share_label"
  if kind == "same_class":  # equal class ids, or equal label sets
    same = np.asarray(query_labels)[:, None] == np.asarray(db_labels)[None, :]
    return same if same.ndim == 2 else same.all(axis=-1)
  if kind == "share_label":
    return shared_labels(query_labels, db_labels) > 0
  if kind == "graded":
    return shared_labels(query_labels, db_labels)
  raise ValueError(f"unknown relevance {kind!r}")


# ------------------------------------------------------------------------------------------
# Rankings of one query


def tie_groups(d) -> list[np.ndarray]:
  """Item indices grouped by equal distance: groups by ascending distance, items by index."""
  groups: list[list[int]] = []
  last = None
  for i in sorted(range(len(d)), key=lambda i: (d[i], i)):
    if groups and d[i] == last:
      groups[-1].append(i)
    else:
      groups.append([i])
      last = d[i]
  return [np.array(g, dtype=np.int64) for g in groups]


def index_ranking(d) -> np.ndarray:
  """The ranking with ties ordered by database index."""
  return np.concatenate(tie_groups(d))


def every_ranking(d):
  """Yield every ranking: each combination of orders within the tie groups."""
  groups = tie_groups(d)
  for orders in itertools.product(*(itertools.permutations(g.tolist()) for g in groups)):
    yield np.array([i for order in orders for i in order], dtype=np.int64)


def number_of_rankings(d) -> int:
  return math.prod(math.factorial(len(g)) for g in tie_groups(d))


def expected_by_rank(d, values) -> np.ndarray:
  """E[value of the item at rank i] for every rank i, over random orders within ties.

  Each rank of a tie group holds each of the group's items with equal
  probability, so the expectation is the group's mean value.
  """
  values = np.asarray(values, np.float64)
  out = []
  for g in tie_groups(d):
    out.extend([values[g].mean()] * len(g))
  return np.array(out)


def precision_terms(rel_ranked) -> np.ndarray:
  """rel_i * precision@i at every rank i of one fixed ranking."""
  rel_ranked = np.asarray(rel_ranked, np.float64)
  terms = np.zeros(len(rel_ranked))
  hits = 0.0
  for i, r in enumerate(rel_ranked, start=1):
    hits += r
    terms[i - 1] = r * hits / i
  return terms


def expected_precision_terms(d, rel) -> np.ndarray:
  """E[rel_i * precision@i] at every rank i, over random orders within ties.

  ``rel_i * hits@i = sum_{t <= i} rel_t rel_i``, so by linearity
  ``E[rel_i hits@i] = sum_{t <= i} P(item at t and item at i both relevant)``.
  For rank i at position j of a group of n items, p of them relevant, after
  earlier groups holding P relevant items (a fixed set: groups are ordered
  independently):

  * t = i:                   P(relevant at i)            = p / n
  * t earlier in the group:  P(both relevant), j-1 ranks = p (p-1) / (n (n-1))
  * t in an earlier group:   P relevant ranks there, each with p / n
  """
  rel = np.asarray(rel, bool)
  terms = []
  before = 0  # relevant items in earlier groups
  rank = 0
  for g in tie_groups(d):
    n = len(g)
    p = int(rel[g].sum())
    one = p / n
    pair = p * (p - 1) / (n * (n - 1)) if n > 1 else 0.0
    for j in range(1, n + 1):
      rank += 1
      e_rel_hits = one + (j - 1) * pair + before * one
      terms.append(e_rel_hits / rank)
    before += p
  return np.array(terms)


# ------------------------------------------------------------------------------------------
# Average precision


def ap_normaliser(normalizer: str, num_relevant: float, top_k, retrieved: float, n: int) -> float:
  if top_k is None or top_k >= n:
    return float(num_relevant)  # whole ranking: all three are R
  if normalizer == "relevant":
    return float(num_relevant)
  if normalizer == "min":
    return float(min(num_relevant, top_k))
  if normalizer == "retrieved":
    return float(retrieved)
  raise ValueError(f"unknown normalizer {normalizer!r}")


def _depth(top_k, n: int) -> int:
  return n if top_k is None else min(int(top_k), n)


def ap_of_ranking(rel_ranked, top_k=None, normalizer="relevant"):
  """(AP, defined) of one fixed ranking, given the relevance of its items in rank order."""
  rel_ranked = np.asarray(rel_ranked, bool)
  n = len(rel_ranked)
  k = _depth(top_k, n)
  total = precision_terms(rel_ranked)[:k].sum()
  norm = ap_normaliser(normalizer, rel_ranked.sum(), top_k, rel_ranked[:k].sum(), n)
  return (total / norm if norm > 0 else 0.0), norm > 0


def _check_aware(top_k, normalizer, n):
  if normalizer == "retrieved" and top_k is not None and top_k < n:
    raise ValueError("tie-aware AP with normalizer='retrieved' and a top_k is not defined")


def ap_one(d, rel, top_k=None, ties="aware", normalizer="relevant"):
  """(AP, defined) of one query: distances [n], relevance [n] bool."""
  rel = np.asarray(rel, bool)
  n = len(rel)
  if ties == "index":
    return ap_of_ranking(rel[index_ranking(d)], top_k, normalizer)
  if ties != "aware":
    raise ValueError(f"unknown ties {ties!r}")
  _check_aware(top_k, normalizer, n)
  k = _depth(top_k, n)
  total = expected_precision_terms(d, rel)[:k].sum()
  norm = ap_normaliser(normalizer, rel.sum(), top_k, np.nan, n)
  return (total / norm if norm > 0 else 0.0), norm > 0


@functools.lru_cache(maxsize=512)
def _mean_prefix_sums(d: tuple, rel: tuple) -> np.ndarray:
  """Entry k-1: the mean over every ranking of sum_{i <= k} rel_i prec@i."""
  rel = np.array(rel, bool)
  return np.mean([np.cumsum(precision_terms(rel[r])) for r in every_ranking(np.array(d))], axis=0)


def ap_by_enumeration(d, rel, top_k=None, normalizer="relevant"):
  """Tie-aware (AP, defined): E[sum of rel_i prec@i over ranks <= k] / normaliser,
  the expectation taken as the plain mean over every order of the tied items."""
  rel = np.asarray(rel, bool)
  n = len(rel)
  _check_aware(top_k, normalizer, n)
  k = _depth(top_k, n)
  total = float(_mean_prefix_sums(tuple(np.asarray(d).tolist()), tuple(rel.tolist()))[k - 1])
  norm = ap_normaliser(normalizer, rel.sum(), top_k, np.nan, n)
  return (total / norm if norm > 0 else 0.0), norm > 0


def average_precision(dists, rel, top_k=None, ties="aware", normalizer="relevant"):
  """Per-query (ap [q], defined [q]) for distances [q, n] and relevance [q, n]."""
  out = [ap_one(d, r, top_k, ties, normalizer) for d, r in zip(np.asarray(dists), np.asarray(rel))]
  return np.array([a for a, _ in out]), np.array([ok for _, ok in out], bool)


class APProfile:
  """Per-query rank-wise terms of one (distances, relevance) pair, for many AP variants.

  ``average_precision`` recomputes everything per call; the tests evaluate dozens
  of conventions on the same data, so they keep the rank-wise terms here and sum
  prefixes. ``ap`` gives exactly ``average_precision``'s result.
  """

  def __init__(self, dists, rel):
    dists = np.asarray(dists)
    rel = np.asarray(rel, bool)
    self.n = rel.shape[1]
    self.num_relevant = rel.sum(axis=1)
    self.terms = {"index": [], "aware": []}
    self.hits = []  # relevant items among the first k of the index ranking, every k
    for d, r in zip(dists, rel):
      ranked = r[index_ranking(d)]
      self.terms["index"].append(np.cumsum(precision_terms(ranked)))
      self.hits.append(np.cumsum(ranked))
      self.terms["aware"].append(np.cumsum(expected_precision_terms(d, r)))

  def ap(self, top_k=None, ties="aware", normalizer="relevant"):
    if ties == "aware":
      _check_aware(top_k, normalizer, self.n)
    k = _depth(top_k, self.n)
    aps, defined = [], []
    for qi in range(len(self.num_relevant)):
      total = self.terms[ties][qi][k - 1]
      retrieved = self.hits[qi][k - 1] if ties == "index" else np.nan
      norm = ap_normaliser(normalizer, self.num_relevant[qi], top_k, retrieved, self.n)
      aps.append(total / norm if norm > 0 else 0.0)
      defined.append(norm > 0)
    return np.array(aps), np.array(defined, bool)


def mean_over_queries(values, defined, rule: str) -> float:
  """Mean of per-query values; undefined ones count as 0 ("zero") or are left out ("skip")."""
  values = np.asarray(values, np.float64)
  defined = np.asarray(defined, bool)
  if rule == "zero":
    return float(np.where(defined, values, 0.0).mean())
  if rule == "skip":
    return float(values[defined].mean()) if defined.any() else float("nan")
  raise ValueError(f"unknown rule {rule!r}")


def mean_average_precision(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  top_k=None,
  ties="aware",
  relevance_kind="auto",
  normalizer="relevant",
  no_relevant="zero",
  weights=None,
  db_mask=None,
) -> float:
  d = distances(query_codes, db_codes, weights, db_mask)
  rel = relevance(query_labels, db_labels, relevance_kind)
  ap, defined = average_precision(d, rel, top_k, ties, normalizer)
  return mean_over_queries(ap, defined, no_relevant)


# ------------------------------------------------------------------------------------------
# Precision and recall at k


def hits_at_k(d, rel, k: int, ties="aware") -> float:
  """(Expected, for ties="aware") number of relevant items among the first k."""
  rel = np.asarray(rel, bool)
  if ties == "index":
    return float(rel[index_ranking(d)][:k].sum())
  return float(expected_by_rank(d, rel)[:k].sum())


def hits_at_k_by_enumeration(d, rel, k: int) -> float:
  rel = np.asarray(rel, bool)
  return float(np.mean([rel[r][:k].sum() for r in every_ranking(d)]))


def precision_at_k(
  query_codes, db_codes, query_labels, db_labels, ks, ties="aware", relevance_kind="auto"
) -> np.ndarray:
  d = distances(query_codes, db_codes)
  rel = relevance(query_labels, db_labels, relevance_kind)
  return np.array(
    [np.mean([hits_at_k(d[i], rel[i], k, ties) / k for i in range(len(d))]) for k in ks]
  )


def recall_at_k(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  ks,
  ties="aware",
  relevance_kind="auto",
  no_relevant="zero",
) -> np.ndarray:
  d = distances(query_codes, db_codes)
  rel = relevance(query_labels, db_labels, relevance_kind)
  num_relevant = rel.sum(axis=1)
  out = []
  for k in ks:
    values = [
      hits_at_k(d[i], rel[i], k, ties) / num_relevant[i] if num_relevant[i] else 0.0
      for i in range(len(d))
    ]
    out.append(mean_over_queries(values, num_relevant > 0, no_relevant))
  return np.array(out)


# ------------------------------------------------------------------------------------------
# Within a Hamming radius


def _ratio_or(num, den, rule):
  if den > 0:
    return num / den
  return 0.0 if rule == "zero" else float("nan")


def precision_recall_at_radius(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  radius,
  relevance_kind="auto",
  average="query",
  empty="zero",
  no_relevant="zero",
):
  """(precision, recall) of the ball d <= radius.

  ``average="query"``: means of per-query ratios (an empty ball is undefined for
  precision, no relevant item undefined for recall, handled by ``empty`` and
  ``no_relevant``). ``"pooled"``: sums over queries, then one ratio (the rules
  only decide the case where a pooled denominator is 0).
  """
  d = distances(query_codes, db_codes)
  rel = relevance(query_labels, db_labels, relevance_kind)
  found, size, num_relevant = [], [], []
  for i in range(len(d)):
    ball = d[i] <= radius
    found.append(int((ball & rel[i]).sum()))
    size.append(int(ball.sum()))
    num_relevant.append(int(rel[i].sum()))
  found, size, num_relevant = map(np.array, (found, size, num_relevant))
  if average == "query":
    precision = mean_over_queries(
      np.where(size > 0, found / np.maximum(size, 1), 0.0), size > 0, empty
    )
    recall = mean_over_queries(
      np.where(num_relevant > 0, found / np.maximum(num_relevant, 1), 0.0),
      num_relevant > 0,
      no_relevant,
    )
    return precision, recall
  if average == "pooled":
    return (
      _ratio_or(found.sum(), size.sum(), empty),
      _ratio_or(found.sum(), num_relevant.sum(), no_relevant),
    )
  raise ValueError(f"unknown average {average!r}")


def pr_curve_by_radius(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  relevance_kind="auto",
  average="query",
  empty="zero",
  no_relevant="zero",
) -> dict:
  num_bits = np.shape(query_codes)[1]
  pr = [
    precision_recall_at_radius(
      query_codes, db_codes, query_labels, db_labels, r, relevance_kind, average, empty, no_relevant
    )
    for r in range(num_bits + 1)
  ]
  return {
    "radius": np.arange(num_bits + 1),
    "precision": np.array([p for p, _ in pr]),
    "recall": np.array([r for _, r in pr]),
  }


def f1_bucket_curve(query_codes, db_codes, query_labels, db_labels, relevance_kind="auto") -> dict:
  """F1 of the pooled precision and recall within radius r, against buckets visited
  (sum_{i <= r} C(K, i)); a pooled ratio with a zero denominator counts 0."""
  num_bits = np.shape(query_codes)[1]
  buckets, f1, precision, recall = [], [], [], []
  for r in range(num_bits + 1):
    p, rc = precision_recall_at_radius(
      query_codes, db_codes, query_labels, db_labels, r, relevance_kind, "pooled", "zero", "zero"
    )
    buckets.append(sum(math.comb(num_bits, i) for i in range(r + 1)))
    f1.append(2 * p * rc / (p + rc) if p + rc > 0 else 0.0)
    precision.append(p)
    recall.append(rc)
  return {
    "buckets": np.array(buckets),
    "f1": np.array(f1),
    "precision": np.array(precision),
    "recall": np.array(recall),
  }


# ------------------------------------------------------------------------------------------
# NDCG


def gains(grades, gain: str) -> np.ndarray:
  g = np.asarray(grades, np.float64)
  if gain == "exp":
    return 2.0**g - 1.0
  if gain == "linear":
    return g
  raise ValueError(f"unknown gain {gain!r}")


def dcg(gains_ranked, k: int) -> float:
  """sum_{i <= k} gain_i / log2(i + 1), ranks i from 1."""
  return float(sum(g / math.log2(i + 1) for i, g in enumerate(gains_ranked[:k], start=1)))


def ndcg_one(d, grades, k: int, ties="aware", gain="exp"):
  """(NDCG@k, defined) of one query; tie-aware: E[DCG@k] / IDCG@k."""
  g = gains(grades, gain)
  ideal = dcg(np.sort(g)[::-1], k)
  if ties == "index":
    got = dcg(g[index_ranking(d)], k)
  elif ties == "aware":
    got = dcg(expected_by_rank(d, g), k)  # linearity: E[gain at rank i] weighted by the discount
  else:
    raise ValueError(f"unknown ties {ties!r}")
  return (got / ideal if ideal > 0 else 0.0), ideal > 0


def ndcg_by_enumeration(d, grades, k: int, gain="exp"):
  g = gains(grades, gain)
  ideal = dcg(np.sort(g)[::-1], k)
  got = float(np.mean([dcg(g[r], k) for r in every_ranking(d)]))
  return (got / ideal if ideal > 0 else 0.0), ideal > 0


def ndcg(dists, grades, k: int, ties="aware", gain="exp"):
  out = [ndcg_one(d, g, k, ties, gain) for d, g in zip(np.asarray(dists), np.asarray(grades))]
  return np.array([v for v, _ in out]), np.array([ok for _, ok in out], bool)


def ndcg_at_k(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  k: int,
  ties="aware",
  gain="exp",
  no_relevant="zero",
) -> float:
  d = distances(query_codes, db_codes)
  grades = relevance(query_labels, db_labels, "graded")
  values, defined = ndcg(d, grades, k, ties, gain)
  return mean_over_queries(values, defined, no_relevant)


# ------------------------------------------------------------------------------------------
# DeepHash-pytorch's CalcTopMap, transcribed


def deephash_calc_top_map(
  query_codes, db_codes, query_labels, db_labels, topk, argsort_kind=None
) -> float:
  """DeepHash-pytorch's ``CalcTopMap`` (utils/tools.py), line for line.

  ``argsort_kind=None`` is its plain ``np.argsort(hamm)`` (NumPy's default, an
  unstable introsort: the order of ties is NumPy's implementation detail);
  ``"stable"`` orders ties by database index. Codes are float32, as the toolbox's
  are (``torch.sign`` of the float32 network outputs), so ``hamm`` is float32 too.
  Class ids become one-hot rows first. Note ``gnd[0:topk]``: ``topk=-1`` drops the
  last item.
  """
  qB = np.asarray(query_codes, np.float32)
  rB = np.asarray(db_codes, np.float32)
  queryL = np.asarray(query_labels)
  retrievalL = np.asarray(db_labels)
  if queryL.ndim == 1:
    num_classes = int(max(queryL.max(), retrievalL.max())) + 1
    queryL = np.eye(num_classes)[queryL]
    retrievalL = np.eye(num_classes)[retrievalL]
  queryL = queryL.astype(np.float64)
  retrievalL = retrievalL.astype(np.float64)
  num_query = queryL.shape[0]
  topkmap = 0
  for iter in range(num_query):
    gnd = (np.dot(queryL[iter, :], retrievalL.transpose()) > 0).astype(np.float32)
    hamm = 0.5 * (rB.shape[1] - np.dot(qB[iter, :], rB.transpose()))
    ind = np.argsort(hamm) if argsort_kind is None else np.argsort(hamm, kind=argsort_kind)
    gnd = gnd[ind]
    tgnd = gnd[0:topk]
    tsum = np.sum(tgnd).astype(int)
    if tsum == 0:
      continue
    count = np.linspace(1, tsum, tsum)
    tindex = np.asarray(np.where(tgnd == 1)) + 1.0
    topkmap_ = np.mean(count / (tindex))
    topkmap = topkmap + topkmap_
  topkmap = topkmap / num_query
  return float(topkmap)
