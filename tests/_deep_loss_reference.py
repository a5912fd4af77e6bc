"""Slow float64 NumPy transcriptions of the five deep hashing base models' formulas.

Written from the papers' formulas, not from jhash: each probability is written out and its
negative log taken, the margin weights pair by pair, the ADSH objective as the paper's
sum, and the KSH residual as ``K S~ - sum_t h_t h_t^T``.
"""

import numpy as np


def sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def sign(x):
  return np.where(x >= 0, 1.0, -1.0)


def weighted_mean(w, values):
  """sum w * values / sum w, over the pairs of positive weight only (0 * inf is no term)."""
  counted = w > 0
  return np.sum(w[counted] * values[counted]) / np.sum(w)


def relaxed_hamming(a, b):
  """(K/2) (1 - cos(a_i, b_j)) for every pair."""
  k = a.shape[1]
  out = np.empty((a.shape[0], b.shape[0]))
  for i in range(a.shape[0]):
    for j in range(b.shape[0]):
      cos = a[i] @ b[j] / (np.linalg.norm(a[i]) * np.linalg.norm(b[j]))
      out[i, j] = k / 2 * (1 - cos)
  return out


def ksh(u, v, s, w):
  """sum w ((1/K) h_i.h_j - S~)^2 / sum w on h = 2 sigmoid(.) - 1."""
  h, g = 2 * sigmoid(u) - 1, 2 * sigmoid(v) - 1
  k = u.shape[1]
  return np.sum(w * (h @ g.T / k - (2 * s - 1)) ** 2) / np.sum(w)


def hashnet(z, v, s, w, beta, alpha):
  """HashNet's weighted likelihood: -log sigmoid(theta) if similar, -log(1 - sigmoid) if not."""
  theta = alpha * np.tanh(beta * z) @ np.tanh(beta * v).T
  p = sigmoid(theta)
  nll = -(s * np.log(p) + (1 - s) * np.log(1 - p))
  return weighted_mean(w, nll)


def adsh(u, v, s, w, gamma, own):
  """ADSH's objective with codes sign(v) and the items' own codes, divided by sum w."""
  t, k = np.tanh(u), u.shape[1]
  total = 0.0
  for i in range(u.shape[0]):
    for j in range(v.shape[0]):
      total += w[i, j] * (t[i] @ sign(v[j]) - k * (2 * s[i, j] - 1)) ** 2
    total += gamma * np.sum((own[i] - t[i]) ** 2)
  return total / np.sum(w)


def adsh_objective(codes, outputs, s_tilde, index, gamma):
  k = codes.shape[1]
  pair = np.sum((outputs @ codes.T - k * s_tilde) ** 2)
  return pair + gamma * sum(
    np.sum((codes[index[i]] - outputs[i]) ** 2) for i in range(outputs.shape[0])
  )


def dch(u, v, s, w, gamma, lam):
  """Cauchy probability p = gamma / (gamma + d); -log p if similar, -log(1 - p) if not."""
  h = np.tanh(u)
  d = relaxed_hamming(h, np.tanh(v))
  with np.errstate(divide="ignore", invalid="ignore"):
    p = gamma / (gamma + d)
    nll = -(s * np.log(p) + (1 - s) * np.log(1 - p))
  to_vertex = relaxed_hamming(np.abs(h), np.ones((1, u.shape[1])))[:, 0]
  return weighted_mean(w, nll) + lam * np.mean(np.log(1 + to_vertex / gamma))


def mmhh_weights(s, w, d, margin, factors):
  """factors: (similar inside, dissimilar inside, similar outside, dissimilar outside)."""
  out = np.empty_like(w)
  for i in range(w.shape[0]):
    for j in range(w.shape[1]):
      inside = d[i, j] <= margin
      if s[i, j] > 0:
        out[i, j] = w[i, j] * (factors[0] if inside else factors[2])
      else:
        out[i, j] = w[i, j] * (factors[1] if inside else factors[3])
  return out


def mmhh(u, v, s, w, gamma, margin, factors, lam):
  """p = 0.5 gamma / (d + gamma); the cross-entropy with margin weights, / sum w; log cosh."""
  h = np.tanh(u)
  d = relaxed_hamming(h, np.tanh(v))
  p = 0.5 * gamma / (d + gamma)
  nll = s * np.log(1 / p) + (1 - s) * np.log(1 / (1 - p))
  scaled = mmhh_weights(s, w, d, margin, factors)
  quant = np.mean(np.sum(np.log(np.cosh(np.abs(h) - 1)), axis=1))
  return np.sum(scaled * nll) / np.sum(w) + lam * quant


def rbf_features(x, anchors, sigma, mu):
  out = np.empty((x.shape[0], anchors.shape[0]))
  for i in range(x.shape[0]):
    for j in range(anchors.shape[0]):
      out[i, j] = np.exp(-np.sum((x[i] - anchors[j]) ** 2) / (2 * sigma**2)) - mu[j]
  return out


def ksh_residual_norms(codes, s_tilde):
  """||K S~ - sum_{t<k} h_t h_t^T||_F for k = 0..K."""
  k = codes.shape[1]
  residual = k * s_tilde
  norms = [np.linalg.norm(residual)]
  for t in range(k):
    residual = residual - np.outer(codes[:, t], codes[:, t])
    norms.append(np.linalg.norm(residual))
  return np.array(norms)


def central_gradient(f, x, step=1e-6):
  """Central finite differences of a scalar function of a float64 array."""
  grad = np.zeros_like(x)
  for index in np.ndindex(x.shape):
    plus, minus = x.copy(), x.copy()
    plus[index] += step
    minus[index] -= step
    grad[index] = (f(plus) - f(minus)) / (2 * step)
  return grad
