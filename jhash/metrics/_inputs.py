"""From codes and labels to chunks of (distances, relevance): the shared front of every metric.

Every code-level metric validates its inputs here, then maps a per-chunk kernel
over query chunks with ``lax.map`` inside one jit, so memory stays at
``chunk x n`` whatever the number of queries.
"""

from __future__ import annotations

import functools
import warnings
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jhash import _checks
from jhash import native
from jhash import codes as codes_lib
from jhash.metrics import _relevance
from jhash.search import _distance

# Elements of a [chunk, n] distance matrix kept at once.
_CHUNK_ELEMENTS = 1 << 23


class Corpus(NamedTuple):
  """Validated retrieval inputs (arrays only; pytree)."""

  query: jax.Array  # uint32 [q, W] packed
  db: jax.Array  # uint32 [n, W] / [n, m, W] packed
  db_mask: jax.Array | None  # bool [n, m] for multi-code items
  weights: jax.Array | None  # weighted Hamming: the weights in units, float32 [K] (integers)
  query_labels: jax.Array
  db_labels: jax.Array


class Setup(NamedTuple):
  """Static facts about a corpus (hashable; used as jit static arguments)."""

  num_bits: int
  num_queries: int
  num_items: int
  kind: str  # "hamming", "multi" or "weighted"
  relevance: str
  max_grade: int


def _check_codes(codes, name: str, ranks) -> None:
  _checks.rank(codes, ranks, name, "codes in {-1,+1}")
  if np.shape(codes)[-1] < 1:
    raise ValueError(
      f"{name} must have a last axis of num_bits >= 1; got {_checks.describe(codes)}."
    )
  dtype = _checks.dtype_of(codes)
  if not (dtype.kind in "biuf" or dtype.name == "bfloat16"):
    raise ValueError(f"{name} must be a real array of -1 and +1; got {_checks.describe(codes)}.")
  codes_lib.check_signs(codes, name)


def require_queries(query_codes) -> None:
  """A mean over queries needs one: raise for [0, K] ``query_codes``."""
  if np.shape(query_codes)[0] < 1:
    raise ValueError(
      f"query_codes must hold at least one query (a mean over no queries is "
      f"undefined); got shape {tuple(np.shape(query_codes))}."
    )


def check_codes_and_labels(
  query_codes, db_codes, query_labels, db_labels, *, db_ranks=(2, 3), min_queries: int = 1
) -> tuple[int, int, int]:
  """Check codes and labels of a retrieval call; return (num_bits, queries, items).

  Empty inputs: a database needs at least one item (a ranking of nothing has no
  AP or cut-off); ``min_queries=1`` for a mean over queries (undefined over
  none), 0 where one value per query is returned (then empty).
  """
  _check_codes(query_codes, "query_codes", 2)
  _check_codes(db_codes, "db_codes", db_ranks)
  num_bits = int(np.shape(query_codes)[1])
  if np.shape(db_codes)[-1] != num_bits:
    raise ValueError(
      f"query_codes and db_codes must have the same code length; got "
      f"{num_bits} (shape {tuple(np.shape(query_codes))}) and "
      f"{np.shape(db_codes)[-1]} (shape {tuple(np.shape(db_codes))})."
    )
  q, n = int(np.shape(query_codes)[0]), int(np.shape(db_codes)[0])
  if q < min_queries:
    require_queries(query_codes)
  if n < 1:
    raise ValueError(
      f"db_codes must hold at least one database item; got shape {tuple(np.shape(db_codes))}."
    )
  _relevance.check_labels(query_labels, db_labels, q, n)
  return num_bits, q, n


def check_cutoff(value, name: str, n: int, allow_none: bool = False) -> int | None:
  """A rank cut-off: an int in [1, n] (n the database size), or None when allowed.

  One rule for every cut-off (``top_k``, ``k``, ``ks``): a cut-off past the end of
  the ranking is an error, never silently the whole ranking.
  """
  if value is None and allow_none:
    return None
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= n:
    whole = "None (the whole ranking) or " if allow_none else ""
    raise ValueError(
      f"{name} must be {whole}a Python int in [1, {n}] (the database holds {n} items); got "
      f"{_checks.static_value(value)}."
    )
  return int(value)


