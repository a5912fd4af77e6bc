"""Average precision, with every convention explicit.

For one query, with database items ranked by ascending distance and
``rel_i`` the relevance of the item at position ``i``::

    AP@k = (1 / Z) sum_{i <= k} rel_i * precision@i

* ``ties="index"``: tied items are ordered by smaller database index (a stable
  sort), one fixed ranking.
* ``ties="aware"``: the expected AP over every order of the tied items (He,
  Cakir, Bargal, Sclaroff, "Hashing as Tie-Aware Learning to Rank", CVPR 2018),
  computed in closed form from each tie group's size and relevant count (the
  derivation is in ``_tie_aware_sum``). Whether that needs a sort depends on the
  distances (``_groups``): integer Hamming distances with a known bound K (plain
  and multi-code codes; ``max_distance`` in the chunk kernel) are grouped by
  counting each value 0..K, with no sort, O(n) per query; weighted Hamming distances
  (exact integers in ``jhash.search.weight_units``, so ties are exact) and other
  distances without a bound are grouped by sorting each query's row (on the CPU a
  native kernel's radix sort, O(n) per query).
* ``normalizer`` Z: ``"relevant"`` (R, relevant items in the whole database),
  ``"min"`` (min(R, k)) or ``"retrieved"`` (relevant items in the top k; a
  random quantity under ties, so only with ``ties="index"`` when k < n).
  Over the whole ranking all three equal R.
* A query whose normaliser is 0 has no AP; ``no_relevant="zero"`` counts it as 0
  in the mean, ``"skip"`` leaves it out.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jhash import _checks
from jhash.metrics import _groups
from jhash.metrics import _inputs
from jhash.metrics import _native_rank

TIES = ("aware", "index")
NORMALIZERS = ("relevant", "min", "retrieved")


def _tie_aware_sum(groups: _groups.TieGroups, top_k: int | None) -> jax.Array:
  """Expected ``sum_{i<=k} rel_i * precision@i`` over orders of ties.

  Per group g (``n`` items, ``p`` relevant, ``N`` items and ``P`` relevant before it,
  ``J`` of its positions inside the cut-off): position ``N + j`` holds a relevant
  item with probability ``p / n``, and given that, the other ``j - 1`` positions of
  the group hold ``(j - 1)(p - 1)/(n - 1)`` relevant items on average, so the term
  is ``(p/n) sum_{j<=J} (P + 1 + (j - 1) m) / (N + j)`` with ``m = (p-1)/(n-1)``,
  whose sum is ``m J + (c - m N)(H(N + J) - H(N))``, ``c = P + 1 - m``.

  Returns: float32 [q].
  """
  n = groups.size.astype(jnp.float32)
  p = groups.hits.astype(jnp.float32)
  before, cut = _groups.cut_sizes(groups, top_k)
  big_n = before.astype(jnp.float32)
  big_j = cut.astype(jnp.float32)
  big_p = _groups.exclusive_cumsum(p)
  m = jnp.where(n > 1, (p - 1.0) / jnp.maximum(n - 1.0, 1.0), 0.0)
  c = big_p + 1.0 - m
  inner = m * big_j + (c - m * big_n) * _groups.harmonic_span(big_n, big_j)
  term = jnp.where((n > 0) & (p > 0), p / jnp.maximum(n, 1.0) * inner, 0.0)
  return jnp.sum(term, axis=-1)


def ranked_positions(distances: jax.Array, k: int, max_distance: int | None = None) -> jax.Array:
  """Database indices of the first ``k`` items ordered by (distance, index): int32 [q, k].

  Args:
    distances: int32 or float32 [q, n], each >= 0 and not NaN (shift a row of signed
      distances by its minimum: the ranking and its ties stay).
    k: how many positions, 1 <= k <= n.
    max_distance: a bound on integer distances, which allows the fast sort key (checked
      as ``average_precision``'s).
  """
  _inputs.check_chunk(distances, distances, "distances")
  _inputs.check_distances(distances, max_distance)
  n = distances.shape[1]
  if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n:
    raise ValueError(
      f"k must be a Python int in [1, {n}] (it sets the result's shape); got {_checks.describe(k)}."
    )
  return _positions(distances, k, max_distance)


def _positions(distances, k: int, max_distance: int | None) -> jax.Array:
  """``ranked_positions`` without its checks, for the kernels (their inputs checked once)."""
  q, n = distances.shape
  exact_float = not jnp.issubdtype(distances.dtype, jnp.integer) or (
    max_distance is not None and max_distance < 2**24
  )
  if k < n and exact_float:
    # lax.top_k keeps the lower index first among equal keys; integer distances
    # below 2**24 are exact as float32.
    return lax.top_k(-distances.astype(jnp.float32), k)[1]
  if max_distance is not None and (max_distance + 2) * n <= 2**31 - 1:
    # One int32 sort key (distance, index): a single-operand sort, several times
    # faster on the CPU than a two-operand stable argsort.
    # Distances past max_distance (an item holding no code) go last, as max_distance + 1.
    key = jnp.minimum(distances, max_distance + 1) * n + jnp.arange(n, dtype=jnp.int32)[None, :]
    return (jnp.sort(key, axis=1) % n)[:, :k]
  return jnp.argsort(distances, axis=1, stable=True)[:, :k].astype(jnp.int32)


def retrievable(relevant, distances, max_distance: int | None):
  """``relevant`` (bool [q, n]) without the items past ``max_distance`` (holding no code:
  ranked last, never retrieved); elementwise, so it fuses into the gather after it."""
  return relevant.astype(bool) & _groups.retrieved(distances, max_distance)


def _index_sum(distances, relevant, k: int, max_distance: int | None):
  """``sum_{i<=k} rel_i precision@i`` and relevant-in-top-k under index ties: [q], [q].

  Items past ``max_distance`` (holding no code) are ranked last and never retrieved."""
  order = _positions(distances, k, max_distance)
  rel = jnp.take_along_axis(retrievable(relevant, distances, max_distance), order, axis=1)
  rel = rel.astype(jnp.float32)
  hits = jnp.cumsum(rel, axis=1)
  pos = jnp.arange(1, rel.shape[1] + 1, dtype=jnp.float32)
  return jnp.sum(rel * hits / pos[None, :], axis=1), hits[:, -1]


def _check_options(top_k, ties, normalizer, n):
  _inputs.check_choice(ties, "ties", TIES)
  _inputs.check_choice(normalizer, "normalizer", NORMALIZERS)
  top_k = _inputs.check_cutoff(top_k, "top_k", n, allow_none=True)
  if ties == "aware" and normalizer == "retrieved" and top_k is not None and top_k < n:
    raise ValueError(
      "normalizer='retrieved' with ties='aware' and a top_k is not defined: "
      "the number of relevant items retrieved varies with the order of ties. "
      "Use ties='index', or normalizer 'relevant' or 'min'."
    )


def average_precision(
  distances: jax.Array,
  relevance: jax.Array,
  *,
  top_k: int | None = None,
  ties: str = "aware",
  normalizer: str = "relevant",
  max_distance: int | None = None,
) -> tuple[jax.Array, jax.Array]:
  """Average precision of each query of a chunk (jittable; options are static).

  Args:
    distances: int32 [q, n] (Hamming, in [0, max_distance], or the largest int32 for an
      item holding no code, as ``jhash.search.multi_code_hamming`` gives) or float32 [q, n]
      (each >= 0 and not NaN: shift a row of signed distances by its minimum).
    relevance: bool [q, n] (non-zero integers count as relevant; floats must be 0 or
      1: graded relevance is ``ndcg``'s).
    top_k: cut-off k in [1, n], or None for the whole ranking (a k past the end is
      an error, as in ``precision_at_k``).
    ties: "aware" or "index" (module docstring).
    normalizer: "relevant", "min" or "retrieved".
    max_distance: D for integer distances: tie groups are counted in O(n) with no
      sort. None groups by sorting.
  Returns:
    (ap float32 [q], defined bool [q]); ``defined`` is False where the normaliser is 0
    (AP is reported as 0 there).
  """
  _inputs.check_chunk(distances, relevance, "relevance")
  _inputs.check_relevance_values(relevance)
  _inputs.check_distances(distances, max_distance)
  q, n = distances.shape
  _check_options(top_k, ties, normalizer, n)
  k = n if top_k is None else int(top_k)
  relevant = relevance.astype(bool)
  if ties == "aware":
    groups = _groups.make_groups(distances, relevant, max_distance)
    numer, retrieved = _tie_aware_sum(groups, None if k == n else k), None
  else:
    numer, retrieved = _index_sum(distances, relevant, k, max_distance)
  return _normalized(numer, retrieved, jnp.sum(relevant, axis=1), k, normalizer)


def _normalized(numer, retrieved, total, k: int, normalizer: str):
  """AP = numer / Z and whether Z > 0, from the relevant items in the top k
  (``retrieved``; None: all of them) and in the whole database (``total``)."""
  total = total.astype(jnp.float32)
  retrieved = total if retrieved is None else retrieved
  z = {"relevant": total, "min": jnp.minimum(total, float(k)), "retrieved": retrieved}[normalizer]
  defined = z > 0
  return jnp.where(defined, numer / jnp.maximum(z, 1.0), 0.0), defined


def _ap_kernel(options, max_distance):
  top_k, ties, normalizer = options

  def kernel(d, rel):
    return average_precision(
      d, rel, top_k=top_k, ties=ties, normalizer=normalizer, max_distance=max_distance
    )

  return kernel


def _native_ap_kernel(options, corpus, setup):
  """The same AP from the native kernels (packed codes on the CPU), from a chunk of
  queries and their labels: no [c, n] distances or relevance."""
  top_k, ties, normalizer = options
  n = setup.num_items
  k = n if top_k is None else top_k
  bound = _native_rank.bind(corpus, setup)

  def kernel(query, labels):
    args = bound(query, labels)
    if setup.kind == "weighted":
      numer, retrieved, total = _native_rank.weighted_ap(*args, k, ties == "aware")
      return _normalized(numer, None if ties == "aware" else retrieved, total, k, normalizer)
    if ties == "aware":
      groups, total = _native_rank.tie_groups(*args)
      numer = _tie_aware_sum(groups, None if k == n else k)
      return _normalized(numer, None, total, k, normalizer)
    numer, retrieved, total = _native_rank.index_ap(*args, k)
    return _normalized(numer, retrieved, total, k, normalizer)

  return kernel


@_inputs.jit_static
def _per_query_ap(corpus, setup, chunk, options):
  kernel = _ap_kernel(options, _inputs.max_distance(setup))
  by_kernel = _native_ap_kernel(options, corpus, setup)
  return _inputs.map_queries(kernel, corpus, setup, chunk, native_kernel=by_kernel)


def average_precisions(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  *,
  top_k=None,
  ties="aware",
  relevance="auto",
  normalizer="relevant",
  weights=None,
  db_mask=None,
  query_chunk=None,
):
  """Per-query AP of codes against a database (see ``mean_average_precision``).

  Returns:
    (ap float32 [q], defined bool [q]); empty for no queries (q = 0).
  """
  corpus, setup = _inputs.prepare(
    query_codes,
    db_codes,
    query_labels,
    db_labels,
    relevance=relevance,
    weights=weights,
    db_mask=db_mask,
    min_queries=0,
  )
  _check_options(top_k, ties, normalizer, setup.num_items)
  chunk = _inputs.chunk_size(setup, query_chunk)
  return _per_query_ap(corpus, setup, chunk, (top_k, ties, normalizer))


def mean_average_precision(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  *,
  top_k=None,
  ties="aware",
  relevance="auto",
  normalizer="relevant",
  no_relevant="zero",
  weights=None,
  db_mask=None,
  query_chunk=None,
) -> float | jax.Array:
  """Mean average precision of Hamming ranking, every convention explicit.

  Args:
    query_codes: [q, K] in {-1,+1}.
    db_codes: [n, K] in {-1,+1}, or [n, m, K] for items with several codes (with
      ``db_mask``): an item's distance is the minimum over its valid codes.
    query_labels, db_labels: class ids int [q] / [n], or multi-hot bool [q, C] / [n, C].
    top_k: AP over the first k items, an int in [1, n] with n the database size
      (None: the whole database). A larger k is an error naming top_k, as for
      ``precision_at_k``'s ks: one rule for every cut-off.
    ties: "aware" (expected AP over orders of tied items; the default) or "index"
      (ties ordered by smaller database index). Tie-aware AP counts the tie
      groups of Hamming distances without a sort; with ``weights`` it sorts
      each query's distances (module docstring; on the CPU a native radix sort).
    relevance: "auto", "same_class" or "share_label".
    normalizer: "relevant", "min" or "retrieved" (module docstring).
    no_relevant: "zero" or "skip" for queries whose normaliser is 0. When no query has
      a relevant item at all, "zero" gives 0 and "skip" NaN, each with a
      ``RuntimeWarning`` (outside jit).
    weights: float [K] for weighted Hamming ranking ``sum_k w_k [q_k != b_k]``, summed
      exactly over the weights rounded to ``jhash.search.weight_units`` (equal sums tie).
    db_mask: bool [n, m] for multi-code ``db_codes``; every item must hold a code (checked
      unless the mask is traced: inside jit an item holding none is never retrieved
      and still counts among the relevant items, on every backend).
    query_chunk: queries per chunk (default: bounded memory, about 32 MB of distances).
  Returns:
    mAP as a Python float (NaN when every query is skipped); inside jit / vmap (traced
    codes or labels) a float32 scalar array, so an evaluation is one jitted function.

  Example: one query of class 0; database items at distances 1, 1 and 2 of
  classes 1, 0, 0. The two items at distance 1 tie: in either order AP is
  ``(1 + 2/3) / 2 = 5/6`` or ``(1/2 + 2/3) / 2 = 7/12``, so the tie-aware AP is
  their mean 17/24; by index the irrelevant item 0 comes first: 7/12.

  >>> import numpy as np
  >>> from jhash import metrics
  >>> query = np.array([[1, 1, 1, 1]], np.int8)
  >>> db = np.array([[1, 1, 1, -1], [1, 1, -1, 1], [-1, -1, 1, 1]], np.int8)
  >>> query_labels, db_labels = np.array([0], np.int32), np.array([1, 0, 0], np.int32)
  >>> round(metrics.mean_average_precision(query, db, query_labels, db_labels), 4)
  0.7083
  >>> round(metrics.mean_average_precision(query, db, query_labels, db_labels,
  ...                                      ties="index"), 4)
  0.5833
  """
  _inputs.check_choice(no_relevant, "no_relevant", ("zero", "skip"))
  ap, defined = average_precisions(
    query_codes,
    db_codes,
    query_labels,
    db_labels,
    top_k=top_k,
    ties=ties,
    relevance=relevance,
    normalizer=normalizer,
    weights=weights,
    db_mask=db_mask,
    query_chunk=query_chunk,
  )
  _inputs.require_queries(query_codes)
  return _inputs.host_mean(ap, defined, no_relevant, "mean_average_precision")
