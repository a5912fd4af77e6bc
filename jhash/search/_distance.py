"""Hamming distances between packed codes, and their real-weighted and multi-code forms.

Two ways to compute the same integer distances:

* ``"xor"``: XOR of the packed words and population count (``lax.population_count``);
  the fast form on CPUs, where it streams 32 bits per instruction.
* ``"matmul"``: unpack to {-1,+1} and use ``d = (K - <q, b>) / 2`` as a matrix product;
  exact in float32 for any K < 2**24, and the fast form where matrix units dominate
  (GPUs, TPUs).

``method="auto"`` picks ``"xor"`` on CPUs and GPUs, where it was measured faster
(on an H200 GPU the exact top-k over 1,000,000 codes ran at 108 billion codes/s
with XOR at 64 bits against 70 with the matrix product; ``benchmarks/RESULTS.md``),
and ``"matmul"`` on TPUs, whose matrix units are the fast path there (not yet
measured).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jhash import _checks
from jhash import codes as codes_lib


def hamming_one(query: jax.Array, item: jax.Array) -> jax.Array:
  """Hamming distance of one pair of packed codes: uint32 [W], [W] -> int32 [] (shapes
  checked, also under vmap; values not)."""
  if np.shape(query) != np.shape(item) or np.ndim(query) != 1:
    raise ValueError(
      "query and item must be one packed code each, uint32 [W] of the same W; got "
      f"{_checks.describe(query)} and {_checks.describe(item)} (vmap it over codes)."
    )
  for name, code in (("query", query), ("item", item)):
    if _checks.dtype_of(code) != np.uint32:
      raise ValueError(
        f"{name} must be a packed code of dtype uint32; got {_checks.describe(code)}."
      )
  return jnp.sum(lax.population_count(query ^ item).astype(jnp.int32))


def _xor_distances(query_packed: jax.Array, db_packed: jax.Array) -> jax.Array:
  # Written as one broadcast (not a nested vmap of hamming_one) so XLA fuses the
  # word loop; equal to vmap(vmap(hamming_one)).
  x = lax.population_count(query_packed[:, None, :] ^ db_packed[None, :, :])
  return jnp.sum(x.astype(jnp.int32), axis=-1)


def _matmul_distances(query_packed, db_packed, num_bits: int) -> jax.Array:
  q = codes_lib.unpack_bits(query_packed, num_bits).astype(jnp.float32)
  b = codes_lib.unpack_bits(db_packed, num_bits).astype(jnp.float32)
  dots = lax.dot_general(q, b, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
  return ((num_bits - dots) * 0.5).astype(jnp.int32)


def default_method() -> str:
  return "matmul" if jax.default_backend() == "tpu" else "xor"


def pairwise_hamming(
  query_packed: jax.Array, db_packed: jax.Array, num_bits: int | None = None, method: str = "auto"
) -> jax.Array:
  """All-pairs Hamming distances for use inside jit: shapes, dtypes and ``method`` are
  checked (they are static), values are not (``hamming_distance`` checks the padding
  bits of concrete codes too).

  Args:
    query_packed: uint32 [q, W].
    db_packed: uint32 [n, W].
    num_bits: code length K; needed by ``method="matmul"`` (defaults to 32 W, exact
      because padding bits are zero in both codes).
    method: "xor", "matmul" or "auto".
  Returns:
    int32 [q, n].
  """
  num_bits = check_pair_static(query_packed, db_packed, num_bits)
  return pairwise_unchecked(jnp.asarray(query_packed), jnp.asarray(db_packed), num_bits, method)


def pairwise_unchecked(query_packed, db_packed, num_bits=None, method="auto") -> jax.Array:
  """``pairwise_hamming`` without checks, for jhash's own kernels."""
  if method == "auto":
    method = default_method()
  if method == "xor":
    return _xor_distances(query_packed, db_packed)
  if method == "matmul":
    k = num_bits if num_bits is not None else codes_lib.WORD_BITS * query_packed.shape[-1]
    return _matmul_distances(query_packed, db_packed, k)
  raise ValueError(f"method must be 'auto', 'xor' or 'matmul'; got {method!r}.")