def prepare(
  query_codes,
  db_codes,
  query_labels,
  db_labels,
  *,
  relevance: str = "auto",
  weights=None,
  db_mask=None,
  min_queries: int = 1,
  relevance_kinds: tuple[str, ...] = _relevance.BINARY_KINDS,
) -> tuple[Corpus, Setup]:
  """Check codes, labels and options; pack the codes. Raises ValueError naming the argument.

  ``min_queries`` as in ``check_codes_and_labels``; ``relevance`` one of
  ``relevance_kinds`` (NDCG's are ``_relevance.KINDS``, with ``"graded"``: the number of
  shared labels).
  """
  num_bits, q, n = check_codes_and_labels(
    query_codes, db_codes, query_labels, db_labels, min_queries=min_queries
  )
  kind = _relevance.resolve(relevance, query_labels, relevance_kinds)
  mask = None
  w = None
  if np.ndim(db_codes) == 3:
    if weights is not None:
      raise ValueError(
        "weights (weighted Hamming) and multi-code db_codes [n, m, K] cannot be combined."
      )
    if db_mask is None:
      db_mask = np.ones(np.shape(db_codes)[:2], bool)
    if tuple(np.shape(db_mask)) != tuple(np.shape(db_codes)[:2]):
      raise ValueError(
        f"db_mask must have shape {tuple(np.shape(db_codes)[:2])} (items, codes "
        f"per item); got {tuple(np.shape(db_mask))}."
      )
    if _checks.dtype_of(db_mask) != np.bool_:
      raise ValueError(f"db_mask must be boolean; got {_checks.describe(db_mask)}.")
    if _checks.is_concrete(db_mask) and not np.asarray(db_mask).any(axis=1).all():
      first = int(np.argmin(np.asarray(db_mask).any(axis=1)))
      raise ValueError(
        f"db_mask must mark at least one valid code per item; item {first} has none."
      )
    mask = jnp.asarray(db_mask, bool)
  elif db_mask is not None:
    raise ValueError(
      f"db_mask is only for multi-code db_codes of shape [n, m, K]; db_codes "
      f"has shape {tuple(np.shape(db_codes))}."
    )
  if weights is not None:
    _distance.check_weights(weights, num_bits)
    w, _ = _distance.units_unchecked(weights)  # ranking by units: the unit does not matter
    kind_d = "weighted"
  else:
    kind_d = "multi" if mask is not None else "hamming"
  query = codes_lib.pack_bits(query_codes)
  db = codes_lib.pack_bits(db_codes)
  corpus = Corpus(query, db, mask, w, jnp.asarray(query_labels), jnp.asarray(db_labels))
  setup = Setup(num_bits, q, n, kind_d, kind, _relevance.max_grade(query_labels))
  return corpus, setup


def max_distance(setup: Setup) -> int | None:
  """Largest integer distance, or None for real-valued (weighted) distances."""
  return None if setup.kind == "weighted" else setup.num_bits


def chunk_distances(corpus: Corpus, setup: Setup, query: jax.Array) -> jax.Array:
  """Distances of a chunk of queries to the whole database: int32 [c, n] (weighted: in
  weight units, exact)."""
  if setup.kind == "weighted":

    def signs(packed):
      return codes_lib.unpack_bits(packed, setup.num_bits).astype(jnp.float32)

    d = _distance.weighted_units_distance(signs(query), signs(corpus.db), corpus.weights)
    return d.astype(jnp.int32)
  if setup.kind == "multi":
    return _distance.multi_unchecked(query, corpus.db, corpus.db_mask, setup.num_bits)
  return _distance.pairwise_unchecked(query, corpus.db, setup.num_bits)


