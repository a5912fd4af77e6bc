"""CDH's B-step: one exact matrix-free sweep over n items against the paper's chunked sweep.

Command: ``python benchmarks/bench_cdh_exact.py [n]`` (default 20,000; the paper's chunks
of 10,000). Random codes, ten balanced classes, K = 32, the exponential merit; the same
codes, terms and random starts for both. The exact sweep does the n x n work of one chunk
of n (``cdh(chunk_size=None)``); the chunked one the work of ``ceil(n / 10,000)`` chunks
of n / m items, pairs across chunks left out. So the exact sweep's n^2 work is m times the
chunked one's: a floor on their time ratio before any overhead. Prints the times, XLA's
temporary memory of each, and appends a section to ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from jhash.methods import cdh_parts

import _report

K, INNER, CHUNK = 32, 16, 10_000


def timed(fn, *args):
  """(seconds to run, temporary bytes) of a jitted ``fn``, compiled first."""
  compiled = jax.jit(fn).lower(*args).compile()
  temp = compiled.memory_analysis().temp_size_in_bytes
  start = time.perf_counter()
  jax.block_until_ready(compiled(*args))
  return time.perf_counter() - start, temp


def main(n: int) -> str:
  rng = np.random.default_rng(0)
  codes = np.where(rng.random((n, K)) < 0.5, 1, -1).astype(np.int8)
  z = (rng.random((n, K)) - 0.5).astype(np.float32)
  labels = (np.arange(n) % 10).astype(np.int32)
  gamma = jnp.float32(0.003)
  m = -(-n // CHUNK)
  uniforms = rng.random((m, K, INNER)).astype(np.float32)

  def one(idx, u, matrix_free):
    sup = cdh_parts.supervision_from_labels(jnp.asarray(labels[idx]))
    fn = lambda c, zz, s, uu: cdh_parts.bstep_sweep(c, zz, s, gamma, uu, matrix_free=matrix_free)
    return timed(fn, jnp.asarray(codes[idx]), jnp.asarray(z[idx]), sup, jnp.asarray(u))

  t_exact, m_exact = one(np.arange(n), uniforms[0], True)
  chunks = np.array_split(rng.permutation(n), m)  # the paper's random chunks
  parts = [one(np.sort(c), uniforms[i], False) for i, c in enumerate(chunks)]
  t_chunk, m_chunk = sum(t for t, _ in parts), max(b for _, b in parts)
  rows = [
    "| sweep | time (s) | XLA temporaries (MB) |",
    "|---|---|---|",
    f"| exact, matrix-free, one chunk of {n:,} | {t_exact:.1f} | {m_exact / 1e6:.1f} |",
    f"| chunked, {m} chunks of about {n // m:,} (stored Gram) | {t_chunk:.1f} | {m_chunk / 1e6:.1f} |",
    f"| ratio exact / chunked | {t_exact / t_chunk:.2f}x (n^2 work alone: {m}x) | |",
  ]
  return "\n".join(rows)


if __name__ == "__main__":
  n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
  table = main(n)
  print(table)
  _report.write_section(
    "CDH's exact B-step against the chunked one",
    f"python benchmarks/bench_cdh_exact.py {n}",
    "Random codes, ten balanced classes, K = 32, 16 inner updates a bit, the exponential "
    "merit; each sweep compiled first, then timed once (compilation left out).\n\n" + table,
  )
