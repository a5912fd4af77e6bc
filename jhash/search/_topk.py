"""Exact top-k search by Hamming distance: plain, weighted and multi-code, public API.

Results are the ``k`` database items with the smallest distance, sorted by
``(distance, database index)``: ties always go to the smaller index. The
selection algorithm (block minima, exact, no data-dependent branch) and why it
was chosen are in ``_blockmin``; the distance kernels in ``_kernels``.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jhash import _checks
from jhash import codes as codes_lib
from jhash.search import _distance
from jhash.search import _blockmin
from jhash.search import _kernels
from jhash.search import _native_topk
from jhash import native


def hamming_topk_unchecked(
  query_packed: jax.Array,
  db_packed: jax.Array,
  k: int,
  num_bits: int | None = None,
  query_chunk: int = _blockmin.DEFAULT_QUERY_CHUNK,
  db_block: int = _blockmin.DEFAULT_DB_BLOCK,
  method: str = "auto",
  num_valid=None,
) -> tuple[jax.Array, jax.Array]:
  """``hamming_topk`` without input checks, to compose inside jit (all sizes static).

  ``num_valid`` (optional, may be traced) marks rows at index >= num_valid as padding,
  returned only after every real row (at distance num_bits + 1; ``_blockmin.select``): a
  concrete one must be in [k, n]; a traced one below k returns padding rows last.
  """
  check_static(query_packed, db_packed, k, num_bits=num_bits, chunks=(query_chunk, db_block))
  _check_num_valid(num_valid, k, np.shape(db_packed)[0])
  w = query_packed.shape[-1]
  num_bits = codes_lib.WORD_BITS * w if num_bits is None else num_bits
  if method == "auto" and query_packed.shape[0] and native.enabled():

    def by_kernel(qp, dp, valid):
      return _native_topk.topk(qp, dp, k, num_bits, valid)

    def array_code(qp, dp, valid):
      return hamming_topk_unchecked(
        qp, dp, k, num_bits, query_chunk, db_block, _distance.default_method(), valid
      )

    valid = jnp.asarray(db_packed.shape[0] if num_valid is None else num_valid, jnp.int32)
    return native.on_cpu(by_kernel, array_code, query_packed, db_packed, valid)
  if method == "auto":
    method = _distance.default_method()
  if method == "native":
    check_method(method)  # a clear error where the kernels are not built
    return _native_topk.topk(query_packed, db_packed, k, num_bits, num_valid)
  if method == "xor" and w <= _kernels.MAX_UNROLLED_WORDS:
    layout, minima = _kernels.xor_layout, _kernels.xor_block_minima
  elif method == "xor":
    layout, minima = _kernels.compact_layout, _kernels.xor_compact_minima
  elif method == "matmul":
    layout, minima = _kernels.matmul_layout, _kernels.matmul_block_minima
  else:
    raise ValueError(f"method must be 'auto', 'native', 'xor' or 'matmul'; got {method!r}.")
  return _blockmin.select(
    query_packed,
    db_packed,
    k,
    layout=layout,
    block_minima=minima,
    candidate_distances=_kernels.xor_candidates,
    sentinel=np.int32(num_bits + 1),
    num_valid=num_valid,
    query_chunk=query_chunk,
    db_block=db_block,
  )


def check_static(
  query, db, k, what: str = "words", num_bits=None, db_rank: int = 2, chunks=None
) -> None:
  """The static facts an ``*_unchecked`` search needs (shapes and dtypes only, free under
  jit): the database ``db_rank``-D ([n, W], or [n, m, W] for several codes an item), ``k``
  an int in [1, n], the query's last axis (``what``) equal to the database's; packed codes
  (``what="words"``) uint32, with ``num_bits`` (when given) fitting their words;
  ``chunks`` (``query_chunk``, ``db_block``) ints >= 1."""
  name = "db_packed" if what == "words" else "db_codes"
  if np.ndim(db) != db_rank:
    last = "W] (W words a code" if what == "words" else "K] (K bits a code"
    layout = f"[n, {last})" if db_rank == 2 else f"[n, m, {last}, m codes an item)"
    raise ValueError(f"{name} must be {db_rank}-D, {layout}; got {_checks.describe(db)}.")
  for value, label in zip(chunks or (), ("query_chunk", "db_block")):
    _checks.positive_int(value, label)
  n = np.shape(db)[0]
  if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n:
    raise ValueError(f"k must be an int in [1, n]; got {k!r} with a database of {n} items.")
  if np.ndim(query) != 2 or np.shape(query)[-1] != np.shape(db)[-1]:
    raise ValueError(
      f"query and database must have the same number of {what} per code (the last axis); "
      f"got shapes {tuple(np.shape(query))} and {tuple(np.shape(db))}."
    )
  if np.shape(query)[-1] < 1:
    raise ValueError(
      f"query and database must have at least one {what[:-1]} per code (a code has "
      f"num_bits >= 1); got shapes {tuple(np.shape(query))} and {tuple(np.shape(db))}."
    )
  if what != "words":
    return
  for x, name in ((query, "query_packed"), (db, "db_packed")):
    if _checks.dtype_of(x) != np.uint32:
      raise ValueError(f"{name} must be packed codes of dtype uint32; got {_checks.describe(x)}.")
  if num_bits is not None:
    w = np.shape(query)[-1]
    low, high = codes_lib.WORD_BITS * (w - 1) + 1, codes_lib.WORD_BITS * w
    if (
      isinstance(num_bits, bool)
      or not isinstance(num_bits, (int, np.integer))
      or not (low <= num_bits <= high)
    ):
      raise ValueError(
        f"num_bits must be an int in [{low}, {high}] for codes of {w} words; got {num_bits!r}."
      )


def _check_num_valid(num_valid, k: int, n: int) -> None:
  """A concrete ``num_valid``: an int in [k, n] (fewer real rows than k would return padding
  rows); a traced one is not checked."""
  if num_valid is None or isinstance(num_valid, jax.core.Tracer):
    return
  if np.ndim(num_valid) or not np.issubdtype(np.asarray(num_valid).dtype, np.integer):
    raise ValueError(
      f"num_valid must be an int (the real rows); got {_checks.describe(num_valid)}."
    )
  if not k <= int(num_valid) <= n:
    raise ValueError(
      f"num_valid must be an int in [k, n] = [{k}, {n}] (the database's real rows; fewer "
      f"than k would return padding rows); got {int(num_valid)}."
    )


_STATIC = ("k", "num_bits", "query_chunk", "db_block", "method")
_hamming_topk_jit = jax.jit(hamming_topk_unchecked, static_argnames=_STATIC)


def check_topk_args(k, n: int, query_chunk, db_block, name_n: str = "db_packed") -> int:
  """Validate ``k`` against the database size and the chunk sizes; returns k as an int."""
  k = _checks.positive_int(k, "k")
  if k > n:
    raise ValueError(f"k must be at most the database size ({name_n} has {n} rows); got k={k}.")
  _checks.positive_int(query_chunk, "query_chunk")
  _checks.positive_int(db_block, "db_block")
  return k


def check_method(method) -> str:
  if method not in ("auto", "native", "xor", "matmul"):
    raise ValueError(f"method must be 'auto', 'native', 'xor' or 'matmul'; got {method!r}.")
  if method == "native" and not native.enabled():
    raise ValueError(
      "method='native' needs jhash's native CPU kernels, which are not built "
      "here (see jhash.native; JHASH_NATIVE=0 turns them off)."
    )
  return method


def hamming_topk(
  query_packed: jax.Array,
  db_packed: jax.Array,
  k: int,
  *,
  num_bits: int | None = None,
  query_chunk: int = _blockmin.DEFAULT_QUERY_CHUNK,
  db_block: int = _blockmin.DEFAULT_DB_BLOCK,
  method: str = "auto",
) -> tuple[jax.Array, jax.Array]:
  """Exact k nearest database codes of each query by Hamming distance.

  Sorted by ``(distance, database index)``: ties always go to the smaller index.
  Memory is bounded by the chunk sizes (about ``query_chunk * 32768`` minima and
  a ``query_chunk x k x 32`` candidate set at a time), never ``[q, n]``.

  Args:
    query_packed: uint32 [q, W] packed codes (``jhash.codes.pack_bits``).
    db_packed: uint32 [n, W] packed codes.
    k: number of neighbours, ``1 <= k <= n``.
    num_bits: code length K (defaults to 32 W; bounds the distances). When given,
      bits past it must be zero in concrete codes (checked: they would count in
      every distance). Without it every bit of the words is part of the code, so set
      padding bits count in the distances and cannot be told from code bits: pass
      ``num_bits`` for codes whose length is not a multiple of 32.
    query_chunk: queries processed together (``benchmarks/bench_topk.py`` compares
      values).
    db_block: database items per block of the fused pass; blocks are whole
      256-item super-blocks, sized near this value with the least padding.
    method: "auto" (on the CPU, the native kernel of ``jhash.native`` when it is
      built: one pass per block of queries over XLA's thread pool; elsewhere the
      array code with the distance form of the backend), "native" (the CPU
      kernel), or the array code with distances by "xor" or "matmul" (see
      ``hamming_distance``; "matmul" is for accelerators, slow on a CPU). All
      give the same result.
  Returns:
    distances int32 [q, k] and indices int32 [q, k].

  Example: 1,000 random 64-bit codes, the first three as queries; each finds
  itself first, at distance 0.

  >>> import jax
  >>> import jax.numpy as jnp
  >>> from jhash import codes, search
  >>> signs = jnp.where(jax.random.bernoulli(jax.random.key(0), 0.5, (1000, 64)), 1, -1)
  >>> db = codes.pack_bits(signs)  # uint32 [1000, 2]
  >>> dist, idx = search.hamming_topk(db[:3], db, k=5, num_bits=64)
  >>> dist.shape, idx.shape
  ((3, 5), (3, 5))
  >>> idx[:, 0], dist[:, 0]
  (Array([0, 1, 2], dtype=int32), Array([0, 0, 0], dtype=int32))
  """
  num_bits = _distance.check_pair(query_packed, db_packed, num_bits)
  k = check_topk_args(k, db_packed.shape[0], query_chunk, db_block)
  return _hamming_topk_jit(
    jnp.asarray(query_packed),
    jnp.asarray(db_packed),
    k=k,
    num_bits=num_bits,
    query_chunk=int(query_chunk),
    db_block=int(db_block),
    method=check_method(method),
  )


# ----------------------------------------------------------------------------------------------
# Weighted Hamming distance.


def weighted_hamming_topk_unchecked(
  query_codes: jax.Array,
  db_codes: jax.Array,
  weights: jax.Array,
  k: int,
  query_chunk: int = _blockmin.DEFAULT_QUERY_CHUNK,
  db_block: int = _blockmin.DEFAULT_DB_BLOCK,
):
  """``weighted_hamming_topk`` without input checks (for use inside jit). On the CPU, the
  native kernel (``jhash.native``; the same results)."""
  check_static(query_codes, db_codes, k, "bits", chunks=(query_chunk, db_block))
  if np.shape(weights) != np.shape(query_codes)[-1:]:
    raise ValueError(
      f"weights must have one entry per bit, shape ({np.shape(query_codes)[-1]},); got "
      f"{tuple(np.shape(weights))}."
    )
  units, unit = _distance.units_unchecked(weights)

  def kernel(qc, dc, units):
    d, i = _native_topk.weighted_topk(codes_lib.pack_bits(qc), codes_lib.pack_bits(dc), units, k)
    return d.astype(jnp.float32), i

  def array_code(qc, dc, units):
    return _weighted_topk_array(qc, dc, units, k, query_chunk, db_block)

  if jnp.shape(query_codes)[0] == 0:
    d, i = array_code(query_codes, db_codes, units)
  else:
    d, i = native.on_cpu(kernel, array_code, jnp.asarray(query_codes), jnp.asarray(db_codes), units)
  return d * unit, i


def _weighted_topk_array(query_codes, db_codes, units, k, query_chunk, db_block):
  """The array code of ``weighted_hamming_topk_unchecked``: distances in weight units
  (float32, integer-valued, exact below 2^24) and indices."""
  total = jnp.sum(units)
  qw = jnp.asarray(query_codes, jnp.float32) * units[None, :]
  hi = lax.Precision.HIGHEST

  def layout(padded, num_blocks, block):
    return padded.reshape(num_blocks, block, padded.shape[1])

  def block_minima(qc, blk):
    d = 0.5 * (total - jnp.einsum("qk,nk->qn", qc, blk.astype(jnp.float32), precision=hi))
    return jnp.min(d.reshape(qc.shape[0], -1, _blockmin.SUB_BLOCK), axis=-1)

  def candidates(qc, cand):
    return 0.5 * (total - jnp.einsum("qk,qgsk->qgs", qc, cand.astype(jnp.float32), precision=hi))

  return _blockmin.select(
    qw,
    jnp.asarray(db_codes),
    k,
    layout=layout,
    block_minima=block_minima,
    candidate_distances=candidates,
    sentinel=np.float32(np.inf),
    query_chunk=query_chunk,
    db_block=db_block,
  )


_weighted_jit = jax.jit(
  weighted_hamming_topk_unchecked, static_argnames=("k", "query_chunk", "db_block")
)


def weighted_hamming_topk(
  query_codes: jax.Array,
  db_codes: jax.Array,
  weights: jax.Array,
  k: int,
  *,
  query_chunk: int = _blockmin.DEFAULT_QUERY_CHUNK,
  db_block: int = _blockmin.DEFAULT_DB_BLOCK,
) -> tuple[jax.Array, jax.Array]:
  """Exact k smallest weighted Hamming distances ``sum_k w_k [q_k != b_k]``.

  The distance is ``weighted_hamming_distance``'s: an exact sum of the weights rounded
  to ``weight_units`` (ties are exact: equal sums of rounded weights); weights may be
  negative. Sorted by (distance, index), ties to the smaller index. On the CPU a
  native kernel (``jhash.native``), elsewhere the array code; the same results.

  Args:
    query_codes: [q, K] in {-1,+1}.
    db_codes: [n, K] in {-1,+1} (int8 keeps the database small).
    weights: float [K], finite, with ``sum |w|`` finite in float32 (else a ValueError).
    k: ``1 <= k <= n``.
    query_chunk, db_block: as in ``hamming_topk``.
  Returns:
    distances float32 [q, k] and indices int32 [q, k].
  """
  _distance.check_weighted(query_codes, db_codes, weights)
  k = check_topk_args(k, np.shape(db_codes)[0], query_chunk, db_block, "db_codes")
  return _weighted_jit(
    jnp.asarray(query_codes),
    jnp.asarray(db_codes),
    jnp.asarray(weights),
    k=k,
    query_chunk=int(query_chunk),
    db_block=int(db_block),
  )


# ----------------------------------------------------------------------------------------------
# Items holding several codes.


def multi_code_topk_unchecked(
  query_packed: jax.Array,
  db_packed: jax.Array,
  db_mask: jax.Array,
  k: int,
  num_bits: int | None = None,
  query_chunk: int = _blockmin.DEFAULT_QUERY_CHUNK,
  db_block: int = _blockmin.DEFAULT_DB_BLOCK,
):
  """``multi_code_topk`` without input checks (for use inside jit). On the CPU, the
  native kernel (``jhash.native``; the same results)."""
  check_static(
    query_packed, db_packed, k, num_bits=num_bits, db_rank=3, chunks=(query_chunk, db_block)
  )
  if np.ndim(db_packed) != 3 or np.shape(db_mask) != np.shape(db_packed)[:2]:
    raise ValueError(
      f"db_packed must be [n, m, W] and db_mask [n, m]; got shapes "
      f"{tuple(np.shape(db_packed))} and {tuple(np.shape(db_mask))}."
    )
  if _checks.dtype_of(db_mask) != np.bool_:
    raise ValueError(f"db_mask must be boolean; got {_checks.describe(db_mask)}.")
  w = query_packed.shape[-1]
  num_bits = codes_lib.WORD_BITS * w if num_bits is None else num_bits

  def kernel(qp, dp, mask):
    return _native_topk.topk(qp, dp, k, num_bits, db_mask=mask)

  def array_code(qp, dp, mask):
    return _multi_code_topk_array(qp, dp, mask, k, num_bits, query_chunk, db_block)

  return native.on_cpu(kernel, array_code, query_packed, db_packed, db_mask)


def _multi_code_topk_array(query_packed, db_packed, db_mask, k, num_bits, query_chunk, db_block):
  """The array code of ``multi_code_topk_unchecked`` (any backend)."""
  m, w = db_packed.shape[1], db_packed.shape[2]
  far = jnp.int32(num_bits + 1)

  unrolled = m * w <= _kernels.MAX_UNROLLED_WORDS
  arrange = _kernels.lanes_layout if unrolled else _kernels.compact_layout

  def layout(padded, num_blocks, block):
    # [T, m, W, (block / 256, 32, 8) or (block / 32, 32)] and the mask likewise.
    codes, mask = padded
    return arrange(codes, num_blocks, block), arrange(mask, num_blocks, block)

  def item(qc, blk, s):
    codes, mask = blk
    d = None
    for j in range(m):
      dj = jnp.where(mask[j, :, s][None], _kernels.xor_item(qc, codes[j], s), far)
      d = dj if d is None else jnp.minimum(d, dj)
    return d

  def block_minima(qc, blk):
    if not unrolled:
      codes, mask = blk
      d = None
      for j in range(m):
        dj = jnp.where(mask[j][None], _kernels.xor_compact_distances(qc, codes[j]), far)
        d = dj if d is None else jnp.minimum(d, dj)
      return jnp.min(d, axis=-1)
    d = item(qc, blk, 0)
    for s in range(1, _blockmin.SUB_BLOCK):
      d = jnp.minimum(d, item(qc, blk, s))
    return d.reshape(qc.shape[0], -1)

  def candidates(qc, cand):
    codes, mask = cand  # [c, G, 32, m, W], [c, G, 32, m]
    x = lax.population_count(qc[:, None, None, None, :] ^ codes).astype(jnp.int32)
    return jnp.min(jnp.where(mask, jnp.sum(x, axis=-1), far), axis=-1)

  return _blockmin.select(
    query_packed,
    (db_packed, db_mask),
    k,
    layout=layout,
    block_minima=block_minima,
    candidate_distances=candidates,
    sentinel=np.int32(num_bits + 1),
    query_chunk=query_chunk,
    db_block=db_block,
  )


_multi_jit = jax.jit(
  multi_code_topk_unchecked, static_argnames=("k", "num_bits", "query_chunk", "db_block")
)


def multi_code_topk(
  query_packed: jax.Array,
  db_packed: jax.Array,
  db_mask: jax.Array,
  k: int,
  *,
  num_bits: int | None = None,
  query_chunk: int = _blockmin.DEFAULT_QUERY_CHUNK,
  db_block: int = _blockmin.DEFAULT_DB_BLOCK,
) -> tuple[jax.Array, jax.Array]:
  """Exact k nearest items when each item holds up to m codes.

  The distance of an item is the minimum Hamming distance over its valid codes
  (``multi_code_hamming``); each item is returned once; sorted by (distance,
  item index), ties to the smaller index. On the CPU a native kernel does it in
  one pass (``jhash.native``; the same results as the array code).

  Args:
    query_packed: uint32 [q, W].
    db_packed: uint32 [n, m, W].
    db_mask: bool [n, m], True for the codes an item holds; every item needs one.
    k: ``1 <= k <= n``.
    num_bits, query_chunk, db_block: as in ``hamming_topk``.
  Returns:
    distances int32 [q, k] and item indices int32 [q, k].
  """
  num_bits = _distance.check_multi(query_packed, db_packed, db_mask, num_bits)
  k = check_topk_args(k, db_packed.shape[0], query_chunk, db_block)
  return _multi_jit(
    jnp.asarray(query_packed),
    jnp.asarray(db_packed),
    jnp.asarray(db_mask),
    k=k,
    num_bits=num_bits,
    query_chunk=int(query_chunk),
    db_block=int(db_block),
  )