def chunk_size(setup: Setup, requested: int | None = None) -> int:
  if requested is not None:
    return _checks.positive_int(requested, "query_chunk")
  per_query = setup.num_items * (1 if setup.kind != "multi" else 2)
  return int(max(1, min(256, _CHUNK_ELEMENTS // max(per_query, 1), setup.num_queries)))


def map_queries(
  kernel: Callable, corpus: Corpus, setup: Setup, chunk: int, native_kernel: Callable | None = None
):
  """Apply ``kernel(distances [c, n], relevance [c, n]) -> pytree of [c, ...]`` to every chunk.

  Queries are padded to a multiple of ``chunk`` (padding rows are dropped from
  the outputs). Returns the pytree with leading axis ``num_queries``.
  ``native_kernel(query [q, W], query_labels [q, ...])``, when given, replaces all of
  it for packed codes (one or several per item) on the CPU when jhash's native
  kernels are built (``jhash.native``): one call for every query (its memory is per
  query, not ``chunk x n``); it must return the same pytree.
  """

  def array_code(query, labels):
    q = setup.num_queries
    pad = (-q) % chunk

    def padded(x):
      return jnp.concatenate([x, jnp.repeat(x[:1], pad, axis=0)]) if pad else x

    qx = padded(query).reshape(-1, chunk, *query.shape[1:])
    ql = padded(labels).reshape(-1, chunk, *labels.shape[1:])

    def one(args):
      query, labels = args
      rel = _relevance.relevance_matrix(labels, corpus.db_labels, setup.relevance)
      return kernel(chunk_distances(corpus, setup, query), rel)

    out = lax.map(one, (qx, ql))
    return jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:])[:q], out)

  # Hamming distances are held in 16 bits by the kernels: codes up to 65,534 bits. No
  # queries: the array code's empty results (the kernels' label words need a query).
  if native_kernel is None or setup.num_bits > 65534 or setup.num_queries == 0:
    return array_code(corpus.query, corpus.query_labels)
  return native.on_cpu(native_kernel, array_code, corpus.query, corpus.query_labels)


def mean_defined(values: jax.Array, defined: jax.Array, rule: str) -> jax.Array:
  """Mean over queries; undefined ones count 0 ("zero") or are left out ("skip")."""
  if rule == "zero":
    return jnp.mean(jnp.where(defined, values, 0.0))
  if rule == "skip":
    total = jnp.sum(jnp.where(defined, values, 0.0))
    count = jnp.sum(defined)
    return jnp.where(count > 0, total / jnp.maximum(count, 1), jnp.nan)
  raise ValueError(f"no_relevant / empty must be 'zero' or 'skip'; got {rule!r}.")


def traced(*trees) -> bool:
  """True when any array of ``trees`` is a tracer (the metric runs inside jit / vmap)."""
  return any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(trees))


def host_mean(values: jax.Array, defined: jax.Array, rule: str, name: str) -> float | jax.Array:
  """``mean_defined`` as a Python float; with ``rule="skip"`` and no query defined it is
  NaN, and a ``RuntimeWarning`` says why (every query was left out). Inside jit / vmap
  (traced ``values``): the float32 scalar array, with no warning."""
  if traced(values, defined):
    return mean_defined(values, defined, rule)
  value = float(mean_defined(values, defined, rule))
  warn_nan(value, name, "no query has a relevant item", "no_relevant", stacklevel=4)
  warn_none_relevant(defined, name, rule, stacklevel=4)
  return value


def warn_none_relevant(defined, name: str, rule: str, stacklevel: int = 3) -> None:
  """A ``RuntimeWarning`` when ``rule="zero"`` scores a concrete result 0 because no query
  has a relevant item at all (``defined`` all False): most often labels of two kinds
  (0-based against 1-based ids, another label set), which a plain 0 would hide."""
  if rule != "zero" or traced(defined):
    return
  defined = np.asarray(defined)
  if defined.size and not defined.any():
    warnings.warn(
      f"{name} is 0: no query has a relevant item in the database, and no_relevant='zero' "
      "counts each such query as 0. Check that the query and database labels are of one "
      "kind (the same class ids or label columns); no_relevant='skip' gives NaN instead.",
      RuntimeWarning,
      stacklevel=stacklevel,
    )


