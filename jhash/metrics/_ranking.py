"""Rank cut-off metrics: precision@k, recall@k and NDCG@k, tie-aware or index-ordered.

Tie-aware values are expectations over every order of the tied items (He et al.,
CVPR 2018): the expected number of relevant items in the top k is
``sum_g p_g J_g / n_g`` over tie groups (``J_g`` of the group's ``n_g`` items fall
inside the cut-off), and the expected DCG@k is
``sum_g (G_g / n_g) (D[N_g + J_g] - D[N_g])`` with ``D`` the cumulative discount.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jhash import _checks
from jhash.metrics import _ap
from jhash.metrics import _groups
from jhash.metrics import _inputs
from jhash.metrics import _native_rank
from jhash.metrics import _relevance

GAINS = ("exp", "linear")


def _check_k(k, n: int) -> int:
  """One cut-off, an int in [1, n]."""
  if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
    raise ValueError(f"k must be one int in [1, {n}]; got {_checks.describe(k)}.")
  return _inputs.check_cutoff(k, "k", n)


def _check_ks(ks, n: int, name: str = "ks") -> tuple[int, ...]:
  """Cut-offs as a tuple of ints in [1, n] (``_inputs.check_cutoff``'s rule)."""
  if isinstance(ks, (int, np.integer)) and not isinstance(ks, bool):
    return (_inputs.check_cutoff(ks, name, n),)
  try:
    values = tuple(ks)
  except TypeError:
    values = ()
  if not values:
    raise ValueError(
      f"{name} must be an int or a non-empty sequence of ints in [1, {n}] (the "
      f"database holds {n} items); got {ks!r}."
    )
  return tuple(_inputs.check_cutoff(k, name, n) for k in values)


def hits_at_k(
  distances, relevance, ks: tuple[int, ...], ties: str = "aware", max_distance: int | None = None
) -> jax.Array:
  """Relevant items in the top k, for each k (expected under ties): float32 [q, len(ks)].

  ``distances``: int32 or float32 [q, n], as ``average_precision``'s (each >= 0, not NaN;
  an int32 past ``max_distance``, or the largest int32, is an item holding no code: never
  retrieved). ``relevance``: bool [q, n] (non-zero integers count as relevant; floats must
  be 0 or 1).
  """
  _inputs.check_chunk(distances, relevance, "relevance")
  _inputs.check_relevance_values(relevance)
  _inputs.check_distances(distances, max_distance)
  _inputs.check_choice(ties, "ties", _ap.TIES)
  ks = _check_ks(ks, distances.shape[1])
  relevant = relevance.astype(bool)
  if ties == "aware":
    return _expected_hits(_groups.make_groups(distances, relevant, max_distance), ks)
  order = _ap._positions(distances, max(ks), max_distance)
  ranked = jnp.take_along_axis(_ap.retrievable(relevant, distances, max_distance), order, axis=1)
  cum = jnp.cumsum(ranked.astype(jnp.float32), axis=1)
  return cum[:, jnp.asarray(ks) - 1]


def _expected_hits(groups: _groups.TieGroups, ks) -> jax.Array:
  """Expected relevant items in the top k under ties, from the tie groups: [q, len(ks)]."""
  n = groups.size.astype(jnp.float32)
  p = groups.hits.astype(jnp.float32)
  share = jnp.where(n > 0, p / jnp.maximum(n, 1.0), 0.0)
  cols = [jnp.sum(share * _groups.cut_sizes(groups, k)[1], axis=-1) for k in ks]
  return jnp.stack(cols, axis=-1)


def _gain(grades, gain: str):
  """The gain of each grade. A grade past ``MAX_EXP_GRADE`` (refused in the data; the
  native kernels' tables count grades up to 32 per label word) gets float32's largest
  gain, not inf: counted 0 times it adds 0, where inf x 0 would be NaN."""
  g = grades.astype(jnp.float32)
  if gain != "exp":
    return g
  big = jnp.float32(np.finfo(np.float32).max)
  return jnp.where(g <= MAX_EXP_GRADE, jnp.exp2(jnp.minimum(g, MAX_EXP_GRADE)) - 1.0, big)


# The "exp" gain 2^g - 1 summed over a ranking of up to 2**27 items stays below float32's
# largest (2**128) for grades up to 100.
MAX_EXP_GRADE = 100


def _check_grades(grades, gain: str) -> None:
  """Concrete grades must be finite, >= 0, and <= MAX_EXP_GRADE for the "exp" gain."""
  if not _checks.is_concrete(grades) or np.size(grades) == 0:
    return
  g = np.asarray(grades)
  _checks.finite(g, "grades")
  if g.min() < 0:
    raise ValueError(f"grades must be >= 0 (relevance levels); found {g.min()} in shape {g.shape}.")
  if gain == "exp" and g.max() > MAX_EXP_GRADE:
    raise ValueError(
      f"grades must be <= {MAX_EXP_GRADE} with gain='exp' (sums of 2**g overflow float32); found "
      f"{g.max()}. Use gain='linear' for larger grades."
    )


def ndcg(
  distances: jax.Array,
  grades: jax.Array,
  *,
  k: int,
  ties: str = "aware",
  gain: str = "exp",
  max_distance: int | None = None,
) -> tuple[jax.Array, jax.Array]:
  """NDCG@k of each query of a chunk with graded relevance (jittable).

  ``DCG@k = sum_{i<=k} gain_i / log2(i + 1)``, gain ``2^g - 1`` ("exp") or ``g``
  ("linear"); NDCG = DCG / IDCG, IDCG from the gains sorted descending.

  Args:
    distances: int32 or float32 [q, n], each >= 0 and not NaN (shift a row of signed
      distances by its minimum: the ranking and its ties stay).
    grades: int [q, n] relevance levels (e.g. number of shared labels), finite, >= 0; with
      ``gain="exp"`` at most ``MAX_EXP_GRADE`` = 100 (sums of ``2**g`` overflow float32
      past it). Checked on concrete arrays (a ValueError), not under jit.
    k: cut-off, 1 <= k <= n.
    ties: "aware" (expected DCG over orders of ties) or "index".
    gain: "exp" or "linear".
    max_distance: bound of integer distances (counting instead of sorting).
  Returns:
    (ndcg float32 [q], defined bool [q]); undefined where IDCG = 0.
  """
  _inputs.check_chunk(distances, grades, "grades")
  _inputs.check_distances(distances, max_distance)
  _inputs.check_choice(ties, "ties", _ap.TIES)
  _inputs.check_choice(gain, "gain", GAINS)
  _check_grades(grades, gain)
  q, n = distances.shape
  k = _check_k(k, n)
  gains = _gain(grades, gain)
  disc = 1.0 / jnp.log2(jnp.arange(2, k + 2, dtype=jnp.float32))
  ideal = jnp.sum(lax.top_k(gains, k)[0] * disc[None, :], axis=-1)
  if ties == "aware":
    dcg = _expected_dcg(_groups.make_groups(distances, gains, max_distance), k)
  else:
    order = _ap._positions(distances, k, max_distance)
    # Items holding no code are never retrieved.
    gains = jnp.where(_groups.retrieved(distances, max_distance), gains, 0.0)
    dcg = jnp.sum(jnp.take_along_axis(gains, order, axis=1) * disc[None, :], axis=-1)
  defined = ideal > 0
  return jnp.where(defined, dcg / jnp.where(defined, ideal, 1.0), 0.0), defined


def _outputs_fit(setup, bytes_per_query: int) -> bool:
  """Whether a native kernel's outputs for every query at once take at most 256 MB (else
  the array code runs, chunk by chunk)."""
  return setup.num_queries * bytes_per_query <= 1 << 28


def _ranked_fits(setup, k: int, width: int) -> bool:
  """``weighted_ranked``'s outputs: groups [q, k] x 2 and grades [q, G]."""
  return _outputs_fit(setup, 8 * k + 4 * width)


@_inputs.jit_static
def _hits_and_totals(corpus, setup, chunk, options):
  ks, ties = options

  def kernel(d, rel):
    hits = hits_at_k(d, rel, ks, ties, _inputs.max_distance(setup))
    return hits, jnp.sum(rel.astype(bool), axis=1)

  by_kernel = None
  bound = _native_rank.bind(corpus, setup)
  width = _native_rank.grade_width(corpus.query_labels)
  if setup.kind == "weighted" and _ranked_fits(setup, max(ks), width):
    # The first max(ks) positions' groups (CPU), either tie rule.
    def by_kernel(query, labels):
      query, db, units, words, db_words, overlap = bound(query, labels)
      relevant = _native_rank.grades(words, overlap) > 0
      groups, per_grade = _native_rank.weighted_ranked(
        query, db, units, words, db_words, overlap, relevant, max(ks), ties == "aware"
      )
      return _expected_hits(groups, ks), jnp.sum(per_grade[:, 1:], axis=1)
  elif ties == "aware" and setup.kind != "weighted":  # tie groups from the native kernel

    def by_kernel(query, labels):
      groups, total = _native_rank.tie_groups(*bound(query, labels))
      return _expected_hits(groups, ks), total

  return _inputs.map_queries(kernel, corpus, setup, chunk, native_kernel=by_kernel)


def _hits(
  query_codes, db_codes, query_labels, db_labels, ks, ties, relevance, weights, db_mask, query_chunk
):
  corpus, setup = _inputs.prepare(
    query_codes,
    db_codes,
    query_labels,
    db_labels,
    relevance=relevance,
    weights=weights,
    db_mask=db_mask,
  )
  _inputs.check_choice(ties, "ties", _ap.TIES)
  ks = _check_ks(ks, setup.num_items)
  chunk = _inputs.chunk_size(setup, query_chunk)
  hits, total = _hits_and_totals(corpus, setup, chunk, (ks, ties))
  return ks, hits, total


def precision_at_k(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  ks,
  *,
  ties="aware",
  relevance="auto",
  weights=None,
  db_mask=None,
  query_chunk=None,
):
  """Mean precision@k over queries for each k in ``ks``: float32 [len(ks)].

  Arguments as in ``mean_average_precision``; ``ks`` an int or a sequence of ints
  in [1, n].
  """
  ks, hits, _ = _hits(
    query_codes,
    db_codes,
    query_labels,
    db_labels,
    ks,
    ties,
    relevance,
    weights,
    db_mask,
    query_chunk,
  )
  return jnp.mean(hits / jnp.asarray(ks, jnp.float32)[None, :], axis=0)


def recall_at_k(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  ks,
  *,
  ties="aware",
  relevance="auto",
  no_relevant="zero",
  weights=None,
  db_mask=None,
  query_chunk=None,
):
  """Mean recall@k (relevant in the top k over all relevant) for each k: float32 [len(ks)].

  Queries with no relevant item count as 0 (``no_relevant="zero"``) or are left out
  (``"skip"``: NaN when every query is, with a ``RuntimeWarning``).
  """
  _inputs.check_choice(no_relevant, "no_relevant", ("zero", "skip"))
  ks, hits, total = _hits(
    query_codes,
    db_codes,
    query_labels,
    db_labels,
    ks,
    ties,
    relevance,
    weights,
    db_mask,
    query_chunk,
  )
  recall = hits / jnp.maximum(total, 1)[:, None].astype(jnp.float32)
  defined = jnp.broadcast_to((total > 0)[:, None], recall.shape)
  mean = jax.vmap(lambda r, d: _inputs.mean_defined(r, d, no_relevant), in_axes=1)
  result = mean(recall, defined)
  _inputs.warn_nan(result, "recall_at_k", "no query has a relevant item", "no_relevant")
  _inputs.warn_none_relevant(total > 0, "recall_at_k", no_relevant)
  return result


def _expected_dcg(groups: _groups.TieGroups, k: int) -> jax.Array:
  """DCG@k expected over the orders of ties, from groups of summed gains: float32 [q]."""
  before, cut = _groups.cut_sizes(groups, k)
  table = jnp.asarray(_groups.discount_table(k).astype(np.float32))
  lo = jnp.minimum(before, k)
  span = table[lo + cut] - table[lo]
  size = groups.size.astype(jnp.float32)
  return jnp.sum(jnp.where(size > 0, groups.hits / jnp.maximum(size, 1.0), 0.0) * span, axis=-1)


def _ndcg_from_grade_groups(counts, k: int, gain: str):
  """Tie-aware NDCG@k from items per (distance, grade), int [q, K + 2, G] (the last
  distance row: items holding no code, never retrieved): (ndcg float32 [q], defined)."""
  gains = _gain(jnp.arange(counts.shape[-1]), gain)
  ranked = counts[:, :-1].astype(jnp.float32)
  dcg = _expected_dcg(_groups.TieGroups(jnp.sum(counts[:, :-1], axis=-1), ranked @ gains), k)
  return _ndcg_of(dcg, jnp.sum(counts, axis=1), gains, k)


def _ndcg_of(dcg, per_grade, gains, k: int):
  """NDCG from DCG@k [q] and the items of each grade int [q, G] (the ideal ranking: grades
  from the highest down, each over its run of positions): (ndcg float32 [q], defined)."""
  per_grade = per_grade[:, ::-1]
  before = _groups.exclusive_cumsum(per_grade)
  table = jnp.asarray(_groups.discount_table(k).astype(np.float32))
  span = table[jnp.minimum(before + per_grade, k)] - table[jnp.minimum(before, k)]
  ideal = jnp.sum(span * gains[::-1][None, :], axis=-1)
  defined = ideal > 0
  return jnp.where(defined, dcg / jnp.where(defined, ideal, 1.0), 0.0), defined


@_inputs.jit_static
def _per_query_ndcg(corpus, setup, chunk, options):
  k, ties, gain = options

  def kernel(d, grades):
    return ndcg(d, grades, k=k, ties=ties, gain=gain, max_distance=_inputs.max_distance(setup))

  by_kernel = None
  width = _native_rank.grade_width(corpus.query_labels)
  bound = _native_rank.bind(corpus, setup)

  def by_ranked(query, db, units, words, db_words, overlap):
    # The first k positions' groups (CPU) by weighted distance, either tie rule.
    gains = _gain(_native_rank.grades(words, overlap), gain)
    groups, per_grade = _native_rank.weighted_ranked(
      query, db, units, words, db_words, overlap, gains, k, ties == "aware"
    )
    return _ndcg_of(_expected_dcg(groups, k), per_grade, gains, k)

  if setup.kind == "weighted" and _ranked_fits(setup, k, width):

    def by_kernel(query, labels):
      return by_ranked(*bound(query, labels))
  elif ties == "index" and setup.kind != "weighted" and _outputs_fit(setup, 4 * width):
    # DCG of the (distance, index) ranking with no sort, and the grade counts (CPU).
    def by_kernel(query, labels):
      args = bound(query, labels)
      gains = _gain(_native_rank.grades(args[3], args[-1]), gain)
      dcg, per_grade = _native_rank.index_dcg(*args, gains, k)
      return _ndcg_of(dcg, per_grade, gains, k)
  # Items per (distance, grade) from the native kernel (CPU).
  elif (
    ties == "aware"
    and setup.kind != "weighted"
    and _outputs_fit(setup, (setup.num_bits + 2) * width * 4)
  ):

    def by_kernel(query, labels):
      return _ndcg_from_grade_groups(_native_rank.grade_groups(*bound(query, labels)), k, gain)

  return _inputs.map_queries(kernel, corpus, setup, chunk, native_kernel=by_kernel)


def ndcg_at_k(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  k,
  *,
  ties="aware",
  gain="exp",
  no_relevant="zero",
  weights=None,
  db_mask=None,
  query_chunk=None,
) -> float | jax.Array:
  """Mean NDCG@k with graded relevance (number of shared labels; same class = 1).

  Arguments as in ``mean_average_precision``; queries with IDCG = 0 count as 0 or
  are skipped per ``no_relevant``.
  """
  corpus, setup = _inputs.prepare(
    query_codes,
    db_codes,
    query_labels,
    db_labels,
    relevance="graded",
    weights=weights,
    db_mask=db_mask,
    relevance_kinds=_relevance.KINDS,
  )
  _inputs.check_choice(ties, "ties", _ap.TIES)
  _inputs.check_choice(gain, "gain", GAINS)
  _inputs.check_choice(no_relevant, "no_relevant", ("zero", "skip"))
  k = _check_k(k, setup.num_items)
  if gain == "exp" and np.ndim(query_labels) == 2 and _checks.is_concrete(query_labels):
    most = int(np.asarray(query_labels).astype(bool).sum(axis=1).max(initial=0))
    if most > MAX_EXP_GRADE:  # a grade (shared labels) can reach a query's label count
      raise ValueError(
        f"gain='exp' takes grades (shared labels) up to {MAX_EXP_GRADE}: sums of 2**g "
        f"overflow float32 past it; a query here holds {most} labels. Use gain='linear'."
      )
  chunk = _inputs.chunk_size(setup, query_chunk)
  values, defined = _per_query_ndcg(corpus, setup, chunk, (k, ties, gain))
  return _inputs.host_mean(values, defined, no_relevant, "ndcg_at_k")
