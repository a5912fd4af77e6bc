"""Active set and its reduction (the paper's Eqn. (11)-(13) and Algorithm 2).

For bit ``k`` with the binary quadratic program

    J_k(x) = (1/n^2) x^T A x + (gamma/n) Z^T x,    x in {-1, +1}^n,

the gradient at the current bit ``b`` is ``g = 2 A b / n^2 + gamma Z / n`` and the
active set is ``I = {i : sign(g_i) != b_i}``, taken strictly here:
``I = {i : g_i b_i < 0}`` (an item with ``g_i = 0`` gains nothing by a flip and
stays out, so a bit at a fixed point has an empty active set and no flip is
ever made for nothing).

Flipping a set ``F`` (``x`` = ``b`` with ``F`` flipped, ``d = x - b``) changes the
objective by ``g^T d + (1/n^2) d^T A d``; the first term is positive for any
non-empty ``F`` within ``I`` and ``d^T A d = 4 1_F^T M 1_F`` with
``M = A .* (b b^T)``. Algorithm 2 grows ``F`` greedily from a random item of
``I`` while the next item's gain ``sum_{j in F} M_ij`` is non-negative, so
``1_F^T M 1_F`` never drops below its start ``M_ii = 0`` and ``J_k`` never
decreases (the paper's Theorem 1).

The reduction works on ``M`` restricted to ``I``, compacted to the first
``|I|`` of ``S`` positions (``S`` a static size): each addition forms one row of
that block, ``O(S) <= O(n)`` entries; ``M`` itself is never stored.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp


def active_set(
  ab: jax.Array, z: jax.Array, b: jax.Array, gamma: jax.Array, num_items: int
) -> tuple[jax.Array, jax.Array]:
  """The gradient of ``J_k`` and the active set.

  Args:
    ab: float32 [n], ``A b``.
    z: float32 [n], the generative linear term ``Z`` of the bit.
    b: float32 [n], the bit in {-1, +1}.
    gamma: float32 [], the weight of the generative term.
    num_items: ``n`` of the objective's normalisers.
  Returns:
    (g float32 [n], active bool [n]) with ``active = g * b < 0``.
  """
  n = float(num_items)
  g = 2.0 * ab / (n * n) + gamma * z / n
  return g, g * b < 0


def compact(mask: jax.Array, size: int) -> tuple[jax.Array, jax.Array]:
  """Indices of the true entries of ``mask`` in order, padded to ``size``.

  Returns:
    (index int32 [size], valid bool [size]); padding entries hold index 0.
  """
  n = mask.shape[0]
  # One sort of int32 keys (true entries first, each group in index order): as fast
  # as a cumulative sum plus scatter on the CPU, and much quicker to compile.
  position = jnp.arange(n, dtype=jnp.int32)
  order = jnp.sort(jnp.where(mask, position, position + n)) % n
  if size <= n:
    index = order[:size]
  else:
    index = jnp.concatenate([order, jnp.zeros((size - n,), jnp.int32)])
  valid = jnp.arange(size) < jnp.sum(mask, dtype=jnp.int32)
  return jnp.where(valid, index, 0), valid


def reduce_active_set(
  row_of_m: Callable[[jax.Array], jax.Array], active: jax.Array, start: jax.Array
) -> tuple[jax.Array, jax.Array]:
  """Algorithm 2: greedy reduction of the active set on ``M = A .* (b b^T)``.

  Starts from ``F = {start}`` with ``gain = M[start]``; repeatedly takes the
  item of ``I \\ F`` with the largest gain (the first such item on ties), stops
  when that gain is negative (or none is left), else adds it and adds its row of
  ``M`` to the gain. Only the rows of items added to ``F`` are formed.

  Args:
    row_of_m: ``p -> M[p, :]``, float32 [S] (``M`` symmetric, zero diagonal; only
      the entries of ``active`` positions matter), e.g. ``lambda p: m[p]``.
    active: bool [S], the active set ``I`` (or its compacted positions).
    start: int [], an entry of ``I``.
  Returns:
    (flip bool [S] the reduced set ``F``, size int32 [] = ``|F|``).
  """
  size = active.shape[0]
  pos = jnp.arange(size)
  # ``candidates`` holds the gain on I \\ F and -inf elsewhere.
  candidates = jnp.where(active & (pos != start), row_of_m(start), -jnp.inf)

  def best(cand):
    # The first position of the largest gain. A maximum and a minimum over
    # positions vectorise; ``argmax`` (a reduction over pairs) runs several times
    # slower on the CPU, and this loop runs once per added item.
    q = jnp.max(cand)
    return jnp.min(jnp.where(cand == q, pos, size)), q

  def cond(carry):
    return carry[3] >= 0

  def body(carry):
    flip, cand, j, _, count = carry
    cand = jnp.where(pos == j, -jnp.inf, cand + row_of_m(j))
    nj, nq = best(cand)
    return flip.at[j].set(True), cand, nj, nq, count + 1

  j0, q0 = best(candidates)
  flip0 = pos == start
  flip, _, _, _, count = jax.lax.while_loop(cond, body, (flip0, candidates, j0, q0, jnp.int32(1)))
  return flip, count