def warn_nan(values, name: str, why: str, option: str, at=None, stacklevel: int = 3) -> None:
  """A ``RuntimeWarning`` when a concrete result holds NaN that ``option="skip"`` left:
  ``"{name} is NaN: {why}, and {option}='skip' leaves every query out ..."``.

  ``at``, for a curve some of whose entries are NaN: ``(label, values)``, the name and
  value of each entry (``("radius", radii)``), to name the NaN ones.
  """
  if traced(values):
    return
  nan = np.isnan(np.asarray(values, np.float64))
  if not nan.any():
    return
  where = ""
  if at is not None and not nan.all():
    labels = np.asarray(at[1])[nan].tolist()
    shown = ", ".join(map(str, labels[:8])) + (", ..." if len(labels) > 8 else "")
    where = f" at {at[0]} {shown}"
  warnings.warn(
    f"{name} is NaN{where}: {why}, and {option}='skip' leaves every query out ({option}='zero' "
    "counts each as 0).",
    RuntimeWarning,
    stacklevel=stacklevel,
  )


def _is_float(x) -> bool:
  """A floating array, bfloat16 and the float8 types (NumPy's opaque "V" kind) too."""
  dtype = _checks.dtype_of(x)
  return dtype.kind == "f" or (dtype.kind == "V" and dtype.name.startswith(("bfloat", "float")))


def check_relevance_values(relevance, name: str = "relevance") -> None:
  """Relevance for a metric of relevant / not relevant items: bool, integers >= 0 (non-zero
  is relevant; a negative one, as in a {-1, +1} similarity, is refused) or floats holding only 0 and 1 (concrete values checked): a float such as
  0.3 (a similarity, a soft label) is not read as relevant; graded relevance is NDCG's."""
  if not _checks.is_concrete(relevance):
    return
  if _checks.dtype_of(relevance).kind == "i":
    low = np.min(np.asarray(relevance), initial=0)
    if low < 0:
      raise ValueError(
        f"{name} must be bool, or integers >= 0 (non-zero is relevant); found {low} in "
        f"{_checks.describe(relevance)}. A {{-1, +1}} similarity S: pass S > 0."
      )
    return
  if not _is_float(relevance):
    return
  a = np.asarray(relevance, np.float32)
  bad = (a != 0) & (a != 1)
  if bad.any():
    raise ValueError(
      f"{name} must be bool (or 0 and 1) for relevant / not relevant; found "
      f"{', '.join(f'{v:g}' for v in np.unique(a[bad])[:5])} in {_checks.describe(relevance)}. "
      "Threshold a similarity first (relevance > t), or use ndcg for graded relevance."
    )


def check_chunk(distances, values, name: str) -> None:
  """A chunk kernel's distances and per-item values must be [q, n] arrays of one shape."""
  for value, what in ((distances, "distances"), (values, name)):
    if not (hasattr(value, "shape") and hasattr(value, "dtype")):
      raise ValueError(
        f"{what} must be an array (NumPy or JAX; np.asarray a list first); got "
        f"{_checks.describe(value)}."
      )
    dtype = np.dtype(value.dtype) if value.dtype != jnp.bfloat16 else np.dtype(np.float32)
    if dtype.kind not in "biuf":
      raise ValueError(f"{what} must hold real numbers; got {_checks.describe(value)}.")
  _checks.rank(distances, 2, "distances", "with shape [q, n]")
  if _checks.is_concrete(values) and _is_float(values):
    if np.isnan(np.asarray(values, np.float32)).any():
      raise ValueError(f"{name} must not be NaN; got {_checks.describe(values)} with NaN entries.")
  if tuple(np.shape(values)) != tuple(np.shape(distances)):
    raise ValueError(
      f"{name} must have the shape of distances {tuple(np.shape(distances))}; "
      f"got {tuple(np.shape(values))}."
    )


#: The largest ``max_distance`` (a code length in bits: distances are counted 0..D).
MAX_COUNTED_DISTANCE = 2**16


def _float32_keeps_order(d: np.ndarray) -> None:
  """float64 distances [q, n] whose float32 rounding (the kernels') overflows, or ties two
  distinct values of a row, change the ranking: refused."""
  with np.errstate(over="ignore"):
    rounded = d.astype(np.float32)
  if np.isinf(rounded).any() and not np.isinf(d[np.isinf(rounded)]).all():
    raise ValueError(
      f"distances overflow float32 (the kernels compare in float32); found {np.nanmax(d)} "
      "in float64 distances. Scale them down."
    )
  s = np.sort(d, axis=1)
  t = s.astype(np.float32)
  merged = (s[:, 1:] != s[:, :-1]) & (t[:, 1:] == t[:, :-1])
  if merged.any():
    row, col = np.argwhere(merged)[0]
    raise ValueError(
      f"distances: float32 (the kernels') cannot tell {float(s[row, col])!r} from "
      f"{float(s[row, col + 1])!r} (query {row}), so the ranking would change; round them to the "
      "precision that matters, or give float32 distances."
    )


