"""A prepared searcher's cost per call at radius 0, against FAISS's ``IndexBinaryHash``.

Command: ``python benchmarks/bench_searcher_calls.py [--quick]``. 1,000,000 random codes
of 32 and of 64 bits, queries drawn from the database (so every query finds its own
bucket); calls of 1, 100, 1,000 and 10,000 queries. jhash: ``jhash.index.searcher(index,
max_radius=0, max_results=16)`` called with NumPy queries (its host path: the native
kernel without JAX's dispatch, results as NumPy), and the same searcher's compiled
program (``jax.jit(searcher.search)``, results copied to NumPy). FAISS:
``IndexBinaryHash(K, K)`` with ``nflip = 0``, ``range_search(x, 1)``, its default threads
(the cores). Medians of interleaved calls after warm-up; every call's item sets checked
against FAISS's on a sample of queries. Writes the section "Prepared searcher's cost per
call, radius 0" for this CPU kind (its title names the CPU) in ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import _report
import faiss
from jhash import index as index_lib

SLOTS = 16


def median_us(fn, repeats: int) -> float:
  fn()
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return 1e6 * float(np.median(times))


def same_items(ids, found, faiss_out, count: int) -> bool:
  lims, _, got = faiss_out
  for i in range(0, count, max(1, count // 50)):
    want = np.sort(got[lims[i] : lims[i + 1]])
    mine = np.sort(ids[i][ids[i] >= 0])
    whole = np.array_equal(mine, want) if want.size <= SLOTS else np.isin(mine, want).all()
    if found[i] != want.size or mine.size != min(want.size, SLOTS) or not whole:
      return False
  return True


def run(num_bits: int, n: int, counts, repeats: int, rng) -> list[list]:
  words = num_bits // 32
  db = rng.integers(0, 2**32, size=(n, words), dtype=np.uint32)
  queries = db[rng.integers(0, n, max(counts))]
  index = index_lib.build_index(db, num_bits=num_bits)
  prepared = index_lib.searcher(index, max_radius=0, max_results=SLOTS)
  compiled = jax.jit(prepared.search)
  findex = faiss.IndexBinaryHash(num_bits, num_bits)
  findex.nflip = 0
  findex.add(np.ascontiguousarray(db).view(np.uint8))
  rows = []
  for count in counts:
    q = np.ascontiguousarray(queries[:count])
    qbytes = np.ascontiguousarray(q).view(np.uint8)
    ids, found = prepared.search(q)
    assert isinstance(ids, np.ndarray), "the host path did not run"
    c_ids, c_found = (np.asarray(x) for x in compiled(q))
    same = np.array_equal(ids, c_ids) and np.array_equal(found, c_found)
    same = same and same_items(ids, found, findex.range_search(qbytes, 1), count)
    reps = repeats if count <= 1000 else max(5, repeats // 10)
    times = {"host": [], "compiled": [], "faiss": []}
    for _ in range(3):  # interleaved thirds, so machine noise hits all alike
      times["host"].append(median_us(lambda: prepared.search(q), reps))
      times["compiled"].append(median_us(lambda: [np.asarray(x) for x in compiled(q)], reps))
      times["faiss"].append(median_us(lambda: findex.range_search(qbytes, 1), reps))
    t = {k: float(np.median(v)) for k, v in times.items()}
    rows.append([num_bits, count, t["host"], t["compiled"], t["faiss"], same])
  return rows


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="small smoke run; prints only")
  args = parser.parse_args()
  n, counts, repeats = (
    (100_000, (1, 100), 20) if args.quick else (1_000_000, (1, 100, 1000, 10_000), 200)
  )
  rng = np.random.default_rng(0)
  rows = [row for bits in (32, 64) for row in run(bits, n, counts, repeats, rng)]
  lines = [
    "| bits | queries a call | jhash searcher, NumPy in (us) | its compiled program (us) "
    "| FAISS (us) | FAISS time / jhash time | same items |",
    "|---|---|---|---|---|---|---|",
  ]
  for bits, count, host, compiled, fa, same in rows:
    lines.append(
      f"| {bits} | {count:,} | {host:.1f} | {compiled:.1f} | {fa:.1f} | {fa / host:.2f} "
      f"| {'yes' if same else 'NO'} |"
    )
  body = (
    f"{n:,} random codes, queries drawn from the database, {SLOTS} result slots; medians "
    f"of {repeats} calls (a tenth of them at 10,000 queries) in three interleaved rounds, "
    f"after warm-up. FAISS with its default threads ({faiss.omp_get_max_threads()}); the "
    f"searcher's host path on OpenMP's threads ({_report.cores()} cores).\n\n"
    + "\n".join(lines)
    + "\n\nThe compiled program's column is slower here than alone: its blocks of calls follow "
    "the host path's and FAISS's, whose OpenMP threads keep spinning for a while after each "
    "call and take the cores from XLA's threads. The host path and FAISS each run their "
    "blocks after the other's too, so their ratio carries the same kind of cost on both sides."
  )
  title = f"Prepared searcher's cost per call, radius 0 ({_report.machine().split(';')[0]})"
  if args.quick:
    print(body)
  else:
    _report.write_section(title, "python benchmarks/bench_searcher_calls.py", body)
  if not all(row[-1] for row in rows):
    raise SystemExit("the searcher's host path, its compiled program and FAISS disagree")


if __name__ == "__main__":
  main()