def check_num_bits(num_bits, words: int) -> int | None:
  """``num_bits`` (or None) as an int that fits ``words`` words per code."""
  if num_bits is None:
    return None
  num_bits = _checks.positive_int(num_bits, "num_bits")
  if codes_lib.num_words(num_bits) != words:
    raise ValueError(
      f"num_bits={num_bits} needs {codes_lib.num_words(num_bits)} words per code, "
      f"but the packed codes have {words}."
    )
  return num_bits


def check_pair_static(query_packed, db_packed, num_bits=None, method="auto") -> int | None:
  """What ``check_pair`` checks without reading values (safe on tracers)."""
  codes_lib.check_packed(query_packed, "query_packed")
  codes_lib.check_packed(db_packed, "db_packed")
  if query_packed.shape[1] != db_packed.shape[1]:
    raise ValueError(
      "query_packed and db_packed must have the same number of words per code; got "
      f"{query_packed.shape[1]} (shape {tuple(query_packed.shape)}) and "
      f"{db_packed.shape[1]} (shape {tuple(db_packed.shape)})."
    )
  if not isinstance(method, str) or method not in ("auto", "xor", "matmul"):
    raise ValueError(f"method must be 'auto', 'xor' or 'matmul'; got {method!r}.")
  return check_num_bits(num_bits, db_packed.shape[1])


def check_pair(query_packed, db_packed, num_bits=None, method="auto") -> int | None:
  """Packed query [q, W] and database [n, W] codes; returns the checked ``num_bits``.

  With ``num_bits`` given, concrete codes must have zero padding bits (past bit
  ``num_bits - 1``), as ``pack_bits`` makes them: set padding bits would count in
  every distance.
  """
  num_bits = check_pair_static(query_packed, db_packed, num_bits, method)
  if num_bits is not None:
    codes_lib.check_padding(query_packed, num_bits, "query_packed")
    codes_lib.check_padding(db_packed, num_bits, "db_packed")
  return num_bits


def hamming_distance(
  query_packed: jax.Array, db_packed: jax.Array, num_bits: int | None = None, method: str = "auto"
) -> jax.Array:
  """Hamming distances between packed query and database codes.

  ``d(q, b) = popcount(q XOR b)``, equal to ``(K - <q, b>) / 2`` for codes in {-1,+1}.

  Args:
    query_packed: uint32 [q, W] from ``jhash.codes.pack_bits``.
    db_packed: uint32 [n, W].
    num_bits: code length K. When given, bits past it must be zero in concrete
      codes (checked; they would count in the distance). None: K = 32 W, every bit
      counts.
    method: "auto" (by backend), "xor" or "matmul".
  Returns:
    int32 [q, n].
  """
  num_bits = check_pair(query_packed, db_packed, num_bits, method)
  return pairwise_unchecked(jnp.asarray(query_packed), jnp.asarray(db_packed), num_bits, method)


# Weighted Hamming distances are exact sums of integer weights: the real weights are
# rounded to multiples of one power of two, 2^-23 to 2^-22 of their summed magnitude, so
# every partial sum is an integer below 2^24 in magnitude (exact in float32 on every
# backend and in any order of summation) and two items tie exactly when their sums
# of rounded weights are equal.
UNIT_BITS = 23