def check_distances(distances, max_distance) -> None:
  """A chunk kernel's distances: at least one item, numbers (not bools); no negative or
  NaN value, integers within int32 and floats whose float32 rounding keeps their order and
  ties (checked when concrete; the kernels compare in int32 or float32); ``max_distance``
  None or an int in [0, ``MAX_COUNTED_DISTANCE``] with integer distances."""
  if np.shape(distances)[1] < 1:
    raise ValueError(
      f"distances must hold at least one database item; got shape {tuple(np.shape(distances))}."
    )
  dtype = _checks.dtype_of(distances)
  if dtype.kind == "b":
    raise ValueError(
      f"distances must be numbers (int32 Hamming distances or float32); got {_checks.describe(distances)}."
    )
  if max_distance is not None:
    if isinstance(max_distance, bool) or not isinstance(max_distance, (int, np.integer)):
      raise ValueError(f"max_distance must be None or an int >= 0; got {max_distance!r}.")
    if max_distance < 0 or not np.issubdtype(dtype, np.integer):
      raise ValueError(
        f"max_distance (an int >= 0) bounds integer distances; got {max_distance!r} with "
        f"distances of dtype {dtype}."
      )
    if max_distance > MAX_COUNTED_DISTANCE:
      raise ValueError(
        f"max_distance must be at most {MAX_COUNTED_DISTANCE:,} (a code length: distances "
        f"are counted 0..max_distance); got {max_distance!r}. Pass None for larger "
        "distances: they are grouped by sorting."
      )
    q = np.shape(distances)[0]
    if q * (max_distance + 2) * 2 > np.iinfo(np.int32).max:  # the counting's int32 bins
      raise ValueError(
        f"{q:,} queries at max_distance={max_distance} need {q * (max_distance + 2) * 2:,} "
        "counting bins, past int32: give the queries in chunks, or max_distance=None."
      )
  if _checks.is_concrete(distances):
    d = np.asarray(distances)
    d = d.astype(np.float32) if _is_float(d) and d.dtype.kind != "f" else d  # bfloat16
    if np.isnan(d).any() if d.dtype.kind == "f" else False:
      raise ValueError(f"distances must not be NaN; found {int(np.isnan(d).sum())} NaN.")
    if d.size and d.min() < 0:
      raise ValueError(
        f"distances must be >= 0; found {d.min()} in shape {d.shape}. A weighted Hamming "
        "distance with negative weights: subtract each row's minimum (the ranking and its "
        "ties are unchanged)."
      )
    if d.dtype.kind in "iu" and d.size and d.max() > np.iinfo(np.int32).max:
      raise ValueError(
        f"distances must fit in int32 (the kernels compare in int32); found {d.max()} in "
        f"{_checks.describe(d)}."
      )
    if d.dtype == np.float64:
      _float32_keeps_order(d)
    # Past max_distance only the no-code sentinel (``multi_code_hamming``'s largest int32).
    past = (d > max_distance) & (d != np.iinfo(np.int32).max) if max_distance is not None else None
    if past is not None and past.any():
      raise ValueError(
        f"distances must be <= max_distance={max_distance} (counting by distance drops "
        f"larger ones; the largest int32 marks an item holding no code); found "
        f"{d[past].max()} in shape {d.shape}."
      )


def check_choice(value, name: str, choices) -> None:
  if not isinstance(value, str) or value not in choices:
    shown = (
      repr(value) if isinstance(value, (str, int, float, type(None))) else _checks.describe(value)
    )
    raise ValueError(f"{name} must be one of {tuple(choices)}; got {shown}.")


jit_static = functools.partial(jax.jit, static_argnames=("setup", "chunk", "options"))
