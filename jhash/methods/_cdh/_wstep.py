"""CDH's W-step: the ``K x V`` logistic problems, solved together by stochastic ascent.

With the codes fixed, each bit-view pair ``(k, v)`` is a separate problem (the
paper's Eqn. (14)); two objectives are offered, both on the mean over items
(the sum's maximiser, with step sizes that do not depend on ``n``):

* ``"probability"`` (the paper's): ``mean_i sigmoid(b_ik w^T [x_i, 1])``, whose
  stochastic gradient is ``sigmoid(.)(1 - sigmoid(.)) b x`` (Section 3.2);
* ``"log_likelihood"``: ``mean_i log sigmoid(b_ik w^T [x_i, 1]) - l2 ||w||^2``,
  plain L2-regularised logistic regression (the bias is not penalised).

One bit's problem is a kernel (``fit_bit``) lifted with ``vmap`` over the bits
of a view; views have their own widths, so a Python loop runs over views. The
minibatches (``num_iters x batch_size`` item indices, drawn with replacement)
are drawn once from the step's key and shared by every bit and view (the views
are aligned, so a minibatch is the same items in each): the vmapped solve
equals a loop over bits given the same minibatches.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import optax

from jhash.methods._cdh import _encode

W_OBJECTIVES = ("probability", "log_likelihood")


def bit_objective(w: jax.Array, x1: jax.Array, b: jax.Array, kind: str, l2: float) -> jax.Array:
  """The ``(k, v)`` objective on items ``x1`` (with the bias column) and bits ``b``.

  Args:
    w: float32 [d + 1].
    x1: float32 [m, d + 1].
    b: float32 [m] in {-1, +1}.
  Returns:
    float32 [].
  """
  t = b * jnp.dot(x1, w)
  if kind == "probability":
    return jnp.mean(jax.nn.sigmoid(t))
  return jnp.mean(jax.nn.log_sigmoid(t)) - l2 * jnp.sum(w[:-1] ** 2)


def minibatches(uniforms: jax.Array, num_items: int) -> jax.Array:
  """Minibatch item indices (drawn with replacement) from uniforms in [0, 1).

  Args:
    uniforms: float32 [T, m], e.g. ``jax.random.uniform(key, (T, m))``.
  Returns:
    int32 [T, m], ``floor(u n)`` clipped to ``n - 1``.
  """
  index = jnp.floor(uniforms * num_items).astype(jnp.int32)
  return jnp.minimum(index, num_items - 1)


def fit_bit(
  w: jax.Array,
  x1: jax.Array,
  b: jax.Array,
  batches: jax.Array,
  *,
  kind: str,
  l2: float,
  learning_rate: float,
) -> jax.Array:
  """Stochastic gradient ascent (Adam, fresh moments) on one bit-view problem.

  Args:
    w: float32 [d + 1], the start.
    x1: float32 [n, d + 1], features with the bias column.
    b: float32 [n], the bit.
    batches: int32 [T, m], one step per row, on items ``batches[t]``.
  Returns:
    float32 [d + 1].
  """
  optimizer = optax.adam(learning_rate)

  def step(carry, index):
    w, opt_state = carry
    grad = jax.grad(lambda w: -bit_objective(w, x1[index], b[index], kind, l2))(w)
    updates, opt_state = optimizer.update(grad, opt_state, w)
    return (optax.apply_updates(w, updates), opt_state), None

  return jax.lax.scan(step, (w, optimizer.init(w)), batches)[0][0]


def view_objective(
  weight: jax.Array, x: jax.Array, codes: jax.Array, kind: str, l2: float
) -> jax.Array:
  """Per-bit objectives of one view on all items: float32 [K]."""
  x1 = _encode.with_bias(x)
  bf = codes.astype(jnp.float32)
  return jax.vmap(bit_objective, in_axes=(0, None, 1, None, None))(weight, x1, bf, kind, l2)


def wstep(
  weights: Sequence[jax.Array],
  views: Sequence[jax.Array],
  codes: jax.Array,
  batches: jax.Array,
  *,
  kind: str = "probability",
  l2: float = 1e-4,
  learning_rate: float = 0.05,
) -> tuple[tuple[jax.Array, ...], jax.Array, jax.Array]:
  """Update every ``w_{k,v}`` for the codes (the paper's Algorithm 1, lines 14-16).

  Args:
    weights: per view float32 [K, d_v + 1].
    views: per view float32 [n, d_v].
    codes: int8 [n, K].
    batches: int32 [T, m], the items of each of the ``T`` steps' minibatches
      (``minibatches``), shared by every bit and view.
    kind: ``"probability"`` or ``"log_likelihood"``.
  Returns:
    (new weights, mean objective over (k, v) before, after).
  """
  if kind not in W_OBJECTIVES:
    raise ValueError(f"w_objective must be one of {W_OBJECTIVES}; got {kind!r}.")
  bf = codes.astype(jnp.float32)
  fit = jax.vmap(
    lambda w, x1, b: fit_bit(w, x1, b, batches, kind=kind, l2=l2, learning_rate=learning_rate),
    in_axes=(0, None, 1),
  )
  new, before, after = [], [], []
  for w, x in zip(weights, views):
    before.append(view_objective(w, x, codes, kind, l2))
    new.append(fit(w, _encode.with_bias(x), bf))
    after.append(view_objective(new[-1], x, codes, kind, l2))
  return tuple(new), jnp.mean(jnp.stack(before)), jnp.mean(jnp.stack(after))
