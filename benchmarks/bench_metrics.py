"""mAP over a whole database: jhash against NumPy implementations of the toolbox formula.

    python benchmarks/bench_metrics.py [--quick]

1,000 queries x 100,000 database codes of 64 bits, 10 classes (codes drawn near
class prototypes so the mAP is neither 0 nor 1). Rows:

* NumPy, toolbox formula: per query, Hamming distance as ``0.5 * (K - q . B^T)``,
  ``np.argsort``, cumulative precision at the relevant positions (the loop of
  DPSH / DeepHash-pytorch's ``CalcMap``).
* NumPy, fast: packed codes, ``np.bitwise_count``, a stable argsort of uint8
  distances (a radix sort) and the same cumulative sums.
* jhash ``mean_average_precision(ties="aware")``: items and relevant items counted
  per distance, no sort.
* jhash ``mean_average_precision(ties="index")``: each relevant item's rank from the
  counts per distance and its position among equal distances, no sort.

On the CPU both run jhash's native kernels (``jhash.native``: one pass per query
over the codes, queries spread over XLA's intra-op thread pool); elsewhere the
array code (a histogram, and one int32 sort key per query for index order).

All variants are timed in one run, interleaved, median of repeats after a
warm-up; the section "mAP over a whole database" of benchmarks/RESULTS.md is
rewritten with the table.
"""

from __future__ import annotations

import argparse

import numpy as np

import _report
import jhash


def toolbox_map(q_codes, db_codes, q_labels, db_labels):
  """The common toolbox loop (float Hamming distance, np.argsort), queries in a loop."""
  k = q_codes.shape[1]
  qf, dbf = q_codes.astype(np.float32), db_codes.astype(np.float32)
  total = 0.0
  for i in range(qf.shape[0]):
    gnd = (db_labels == q_labels[i]).astype(np.float32)
    tsum = int(gnd.sum())
    if tsum == 0:
      continue
    hamm = 0.5 * (k - dbf @ qf[i])
    gnd = gnd[np.argsort(hamm)]
    count = np.linspace(1, tsum, tsum)
    tindex = np.flatnonzero(gnd == 1) + 1.0
    total += np.mean(count / tindex)
  return total / qf.shape[0]


def fast_numpy_map(q_packed, db_packed, q_labels, db_labels):
  """Packed codes, bitwise_count, stable (radix) argsort of uint8 distances."""
  total = 0.0
  for i in range(q_packed.shape[0]):
    d = np.bitwise_count(db_packed ^ q_packed[i][None, :]).sum(1, dtype=np.uint8)
    rel = db_labels[np.argsort(d, kind="stable")] == q_labels[i]
    hits = np.cumsum(rel)
    r = hits[-1]
    if r:
      total += np.sum(hits[rel] / (np.flatnonzero(rel) + 1.0)) / r
  return total / q_packed.shape[0]


def make_data(num_queries, num_items, num_bits, num_classes=10, flip=0.3, seed=0):
  rng = np.random.default_rng(seed)
  protos = np.where(rng.random((num_classes, num_bits)) < 0.5, -1, 1).astype(np.int8)

  def draw(n):
    labels = rng.integers(0, num_classes, n).astype(np.int32)
    noise = np.where(rng.random((n, num_bits)) < flip, -1, 1).astype(np.int8)
    return protos[labels] * noise, labels

  return draw(num_queries), draw(num_items)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()
  nq, nd, k = (100, 20_000, 64) if args.quick else (1000, 100_000, 64)
  (qc, ql), (dc, dl) = make_data(nq, nd, k)
  qp = np.asarray(jhash.codes.pack_bits(qc))
  dp = np.asarray(jhash.codes.pack_bits(dc))
  runs = {
    "NumPy, toolbox formula (float distances, np.argsort)": lambda: toolbox_map(qc, dc, ql, dl),
    "NumPy, fast (bitwise_count, radix argsort)": lambda: fast_numpy_map(qp, dp, ql, dl),
    "jhash, tie-aware": lambda: jhash.metrics.mean_average_precision(qc, dc, ql, dl, ties="aware"),
    "jhash, ties by index (no sort)": lambda: jhash.metrics.mean_average_precision(
      qc, dc, ql, dl, ties="index"
    ),
  }
  values = {name: fn() for name, fn in runs.items()}  # warm-up (compiles jhash)
  times = _report.interleaved(runs, args.repeats)
  base = times["NumPy, toolbox formula (float distances, np.argsort)"]
  rows = [
    [name, f"{values[name]:.6f}", f"{times[name]:.3f}", f"{base / times[name]:.1f}x"]
    for name in runs
  ]
  table = _report.table(["implementation", "mAP", "seconds (median)", "speed-up vs toolbox"], rows)
  fast = times["NumPy, fast (bitwise_count, radix argsort)"]
  note = (
    f"{nq:,} queries x {nd:,} database codes, {k} bits, 10 classes; mAP over the whole "
    f"database. Against the fast NumPy variant, jhash tie-aware is "
    f"{fast / times['jhash, tie-aware']:.1f}x and jhash index-ordered "
    f"{fast / times['jhash, ties by index (no sort)']:.1f}x. The index-ordered jhash mAP equals "
    f"the NumPy stable one to {abs(values['jhash, ties by index (no sort)'] - values['NumPy, fast (bitwise_count, radix argsort)']):.1e}; "
    "the toolbox's unstable argsort orders ties arbitrarily, so its value differs slightly. "
    f"jhash ran {'the native CPU kernels' if jhash.native.enabled() else 'the array code'} "
    "(jhash.native)."
  )
  _report.write_section(
    "mAP over a whole database",
    "python benchmarks/bench_metrics.py" + (" --quick" if args.quick else ""),
    table + "\n\n" + note,
  )


if __name__ == "__main__":
  main()
