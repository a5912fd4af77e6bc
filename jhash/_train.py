"""A method's whole schedule as one pure function: ``make_train``.

``jhash.fit`` is a host loop: it fetches metrics, shows progress, calls back, checkpoints
and reads streams, so it cannot be traced. ``make_train`` gives the same schedule (the
same minibatch order, step keys and phases: ``jhash._order``) as a function of arrays
only, to be jitted whole, vmapped over seeds, or scanned inside a larger program:

    train = jhash.make_train(method, batch)
    states, metrics = jax.jit(jax.vmap(train, in_axes=(0, None)))(keys, batch)

The training batch is an argument of ``train``, not a constant it closes over: under
``jit`` a closed-over array is a compile-time constant, and XLA may spend seconds
folding work on it (a 784 x 784 covariance of 20,000 items took over 10 s to fold).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jhash import _api
from jhash import _checks
from jhash import _fit
from jhash import _fit_checks
from jhash import _loops
from jhash import _order


def make_train(
  method: _api.HashingMethod,
  batch: Mapping,
  num_steps: int | None = None,
  *,
  num_epochs: int | None = None,
) -> Callable:
  """A pure ``train(key, batch, state=None) -> (state, metrics)`` running ``method``'s
  schedule on batches shaped like ``batch``.

  Args:
    method: a ``HashingMethod``.
    batch: the training batch ``{"views": (...), "labels": ...}``, checked here; ``train``
      takes batches of the same item count, item shapes and dtypes (the schedule's
      length and minibatch order depend on the count).
    num_steps, num_epochs: the schedule's length, as in ``jhash.fit``.
  Returns:
    ``train(key, batch, state=None)``: ``key`` a PRNG key, ``state`` a state to start from
    (default: ``init``'s). It returns the final state and a dict of metric name -> array
    [steps], one entry per step of the phases that report it: seed for seed what
    ``jhash.fit(method, key, batch, num_steps, num_epochs=...)`` returns. Jittable and
    vmappable (over keys, states or batches).

  Example:
    >>> import jax, numpy as np, jhash
    >>> x = np.random.default_rng(0).normal(size=(100, 16)).astype(np.float32)
    >>> batch = {"views": (x,)}
    >>> train = jhash.make_train(jhash.methods.itq(8, num_iters=5), batch)
    >>> keys = jax.random.split(jax.random.key(0), 4)
    >>> states, metrics = jax.jit(jax.vmap(train, in_axes=(0, None)))(keys, batch)
    >>> metrics["quantization_loss"].shape
    (4, 5)
  """
  _fit.check_method(method)
  n = _fit_checks.check_training_batch(method, batch)
  method = _api.bound(method, batch)
  spans = [s for s in _fit_checks.spans(method, n, num_steps, num_epochs) if s.stop > s.start]
  want = _layout(batch)
  init = _loops.init_of(method.init, method.name, method.num_bits)
  loops = [
    _loops.phase_loop(
      s.phase.update,
      None if s.phase.batch_size is None else min(s.phase.batch_size, n),
      s.stop - s.start,
    )
    for s in spans
  ]

  def train(key, batch, state=None):
    _fit_checks.check_key(key)
    got = _layout(batch) if isinstance(batch, Mapping) else _checks.describe(batch)
    if got != want:
      raise ValueError(
        f"batch must be laid out as make_train's batch (its entries' shapes and dtypes) "
        f"{want}; got {got}."
      )
    # As arrays: under vmap without jit a NumPy batch stays NumPy, and NumPy cannot be
    # indexed by the traced minibatch order.
    for i, view in enumerate(batch["views"]):  # values, where they are known
      _checks.finite(view, f"views[{i}]")
    batch = jax.tree.map(jnp.asarray, dict(batch))
    if state is None:
      state = init(_order.init_key(key), batch)
    else:  # the state's layout is the one init makes (shapes: checked under jit too)
      _fit.check_state(method, key, batch, state)
    history: dict[str, list] = {}
    for span, loop in zip(spans, loops):
      # A barrier between phases (and after init) keeps XLA from fusing across them, so
      # each phase computes what fit's separate programs compute, to the bit.
      state = jax.lax.optimization_barrier(state)
      state, metrics = loop(state, batch, key, 0, span.stop - span.start, span.start, span.index)
      for name, value in metrics.items():
        history.setdefault(name, []).append(value)
    return state, {name: jnp.concatenate(values) for name, values in history.items()}

  return train


def _layout(batch: Mapping) -> list:
  """(path, shape, dtype) of each array of ``batch``, in order."""
  leaves = jax.tree_util.tree_leaves_with_path(dict(batch))
  return [
    (jax.tree_util.keystr(path), tuple(np.shape(v)), np.dtype(v.dtype).name) for path, v in leaves
  ]
