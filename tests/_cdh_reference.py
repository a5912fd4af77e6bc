"""Slow, dense NumPy references for CDH (float64 unless stated), written for clarity.

Notation as in METHODS.md section 1: codes ``B`` in {-1,+1} [n, K], supervision
``Y`` in {-1,0,+1} [n, n], weights ``W[v]`` [K, d_v + 1] (last column the bias),
features ``X[v]`` [n, d_v].
"""

from __future__ import annotations

import numpy as np


def sigmoid(t):
  return 1.0 / (1.0 + np.exp(-t))


def dense_supervision(labels) -> np.ndarray:
  """Y = +1 for pairs that share a label (same class), -1 otherwise; float64 [n, n]."""
  labels = np.asarray(labels)
  if labels.ndim == 1:
    share = labels[:, None] == labels[None, :]
  else:
    share = (labels.astype(np.int64) @ labels.astype(np.int64).T) > 0
  return np.where(share, 1.0, -1.0)


def with_bias(x) -> np.ndarray:
  x = np.asarray(x, np.float64)
  return np.concatenate([x, np.ones((x.shape[0], 1))], axis=1)


def merit(y, p, kind):
  """l(Y_ij, p_ij): ``Y p`` (linear) or ``-exp(-Y p)`` (exponential)."""
  return y * p if kind == "linear" else -np.exp(-y * p)


def semantic_term(codes, y, kind) -> float:
  """(1/n^2) sum_ij l(Y_ij, p_ij), every ordered pair (i = j included)."""
  b = np.asarray(codes, np.float64)
  n, k = b.shape
  return float(np.sum(merit(y, b @ b.T / k, kind)) / n**2)


def generative_term(codes, weights, views, gamma) -> float:
  """(gamma/n) sum_i sum_k sum_v sigmoid(b_ik w_kv^T [x_i^v, 1])."""
  b = np.asarray(codes, np.float64)
  total = 0.0
  for w, x in zip(weights, views):
    total += np.sum(sigmoid(b * (with_bias(x) @ np.asarray(w, np.float64).T)))
  return float(gamma / b.shape[0] * total)


def objective(codes, y, weights, views, gamma, kind) -> float:
  """The full CDH objective J (both terms)."""
  return semantic_term(codes, y, kind) + generative_term(codes, weights, views, gamma)


def generative_linear_terms(weights, views) -> np.ndarray:
  """Z_ik = sum_v (sigmoid(w_kv^T [x_i^v, 1]) - 1/2), [n, K]."""
  return sum(
    sigmoid(with_bias(x) @ np.asarray(w, np.float64).T) - 0.5 for w, x in zip(weights, views)
  )


def bit_matrix(codes, y, k, kind) -> np.ndarray:
  """A of bit k, rebuilt from scratch: sinh(Y/K) exp(-Y p^{-k}) or Y/K, zero diagonal."""
  b = np.asarray(codes, np.float64)
  num_bits = b.shape[1]
  if kind == "linear":
    a = y / num_bits
  else:
    rest = np.delete(b, k, axis=1)
    p_minus_k = rest @ rest.T / num_bits
    a = np.sinh(y / num_bits) * np.exp(-y * p_minus_k)
  a = np.array(a, np.float64)
  np.fill_diagonal(a, 0.0)
  return a


def bit_objective(a, z, x, gamma) -> float:
  """J_k(x) = (1/n^2) x^T A x + (gamma/n) Z^T x."""
  x = np.asarray(x, np.float64)
  n = x.shape[0]
  return float(x @ a @ x / n**2 + gamma / n * (np.asarray(z, np.float64) @ x))


def algorithm2(a, b, active, start) -> np.ndarray:
  """The paper's Algorithm 2 (active set reduction), transcribed line by line.

  Float32 throughout, gains accumulated row by row in the order of addition, so a
  float32 implementation doing the same additions gets bitwise equal gains.

  Args:
    a: [n, n] symmetric, zero diagonal.
    b: [n] current bit in {-1,+1}.
    active: bool [n], the active set I.
    start: the first element of I_r (must be in I).
  Returns:
    bool [n], the reduced set I_r (the items to flip).
  """
  a = np.asarray(a, np.float32)
  b = np.asarray(b, np.float32)
  s = np.asarray(active, np.float32)
  m = a * np.outer(b, b) * np.outer(s, s)  # line 4
  reduced = {int(start)}  # line 5
  gain = m[start, :].copy()  # line 6
  while True:  # line 7
    candidates = [i for i in np.flatnonzero(active) if i not in reduced]
    if not candidates:
      break
    values = gain[candidates]
    i = candidates[int(np.argmax(values))]  # line 8
    q = gain[i]
    if q < 0:  # line 9
      break
    reduced.add(i)  # line 10
    gain = gain + m[i, :]  # line 11
  out = np.zeros(b.shape[0], bool)
  out[sorted(reduced)] = True
  return out


