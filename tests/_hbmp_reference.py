"""Slow, plain NumPy references for HBMP (written for clarity, not speed).

* ``masked_residual``: ``Q = M .* (R - sum_k alpha_k v_k v_k^T)`` formed explicitly.
* ``regress_lstsq``: the paper's refit (Eq. 9-10): stack ``vec(v_k v_k^T)`` over the
  off-diagonal entries and call ``np.linalg.lstsq``, ``O(t^2 n^2)``.
* ``best_single_flip_gain``: every single flip's change of ``v^T Q v``, by brute force.
* ``weighted_hamming_map``: mAP of a ranking by weighted Hamming distance, by sorting.
* ``pursuit``: the whole inference as a user would port the paper to NumPy: the residual
  formed each step, power iteration (shifted when the dominant eigenvalue is negative)
  from several starts, sign, single-flip local search, the random rule for degenerate
  steps, and step sizes; ``regress`` by the vectorised least squares above. It records the
  time of each part of each bit (the benchmark times its own NumPy port).
"""

from __future__ import annotations

import time

import numpy as np


def off_diagonal_mask(n: int) -> np.ndarray:
  return ~np.eye(n, dtype=bool)


def masked_residual(r, codes, alphas) -> np.ndarray:
  """``M .* (R - V diag(alpha) V^T)``, float64 [n, n]."""
  v = np.asarray(codes, np.float64)
  q = np.asarray(r, np.float64) - (v * np.asarray(alphas, np.float64)[None, :]) @ v.T
  np.fill_diagonal(q, 0.0)
  return q


def regress_lstsq(r, codes) -> np.ndarray:
  """Least-squares alphas on the off-diagonal entries (Eq. 10), by ``np.linalg.lstsq``."""
  v = np.asarray(codes, np.float64)
  mask = off_diagonal_mask(v.shape[0])
  columns = np.stack([np.outer(v[:, k], v[:, k])[mask] for k in range(v.shape[1])], axis=1)
  target = np.asarray(r, np.float64)[mask]
  return np.linalg.lstsq(columns, target, rcond=None)[0]


def best_single_flip_gain(q, code) -> float:
  """Largest change of ``v^T Q v`` over single flips, each objective recomputed."""
  q = np.asarray(q, np.float64).copy()
  np.fill_diagonal(q, 0.0)
  v = np.asarray(code, np.float64)
  base = v @ q @ v
  best = -np.inf
  for i in range(v.shape[0]):
    w = v.copy()
    w[i] = -w[i]
    best = max(best, w @ q @ w - base)
  return float(best)


def weighted_hamming_map(query_codes, db_codes, weights, query_labels, db_labels) -> float:
  """mAP of ranking by weighted Hamming distance ``sum_k w_k [q_k != b_k]``, by sorting.

  Ties are ordered by database index (a stable sort); a query with no relevant item
  counts 0.
  """
  q = np.asarray(query_codes, np.float64)
  b = np.asarray(db_codes, np.float64)
  w = np.asarray(weights, np.float64)
  aps = []
  for i in range(q.shape[0]):
    dist = np.array([np.sum(w * (q[i] != b[j])) for j in range(b.shape[0])])
    order = np.argsort(dist, kind="stable")
    rel = (np.asarray(db_labels)[order] == np.asarray(query_labels)[i]).astype(float)
    if rel.sum() == 0:
      aps.append(0.0)
      continue
    precision = np.cumsum(rel) / np.arange(1, rel.size + 1)
    aps.append(float(np.sum(precision * rel) / rel.sum()))
  return float(np.mean(aps))


def _power(q, x, shift, num_iters, tol):
  """Power iteration on ``Q - shift I`` for the columns of ``x`` [n, r]."""
  x = x / np.linalg.norm(x, axis=0, keepdims=True)
  for _ in range(num_iters):
    y = q @ x - shift[None, :] * x
    y = y / np.maximum(np.linalg.norm(y, axis=0, keepdims=True), 1e-300)
    sign = np.where(np.sum(y * x, axis=0) >= 0, 1.0, -1.0)
    delta = np.linalg.norm(y - sign[None, :] * x, axis=0)
    x = y
    if np.all(delta <= tol):
      break
  return x


