"""What the HBMP experiments share: the fast weighted mAP, the HBMP cell, the pursuit as one call.

Weighted Hamming mAP on a large database: ``jhash.metrics.mean_average_precision(...,
weights=alphas)`` groups real-valued distances by sorting every query's row, and XLA's
CPU sort makes that about 45 s for 1,000 queries against 69,000 items.
``ranked_map`` gives the same tie-aware mAP from the library's chunk kernel
(``jhash.metrics.average_precision``) on integer distances: the database's distinct
codes are ranked per query in NumPy (weighted distances equal to 1e-9 of ``sum |w|``
tie), each item takes the rank of its code, and the kernel counts tie groups by
histogram. The tests check it against ``mean_average_precision``.

Everything here reaches HBMP through its public method (``jhash.methods.hbmp`` and its
``extras``): ``whole_pursuit`` compiles the pursuit of every bit as one call from
``extras.pursuit``.
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jhash
from experiments import harness

# Distances closer than this fraction of sum |w| tie in ``ranked_map``.
TIE_RESOLUTION = 2.0 ** -30


# ----------------------------------------------------------------------------- ranking


@functools.lru_cache(maxsize=16)
def _ap_kernel(max_distance: int):
  return jax.jit(functools.partial(jhash.metrics.average_precision, max_distance=max_distance))


def _dense_ranks(query_codes, unique_codes, weights) -> np.ndarray:
  """Rank of each distinct database code per query by weighted distance: int32 [q, u]."""
  q = np.asarray(query_codes, np.float64)
  w = np.asarray(weights, np.float64)
  dist = 0.5 * (w.sum() - (q * w[None, :]) @ unique_codes.T.astype(np.float64))
  scale = max(float(np.abs(w).sum()), 1e-30)
  keys = np.round(dist / (scale * TIE_RESOLUTION)).astype(np.int64)
  return np.stack([np.unique(row, return_inverse=True)[1].reshape(-1) for row in keys]
                  ).astype(np.int32)


def ranked_map(query_codes, db_codes, query_labels, db_labels, weights=None,
               relevance: str = "auto") -> float:
  """Tie-aware mAP of (weighted) Hamming ranking over the whole database.

  Equal to ``jhash.metrics.mean_average_precision(..., weights=weights)`` (queries with
  no relevant item count as 0); for ``weights=None`` it calls it.
  """
  if weights is None:
    return jhash.metrics.mean_average_precision(query_codes, db_codes, query_labels,
                                                db_labels, relevance=relevance)
  db = np.asarray(db_codes)
  unique, inverse = np.unique(db, axis=0, return_inverse=True)
  inverse = inverse.reshape(-1)
  ranks = _dense_ranks(query_codes, unique, weights)
  bound = 1 << int(np.ceil(np.log2(max(unique.shape[0], 2))))   # few compiled sizes
  kernel = _ap_kernel(bound - 1)
  query_labels, db_labels = np.asarray(query_labels), np.asarray(db_labels)
  kind = ("same_class" if query_labels.ndim == 1 else "share_label") if relevance == "auto" \
      else relevance
  chunk = max(1, min(256, (1 << 23) // max(db.shape[0], bound)))
  total = 0.0
  for start in range(0, ranks.shape[0], chunk):
    rows = slice(start, start + chunk)
    rel = jhash.metrics.relevance(jax.numpy.asarray(query_labels[rows]),
                                  jax.numpy.asarray(db_labels), kind)
    ap, _ = kernel(jax.numpy.asarray(ranks[rows][:, inverse]), rel)
    total += float(np.sum(np.asarray(ap, np.float64)))
  return total / ranks.shape[0]


def retrieval_scores(query_codes, db_codes, query_labels, db_labels, weights,
                     ndcg_k: int | None = None) -> dict:
  """mAP (and NDCG@k for multi-hot labels) with unweighted and weighted ranking."""
  out = {"map": ranked_map(query_codes, db_codes, query_labels, db_labels),
         "map_weighted": ranked_map(query_codes, db_codes, query_labels, db_labels, weights)}
  if ndcg_k:
    args = (query_codes, db_codes, query_labels, db_labels, ndcg_k)
    out["ndcg"] = jhash.metrics.ndcg_at_k(*args)
    out["ndcg_weighted"] = jhash.metrics.ndcg_at_k(*args, weights=weights)
  return out


# ----------------------------------------------------------------------------- HBMP cells


def hbmp_cell(workdir: harness.Workdir, cell: str, method, key, batches,
              checkpoint_every: int, ndcg_k: int | None = None) -> dict:
  """Fit HBMP (pursuit then hash functions, resumable), encode, and score a cell.

  Returns mAP (weighted and unweighted; NDCG too for ``ndcg_k``), the bit errors of the
  learned codes against the target codes (training set, and queries against the target
  code of their class / nearest label set), the alphas, the per-bit residual norms and
  the hash functions' training curves (one entry per minibatch step).
  """
  train, query, database = batches
  started = time.time()
  state, history = workdir.fit(cell, method, key, train, checkpoint_every=checkpoint_every)
  jax.block_until_ready(state)
  fit_seconds = time.time() - started
  started = time.time()
  q_codes = jhash.encode(method, state, query)
  db_codes = jhash.encode(method, state, database)
  train_codes = jhash.encode(method, state, train)
  jax.block_until_ready(db_codes)
  encode_seconds = time.time() - started
  weights = np.asarray(method.extras.weights(state))
  query_targets = np.asarray(method.extras.encode_targets(state, query))
  result = retrieval_scores(q_codes, db_codes, query["labels"], database["labels"], weights,
                            ndcg_k)
  result.update({
      "train_bit_error": float(np.mean(np.asarray(train_codes) != np.asarray(
          method.extras.target_codes(state)))),
      "query_bit_error": float(np.mean(np.asarray(q_codes) != query_targets)),
      "alphas": weights.tolist(),
      "residual_norms": (np.asarray(state.pursuit.residual_norms)
                         / float(state.pursuit.initial_norm)).tolist(),
      "bit_error_curve": history["bit_error"].tolist(),
      "hinge_loss_curve": history["hinge_loss"].tolist(),
      "fit_seconds": fit_seconds,
      "encode_seconds": encode_seconds,
  })
  return result


def hbmp_method(bits: int, hash_function: str, config, **pursuit) -> jhash.methods.HashingMethod:
  """``hbmp`` with the hash-function options of ``config.hash_options[hash_function]``."""
  options = config.hash_options[hash_function].to_dict()
  return jhash.methods.hbmp(bits, hash_function=hash_function, hash_options=options, **pursuit)


# ----------------------------------------------------------------------------- pursuit


def class_affinity(num_classes: int, num_bits: int) -> np.ndarray:
  """The class-level affinity ``R = b (2I - 1)``: float32 [m, m] (the paper's Figure 1(a))."""
  return (num_bits * (2.0 * np.eye(num_classes) - 1.0)).astype(np.float32)


@functools.lru_cache(maxsize=16)
def whole_pursuit(pursuit):
  """The pursuit of all ``pursuit.num_bits`` bits as one compiled call.

  ``pursuit``: ``hbmp(...).extras.pursuit``. Returns a jitted ``(affinity float32 [m, m],
  key, rule int32 []) -> PursuitState`` (a ``lax.scan`` over bits, bit ``t`` with the key
  ``fold_in(key, t)``); ``rule`` is a step-size rule as ``pursuit_rule`` gives it, data in
  the state, so one compilation serves every rule.
  """
  def run(affinity, key, rule):
    def body(state, bit):
      return pursuit.step(state, affinity, jax.random.fold_in(key, bit))[0], None
    state = pursuit.init(affinity)._replace(step_size=rule)
    return lax.scan(body, state, jnp.arange(pursuit.num_bits))[0]
  return jax.jit(run)


def pursuit_rule(method, affinity) -> jax.Array:
  """The step-size rule of an ``hbmp`` method, as the pursuit's state holds it."""
  return method.extras.pursuit.init(jnp.asarray(affinity)).step_size
