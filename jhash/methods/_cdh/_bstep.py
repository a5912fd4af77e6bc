"""CDH's B-step: coordinate discrete ascent on the code matrix, one bit at a time.

Bit ``k`` of the objective ("Coordinate Discrete Optimization for Efficient
Cross-View Image Retrieval", IJCAI 2016, Eqn. (8))
is, up to a constant, the binary quadratic program

    J_k(x) = (1/n^2) x^T A x + (gamma/n) Z^T x,   x in {-1, +1}^n,

    exponential merit:  A_ij = sinh(Y_ij/K) exp(-Y_ij p_ij^{-k}),
    linear merit:       A_ij = Y_ij / K,                  A_ii = 0,

with ``p^{-k} = (B B^T - B_k B_k^T) / K`` the leave-one-out code products and
``Z`` the generative linear term (``_encode.generative_terms``). Changing only
column ``k`` of ``B`` changes the full objective ``J`` by exactly the change of
``J_k``.

How the work is organised (``n`` items, ``K`` bits):

* The Gram ``G = B B^T`` is computed once per sweep and kept exactly, in int8
  (int16 when ``K > 127``): ``K p_ij`` is an integer, so ``A`` follows from ``G``,
  ``Y`` and the current column, with no drift. When column ``k`` changes from
  ``old`` to ``new``, ``G += new new^T - old old^T``. That rank-one update is
  applied lazily, inside the next bit's pass over ``G`` (one read and one write of
  each row block), and the last bit's update of a sweep is never needed.
* ``A`` is never stored. ``A b`` is formed row block by row block (``block_rows``
  rows at a time) from ``G``, ``Y``'s rows (computed from labels) and ``b``: one
  pass over ``G`` per bit.
* Inner updates of a bit (gradient, active set ``I``, Algorithm 2, flip) do not
  need another pass: ``A`` is fixed while only column ``k`` moves, and flipping
  ``F`` changes ``A b`` by ``A d`` with ``d`` supported on ``F``, formed from the
  ``|F|`` rows of ``A`` (``O(n |F|)``). Algorithm 2 runs on ``M`` restricted to
  ``I`` (compacted to a static size ``S >= |I|`` taken from a short list of
  sizes, ``lax.switch``) and forms the row of each item it adds from its row of
  ``G`` (``O(S)``).

Memory: ``G`` (``n^2`` bytes) and ``Y`` when given explicitly (``n^2`` bytes),
plus ``O(n)``-row blocks: well under ``3 x 4 n^2`` bytes. A
chunk of the data is just a call on a subset of rows (``codes``, ``z`` and
``Supervision`` restricted to it: ``_chunks``); the passes are loops over row
blocks, so the ``n x n`` work splits by rows: with ``sweep(..., mesh=...)`` the
rows of ``G`` are split over the devices of a 1-D mesh (``_shard``), giving
the same codes as one device.

Matrix-free (``sweep(..., matrix_free=True)``; the method's ``chunk_size=None``): no
``G`` is stored. Every entry of ``K p^{-k}`` the bit needs is recomputed from the
codes as ``B'[rows] B'^T``, ``B'`` = ``B`` with column ``k`` zero (``FromCodes``;
sums of ``K`` terms in {-1, 0, 1}, exact in float32): each block of the pass forming
``A b`` (``O(block_rows K n)``), the rows of ``A`` of the flipped items
(``O(|F| K n)``) and Algorithm 2's rows among ``I`` (``O(S K)`` per added item).
``loo_rows`` / ``loo_among`` give those entries from ``G`` or from ``B``, so the two
modes share every other step and the values of ``A`` are the same: the codes are
those of the Gram, bit for bit. Memory is ``O(block_rows n + n K)`` (no ``n x n``
array, ``Y`` from labels); time ``O(n^2 K)`` per bit, ``O(n^2 K^2)`` per sweep, against
``O(n^2)`` per bit with ``G`` (the linear merit never needs ``G``: both modes are
one). The products are matrix products, cheap next to the ``exp`` of every entry: at
n = 10,000, K = 32 (class labels, 16 inner updates) a sweep took 26 s against 12-15 s
with ``G`` (2 busy CPU cores), in 4.3 MB of temporaries against 112 MB. With a mesh,
each device forms its rows of ``A b`` from the replicated codes; rows of ``A`` need
no exchange.
"""

