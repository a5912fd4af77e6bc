"""The native CPU kernels where items hold several codes, the radius curves, weighted ranking.

    python benchmarks/bench_native.py [--quick]

1,000 queries x 100,000 items of 64 bits, 10 classes (codes drawn near class
prototypes); for the multi-code rows each item holds 1 to 3 codes (its first, and
each other with probability 0.7), as MCH's index keeps the codes of crops. Rows,
each against a NumPy implementation and jhash's own array code:

* ``jhash.search.multi_code_topk``, k = 100: NumPy takes each item's least distance
  over its codes (``np.bitwise_count``), the k smallest by (distance, index) with
  ``np.argpartition`` on one int64 key, then sorts them.
* ``jhash.metrics.mean_average_precision(db_mask=...)``, ties by index and tie-aware:
  NumPy takes the least distances, a stable argsort (a radix sort of uint8) and the
  cumulative precision (index order).
* ``jhash.metrics.pr_curve_by_radius``: NumPy counts items and relevant items per
  distance with ``np.bincount`` and takes cumulative sums.
* ``jhash.metrics.ndcg_at_k`` (k = 100, tie-aware, items of several codes): against
  the array code only.
* Weighted Hamming ranking (HBMP's; one code per item, 64 real weights in (0.5, 1.5)):
  ``jhash.search.weighted_hamming_topk`` (k = 100), ``mean_average_precision(weights=)``
  by index and tie-aware, ``ndcg_at_k(weights=)`` (k = 100, tie-aware; against the array
  code only); and index-ordered ``ndcg_at_k`` of the items' first codes (against the
  array code only). NumPy computes a query's distances as one float64
  matrix-vector product with the weights as jhash rounds them (``weight_units``: the
  same ranking), then ``np.argpartition`` on (distance, index) / a stable argsort.

``--quick`` (100 queries x 20,000 items) only prints. NumPy and jhash (native
kernels) are interleaved, median of repeats after a warm-up; jhash's array code (the kernels switched off, as on a GPU or TPU, here on
the CPU) is timed after them in the same process. Results are checked equal across
the three. The section "Native kernels: several codes per item, radius curves, weighted
ranking" of benchmarks/RESULTS.md is rewritten with the table.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import _report
import jhash

K = 100  # top-k


def make_data(num_queries, num_items, num_bits, codes_per_item=3, num_classes=10, flip=0.3, seed=0):
  rng = np.random.default_rng(seed)
  protos = np.where(rng.random((num_classes, num_bits)) < 0.5, -1, 1).astype(np.int8)

  def noisy(labels, shape):
    noise = np.where(rng.random(shape + (num_bits,)) < flip, -1, 1).astype(np.int8)
    return protos[labels].reshape(labels.shape + (1,) * (len(shape) - 1) + (num_bits,)) * noise

  ql = rng.integers(0, num_classes, num_queries).astype(np.int32)
  dl = rng.integers(0, num_classes, num_items).astype(np.int32)
  qc = noisy(ql, (num_queries,))
  dc = noisy(dl, (num_items, codes_per_item))
  mask = rng.random((num_items, codes_per_item)) < 0.7
  mask[:, 0] = True
  return qc, ql, dc, dl, mask


def np_least_distances(q_packed, db_packed, mask, num_bits, i):
  """Query i's least distance over each item's held codes: uint8 [n]."""
  d = np.bitwise_count(db_packed ^ q_packed[i][None, None, :]).sum(-1, dtype=np.uint8)
  return np.where(mask, d, np.uint8(num_bits + 1)).min(axis=1)


def np_multi_topk(q_packed, db_packed, mask, num_bits, k):
  n = db_packed.shape[0]
  out_d = np.empty((q_packed.shape[0], k), np.int64)
  out_i = np.empty((q_packed.shape[0], k), np.int64)
  index = np.arange(n, dtype=np.int64)
  for i in range(q_packed.shape[0]):
    key = np_least_distances(q_packed, db_packed, mask, num_bits, i).astype(np.int64) * n + index
    top = np.sort(key[np.argpartition(key, k - 1)[:k]])
    out_d[i], out_i[i] = top // n, top % n
  return out_d, out_i


def np_multi_map(q_packed, db_packed, mask, num_bits, q_labels, db_labels):
  """Index-ordered mAP over the whole database (stable argsort of uint8 distances)."""
  total = 0.0
  for i in range(q_packed.shape[0]):
    d = np_least_distances(q_packed, db_packed, mask, num_bits, i)
    rel = db_labels[np.argsort(d, kind="stable")] == q_labels[i]
    hits = np.cumsum(rel)
    if hits[-1]:
      total += np.sum(hits[rel] / (np.flatnonzero(rel) + 1.0)) / hits[-1]
  return total / q_packed.shape[0]


def np_pr_curve(q_packed, db_packed, num_bits, q_labels, db_labels):
  """Mean over queries of precision and recall within each radius (empty ball: 0)."""
  precision = np.zeros(num_bits + 1)
  recall = np.zeros(num_bits + 1)
  for i in range(q_packed.shape[0]):
    d = np.bitwise_count(db_packed ^ q_packed[i][None, :]).sum(1, dtype=np.uint8)
    rel = db_labels == q_labels[i]
    found = np.cumsum(np.bincount(d, minlength=num_bits + 1))
    hits = np.cumsum(np.bincount(d[rel], minlength=num_bits + 1))
    precision += np.where(found > 0, hits / np.maximum(found, 1), 0.0)
    recall += hits / max(int(rel.sum()), 1)
  return precision / q_packed.shape[0], recall / q_packed.shape[0]


def np_weighted_distances(qc, db, weights, i):
  """Query i's weighted distances, float64 [n] (db float64 [n, K] in {-1,+1})."""
  return 0.5 * (weights.sum() - db @ (qc[i] * weights))


