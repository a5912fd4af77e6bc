"""What the HBMP experiments share: scores with and without bit weights, the HBMP cell.

Everything here reaches HBMP through its public method (``jhash.methods.hbmp`` and its
``extras``; ``extras.pursuit.run`` makes every bit in one compiled call). Weighted Hamming
mAP is ``jhash.metrics.weighted_mean_average_precision``, a shorthand for
``mean_average_precision(..., weights=)`` (on the CPU a native kernel).
"""

from __future__ import annotations

import time

import jax
import numpy as np

import jhash
from experiments import harness


# ----------------------------------------------------------------------------- ranking


def retrieval_scores(
  query_codes, db_codes, query_labels, db_labels, weights, ndcg_k: int | None = None
) -> dict:
  """mAP (and NDCG@k for multi-hot labels) with unweighted and weighted ranking."""
  args = (query_codes, db_codes, query_labels, db_labels)
  out = {
    "map": jhash.metrics.mean_average_precision(*args),
    "map_weighted": jhash.metrics.weighted_mean_average_precision(*args, weights),
  }
  if ndcg_k:
    args = (query_codes, db_codes, query_labels, db_labels, ndcg_k)
    out["ndcg"] = jhash.metrics.ndcg_at_k(*args)
    out["ndcg_weighted"] = jhash.metrics.ndcg_at_k(*args, weights=weights)
  return out


# ----------------------------------------------------------------------------- HBMP cells


def hbmp_cell(
  workdir: harness.Workdir,
  cell: str,
  method,
  key,
  batches,
  checkpoint_every: int,
  ndcg_k: int | None = None,
) -> dict:
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
  result = retrieval_scores(q_codes, db_codes, query["labels"], database["labels"], weights, ndcg_k)
  result.update(
    {
      "train_bit_error": float(
        np.mean(np.asarray(train_codes) != np.asarray(method.extras.target_codes(state)))
      ),
      "query_bit_error": float(np.mean(np.asarray(q_codes) != query_targets)),
      "alphas": weights.tolist(),
      "residual_norms": (
        np.asarray(state.pursuit.residual_norms) / float(state.pursuit.initial_norm)
      ).tolist(),
      "bit_error_curve": history["bit_error"].tolist(),
      "hinge_loss_curve": history["hinge_loss"].tolist(),
      "fit_seconds": fit_seconds,
      "encode_seconds": encode_seconds,
    }
  )
  return result


def hbmp_method(bits: int, hash_function: str, config, **pursuit) -> jhash.methods.HashingMethod:
  """``hbmp`` with the hash-function options of ``config.hash_options[hash_function]``."""
  options = config.hash_options[hash_function].to_dict()
  return jhash.methods.hbmp(bits, hash_function=hash_function, hash_options=options, **pursuit)


# ----------------------------------------------------------------------------- pursuit


def class_affinity(num_classes: int, num_bits: int) -> np.ndarray:
  """The class-level affinity ``R = b (2I - 1)``: float32 [m, m] (the paper's Figure 1(a))."""
  return (num_bits * (2.0 * np.eye(num_classes) - 1.0)).astype(np.float32)
