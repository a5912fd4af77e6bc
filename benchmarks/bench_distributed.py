"""The sharded Hamming top-k over two processes against one process, on the same machine.

Command, from the repository root: ``python benchmarks/bench_distributed.py`` (about a
minute on 2 CPU cores; ``--quick``: a small database, prints only). The same database
(1,000,000 random 64-bit codes; 1,000 queries; k = 100) is searched by
``jhash.search.sharded_hamming_topk`` over 2 devices: once in one process with 2 host
devices, once in two processes of one device each, joined by ``jhash.distributed`` on the
loopback address (Gloo collectives). Each process loads only its rows
(``distributed.global_rows``); the times include ``distributed.gather`` of the results to
every process. The difference is the cost of the collectives between processes. The
results are checked equal. Writes the ``## Sharded top-k over processes`` section of
``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import datetime
import os
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

SECTION = "## Sharded top-k over processes"
NUM_BITS, K, REPEATS = 64, 100, 7


def sizes(quick: bool) -> tuple[int, int]:
  return (100_000, 200) if quick else (1_000_000, 1_000)


def data(n: int, num_queries: int):
  rng = np.random.default_rng(0)
  db = rng.integers(0, 2**32, size=(n, NUM_BITS // 32), dtype=np.uint64).astype(np.uint32)
  return db[rng.integers(0, n, num_queries)].copy(), db


def worker(quick: bool, out: str) -> None:
  """One process of a run: its rows, the search timed, results written by process 0."""
  import jax  # pylint: disable=import-outside-toplevel

  from jhash import distributed  # pylint: disable=import-outside-toplevel
  from jhash import search  # pylint: disable=import-outside-toplevel

  if "JHASH_NUM_PROCESSES" in os.environ:
    distributed.initialize()
  queries, db = data(*sizes(quick))
  mesh = distributed.process_mesh("db")
  start, stop = distributed.row_range(db.shape[0], mesh)
  table = distributed.global_rows(db[start:stop], db.shape[0], mesh)

  def run():
    d, i = search.sharded_hamming_topk(
      queries, table, K, mesh=mesh, num_bits=NUM_BITS, num_rows=db.shape[0]
    )
    return distributed.gather(d), distributed.gather(i)

  d, i = run()  # compile
  times = []
  for _ in range(REPEATS):
    t0 = time.perf_counter()
    run()
    times.append(time.perf_counter() - t0)
  if jax.process_index() == 0:
    np.savez(out, d=d, i=i, seconds=np.median(times), devices=jax.device_count())


def _launch(quick: bool, processes: int, out: str) -> None:
  port = None
  if processes > 1:
    with socket.socket() as s:
      s.bind(("127.0.0.1", 0))
      port = s.getsockname()[1]
  procs = []
  for rank in range(processes):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    if processes > 1:
      env.update(
        JHASH_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
        JHASH_NUM_PROCESSES=str(processes),
        JHASH_PROCESS_ID=str(rank),
      )
    else:
      env["XLA_FLAGS"] = env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    args = [sys.executable, __file__, "--worker", out] + (["--quick"] if quick else [])
    procs.append(subprocess.Popen(args, env=env))
  for proc in procs:
    if proc.wait(timeout=900):
      raise SystemExit(f"a worker failed (exit {proc.returncode})")


def main() -> None:
  quick = "--quick" in sys.argv
  if "--worker" in sys.argv:
    worker(quick, sys.argv[sys.argv.index("--worker") + 1])
    return
  import _report  # pylint: disable=import-outside-toplevel

  n, num_queries = sizes(quick)
  with tempfile.TemporaryDirectory() as tmp:
    got = {}
    for processes in (1, 2):
      out = os.path.join(tmp, f"{processes}.npz")
      _launch(quick, processes, out)
      got[processes] = dict(np.load(out))
  same = all(np.array_equal(got[1][x], got[2][x]) for x in ("d", "i"))
  one, two = float(got[1]["seconds"]), float(got[2]["seconds"])
  lines = [
    SECTION,
    "",
    f"Command: `python benchmarks/bench_distributed.py{' --quick' if quick else ''}`. "
    f"Machine: {_report.cores()} cores ({_report.cpu_model()}); "
    f"{datetime.date.today().isoformat()}.",
    "",
    f"{n:,} random {NUM_BITS}-bit codes, {num_queries:,} queries, k = {K}; "
    "`jhash.search.sharded_hamming_topk` over 2 devices, each process loading only its "
    "rows (`jhash.distributed.global_rows`), results gathered to every process; median of "
    f"{REPEATS} calls after one to compile.",
    "",
    "| run | devices | seconds per call | queries / s |",
    "|---|---|---|---|",
    f"| one process, 2 host devices | 2 | {one:.3f} | {num_queries / one:,.0f} |",
    f"| two processes of 1 device (Gloo, loopback) | 2 | {two:.3f} | {num_queries / two:,.0f} |",
    "",
    f"Two processes / one: {two / one:.2f}x the time (the collectives between processes); "
    f"the same distances and indices: {'yes' if same else 'NO'}.",
    "",
  ]
  text = "\n".join(lines)
  print(text)
  if not quick:
    _report.replace_section(text)
  if not same:
    raise SystemExit("the two runs returned different results")


if __name__ == "__main__":
  main()