from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from jhash import _checks
from jhash.methods._cdh import _active_set
from jhash.methods._cdh import _shard
from jhash.methods._cdh import _supervision as sv
from jhash.methods._cdh._shard import RowShard
from jhash.methods._cdh._loo import ONE_DEVICE as ONE_DEVICE
from jhash.methods._cdh._loo import FromCodes as FromCodes
from jhash.methods._cdh._loo import Source as Source
from jhash.methods._cdh._loo import for_row_blocks as for_row_blocks
from jhash.methods._cdh._loo import from_codes as from_codes
from jhash.methods._cdh._loo import gram as gram
from jhash.methods._cdh._loo import gram_dtype as gram_dtype
from jhash.methods._cdh._loo import loo_among as loo_among
from jhash.methods._cdh._loo import loo_rows as loo_rows


MERITS = ("exponential", "linear")


class BitStats(NamedTuple):
  """What happened to one bit (stacked to ``[K]`` by a sweep)."""

  active: jax.Array  # int32 [], |I| at the bit's first inner update
  flipped: jax.Array  # int32 [], sum of |F| over the bit's inner updates
  inner_steps: jax.Array  # int32 [], inner updates run
  converged: jax.Array  # bool [], the active set ended empty (a fixed point)
  objective_before: jax.Array  # float32 [], J_k(B_k) before the bit's update
  objective: jax.Array  # float32 [], J_k(B_k) after


class SweepCarry(NamedTuple):
  """State carried from bit to bit within a sweep."""

  codes: jax.Array  # int8 [n, K], B
  gram: jax.Array | None  # int8/int16 [r, n], rows of B B^T held here (r = n on one
  #   device), before the pending update; None: no Gram (the linear merit, or the
  #   matrix-free mode: ``K p^{-k}`` recomputed from ``codes``)
  pending_new: jax.Array  # int8 [n], column last changed, its new value (0: none)
  pending_old: jax.Array  # int8 [n], ... and its old value


def check_merit(merit, name: str = "merit") -> None:
  """``merit``: one of ``MERITS`` (a ValueError naming ``name``; a typo is not the other)."""
  if not isinstance(merit, str) or merit not in MERITS:
    raise ValueError(f"{name} must be one of {MERITS}; got {merit!r}.")


def pair_weights(y: jax.Array, loo: jax.Array, num_bits: int, merit: str) -> jax.Array:
  """Entries of ``A`` from entries of ``Y`` and of ``K p^{-k}`` (any shape, float32).

  ``sinh(Y/K) = Y sinh(1/K)`` for ``Y`` in {-1, 0, 1}.
  """
  if merit == "linear":
    return y * (1.0 / num_bits)
  return y * (math.sinh(1.0 / num_bits) * jnp.exp(y * loo * (-1.0 / num_bits)))


def _zero_diagonal(a: jax.Array, rows: jax.Array) -> jax.Array:
  cols = jnp.arange(a.shape[1])
  return jnp.where(rows[:, None] == cols[None, :], jnp.float32(0), a)


