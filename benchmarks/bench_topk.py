"""Exact Hamming top-k: jhash against FAISS IndexBinaryFlat, same run, interleaved.

Command: ``python benchmarks/bench_topk.py`` (about 5-10 minutes on 2 busy CPU
cores); ``--quick`` runs a smoke version (100,000 codes, 200 queries, 3
repeats) and only prints. The full run writes its table into the
``## Hamming top-k`` section of ``benchmarks/RESULTS.md`` (only that section is
replaced, with ``benchmarks/_report.py``) and prints it.

Workload: 1,000,000 uniformly random database codes and 1,000 uniformly random
queries of 32, 64 and 128 bits, k = 100. Rows:

* FAISS ``IndexBinaryFlat.search`` with ``faiss.omp_set_num_threads`` set to the
  number of cores, and with one thread (for reference);
* ``jhash.search.hamming_topk``, the default call on one device: on the CPU the
  native kernel (``jhash.native``: one vectorized pass per block of queries,
  spread over XLA's intra-op thread pool, so it uses the cores JAX has);
* the same with ``method="xor"``, the array code (XLA's CPU backend runs its loops
  on one thread, as its CPU time / wall time shows);
* ``jhash.search.sharded_hamming_topk`` over 2 host devices
  (``--xla_force_host_platform_device_count=2``, set by this script before JAX
  is imported): ``shard_map``, a top-k per half, one exact merge;
* ``hamming_topk_unchecked`` inside a ``shard_map`` that splits the queries
  over the 2 host devices (the database replicated): the other way to use both
  cores, with no merge and no selection work repeated per shard;
* on a GPU where the ``faiss-gpu`` package is installed, FAISS's own GPU index
  (``GpuIndexBinaryFlat``), with ratios against it too;
* naive: XOR + population count of the whole ``[chunk, n]`` distance matrix and
  ``lax.top_k`` on float32 keys, 8 queries at a time.

Each repeat runs every row back to back, so all rows see the same load on this
shared machine; times are medians over the repeats after one warm-up, and the
speed-ups are medians over repeats of FAISS's time over the row's time.
Correctness is checked in the same run: jhash's distances equal FAISS's, its
indices equal FAISS's wherever the distance is unique and below the k-th, the
sharded and naive rows equal the single-device result exactly.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ["XLA_FLAGS"] = (
  os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
).strip()

import numpy as np  # noqa: E402

import _report  # noqa: E402
import faiss  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import Mesh  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from jhash import codes as codes_lib  # noqa: E402
from jhash.search import hamming_topk  # noqa: E402
from jhash.search import hamming_topk_unchecked  # noqa: E402
from jhash.search import sharded_hamming_topk  # noqa: E402

CORES = _report.cores()
TITLE = "Hamming top-k"
DEFAULT = "jhash hamming_topk (default call, 1 device)"


def random_packed(rng, n, num_bits):
  words = rng.integers(0, 2**32, size=(n, codes_lib.num_words(num_bits)), dtype=np.uint64)
  words = words.astype(np.uint32)
  if num_bits % 32:
    words[:, -1] &= np.uint32((1 << (num_bits % 32)) - 1)
  return words


@jax.jit
def _naive_chunk(q, db):
  d = jnp.sum(lax.population_count(q[:, None, :] ^ db[None, :, :]).astype(jnp.int32), axis=-1)
  _, pos = lax.top_k(-d.astype(jnp.float32), 100)
  return jnp.take_along_axis(d, pos, axis=1), pos


def naive_topk(q, db, k, chunk=8):
  assert k == 100
  out = [_naive_chunk(q[i : i + chunk], db) for i in range(0, q.shape[0], chunk)]
  return np.concatenate([np.asarray(o[0]) for o in out]), np.concatenate(
    [np.asarray(o[1]) for o in out]
  )


def check_against_faiss(d, i, fd, fi):
  """Distances equal; indices equal where a distance is unique in its row and below the k-th."""
  if not np.array_equal(d, fd):
    return False
  for r in range(d.shape[0]):
    vals, counts = np.unique(d[r], return_counts=True)
    unique = np.isin(d[r], vals[counts == 1]) & (d[r] < d[r, -1])
    if not np.array_equal(i[r][unique], fi[r][unique]):
      return False
  return True


FAISS_GPU = "FAISS GpuIndexBinaryFlat (GPU)"


def faiss_gpu_index(num_bits, db_bytes):
  """``(resources, index)`` of FAISS's own GPU index (the ``faiss-gpu`` package) holding
  the database, or None where jhash is not on a GPU or FAISS has no GPU index or GPU."""
  if jax.default_backend() != "gpu" or not hasattr(faiss, "StandardGpuResources"):
    return None
  try:
    if faiss.get_num_gpus() < 1:
      return None
    resources = faiss.StandardGpuResources()
    index = faiss.index_cpu_to_gpu(resources, 0, faiss.IndexBinaryFlat(num_bits))
    index.add(db_bytes)
  except Exception as e:  # a FAISS build whose GPU part does not load: say so, go on
    print(f"FAISS GPU index unavailable: {e}", flush=True)
    return None
  return resources, index


def run_bits(num_bits, n, num_queries, k, repeats, rng, with_naive):
  db = random_packed(rng, n, num_bits)
  q = random_packed(rng, num_queries, num_bits)
  db_bytes, q_bytes = codes_lib.to_bytes(db), codes_lib.to_bytes(q)
  index = faiss.IndexBinaryFlat(num_bits)
  index.add(db_bytes)
  dev_db, dev_q = jax.device_put(db, jax.devices()[0]), jax.device_put(q, jax.devices()[0])
  mesh = Mesh(np.asarray(jax.devices()[:2]), ("db",))
  query_mesh = Mesh(np.asarray(jax.devices()[:2]), ("q",))
  split_queries = jax.jit(
    jax.shard_map(
      lambda qs, d: hamming_topk_unchecked(qs, d, k, num_bits),
      mesh=query_mesh,
      in_specs=(P("q"), P()),
      out_specs=(P("q"), P("q")),
      check_vma=False,
    )
  )

  def faiss_threads(t):
    def run():
      faiss.omp_set_num_threads(t)
      return index.search(q_bytes, k)

    return run

  rows = {
    f"FAISS IndexBinaryFlat ({CORES} threads)": faiss_threads(CORES),
    "FAISS IndexBinaryFlat (1 thread)": faiss_threads(1),
  }
  gpu = faiss_gpu_index(num_bits, db_bytes)
  if gpu is not None:
    rows[FAISS_GPU] = lambda: gpu[1].search(q_bytes, k)
  rows[DEFAULT] = lambda: jax.block_until_ready(hamming_topk(dev_q, dev_db, k, num_bits=num_bits))
  if jax.default_backend() == "cpu":
    rows["jhash hamming_topk, array code (method='xor')"] = lambda: jax.block_until_ready(
      hamming_topk(dev_q, dev_db, k, num_bits=num_bits, method="xor")
    )
    rows["jhash sharded_hamming_topk (2 CPU devices)"] = lambda: jax.block_until_ready(
      sharded_hamming_topk(q, db, k, mesh=mesh, num_bits=num_bits)
    )
    rows["jhash hamming_topk, queries split over 2 CPU devices"] = lambda: jax.block_until_ready(
      split_queries(q, db)
    )
  else:  # on an accelerator: both distance forms (the default there is "matmul")
    rows["jhash hamming_topk, method='xor'"] = lambda: jax.block_until_ready(
      hamming_topk(dev_q, dev_db, k, num_bits=num_bits, method="xor")
    )
  if with_naive:
    rows["naive XOR + lax.top_k (float32 keys)"] = lambda: naive_topk(dev_q, dev_db, k)
  faiss_name = list(rows)[0]
  references = [name for name in rows if name.startswith("FAISS")]

  outputs = {name: fn() for name, fn in rows.items()}  # warm-up (compiles) and results
  fd, fi = outputs[faiss_name]
  jd, ji = (np.asarray(a) for a in outputs[DEFAULT])
  checks = {"jhash == FAISS": check_against_faiss(jd, ji, fd, fi)}
  if gpu is not None:
    gd, gi = outputs[FAISS_GPU]
    checks["jhash == FAISS GPU"] = check_against_faiss(jd, ji, gd, gi)
  for name in rows:
    if name.startswith("jhash") and name != DEFAULT:
      od, oi = (np.asarray(a) for a in outputs[name])
      checks[f"{name[6:]} == single device"] = bool(
        np.array_equal(od, jd) and np.array_equal(oi, ji)
      )
  if with_naive:
    nd, ni = outputs["naive XOR + lax.top_k (float32 keys)"]
    checks["naive == jhash"] = bool(np.array_equal(nd, jd) and np.array_equal(ni, ji))

  wall = {name: [] for name in rows}
  cpu = {name: [] for name in rows}
  for _ in range(repeats):
    for name, fn in rows.items():
      c0, t0 = time.process_time(), time.perf_counter()
      fn()
      wall[name].append(time.perf_counter() - t0)
      cpu[name].append(time.process_time() - c0)
  result = {}
  for name in rows:
    w = np.asarray(wall[name])
    result[name] = {
      "rate": n * num_queries / np.median(w) / 1e9,
      "ratios": {ref: float(np.median(np.asarray(wall[ref]) / w)) for ref in references},
      "cpu_per_wall": float(np.median(np.asarray(cpu[name]) / w)),
    }
  return result, checks


NOTES = """\
Notes. The selection is exact and breaks ties by the smaller database index. The default
call on the CPU is the native kernel of `jhash/native/kernels.cc` (a running k-th
distance per query over a vectorized distance pass, 64 queries sharing each database
tile, query blocks spread over XLA's intra-op thread pool: its CPU time / wall time
shows both cores at work); the array code (`method='xor'`, the block-minima selection of
`jhash/search/_blockmin.py`) runs on one thread. FAISS's tie order differs, so its
indices are compared only where a distance is unique and below the k-th. Two-thread
FAISS uses both cores (near 2 on an otherwise idle machine; well below 2 when other
work competes for the cores: the load average and the CPU shares above say which case a
run was). The sharded rows run on two forced host devices, each calling the default
search on its part.
"""


ACCELERATOR_NOTES = """\
Notes. jhash runs on the accelerator (one device; queries and database already on it,
results copied back), FAISS `IndexBinaryFlat` on the host's CPU cores with all its
threads and with one; {gpu_index}
The default distance form off the CPU is the +-1 matrix product ("matmul"); the XOR +
popcount row is the CPU form run on the accelerator.
"""
GPU_INDEX = (
  "FAISS's own GPU index (`GpuIndexBinaryFlat`, from the faiss-gpu package) on\n"
  "the same GPU, its database on the GPU, queries and results through the host\n"
  "as FAISS's Python interface takes them."
)
NO_GPU_INDEX = "no FAISS GPU index (the faiss-gpu package) was installed there."


def body(results, checks, n, num_queries, k, repeats, loads):
  bits = list(results)
  names = list(results[bits[0]])
  references = [name for name in names if name.startswith("FAISS")]
  header = [f"{b} bits" for b in bits]
  rates = [[name] + [f"{results[b][name]['rate']:.2f}" for b in bits] for name in names]
  ratios = []
  for name in names:
    if name in references:
      continue
    for ref in references:
      label = f"{name} / {ref.replace('FAISS IndexBinaryFlat ', 'FAISS ')}"
      ratios.append([label] + [f"x{results[b][name]['ratios'][ref]:.2f}" for b in bits])
  shares = [[name] + [f"{results[b][name]['cpu_per_wall']:.2f}" for b in bits] for name in names]
  check_line = "; ".join(
    f"{b} bits: " + ", ".join(f"{c} {'ok' if v else 'FAILED'}" for c, v in checks[b].items())
    for b in bits
  )
  return "\n".join(
    [
      f"{n:,} uniformly random database codes, {num_queries:,} random queries, k = {k}; "
      f"median of {repeats} interleaved repeats after a warm-up. FAISS threads: "
      f"`faiss.omp_set_num_threads({CORES})` ({CORES} = the number of cores), and 1. Load "
      "average (1 min) at the start of each code length: "
      + ", ".join(f"{l:.1f}" for l in loads)
      + " (a shared machine: compare the ratios, measured in the same run, not the rates).",
      "",
      "Billion codes compared per second:",
      "",
      _report.table(["implementation"] + header, rates),
      "",
      "Speed-up (median over repeats of FAISS's time / this row's time):",
      "",
      _report.table(["row / reference"] + header, ratios),
      "",
      "CPU time / wall time (median):",
      "",
      _report.table(["implementation"] + header, shares),
      "",
      f"Checks in the same run: {check_line}.",
      "",
      NOTES
      if jax.default_backend() == "cpu"
      else ACCELERATOR_NOTES.format(gpu_index=GPU_INDEX if FAISS_GPU in names else NO_GPU_INDEX),
    ]
  )


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="small smoke run; print only")
  parser.add_argument("--repeats", type=int, default=None)
  parser.add_argument(
    "--bits",
    type=int,
    nargs="+",
    default=[32, 64, 128],
    help="code lengths (the full run writes RESULTS.md only with all three)",
  )
  args = parser.parse_args()
  n, num_queries, repeats = (100_000, 200, 3) if args.quick else (1_000_000, 1_000, 5)
  repeats = args.repeats or repeats
  k = 100
  rng = np.random.default_rng(0)
  results, checks, loads = {}, {}, []
  for num_bits in args.bits:
    loads.append(os.getloadavg()[0])
    results[num_bits], checks[num_bits] = run_bits(
      num_bits, n, num_queries, k, repeats, rng, with_naive=True
    )
    print(
      f"{num_bits} bits:",
      {m: round(r["rate"], 3) for m, r in results[num_bits].items()},
      checks[num_bits],
      flush=True,
    )
  text = body(results, checks, n, num_queries, k, repeats, loads)
  if args.quick or args.bits != [32, 64, 128]:
    print(text)
  else:
    _report.write_section(TITLE, "python benchmarks/bench_topk.py", text)
  if not all(all(c.values()) for c in checks.values()):
    sys.exit(1)


if __name__ == "__main__":
  main()