def _direction(q, rng, num_restarts, num_iters, tol):
  """Eigenvectors of the algebraically largest eigenvalue from several starts: [n, r]."""
  n = q.shape[0]
  x0 = rng.standard_normal((n, num_restarts))
  x = _power(q, x0, np.zeros(num_restarts), num_iters, tol)
  lam = np.sum(x * (q @ x), axis=0)
  shift = np.minimum(lam, 0.0)
  start = np.where(lam[None, :] < 0, x0, x)
  return _power(q, start, shift, num_iters, tol)


def _local_search(q, v, max_flips):
  qv = q @ v
  for _ in range(max_flips):
    gains = -4.0 * v * qv
    i = int(np.argmax(gains))
    if gains[i] <= 1e-5 * np.max(np.abs(qv)):
      break
    qv -= 2.0 * v[i] * q[i]  # Q is symmetric: row i is column i
    v[i] = -v[i]
  return v


def _is_new(v, codes):
  return not np.any(np.abs(v @ codes) == v.shape[0]) if codes.shape[1] else True


def pursuit(
  r,
  num_bits,
  rng,
  *,
  step_size="regress",
  num_restarts=4,
  num_iters=20,
  tol=1e-4,
  local_search=True,
  stop_after=None,
):
  """The paper's inference in NumPy (see module docstring).

  Args:
    r: float [n, n] affinity.
    num_bits: b.
    rng: ``np.random.Generator``.
    step_size: "constant", "line" or "regress".
    stop_after: run only this many bits (for timing the first bits of a long run).
  Returns:
    dict with ``codes`` [n, t] float, ``alphas`` [t], ``residual_norms`` [t],
    ``initial_norm`` and per-bit seconds ``time_residual``, ``time_direction``,
    ``time_refit`` (each [t]).
  """
  r = np.asarray(r, np.float64)
  n = r.shape[0]
  mask = off_diagonal_mask(n)
  r0 = np.where(mask, r, 0.0)
  codes = np.zeros((n, 0))
  alphas = np.zeros(0)
  columns = np.zeros((mask.sum(), 0))  # vec(v_k v_k^T) on the masked entries
  out = {k: [] for k in ("residual_norms", "time_residual", "time_direction", "time_refit")}
  for _ in range(num_bits if stop_after is None else stop_after):
    t0 = time.perf_counter()
    q = masked_residual(r, codes, alphas)
    t1 = time.perf_counter()
    x = _direction(q, rng, num_restarts, num_iters, tol)
    signs = np.where(x >= 0, 1.0, -1.0)
    objectives = np.sum(signs * (q @ signs), axis=0)
    usable = [j for j in range(num_restarts) if _is_new(signs[:, j], codes) and objectives[j] > 0]
    best = max(usable or range(num_restarts), key=lambda j: objectives[j])
    v = signs[:, best].copy()
    if local_search:
      v = _local_search(q, v, n)
    if not _is_new(v, codes) or v @ q @ v <= 0:
      for _ in range(16):
        v = rng.choice([-1.0, 1.0], size=n)
        if _is_new(v, codes):
          break
    t2 = time.perf_counter()
    codes = np.concatenate([codes, v[:, None]], axis=1)
    if step_size == "constant":
      alphas = np.append(alphas, 1.0)
    elif step_size == "line":
      alphas = np.append(alphas, (v @ q @ v) / (n * n - n))
    else:
      columns = np.concatenate([columns, np.outer(v, v)[mask][:, None]], axis=1)
      alphas = np.linalg.lstsq(columns, r0[mask], rcond=None)[0]
    t3 = time.perf_counter()
    out["residual_norms"].append(np.linalg.norm(masked_residual(r, codes, alphas)))
    out["time_residual"].append(t1 - t0)
    out["time_direction"].append(t2 - t1)
    out["time_refit"].append(t3 - t2)
  result = {k: np.asarray(v) for k, v in out.items()}
  result.update(codes=codes, alphas=alphas, initial_norm=np.linalg.norm(r0))
  return result