def a_times_b(
  carry: SweepCarry,
  b0: jax.Array,
  sup: sv.Supervision,
  num_bits: int,
  merit: str,
  block_rows: int,
  shard: RowShard = ONE_DEVICE,
  source: FromCodes | None = None,
) -> tuple[jax.Array | None, jax.Array]:
  """One pass: apply the pending rank-one update to ``G`` and form ``A b``.

  Args:
    carry: the sweep carry (its ``gram`` is updated in place, block by block).
    b0: float32 [n], the bit ``k`` as it is in ``G`` (its value at the bit's start).
    shard: which rows of ``G`` this device holds (its rows of ``A b`` are formed
      here, then gathered).
    source: the bit's ``FromCodes`` in the matrix-free mode (``carry.gram`` is None):
      each block's ``K p^{-k}`` is recomputed from the codes. None: read from ``G``.
  Returns:
    (updated gram, ``A b0`` float32 [n]).
  """
  n = b0.shape[0]
  mine = _shard.local_rows(shard, n)

  def block(start, size, fresh, c):
    g, ab = c
    rows = jax.lax.dynamic_slice_in_dim(mine, start, size)
    loo = None
    if merit == "exponential":
      g, loo = _block_loo(g, carry, source, start, rows, fresh, b0)
    a = _zero_diagonal(pair_weights(sv.rows(sup, rows), loo, num_bits, merit), rows)
    return g, jax.lax.dynamic_update_slice_in_dim(ab, jnp.dot(a, b0), start, 0)

  r = mine.shape[0]
  gram_, ab = for_row_blocks(r, block_rows, block, (carry.gram, jnp.zeros((r,), jnp.float32)))
  return gram_, _shard.gather_rows(ab, shard, n)


def _block_loo(g, carry, source, start, rows, fresh, b0):
  """One block of a pass: (``G`` with the block's pending update applied, ``K p^{-k}[rows]``).

  From the codes (``source``, matrix-free; ``g`` None, returned as is) or from the block
  of ``G`` (``g``: this device's rows; ``start``: the block's first local row; ``fresh``:
  the rows no earlier block updated).
  """
  if source is not None:
    return g, loo_rows(source, rows, b0)
  new, old = carry.pending_new, carry.pending_old
  part = jax.lax.dynamic_slice_in_dim(g, start, rows.shape[0], 0)
  take = lambda v: v[rows]
  # Rows an earlier (overlapping) block updated already get no second update.
  new_rows = jnp.where(fresh, take(new), 0).astype(new.dtype)
  old_rows = jnp.where(fresh, take(old), 0).astype(old.dtype)
  part = part + (new_rows[:, None] * new[None, :] - old_rows[:, None] * old[None, :]).astype(
    part.dtype
  )
  # Write the block, then read it back from the updated Gram (the barrier keeps
  # XLA from folding the read into the write): reading the old Gram after the
  # in-place write would make XLA copy the whole Gram every block.
  g = jax.lax.optimization_barrier(jax.lax.dynamic_update_slice_in_dim(g, part, start, 0))
  part = jax.lax.dynamic_slice_in_dim(g, start, rows.shape[0], 0)
  return g, part.astype(jnp.float32) - take(b0)[:, None] * b0[None, :]


def a_rows(
  index: jax.Array,
  source: Source,
  b0: jax.Array,
  sup: sv.Supervision,
  num_bits: int,
  merit: str,
  shard: RowShard = ONE_DEVICE,
) -> jax.Array:
  """Rows ``A[index, :]`` (float32 ``[m, n]``) on every device, ``K p^{-k}`` from
  ``source`` (the updated Gram, or ``FromCodes``: ``loo_rows``)."""
  loo = loo_rows(source, index, b0, shard) if merit == "exponential" else None
  return _zero_diagonal(pair_weights(sv.rows(sup, index), loo, num_bits, merit), index)