def weight_units(weights: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Real bit weights as integers times one unit (jittable).

  ``unit = 2^(e - 23)`` with ``2^e`` the least power of two above ``sum_k |w_k|`` (so
  ``unit`` is 2^-23 to 2^-22 of it); ``units_k = round(w_k / unit)``. Dyadic weights of
  less than 23 bits' range (integers, multiples of 1/8) are kept exactly; any weight
  moves by at most half a unit, at most ``2^-23 sum_k |w_k|``.

  Args:
    weights: float [K].
  Returns:
    (units float32 [K], integer-valued with ``sum |units| < 2^23 + K``; unit float32 []).

  Example: ``sum |w| = 1.75``, below 2^1, so the unit is 2^(1 - 23); these weights are
  multiples of it and are kept exactly.

  >>> import numpy as np
  >>> from jhash import search
  >>> units, unit = search.weight_units(np.array([1.0, 0.5, -0.25], np.float32))
  >>> np.asarray(units).astype(int).tolist(), float(unit) == 2.0 ** -22
  ([4194304, 2097152, -1048576], True)
  """
  check_weights(weights)
  return units_unchecked(weights)


def check_weights(weights, num_bits: int | None = None) -> None:
  """Weights are real, finite (when concrete) and 1-D, one per bit when ``num_bits`` is given."""
  _checks.rank(weights, 1, "weights", "with shape [num_bits]")
  dtype = _checks.dtype_of(weights)
  if not (dtype.kind in "iuf" or dtype.name == "bfloat16"):
    raise ValueError(f"weights must be real numbers; got {_checks.describe(weights)}.")
  if num_bits is not None and np.shape(weights)[0] != num_bits:
    raise ValueError(
      f"weights must have one entry per bit ({num_bits}); got shape {tuple(np.shape(weights))}."
    )
  _checks.finite(weights, "weights")
  if _checks.is_concrete(weights):
    w = np.abs(np.asarray(weights, np.float64))
    tiny = float(np.finfo(np.float32).tiny)
    if ((w > 0) & (w < tiny)).any():
      raise ValueError(
        f"weights must be 0 or at least {tiny:.3g} in magnitude (float32's smallest normal "
        f"number: smaller ones lose their precision); found {w[(w > 0) & (w < tiny)].min():.3g}. "
        "Scale the weights up: the ranking does not change."
      )


def check_weighted(query_codes, db_codes, weights) -> None:
  """Codes in {-1,+1}, query [q, K] and database [n, K], and K real weights."""
  _checks.signed_codes(query_codes, "query_codes")
  _checks.signed_codes(db_codes, "db_codes", num_bits=np.shape(query_codes)[1])
  check_weights(weights, np.shape(query_codes)[1])
  if _checks.is_concrete(weights):
    total = float(np.sum(np.abs(np.asarray(weights, np.float64))))
    if total > float(np.finfo(np.float32).max):
      raise ValueError(
        f"weights: the sum of |weights| must be finite in float32 (a distance can reach it); "
        f"got {total:.3g}. Scale the weights down: the ranking does not change."
      )


def units_unchecked(weights: jax.Array) -> tuple[jax.Array, jax.Array]:
  """``weight_units`` without checks, for jhash's own kernels."""
  w = jnp.asarray(weights, jnp.float32)
  # The exponent of sum |w|, summed after scaling by the largest weight (no overflow
  # for weights near float32's largest).
  _, top = jnp.frexp(jnp.max(jnp.abs(w), initial=0.0))
  _, exponent = jnp.frexp(jnp.sum(jnp.ldexp(jnp.abs(w), -top)))
  exponent = exponent + top
  # Scaled by ldexp, not divided by the unit: the unit of tiny weights may underflow.
  return (
    jnp.round(jnp.ldexp(w, UNIT_BITS - exponent)),
    jnp.ldexp(jnp.float32(1), exponent - UNIT_BITS),
  )


def weighted_units_distance(
  query_codes: jax.Array, db_codes: jax.Array, units: jax.Array
) -> jax.Array:
  """Weighted Hamming distances in weight units, exact: float32 [q, n], integer-valued.

  Args:
    query_codes: [q, K] in {-1,+1}.
    db_codes: [n, K] in {-1,+1}.
    units: float32 [K] from ``weight_units``.
  """
  q = jnp.asarray(query_codes, jnp.float32)
  b = jnp.asarray(db_codes, jnp.float32)
  dots = jnp.einsum("qk,nk->qn", q * units[None, :], b, precision=lax.Precision.HIGHEST)
  return 0.5 * (jnp.sum(units) - dots)


def weighted_hamming_distance(
  query_codes: jax.Array, db_codes: jax.Array, weights: jax.Array
) -> jax.Array:
  """Weighted Hamming distance ``sum_k w_k [q_k != b_k]`` (HBMP's retrieval).

  Summed exactly over the weights rounded to ``weight_units`` (error at most
  ``K 2^-23 sum_k |w_k|``; none for dyadic weights such as integers or
  multiples of 1/8), so equal sums tie exactly on every backend: the distance that
  ``weighted_hamming_topk`` and the metrics' ``weights=`` rank by.

  Args:
    query_codes: [q, K] in {-1,+1}.
    db_codes: [n, K] in {-1,+1}.
    weights: float [K], one real weight per bit (may be negative); ``sum |w|`` must be
      finite in float32 (else a ValueError).
  Returns:
    float32 [q, n].
  """
  check_weighted(query_codes, db_codes, weights)
  units, unit = units_unchecked(weights)
  return weighted_units_distance(query_codes, db_codes, units) * unit


def multi_code_hamming(
  query_packed: jax.Array,
  db_packed: jax.Array,
  db_mask: jax.Array,
  num_bits: int | None = None,
  method: str = "auto",
) -> jax.Array:
  """Distance to items holding several codes: the minimum over each item's valid codes.

  Args:
    query_packed: uint32 [q, W].
    db_packed: uint32 [n, m, W], up to m codes per item.
    db_mask: bool [n, m], True for the codes an item holds (at least one per item).
    num_bits: code length K.
    method: as in ``hamming_distance``.
  Returns:
    int32 [q, n]: ``min_{c : mask[i, c]} d(q, db[i, c])`` (a large value for an
    item with no valid code).
  """
  num_bits = check_multi(query_packed, db_packed, db_mask, num_bits)
  if not isinstance(method, str) or method not in ("auto", "xor", "matmul"):
    raise ValueError(f"method must be 'auto', 'xor' or 'matmul'; got {method!r}.")
  return multi_unchecked(
    jnp.asarray(query_packed), jnp.asarray(db_packed), jnp.asarray(db_mask), num_bits, method
  )


def multi_unchecked(query_packed, db_packed, db_mask, num_bits=None, method="auto"):
  """``multi_code_hamming`` without checks, for jhash's own kernels."""
  n, m, w = db_packed.shape
  flat = pairwise_unchecked(query_packed, db_packed.reshape(n * m, w), num_bits, method)
  flat = jnp.where(db_mask.reshape(1, n * m), flat, jnp.iinfo(jnp.int32).max)
  return jnp.min(flat.reshape(query_packed.shape[0], n, m), axis=-1)


def check_multi(query_packed, db_packed, db_mask, num_bits=None) -> int | None:
  """Queries uint32 [q, W], items' codes uint32 [n, m, W] and their mask bool [n, m] with
  a valid code per item (when concrete); returns the checked ``num_bits``."""
  codes_lib.check_packed(query_packed, "query_packed")
  _checks.rank(db_packed, 3, "db_packed", "with shape [n, codes_per_item, words]")
  if _checks.dtype_of(db_packed) != np.uint32:
    raise ValueError(
      f"db_packed must be packed codes of dtype uint32; got {_checks.describe(db_packed)}."
    )
  if db_packed.shape[2] != query_packed.shape[1]:
    raise ValueError(
      "query_packed and db_packed must have the same number of words per code; "
      f"got {query_packed.shape[1]} and {db_packed.shape[2]} "
      f"(db_packed shape {tuple(db_packed.shape)})."
    )
  _checks.rank(db_mask, 2, "db_mask", "with shape [n, codes_per_item]")
  if tuple(np.shape(db_mask)) != tuple(db_packed.shape[:2]):
    raise ValueError(
      f"db_mask must have shape {tuple(db_packed.shape[:2])} (db_packed's [n, m]); "
      f"got {_checks.describe(db_mask)}."
    )
  if _checks.dtype_of(db_mask) != np.bool_:
    raise ValueError(f"db_mask must be boolean; got {_checks.describe(db_mask)}.")
  if _checks.is_concrete(db_mask):
    empty = ~np.asarray(db_mask).any(axis=1)
    if empty.any():
      raise ValueError(
        f"db_mask must mark at least one valid code per item; {int(empty.sum())} "
        f"items have none (first: item {int(np.argmax(empty))})."
      )
  num_bits = check_num_bits(num_bits, db_packed.shape[2])
  if num_bits is not None:
    codes_lib.check_padding(query_packed, num_bits, "query_packed")
    codes_lib.check_padding(db_packed, num_bits, "db_packed")
  return num_bits
