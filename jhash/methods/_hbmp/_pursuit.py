"""Binary matrix pursuit: HBMP's inference of target codes (stage i, Cakir et al., Alg. 1).

Fit the affinity ``R`` [n, n] on its off-diagonal entries (mask ``M``) by a weighted
sum of rank-one binary matrices (Eq. 4),

    min_{alpha, V} || M .* (R - sum_{k=1..b} alpha_k v_k v_k^T) ||_F,   v_k in {-1,+1}^n,

greedily: ``U_0 = 0``; step ``t`` takes the residual ``Q = M .* (R - U_{t-1})`` (the
negative gradient, Eq. 5), picks ``v_t = argmax_v v^T Q v`` (Eq. 6, by ``_power``), and
sets the step sizes (``_steps``). ``||Q_t||_F`` per bit is the paper's Figure 1(c).

The residual is never formed. With ``V`` the codes [n, b] (zero columns for bits not
made) and ``A = diag(alpha)``, ``M .* V A V^T = V A V^T - (sum_k alpha_k) I``, so

    Q x = R x - diag(R) .* x - V (alpha .* (V^T x)) + (sum_k alpha_k) x,

``O(n^2 + t n)`` per product: changing the alphas (``regress``) costs nothing, and the
power iteration's products from several starts are one matrix product with ``R``.
The residual norm comes from cached ``G`` and ``c`` in ``O(b^2)`` (``_steps``), and is
summed from the entries (``O(b n^2)``) only once it falls below 10% of the initial norm,
where the closed form's float32 cancellation would show.

**Degenerate steps.** When the polished code repeats an earlier code (or its negation)
or has ``v^T Q v <= 0``, the step uses a random code instead (the rule of the authors'
code). In float32, "``<= 0``" means ``v^T Q v <= 1e-5 ||R0||_F sqrt(n^2 - n)``: since
``|v^T Q v| <= ||Q||_F sqrt(n^2 - n)``, every step on a residual below ``1e-5`` of the
initial norm (float32 rounding level after an exact fit) counts as degenerate instead
of fitting a direction to noise. The
random code is drawn from the step's key among the codes not made yet: uniformly from
all ``2^(n-1)`` codes up to negation when ``n <= 16``, else the first new one of 16
random draws (a repeat then has probability below ``(t / 2^(n-1))^16``; it is
reported). The metrics say whether a step was degenerate and whether its code repeats
an earlier one. At most ``2^(n-1)`` distinct codes exist up to negation, so
``infer_codes`` rejects ``num_bits > 2^(n-1)``.

**Eigensolvers.** Above ``DENSE_MAX_ITEMS`` items the direction comes from power
iteration on the implicit residual (``_power.top_eigenvector``). At or below it the
residual is formed (``O(b n^2)``) and the same power iterations are evaluated in
closed form from one ``eigh`` (``_power.dense_top_eigenvector``): the same codes,
alphas and metrics up to float32 rounding (see ``_power`` for where rounding can
decide), without the iterations' loops, which are the whole cost of a step at 10 items.
``eigensolver="power"`` or ``"dense"`` forces one path at any size.

**A whole pursuit in one call** (``infer_codes``) draws the random numbers of every bit
first (``MatrixPursuit.draw_all``: the same numbers as the keys ``fold_in(key, t)`` give
``step``) and scans a step without the no-op guard for a full state. At 10 items a step
is mostly fixed costs (kernel launches, the CPU generator's loop, the refit), so these
and ``regress``'s bordered factor (``_steps``) took a 48-bit pursuit from about 8 ms to
about 5 ms on 2 CPU cores.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jhash import _checks
from jhash.methods._hbmp import _affinity
from jhash.methods._hbmp import _power
from jhash.methods._hbmp import _steps

ENUMERATE_MAX_ITEMS = 16  # degenerate rule: enumerate every code up to this many items
NUM_RANDOM_DRAWS = 16  # degenerate rule: random draws beyond it
DIRECT_NORM_BELOW = 0.1  # residual norms below this fraction are summed from the entries
NOISE_GAIN = 1e-5  # v^T Q v below this times ||R0||_F sqrt(n^2 - n) counts as <= 0
EIGENSOLVERS = ("auto", "power", "dense")
DENSE_MAX_ITEMS = 20  # "auto": the dense eigensolver at or below this many items


class PursuitState(NamedTuple):
  """Full-size buffers of the pursuit after ``step`` bits."""

  codes: jax.Array  # int8 [n, b]; column k is v_k for k < step, zero after
  alphas: jax.Array  # float32 [b]; zero for bits not made
  step: jax.Array  # int32 [], bits made so far
  gram: jax.Array  # float32 [b, b]; G_kl = (v_k^T v_l)^2 - n on made bits, else 0
  corr: jax.Array  # float32 [b]; c_k = v_k^T R0 v_k on made bits, else 0
  residual_norms: jax.Array  # float32 [b]; ||Q_k||_F after bit k (0 for bits not made)
  initial_norm: jax.Array  # float32 []; ||M .* R||_F
  step_size: jax.Array  # int32 []; the rule, an index into _steps.STEP_SIZES (data, so
  # one compiled step serves every rule)
  factor: _steps.RegressFactor  # regress's inverse Cholesky factor of G (``_steps``)


class StepDraws(NamedTuple):
  """The random numbers of one step, ``draw(key, n)``: the power iteration's starts and
  the key of the degenerate rule. A whole pursuit draws every bit's at once
  (``draw_all``): on the CPU each call of the generator is a loop of its own, which cost
  more than the rest of a 10-item step."""

  starts: jax.Array  # float32 [num_restarts, n]
  key: jax.Array  # PRNG key of the degenerate rule (drawn from only when used)


class MatrixPursuit(NamedTuple):
  """Pure functions of the pursuit (``matrix_pursuit``).

  ``step(state, R, key) = step_drawn(state, R, draw(key, n))``; ``draw_all(key, b, n)``
  gives the draws of bits ``0..b-1`` under the keys ``fold_in(key, t)`` (leading [b] axis);
  ``run(R, key) -> PursuitResult`` makes all ``num_bits`` bits in one compiled ``lax.scan``
  (``infer_codes`` without its input checks; one compilation serves every step-size rule).
  """

  init: Callable[[jax.Array], PursuitState]
  step: Callable[[PursuitState, jax.Array, jax.Array], tuple[PursuitState, dict]]
  num_bits: int
  step_drawn: Callable[[PursuitState, jax.Array, StepDraws], tuple[PursuitState, dict]]
  draw: Callable[[jax.Array, int], StepDraws]
  draw_all: Callable[[jax.Array, int, int], StepDraws]
  run: Callable[[jax.Array, jax.Array], "PursuitResult"]


class PursuitResult(NamedTuple):
  """Output of ``infer_codes``."""

  codes: jax.Array  # int8 [n, b] in {-1, +1}
  alphas: jax.Array  # float32 [b], the bit weights (weighted Hamming ranking)
  residual_norms: jax.Array  # float32 [b], ||Q_t||_F after each bit (Figure 1(c))
  initial_norm: jax.Array  # float32 [], ||M .* R||_F
  metrics: dict  # name -> [b] per-bit metrics of ``step``


def residual_operator(affinity: jax.Array, codes: jax.Array, alphas: jax.Array):
  """``(matvec, column)`` of the implicit residual ``Q = M .* (R - V diag(alpha) V^T)``.

  Args:
    affinity: float32 [n, n], R (its diagonal is ignored).
    codes: float32 [n, b], V (zero columns for bits not made).
    alphas: float32 [b] (zero for bits not made).
  Returns:
    ``x -> Q x`` (float32 [n] -> [n], ``O(n^2 + b n)``) and ``i -> Q[:, i]`` (``O(b n)``).
  """
  hi = lax.Precision.HIGHEST
  diag = jnp.diagonal(affinity)
  total = jnp.sum(alphas)

  def matvec(x):
    low_rank = jnp.dot(codes, alphas * jnp.dot(x, codes, precision=hi), precision=hi)
    return jnp.dot(affinity, x, precision=hi) - diag * x - low_rank + total * x

  def column(i):
    col = affinity[i] - jnp.dot(codes, alphas * codes[i], precision=hi)
    return col.at[i].set(0.0)

  return matvec, column


def dense_residual(affinity: jax.Array, codes: jax.Array, alphas: jax.Array) -> jax.Array:
  """The residual ``Q = M .* (R - V diag(alpha) V^T)`` formed: float32 [n, n], ``O(b n^2)``.

  Args:
    affinity: float32 [n, n], R (its diagonal is ignored).
    codes: float32 [n, b], V (zero columns for bits not made).
    alphas: float32 [b] (zero for bits not made).
  """
  fitted = jnp.dot(codes * alphas[None, :], codes.T, precision=lax.Precision.HIGHEST)
  return jnp.where(jnp.eye(affinity.shape[0], dtype=bool), 0.0, affinity - fitted)


def direct_residual_norm(affinity: jax.Array, codes: jax.Array, alphas: jax.Array) -> jax.Array:
  """``||M .* (R - V diag(alpha) V^T)||_F`` from the entries: ``O(b n^2)``, float32 [].

  The closed form of ``_steps.residual_norm`` subtracts numbers of the size of
  ``||R0||_F^2``, so its float32 rounding is about ``3e-4 ||R0||_F``; this sum of
  squares is exact to float32 rounding of the entries.
  """
  q = dense_residual(affinity, codes, alphas)
  return jnp.sqrt(jnp.sum(q * q))


def _repeats(candidates: jax.Array, codes: jax.Array) -> jax.Array:
  """Whether each code equals a made code or its negation: [m, n], [n, b] -> bool [m]."""
  n = codes.shape[0]
  overlap = jnp.dot(candidates, codes, precision=lax.Precision.HIGHEST)
  return jnp.any(jnp.abs(overlap) > n - 0.5, axis=-1)


def _all_codes(n: int) -> np.ndarray:
  """Every code with first entry +1 (all codes up to negation): float32 [2^(n-1), n]."""
  j = np.arange(2 ** (n - 1))[:, None]
  bits = (j >> np.arange(n - 1)[None, :]) & 1
  return np.concatenate([np.ones((j.shape[0], 1)), 2.0 * bits - 1.0], axis=1).astype(np.float32)


def random_new_code(key: jax.Array, codes: jax.Array) -> jax.Array:
  """A random code that repeats no made code up to negation (the degenerate rule).

  Args:
    key: PRNG key.
    codes: float32 [n, b], the made codes (zero columns for bits not made).
  Returns:
    float32 [n] in {-1, +1}: uniform over the unused codes when ``n <= 16``; otherwise
    the first unused of 16 random draws (the first draw when all 16 repeat).
  """
  n = codes.shape[0]
  if n <= ENUMERATE_MAX_ITEMS:
    table = jnp.asarray(_all_codes(n))
    priority = jax.random.uniform(key, (table.shape[0],))
    return table[jnp.argmax(jnp.where(_repeats(table, codes), -1.0, priority))]
  draws = jax.random.rademacher(key, (NUM_RANDOM_DRAWS, n), jnp.float32)
  return draws[jnp.argmax(~_repeats(draws, codes))]


def matrix_pursuit(
  num_bits: int,
  *,
  step_size: str = "regress",
  num_restarts: int = 4,
  num_iters: int = 20,
  tol: float = 1e-4,
  local_search: bool = True,
  max_flips: int | None = None,
  eigensolver: str = "auto",
) -> MatrixPursuit:
  """The pursuit as pure functions: ``init(R) -> state``, ``step(state, R, key)``.

  Args:
    num_bits: b, bits (steps) in the state's buffers.
    step_size: "constant", "line" or "regress" (``_steps``); kept in the state as an
      index (``PursuitState.step_size``), so one compiled ``step`` serves every rule.
    num_restarts: random starts of the power iteration (vmapped); the step keeps the
      start whose binarised vector has the largest ``v^T Q v`` (Eq. 6's objective)
      among those that are not degenerate, and polishes that one only.
    num_iters: the most power-iteration updates per run (two runs when shifted). The
      local search makes up for an eigenvector that has not fully converged: on a
      4,850-item "share a label" affinity, 15, 30 and 50 updates gave the same residual
      after 64 bits (0.588-0.589 of the initial norm), 15 in a quarter of the time of 50.
    tol: power-iteration tolerance on the change of the unit iterate.
    local_search: polish ``sign(v*)`` by single-bit flips.
    max_flips: the most flips (default: n).
    eigensolver: how the power iterations are computed: ``"power"`` (products with the
      implicit residual, in loops), ``"dense"`` (one ``eigh`` of the formed residual,
      the iterates in closed form: the same results up to rounding, ``O(n^3)``) or
      ``"auto"``: dense at or below ``DENSE_MAX_ITEMS`` items (the module docstring).
  Returns:
    MatrixPursuit. ``step`` adds one bit (a no-op once ``b`` bits are made) and returns
    scalar metrics: ``residual_norm`` (``||Q_t||_F``), ``objective`` (``v^T Q v`` on the
    residual before the step), ``alpha`` (the new bit's step size as set at this step),
    ``rayleigh`` (the kept start's eigenvalue estimate), ``shift`` (its second-run
    shift, 0 when not shifted), ``power_iterations`` (products of the slowest start),
    ``flips``, ``degenerate`` (the random rule was used) and ``repeated`` (the code
    repeats an earlier one up to negation). The dense eigensolver reports the products
    its closed form stands for.
  """
  num_bits = _checks.positive_int(num_bits, "num_bits")
  rule = _steps.rule_index(step_size)
  num_restarts = _checks.positive_int(num_restarts, "num_restarts")
  num_iters = _checks.positive_int(num_iters, "num_iters")
  if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 <= tol < float("inf"):
    raise ValueError(f"tol must be a finite float >= 0; got {tol!r}.")
  local_search = _checks.flag(local_search, "local_search")
  if max_flips is not None:
    max_flips = _checks.nonneg_int(max_flips, "max_flips")
  if eigensolver not in EIGENSOLVERS:
    raise ValueError(
      f"eigensolver must be one of {', '.join(map(repr, EIGENSOLVERS))}; got {eigensolver!r}."
    )
  return _matrix_pursuit(
    num_bits, rule, num_restarts, num_iters, tol, bool(local_search), max_flips, eigensolver
  )


# One MatrixPursuit per setting, and one ``step`` per solver setting (it does not
# depend on the number of bits or the rule, which live in the state): jit caches are
# keyed on the functions, so methods built with the same settings share their compiled
# steps.
@functools.lru_cache(maxsize=64, typed=True)
def _matrix_pursuit(
  num_bits: int,
  rule: int,
  num_restarts: int,
  num_iters: int,
  tol,
  local_search: bool,
  max_flips: int | None,
  eigensolver: str,
) -> MatrixPursuit:
  step, step_drawn, draw, draw_all = _step_functions(
    num_restarts, num_iters, tol, local_search, max_flips, eigensolver
  )

  def init(affinity):
    affinity = jnp.asarray(affinity, jnp.float32)
    n = affinity.shape[0]
    off = jnp.where(jnp.eye(n, dtype=bool), 0.0, affinity)
    b = num_bits
    return PursuitState(
      codes=jnp.zeros((n, b), jnp.int8),
      alphas=jnp.zeros((b,), jnp.float32),
      step=jnp.int32(0),
      gram=jnp.zeros((b, b), jnp.float32),
      corr=jnp.zeros((b,), jnp.float32),
      residual_norms=jnp.zeros((b,), jnp.float32),
      initial_norm=jnp.linalg.norm(off),
      step_size=jnp.int32(rule),
      factor=_steps.new_factor(b),
    )

  def run(affinity, key):
    compiled = _compiled_pursuit(
      num_bits, num_restarts, num_iters, float(tol), bool(local_search), max_flips, eigensolver
    )
    # NumPy arguments go to the compiled call directly: converting them with jnp first
    # dispatches two small computations, about 1 ms, a fifth of a 10-item 48-bit pursuit.
    # JAX arrays (and tracers) stay where they are: no round trip through the host.
    if isinstance(affinity, jax.Array):
      affinity = jnp.asarray(affinity, jnp.float32)
    else:
      affinity = np.asarray(affinity, np.float32)
    return compiled(affinity, key, np.int32(rule))

  return MatrixPursuit(init, step, num_bits, step_drawn, draw, draw_all, run)


@functools.lru_cache(maxsize=64, typed=True)
def _step_functions(
  num_restarts: int,
  num_iters: int,
  tol,
  local_search: bool,
  max_flips: int | None,
  eigensolver: str,
):
  """``(step, step_drawn, draw, draw_all)`` of ``matrix_pursuit`` for one solver setting."""
  step_drawn = _pursuit_step(num_restarts, num_iters, tol, local_search, max_flips, eigensolver)

  def draw(key, n):
    key_starts, key_random = jax.random.split(key)
    return StepDraws(_power.random_starts(key_starts, num_restarts, n), key_random)

  def step(state, affinity, key):
    return step_drawn(state, affinity, draw(key, state.codes.shape[0]))

  def draw_all(key, num_steps, n):
    return jax.vmap(lambda t: draw(jax.random.fold_in(key, t), n))(jnp.arange(num_steps))

  return step, step_drawn, draw, draw_all


@functools.lru_cache(maxsize=64, typed=True)
def _pursuit_step(
  num_restarts: int,
  num_iters: int,
  tol,
  local_search: bool,
  max_flips: int | None,
  eigensolver: str,
  guard_full: bool = True,
) -> Callable:
  """``step_drawn(state, R, draws)`` of ``matrix_pursuit`` for one solver setting.

  ``guard_full=False`` drops the no-op for a full state (a select per state field, a
  tenth of a 10-item step's kernels): for scans that make exactly ``b`` bits.
  """

  def directions(state, affinity, matvec, starts):
    """``PowerResult`` of every start (leading [num_restarts] axis), by either solver."""
    if uses_dense_eigensolver(eigensolver, affinity.shape[0]):
      q = dense_residual(affinity, state.codes.astype(jnp.float32), state.alphas)
      return _power.dense_top_eigenvector(q, starts, num_iters, tol)[1]
    return _power.top_eigenvector(matvec, starts, num_iters, tol)[1]

  def choose(state, affinity, draws):
    """The new code: the best start, polished; the random rule when degenerate.

    The power iteration is vmapped over starts (its products become one matrix
    product); the local search runs on the kept start only: a vmapped while loop with
    per-start row gathers cost about 7x more per flip on the CPU than a single one.
    """
    n = affinity.shape[0]
    codes = state.codes.astype(jnp.float32)
    matvec, column = residual_operator(affinity, codes, state.alphas)
    power = directions(state, affinity, matvec, draws.starts)
    signs = _power.binarize(power.vector)  # [r, n]
    q_signs = jax.vmap(matvec)(signs)
    objectives = jnp.sum(signs * q_signs, axis=1)
    floor = NOISE_GAIN * state.initial_norm * jnp.sqrt(float(n * n - n))
    usable = ~_repeats(signs, codes) & (objectives > floor)
    best = jnp.where(
      jnp.any(usable), jnp.argmax(jnp.where(usable, objectives, -jnp.inf)), jnp.argmax(objectives)
    )
    if local_search:
      flips_cap = n if max_flips is None else max_flips
      polished = _power.local_search(column, signs[best], q_signs[best], flips_cap)
    else:
      polished = _power.LocalSearchResult(
        signs[best], q_signs[best], objectives[best], jnp.int32(0)
      )
    degenerate = _repeats(polished.code[None, :], codes)[0] | (polished.objective <= floor)

    # Only the branch taken runs: drawn at every step (jnp.where), the random rule cost
    # about 30 us of a 10-item step on the CPU, a quarter of a dense step.
    # A polished code that is kept repeats nothing (else it would be degenerate); only a
    # random one is checked.
    def random_code():
      new = random_new_code(draws.key, codes)
      return new, _repeats(new[None, :], codes)[0]

    code, repeated = lax.cond(degenerate, random_code, lambda: (polished.code, False))
    info = {
      "rayleigh": power.rayleigh[best],
      "shift": power.shift[best],
      "power_iterations": jnp.max(power.iterations),
      "flips": polished.flips,
      "degenerate": degenerate,
      "repeated": repeated,
    }
    return code, info

  def step_drawn(state, affinity, draws):
    """Add bit ``state.step``: its code, ``c`` and ``G``, the alphas, the residual norm."""
    affinity = jnp.asarray(affinity, jnp.float32)
    n, b = state.codes.shape
    bit = jnp.minimum(state.step, b - 1)
    code, info = choose(state, affinity, draws)
    made = jnp.arange(b) < state.step
    codes = state.codes.astype(jnp.float32)
    hi = lax.Precision.HIGHEST
    corr_new = jnp.dot(code, jnp.dot(affinity, code, precision=hi), precision=hi) - jnp.sum(
      jnp.diagonal(affinity)
    )
    row = _steps.gram_row(codes, code, made)
    objective = corr_new - jnp.dot(state.alphas, row)  # v^T Q v = v^T R0 v - sum a_k G_k.
    row = row.at[bit].set(float(_steps.masked_size(n)))
    gram = state.gram.at[bit, :].set(row).at[:, bit].set(row)
    corr = state.corr.at[bit].set(corr_new)
    made = made.at[bit].set(True)
    new_codes = state.codes.at[:, bit].set(code.astype(jnp.int8))
    codes = codes.at[:, bit].set(code)  # the same codes, as float32
    alphas, factor = _steps.new_alphas(
      state.step_size,
      state.alphas,
      bit,
      objective,
      gram,
      corr,
      made,
      n,
      state.factor,
      codes,
      affinity,
    )
    norm = _steps.residual_norm(state.initial_norm, alphas, corr, gram)
    # Below 10% of the initial norm the closed form's rounding (~3e-4 of it) matters.
    norm = lax.cond(
      norm < DIRECT_NORM_BELOW * state.initial_norm,
      lambda: direct_residual_norm(affinity, codes, alphas),
      lambda: norm,
    )
    new = PursuitState(
      new_codes,
      alphas,
      state.step + 1,
      gram,
      corr,
      state.residual_norms.at[bit].set(norm),
      state.initial_norm,
      state.step_size,
      factor,
    )
    metrics = {"residual_norm": norm, "objective": objective, "alpha": alphas[bit], **info}
    if guard_full:
      full = state.step >= b
      new = jax.tree.map(lambda old, upd: jnp.where(full, old, upd), state, new)
      metrics["residual_norm"] = jnp.where(full, state.residual_norms[b - 1], norm)
    return new, metrics

  return step_drawn


def uses_dense_eigensolver(eigensolver: str, n: int) -> bool:
  """Whether ``eigensolver`` ("auto", "power", "dense") takes the dense path for ``n`` items."""
  return eigensolver == "dense" or (eigensolver == "auto" and n <= DENSE_MAX_ITEMS)


def check_num_bits_for_items(num_bits: int, n: int) -> None:
  """At most ``2^(n-1)`` distinct codes exist for ``n`` items up to negation."""
  if n < 63 and num_bits > 2 ** (n - 1):
    raise ValueError(
      f"num_bits must be at most 2**(n-1) = {2 ** (n - 1)} for n = {n} items (the number "
      f"of distinct codes up to negation); got num_bits={num_bits}."
    )


@functools.lru_cache(maxsize=32)
def _compiled_pursuit(num_bits, num_restarts, num_iters, tol, local_search, max_flips, eigensolver):
  """The pursuit of all ``num_bits`` bits as one jitted ``(R, key, rule) -> PursuitResult``
  (shared by every step-size rule: the rule is data in the state)."""
  pursuit = _matrix_pursuit(
    num_bits, 0, num_restarts, num_iters, tol, local_search, max_flips, eigensolver
  )
  step = _pursuit_step(
    num_restarts, num_iters, tol, local_search, max_flips, eigensolver, guard_full=False
  )  # the scan makes exactly num_bits bits

  def run(affinity, key, rule):
    def body(state, draws):
      return step(state, affinity, draws)

    state = pursuit.init(affinity)._replace(step_size=rule)
    draws = pursuit.draw_all(key, num_bits, affinity.shape[0])
    state, metrics = lax.scan(body, state, draws)
    return PursuitResult(
      state.codes, state.alphas, state.residual_norms, state.initial_norm, metrics
    )

  return jax.jit(run)


def infer_codes(
  affinity,
  num_bits: int,
  key: jax.Array,
  *,
  step_size: str = "regress",
  num_restarts: int = 4,
  num_iters: int = 20,
  tol: float = 1e-4,
  local_search: bool = True,
  max_flips: int | None = None,
  eigensolver: str = "auto",
) -> PursuitResult:
  """Target codes and bit weights of ``n`` items from their affinity (HBMP stage i).

  Runs all ``num_bits`` steps of ``matrix_pursuit`` in one jitted ``lax.scan``; bit
  ``t`` uses the key ``fold_in(key, t)``.

  Args:
    affinity: float [n, n], R, symmetric and finite, ``n >= 2`` (its diagonal is ignored).
    num_bits: b, at most ``2^(n-1)``.
    key: PRNG key.
    step_size, num_restarts, num_iters, tol, local_search, max_flips, eigensolver: see
      ``matrix_pursuit``.
  Returns:
    PursuitResult: codes int8 [n, b], alphas float32 [b], residual_norms float32 [b],
    initial_norm float32 [] and per-bit metrics ([b] each).
  """
  n = _affinity.check_affinity(affinity, "affinity")
  num_bits = _checks.positive_int(num_bits, "num_bits")
  check_num_bits_for_items(num_bits, n)
  pursuit = matrix_pursuit(
    num_bits,
    step_size=step_size,
    num_restarts=num_restarts,
    num_iters=num_iters,
    tol=tol,
    local_search=local_search,
    max_flips=max_flips,
    eigensolver=eigensolver,
  )
  return pursuit.run(affinity, key)