def restricted_rows(
  index: jax.Array,
  valid: jax.Array,
  source: Source,
  b0: jax.Array,
  b: jax.Array,
  sup: sv.Supervision,
  num_bits: int,
  merit: str,
  shard: RowShard = ONE_DEVICE,
) -> Callable[[jax.Array], jax.Array]:
  """Rows of ``M = A .* (b b^T)`` among the items ``index``: ``p -> M[index[p], index]``.

  ``K p^{-k}`` among them comes from ``loo_among``: ``G[index[p], index] -
  b0[index[p]] b0[index]`` (a gather of ``S`` entries of one row of the Gram) or, matrix-free,
  ``B'[index] B'[index[p]]``; so ``M`` is never stored.
  Padding positions (``~valid``) and the diagonal are zero.

  Args:
    source: int8 [r, n], this device's rows of ``B B^T`` with bit ``k`` equal to
      ``b0``; or ``FromCodes`` (matrix-free); None for the linear merit.
    b0: float32 [n], bit ``k`` as it is in ``source``.
    b: float32 [n], bit ``k`` now.
  """
  size = index.shape[0]
  bi = jnp.where(valid, b[index], 0.0)
  y_row = sv.among(sup, index)
  loo_row = loo_among(source, index, b0, shard) if merit == "exponential" else lambda p: None
  pos = jnp.arange(size)

  def row(p):
    m = pair_weights(y_row(p), loo_row(p), num_bits, merit) * (bi[p] * bi)
    return jnp.where(pos == p, jnp.float32(0), m)

  return row


def reduction_sizes(num_items: int, smallest: int = 256) -> tuple[int, ...]:
  """Static sizes ``S`` for the restricted ``M``: doubling from ``smallest``, then ``n``."""
  sizes, s = [], smallest
  while s < num_items:
    sizes.append(s)
    s *= 2
  return tuple(sizes) + (num_items,)


def _reduce(
  active: jax.Array,
  count: jax.Array,
  source: Source,
  b0: jax.Array,
  b: jax.Array,
  sup: sv.Supervision,
  u: jax.Array,
  num_bits: int,
  merit: str,
  sizes: tuple[int, ...],
  shard: RowShard = ONE_DEVICE,
) -> jax.Array:
  """Algorithm 2 from a random start in ``I``, at the smallest size ``S >= |I|``.

  Args:
    source: where ``K p^{-k}`` comes from (``restricted_rows``).
    u: float32 [] uniform in [0, 1): the start is item ``floor(u |I|)`` of ``I``.
  Returns:
    int8 [n], 1 for the items to flip.
  """
  n = b.shape[0]
  start = jnp.minimum(jnp.floor(u * count).astype(jnp.int32), count - 1)

  def at_size(size):
    def run(active, b, start):
      index, valid = _active_set.compact(active, size)
      rows = restricted_rows(index, valid, source, b0, b, sup, num_bits, merit, shard)
      flip, _ = _active_set.reduce_active_set(rows, valid, start)
      return jnp.zeros((n,), jnp.int8).at[index].add(flip.astype(jnp.int8))

    return run

  branches = [at_size(s) for s in sizes]
  if len(branches) == 1:
    return branches[0](active, b, start)
  which = jnp.sum(jnp.asarray(sizes[:-1]) < count)
  return jax.lax.switch(which, branches, active, b, start)