def np_weighted_topk(qc, db, weights, k):
  out_d = np.empty((qc.shape[0], k))
  out_i = np.empty((qc.shape[0], k), np.int64)
  for i in range(qc.shape[0]):
    d = np_weighted_distances(qc, db, weights, i)
    part = np.argpartition(d, k - 1)[:k]
    # Ties at the k-th distance: every item at most that far, then (distance, index).
    keep = np.flatnonzero(d <= d[part].max())
    top = keep[np.lexsort((keep, d[keep]))][:k]
    out_d[i], out_i[i] = d[top], top
  return out_d, out_i


def np_weighted_map(qc, db, weights, q_labels, db_labels):
  """Index-ordered mAP over the whole database by weighted distance (stable argsort)."""
  total = 0.0
  for i in range(qc.shape[0]):
    rel = db_labels[np.argsort(np_weighted_distances(qc, db, weights, i), kind="stable")]
    rel = rel == q_labels[i]
    hits = np.cumsum(rel)
    if hits[-1]:
      total += np.sum(hits[rel] / (np.flatnonzero(rel) + 1.0)) / hits[-1]
  return total / qc.shape[0]


def weights_for(num_bits, seed=1):
  return (0.5 + np.random.default_rng(seed).random(num_bits)).astype(np.float32)


def jhash_runs(qc, ql, dc, dl, mask, qp, dp):
  num_bits = qc.shape[1]
  single = dc[:, 0]
  w = weights_for(num_bits)

  def weighted_topk():
    return jax.block_until_ready(jhash.search.weighted_hamming_topk(qc, single, w, K))

  def topk():
    return jax.block_until_ready(jhash.search.multi_code_topk(qp, dp, mask, K, num_bits=num_bits))

  return {
    "multi_code_topk": topk,
    "mAP, ties by index": lambda: jhash.metrics.mean_average_precision(
      qc, dc, ql, dl, db_mask=mask, ties="index"
    ),
    "mAP, tie-aware": lambda: jhash.metrics.mean_average_precision(
      qc, dc, ql, dl, db_mask=mask, ties="aware"
    ),
    "pr_curve_by_radius": lambda: jhash.metrics.pr_curve_by_radius(qc, single, ql, dl),
    "ndcg_at_k, tie-aware": lambda: jhash.metrics.ndcg_at_k(qc, dc, ql, dl, K, db_mask=mask),
    "weighted_hamming_topk": weighted_topk,
    "weighted mAP, ties by index": lambda: jhash.metrics.mean_average_precision(
      qc, single, ql, dl, weights=w, ties="index"
    ),
    "weighted mAP, tie-aware": lambda: jhash.metrics.mean_average_precision(
      qc, single, ql, dl, weights=w
    ),
    "weighted NDCG@k, tie-aware": lambda: jhash.metrics.ndcg_at_k(qc, single, ql, dl, K, weights=w),
    "ndcg_at_k, ties by index (one code per item)": lambda: jhash.metrics.ndcg_at_k(
      qc, single, ql, dl, K, ties="index"
    ),
  }


def median_times(runs, repeats):
  times = {}
  for name, fn in runs.items():
    samples = []
    for _ in range(repeats):
      start = time.perf_counter()
      fn()
      samples.append(time.perf_counter() - start)
    times[name] = float(np.median(samples))
  return times