def active_set(a, z, b, gamma) -> np.ndarray:
  """I = {i : g_i b_i < 0}, g = 2 A b / n^2 + gamma Z / n (ties g_i = 0 stay out)."""
  b = np.asarray(b, np.float64)
  n = b.shape[0]
  g = 2 * a @ b / n**2 + gamma * np.asarray(z, np.float64) / n
  return g * b < 0


def single_flip_gains(a, z, b, gamma) -> np.ndarray:
  """J_k(b with item i flipped) - J_k(b), for every i, by brute force."""
  base = bit_objective(a, z, b, gamma)
  out = np.empty(b.shape[0])
  for i in range(b.shape[0]):
    x = np.array(b, np.float64)
    x[i] = -x[i]
    out[i] = bit_objective(a, z, x, gamma) - base
  return out


def wstep_objective(w, x, b, kind, l2=0.0) -> float:
  """The W-step's objective of one bit-view pair on items ``x`` [n, d] with bits ``b`` [n]:
  ``mean_i sigmoid(b_i w^T [x_i, 1])`` ("probability") or
  ``mean_i log sigmoid(b_i w^T [x_i, 1]) - l2 ||w[:-1]||^2`` ("log_likelihood")."""
  w = np.asarray(w, np.float64)
  t = np.asarray(b, np.float64) * (with_bias(x) @ w)
  if kind == "probability":
    return float(np.mean(sigmoid(t)))
  return float(np.mean(-np.logaddexp(0.0, -t)) - l2 * np.sum(w[:-1] ** 2))


def logistic_regression(x, b, l2, iters=100) -> np.ndarray:
  """The maximiser of the "log_likelihood" W-step objective (L2-regularised logistic
  regression, bias not penalised) by Newton's method with step halving: float64 [d + 1].

  Gradient ``X1^T (b sigmoid(-b t)) / n - 2 l2 w'`` and Hessian
  ``-X1^T diag(s (1 - s)) X1 / n - 2 l2 I'`` (``t = X1 w``, ``s = sigmoid(t)``, ``'``:
  the bias entry zeroed).
  """
  x1 = with_bias(x)
  b = np.asarray(b, np.float64)
  n, d1 = x1.shape
  penalised = np.ones(d1)
  penalised[-1] = 0.0
  w = np.zeros(d1)
  for _ in range(iters):
    t = x1 @ w
    s = sigmoid(t)
    grad = x1.T @ (b * sigmoid(-b * t)) / n - 2 * l2 * penalised * w
    if np.max(np.abs(grad)) < 1e-10:
      break
    hess = -(x1.T * (s * (1 - s))) @ x1 / n - 2 * l2 * np.diag(penalised)
    step = -np.linalg.solve(hess, grad)
    base = wstep_objective(w, x, b, "log_likelihood", l2)
    while (
      wstep_objective(w + step, x, b, "log_likelihood", l2) < base and np.max(np.abs(step)) > 1e-12
    ):
      step = step / 2
    w = w + step
  return w


def encode(weights, views, log_prior_odds) -> np.ndarray:
  """Generative codes by the product rule, with None for unobserved views.

  b_k = argmax_b log P_k(b) + sum_{v observed} log sigmoid(b w_kv^T [x^v, 1]).
  """
  n = next(x for x in views if x is not None).shape[0]
  k = np.asarray(weights[0]).shape[0]
  prior_plus = 1.0 / (1.0 + np.exp(-np.asarray(log_prior_odds, np.float64)))
  score = {
    s: np.log(prior_plus if s > 0 else 1.0 - prior_plus)[None, :] * np.ones((n, k)) for s in (1, -1)
  }
  for w, x in zip(weights, views):
    if x is None:
      continue
    t = with_bias(x) @ np.asarray(w, np.float64).T
    for s in (1, -1):
      score[s] = score[s] + np.log(sigmoid(s * t))
  return np.where(score[1] >= score[-1], 1, -1).astype(np.int8)