def _a_times_flips(
  flip: jax.Array,
  b: jax.Array,
  b0: jax.Array,
  source: Source,
  sup: sv.Supervision,
  num_bits: int,
  merit: str,
  chunk: int,
  shard: RowShard = ONE_DEVICE,
) -> jax.Array:
  """``A d`` for ``d = -2 b`` on the flipped items (0 elsewhere), from their rows of ``A``.

  With a ``shard`` the rows are gathered from their owners (or, matrix-free,
  recomputed on every device from the codes) and the product is formed on every
  device, as on one device (the same operands, the same order).
  """
  n = b.shape[0]
  index, valid = _active_set.compact(flip > 0, n)
  num = jnp.sum(flip > 0)
  index = jnp.concatenate([index, jnp.zeros((chunk,), jnp.int32)])
  valid = jnp.concatenate([valid, jnp.zeros((chunk,), bool)])

  def body(t, acc):
    rows = jax.lax.dynamic_slice_in_dim(index, t * chunk, chunk)
    ok = jax.lax.dynamic_slice_in_dim(valid, t * chunk, chunk)
    d = jnp.where(ok, -2.0 * b[rows], 0.0)
    return acc + jnp.dot(d, a_rows(rows, source, b0, sup, num_bits, merit, shard))

  return jax.lax.fori_loop(0, (num + chunk - 1) // chunk, body, jnp.zeros((n,), jnp.float32))


def bit_objective(ab: jax.Array, z: jax.Array, b: jax.Array, gamma: jax.Array) -> jax.Array:
  """``J_k(b) = b^T A b / n^2 + gamma Z^T b / n`` from ``A b``."""
  n = float(b.shape[0])
  return jnp.dot(b, ab) / (n * n) + gamma * jnp.dot(z, b) / n


class _Inner(NamedTuple):
  """One bit's inner updates, carried by ``update_bit``'s while loop."""

  b: jax.Array  # float32 [n]
  ab: jax.Array  # float32 [n], A b
  num_active: jax.Array
  first_active: jax.Array
  flipped: jax.Array
  step: jax.Array


def update_bit(
  carry: SweepCarry,
  k: jax.Array,
  z: jax.Array,
  sup: sv.Supervision,
  gamma: jax.Array,
  uniforms: jax.Array,
  *,
  merit: str = "exponential",
  block_rows: int = 32,
  chunk: int = 64,
  sizes: tuple[int, ...] | None = None,
  shard: RowShard = ONE_DEVICE,
) -> tuple[SweepCarry, BitStats]:
  """Update column ``k`` of ``B``: inner updates until ``I`` is empty or the cap.

  Each inner update ``t``: ``g = 2 A b / n^2 + gamma Z / n``,
  ``I = {i : g_i b_i < 0}``, ``F`` = Algorithm 2 on ``I`` from a random start
  (item ``floor(uniforms[t] |I|)`` of ``I``), flip ``F``; at most
  ``len(uniforms)`` of them. ``J_k`` never decreases (Theorem 1); when ``I``
  ends empty, no single flip improves ``J_k`` (Theorem 2).

  Args:
    carry: ``SweepCarry`` (codes, Gram with a pending rank-one update; no Gram with
      the exponential merit: the matrix-free mode, ``K p^{-k}`` from the codes).
    k: int [], the bit.
    z: float32 [n], the generative linear term of bit ``k``.
    sup: the supervision.
    gamma: float32 [].
    uniforms: float32 [max_inner] in [0, 1), one per inner update.
    merit, block_rows, chunk: see ``sweep``.
    sizes: static sizes for the restricted ``M`` (default ``reduction_sizes(n)``).
    shard: the rows of ``G`` this device holds (``_shard``; default: one device).
  Returns:
    (carry with column ``k`` updated and its change pending, ``BitStats``).
  """
  codes = carry.codes
  n, num_bits = codes.shape
  sizes = reduction_sizes(n) if sizes is None else sizes
  col0 = jax.lax.dynamic_index_in_dim(codes, k, axis=1, keepdims=False)
  b0 = col0.astype(jnp.float32)
  free = from_codes(codes, k) if merit == "exponential" and carry.gram is None else None
  gram_, ab0 = a_times_b(carry, b0, sup, num_bits, merit, block_rows, shard, free)
  source = gram_ if free is None else free
  _, active0 = _active_set.active_set(ab0, z, b0, gamma, n)
  count0 = jnp.sum(active0, dtype=jnp.int32)
  max_inner = uniforms.shape[0]

  def cond(s):
    return (s.step < max_inner) & (s.num_active > 0)

  def body(s):
    _, active = _active_set.active_set(s.ab, z, s.b, gamma, n)
    flip = _reduce(
      active, s.num_active, source, b0, s.b, sup, uniforms[s.step], num_bits, merit, sizes, shard
    )
    ab = s.ab + _a_times_flips(flip, s.b, b0, source, sup, num_bits, merit, chunk, shard)
    b = jnp.where(flip > 0, -s.b, s.b)
    _, active = _active_set.active_set(ab, z, b, gamma, n)
    return _Inner(
      b,
      ab,
      jnp.sum(active, dtype=jnp.int32),
      s.first_active,
      s.flipped + jnp.sum(flip, dtype=jnp.int32),
      s.step + 1,
    )

  zero = jnp.int32(0)
  out = jax.lax.while_loop(cond, body, _Inner(b0, ab0, count0, count0, zero, zero))
  new_col = jnp.where(out.b > 0, jnp.int8(1), jnp.int8(-1))
  codes = jax.lax.dynamic_update_index_in_dim(codes, new_col, k, axis=1)
  stats = BitStats(
    out.first_active,
    out.flipped,
    out.step,
    out.num_active == 0,
    bit_objective(ab0, z, b0, gamma),
    bit_objective(out.ab, z, out.b, gamma),
  )
  return SweepCarry(codes, gram_, new_col, col0), stats


def start_sweep(
  codes: jax.Array,
  merit: str,
  block_rows: int = 256,
  shard: RowShard = ONE_DEVICE,
  matrix_free: bool = False,
) -> SweepCarry:
  """The carry at the start of a sweep: the Gram (exponential merit, unless
  ``matrix_free``) and nothing pending."""
  matrix_free = _checks.flag(matrix_free, "matrix_free")
  n = codes.shape[0]
  g = gram(codes, block_rows, shard) if merit == "exponential" and not matrix_free else None
  none = jnp.zeros((n,), jnp.int8)
  return SweepCarry(codes, g, none, none)


def sweep(
  codes: jax.Array,
  z: jax.Array,
  sup: sv.Supervision,
  gamma: jax.Array,
  uniforms: jax.Array,
  *,
  merit: str = "exponential",
  block_rows: int = 32,
  chunk: int = 64,
  mesh: Mesh | None = None,
  matrix_free: bool = False,
) -> tuple[jax.Array, BitStats]:
  """One B-step: update bits ``0`` to ``K-1`` in turn (the paper's Algorithm 1, lines 8-13).

  Args:
    codes: int8 [n, K] in {-1, +1}.
    z: float32 [n, K], ``Z_ik = sum_v (sigmoid(w_kv^T x_i^v) - 1/2)``.
    sup: ``Supervision`` of the same ``n`` items.
    gamma: float32 [], weight of the generative term.
    uniforms: float32 [K, max_inner] in [0, 1) (e.g. ``jax.random.uniform(key,
      (K, max_inner))``): row ``k`` picks the random starts of bit ``k``'s inner
      updates, and ``max_inner`` caps them (each inner update ends with a flip).
    merit: ``"exponential"`` or ``"linear"``.
    block_rows: rows per block of the pass over ``G`` (or, matrix-free, over the
      rows of ``K p^{-k}``) forming ``A b``.
    chunk: rows of ``A`` formed together when updating ``A b`` after a flip.
    mesh: a 1-D ``jax.sharding.Mesh``: the rows of ``G`` and the passes over them
      are split over its devices (``_shard``); the inputs and outputs are
      replicated and the codes equal one device's. None: one device.
    matrix_free: store no Gram; recompute each entry of ``K p^{-k}`` the sweep
      needs from the codes (memory ``O(block_rows n + n K)``; each bit's pass
      ``O(n^2 K)`` instead of ``O(n^2)``). The codes equal the Gram's, bit for bit.
  Returns:
    (codes int8 [n, K], ``BitStats`` with fields stacked to ``[K]``).
  Raises:
    ValueError: shapes that do not fit (``z`` [n, K], ``sup`` of n items, ``uniforms``
      [K, m]), an unknown ``merit``, ``block_rows`` or ``chunk`` not ints >= 1, or (concrete
      values only) codes other than -1 and +1 or ``gamma`` < 0.
  """
  check_merit(merit)
  _checks.signed_codes(codes, "codes")
  n, num_bits = codes.shape
  if tuple(np.shape(z)) != (n, num_bits):
    raise ValueError(
      f"z must be [n, K] = [{n}, {num_bits}] like codes (generative_terms); got "
      f"{_checks.describe(z)}."
    )
  sv.check_supervision(sup, n)
  _checks.scalar(gamma, "gamma", low=0)
  block_rows = _checks.positive_int(block_rows, "block_rows")
  chunk = _checks.positive_int(chunk, "chunk")
  matrix_free = _checks.flag(matrix_free, "matrix_free")
  if np.ndim(uniforms) != 2 or uniforms.shape[0] != num_bits:
    raise ValueError(
      f"uniforms must be [K, max_inner] with one row per bit ({num_bits}); got "
      f"{_checks.describe(uniforms)}."
    )
  run = functools.partial(
    _sweep, merit=merit, block_rows=block_rows, chunk=chunk, matrix_free=matrix_free
  )
  if mesh is None:
    return run(codes, z, sup, gamma, uniforms, shard=ONE_DEVICE)
  shard = row_shard(mesh)
  # check_vma=False: the loops' carries start replicated and take per-device rows
  # of G; every output is formed from gathered (replicated) values.
  return jax.shard_map(
    functools.partial(run, shard=shard),
    mesh=mesh,
    in_specs=(P(), P(), P(), P(), P()),
    out_specs=P(),
    check_vma=False,
  )(codes, z, sup, gamma, uniforms)


def row_shard(mesh: Mesh) -> RowShard:
  """The ``RowShard`` of a 1-D mesh (raises ValueError naming ``mesh`` otherwise)."""
  if not isinstance(mesh, Mesh) or len(mesh.axis_names) != 1:
    raise ValueError(
      f"mesh must be a 1-D jax.sharding.Mesh (e.g. Mesh(jax.devices(), ('rows',))); got {mesh!r}."
    )
  axis = mesh.axis_names[0]
  return RowShard(axis, int(mesh.shape[axis]))


def _sweep(codes, z, sup, gamma, uniforms, *, merit, block_rows, chunk, shard, matrix_free):
  sizes = reduction_sizes(codes.shape[0])

  def one_bit(carry, xs):
    k, bit_uniforms = xs
    return update_bit(
      carry,
      k,
      jax.lax.dynamic_index_in_dim(z, k, axis=1, keepdims=False),
      sup,
      gamma,
      bit_uniforms,
      merit=merit,
      block_rows=block_rows,
      chunk=chunk,
      sizes=sizes,
      shard=shard,
    )

  start = start_sweep(codes, merit, shard=shard, matrix_free=matrix_free)
  carry, stats = jax.lax.scan(one_bit, start, (jnp.arange(codes.shape[1]), uniforms))
  return carry.codes, stats


def current_gram(carry: SweepCarry) -> jax.Array:
  """The Gram with the pending rank-one update applied (int32 ``[n, n]``; for tests)."""
  new = carry.pending_new.astype(jnp.int32)
  old = carry.pending_old.astype(jnp.int32)
  return carry.gram.astype(jnp.int32) + new[:, None] * new[None, :] - old[:, None] * old[None, :]


def dense_bit_matrix(carry: SweepCarry, k: jax.Array, sup: sv.Supervision, merit: str) -> jax.Array:
  """``A`` of bit ``k`` as float32 ``[n, n]`` from the carried Gram, or from the codes
  when the carry holds none (small ``n``; tests)."""
  n, num_bits = carry.codes.shape
  b = jax.lax.dynamic_index_in_dim(carry.codes, k, axis=1, keepdims=False).astype(jnp.float32)
  loo = None
  if merit == "exponential" and carry.gram is None:
    loo = loo_rows(from_codes(carry.codes, k), jnp.arange(n), b)
  elif merit == "exponential":
    loo = current_gram(carry).astype(jnp.float32) - b[:, None] * b[None, :]
  a = pair_weights(sv.dense(sup), loo, num_bits, merit)
  return _zero_diagonal(a, jnp.arange(n))