def check_equal(name, a, b, numpy_value):
  if name == "weighted_hamming_topk":
    return (
      all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b))
      and np.array_equal(np.asarray(a[1]), numpy_value[1])
      and np.allclose(np.asarray(a[0]), numpy_value[0], rtol=1e-6)
    )
  if name == "weighted mAP, ties by index":
    return abs(a - b) < 1e-6 and abs(a - numpy_value) < 1e-5
  if name == "weighted mAP, tie-aware" or name.startswith(("weighted NDCG", "ndcg")):
    return abs(a - b) < 1e-6  # sums in another order (the AP kernel's in float64)
  if name == "multi_code_topk":
    same = all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b))
    return same and all(np.array_equal(np.asarray(x), y) for x, y in zip(a, numpy_value))
  if name == "pr_curve_by_radius":
    return all(
      np.allclose(a[f], b[f], atol=1e-5) and np.allclose(a[f], v, atol=1e-5)
      for f, v in zip(("precision", "recall"), numpy_value)
    )
  if name == "mAP, ties by index":
    return abs(a - b) < 1e-6 and abs(a - numpy_value) < 1e-5
  return a == b  # tie-aware mAP: the same integer tie groups


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()
  nq, nd, k = (100, 20_000, 64) if args.quick else (1000, 100_000, 64)
  qc, ql, dc, dl, mask = make_data(nq, nd, k)
  qp = np.asarray(jhash.codes.pack_bits(qc))
  dp = np.asarray(jhash.codes.pack_bits(dc.reshape(-1, k))).reshape(nd, dc.shape[1], -1)
  single = dc[:, 0].astype(np.float64)
  units, unit = jhash.search.weight_units(weights_for(k))
  rounded = np.asarray(units, np.float64) * float(unit)  # the weights jhash ranks by
  numpy_runs = {
    "multi_code_topk": lambda: np_multi_topk(qp, dp, mask, k, K),
    "mAP, ties by index": lambda: np_multi_map(qp, dp, mask, k, ql, dl),
    "pr_curve_by_radius": lambda: np_pr_curve(qp, dp[:, 0], k, ql, dl),
    "weighted_hamming_topk": lambda: np_weighted_topk(qc, single, rounded, K),
    "weighted mAP, ties by index": lambda: np_weighted_map(qc, single, rounded, ql, dl),
  }
  runs = jhash_runs(qc, ql, dc, dl, mask, qp, dp)
  interleaved = {
    **{f"numpy {n}": f for n, f in numpy_runs.items()},
    **{f"jhash {n}": f for n, f in runs.items()},
  }
  values = {name: fn() for name, fn in interleaved.items()}  # warm-up (compiles jhash)
  times = _report.interleaved(interleaved, args.repeats)
  native_on = jhash.native.enabled()
  # The array code: the kernels switched off, everything compiled again.
  jhash.native.enabled = lambda: False
  jax.clear_caches()
  array_values = {name: fn() for name, fn in runs.items()}
  array_times = median_times(runs, args.repeats)
  rows = []
  for name in runs:
    peer = times.get(f"numpy {name}")
    twin = "numpy weighted mAP, ties by index" if "weighted" in name else "numpy mAP, ties by index"
    ok = check_equal(
      name,
      values[f"jhash {name}"],
      array_values[name],
      values.get(f"numpy {name}", values.get(twin)),
    )
    head, comma, rest = name.partition(",")
    rows.append(
      [
        f"`{head}`{comma}{rest}" if "_" in head else name,
        "" if peer is None else f"{peer:.3f}",
        f"{array_times[name]:.3f}",
        f"{times[f'jhash {name}']:.3f}",
        "" if peer is None else f"{peer / times[f'jhash {name}']:.1f}x",
        f"{array_times[name] / times[f'jhash {name}']:.1f}x",
        "yes" if ok else "NO",
      ]
    )
  table = _report.table(
    [
      "function",
      "NumPy (s)",
      "jhash array code (s)",
      "jhash default (s)",
      "default vs NumPy",
      "default vs array code",
      "results equal",
    ],
    rows,
  )
  note = (
    f"{nq:,} queries x {nd:,} items, {k} bits, 10 classes; multi-code rows: items of 1 to "
    f"3 codes ({mask.sum() / nd:.2f} on average), top-k k = {K}; the radius curves over "
    "the items' first codes; weighted rows: the items' first codes, 64 weights in "
    "(0.5, 1.5). The tie-aware rows have no NumPy peer (NumPy's row for the "
    "mAP is index-ordered; 'results equal' there compares the two jhash paths' integer "
    "tie groups; for weighted ranking within 1e-6: the kernel sums in float64, the "
    "array code in float32). jhash default ran "
    f"{'the native CPU kernels' if native_on else 'the array code (kernels not built)'}."
  )
  if args.quick:  # a smoke run: printed only
    print(table + "\n\n" + note)
    return
  _report.write_section(
    "Native kernels: several codes per item, radius curves, weighted ranking",
    "python benchmarks/bench_native.py",
    table + "\n\n" + note,
  )


if __name__ == "__main__":
  main()
