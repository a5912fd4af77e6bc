"""CDH's B-step: jhash (jitted, bit by bit) against a plain NumPy port, same run.

Command, from the repository root with jhash installed (``./install.sh bench``):
``python benchmarks/bench_cdh.py`` (about 5-15 minutes on 2 CPU cores,
most of it the NumPy port at n = 10,000); ``--quick`` runs n = 2,000 only and
only prints. The full run writes its tables into the ``## CDH B-step`` section
of ``benchmarks/RESULTS.md`` (only that section is replaced) and prints them.

Workload: the first B-step sweep of CDH (the heaviest: most flips) on real data,
Fashion-MNIST's 10,000 test images cut into two views (top and bottom halves,
``jhash.data.make_two_view``), class supervision (10 classes), ``K = 32`` bits,
the exponential merit, ``gamma = 0.01``, ``max_inner = 16``; the codes and the
generative term ``Z`` come from CDH's initialisation (random ``w``, ``B = sign(Z)``).
Smaller ``n`` take the first ``n`` images.

* jhash: ``jhash.methods.cdh_parts.bstep_sweep`` under ``jax.jit`` (compiled before
  timing): the Gram kept exactly in int8 with a rank-one update per bit applied
  inside the next bit's pass, ``A b`` formed block by block without storing
  ``A``, inner updates that update ``A b`` from the flipped rows only, and
  Algorithm 2 on the active set compacted to a static size.
* NumPy: the same algorithm as a user would port it from the paper (float32,
  to be fair to NumPy): ``Y`` dense (built before timing), ``G = B B^T`` once per
  sweep and updated by rank one per bit, per bit the dense ``A`` from ``G``, then
  per inner update ``g = 2 A b / n^2 + gamma Z / n``, the active set, ``M`` on
  ``I x I`` and Algorithm 2 as a Python loop over NumPy rows.

Both start from the same codes; their random starts differ (JAX and NumPy
generators), so the final objectives agree closely but not exactly: both are
printed. Timings are medians of repeats (1 for NumPy at n = 10,000); the
machine is shared, so compare the ratio measured in the same run.
Peak memory: XLA's ``memory_analysis()`` of the compiled sweep (arguments,
outputs and temporaries), against ``3 x n^2 x 4`` bytes.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import _report
from jhash import data
from jhash.methods import cdh_parts

SECTION = "## CDH B-step"
K, GAMMA, MAX_INNER = 32, 0.01, 16


# ----------------------------------------------------------------------------- NumPy port


def numpy_sweep(codes, labels, z, gamma, max_inner, rng):
  """One B-step sweep as a plain NumPy port of the paper (float32, dense A per bit)."""
  n, num_bits = codes.shape
  y = np.where(labels[:, None] == labels[None, :], 1.0, -1.0).astype(np.float32)
  return _numpy_sweep_given_y(codes, y, z, gamma, max_inner, rng)


def _numpy_sweep_given_y(codes, y, z, gamma, max_inner, rng):
  n, num_bits = codes.shape
  b_all = codes.astype(np.float32)
  gram = b_all @ b_all.T  # once per sweep
  sinh_y = np.sinh(y / num_bits)
  flips = 0
  for k in range(num_bits):
    b = b_all[:, k].copy()
    loo = (gram - np.outer(b, b)) / num_bits  # p^{-k}
    a = sinh_y * np.exp(-y * loo)
    np.fill_diagonal(a, 0.0)
    for _ in range(max_inner):
      g = 2.0 * (a @ b) / n**2 + gamma * z[:, k] / n
      active = np.flatnonzero(g * b < 0)
      if active.size == 0:
        break
      m = a[np.ix_(active, active)] * np.outer(b[active], b[active])
      start = rng.integers(active.size)  # Algorithm 2
      chosen = np.zeros(active.size, bool)
      chosen[start] = True
      gain = m[start].copy()
      while True:
        candidates = np.where(chosen, -np.inf, gain)
        j = int(np.argmax(candidates))
        if candidates[j] < 0:
          break
        chosen[j] = True
        gain += m[j]
      b[active[chosen]] *= -1
      flips += int(chosen.sum())
    gram += np.outer(b, b) - np.outer(b_all[:, k], b_all[:, k])
    b_all[:, k] = b
  return b_all.astype(np.int8), flips


# ----------------------------------------------------------------------------- jhash


def setup(n, seed=0):
  ds = data.load_fashion_mnist("test")
  two = data.make_two_view(ds.views[0][:n], ds.labels[:n])
  batch = two.batch()
  method = cdh_parts.cdh(K, gamma=GAMMA, max_inner=MAX_INNER)
  state = method.init(jax.random.key(seed), batch)
  views = tuple(jnp.asarray(v) for v in batch["views"])
  z = cdh_parts.generative_terms(state.weights, views)
  return np.asarray(batch["labels"]), state.codes, z


def jhash_sweep_fn():
  def run(codes, labels, z, uniforms):
    sup = cdh_parts.Supervision(class_ids=labels)
    out, stats = cdh_parts.bstep_sweep(codes, z, sup, jnp.float32(GAMMA), uniforms)
    return out, jnp.sum(stats.flipped)

  return jax.jit(run)


def objective(codes, labels, z):
  sup = cdh_parts.Supervision(class_ids=jnp.asarray(labels, jnp.int32))
  codes = jnp.asarray(codes)
  return float(
    cdh_parts.semantic_term(codes, sup, "exponential")
    + cdh_parts.generative_term(codes, z, jnp.float32(GAMMA), 2)
  )


def median_time(fn, repeats):
  times = []
  for _ in range(repeats):
    t = time.perf_counter()
    out = fn()
    times.append(time.perf_counter() - t)
  return float(np.median(times)), out


def measure(n, numpy_repeats, jax_repeats, run_numpy=True):
  labels, codes, z = setup(n)
  labels_j = jnp.asarray(labels, jnp.int32)
  uniforms = jax.random.uniform(jax.random.key(1), (K, MAX_INNER))
  sweep = jhash_sweep_fn()
  compiled = sweep.lower(codes, labels_j, z, uniforms).compile()
  mem = compiled.memory_analysis()
  peak = (
    mem.temp_size_in_bytes
    + mem.argument_size_in_bytes
    + mem.output_size_in_bytes
    - mem.alias_size_in_bytes
  )
  jax.block_until_ready(compiled(codes, labels_j, z, uniforms))  # warm-up
  t_jax, (out_j, flips_j) = median_time(
    lambda: jax.block_until_ready(compiled(codes, labels_j, z, uniforms)), jax_repeats
  )
  row = {
    "n": n,
    "jax_s": t_jax,
    "jax_flips": int(flips_j),
    "peak": peak,
    "temp": mem.temp_size_in_bytes,
    "J0": objective(codes, labels, z),
    "J_jax": objective(out_j, labels, z),
  }
  if run_numpy:
    codes_np, z_np = np.asarray(codes), np.asarray(z)
    t_np, (out_n, flips_n) = median_time(
      lambda: numpy_sweep(codes_np, labels, z_np, GAMMA, MAX_INNER, np.random.default_rng(0)),
      numpy_repeats,
    )
    row.update(numpy_s=t_np, numpy_flips=flips_n, J_numpy=objective(out_n, labels, z))
  return row


# ----------------------------------------------------------------------------- report


def tables(compare, scaling, command) -> str:
  lines = [
    SECTION,
    "",
    f"Command: `{command}`. Machine: {_report.machine()}.",
    "",
    f"One B-step sweep (all {K} bits, first sweep from CDH's initialisation), "
    f"Fashion-MNIST test images as two views, 10 classes, exponential merit, "
    f"gamma = {GAMMA}, max_inner = {MAX_INNER}. NumPy: the paper ported as a user "
    "would (dense A per bit from the Gram, Algorithm 2 as a Python loop), float32.",
    "",
    "| n | NumPy port (s) | jhash (s) | speed-up | flips NumPy / jhash | "
    "J start | J after, NumPy / jhash |",
    "|---|---|---|---|---|---|---|",
  ]
  for r in compare:
    lines.append(
      f"| {r['n']:,} | {r['numpy_s']:.2f} | {r['jax_s']:.2f} | "
      f"{r['numpy_s'] / r['jax_s']:.1f}x | {r['numpy_flips']:,} / "
      f"{r['jax_flips']:,} | {r['J0']:.5f} | {r['J_numpy']:.5f} / "
      f"{r['J_jax']:.5f} |"
    )
  lines += [
    "",
    "Time per sweep and peak memory of the jitted sweep (XLA's memory_analysis: "
    "arguments + outputs + temporaries), K = 32:",
    "",
    "| n | jhash sweep (s) | s / (n/1000)^2 | flips | peak memory (MB) | "
    "3 x n^2 x 4 bytes (MB) | peak / bound |",
    "|---|---|---|---|---|---|---|",
  ]
  for r in scaling:
    bound = 3 * r["n"] ** 2 * 4
    lines.append(
      f"| {r['n']:,} | {r['jax_s']:.3f} | {r['jax_s'] / (r['n'] / 1000) ** 2:.4f} | "
      f"{r['jax_flips']:,} | {r['peak'] / 2**20:.1f} | {bound / 2**20:.1f} | "
      f"{r['peak'] / bound:.2f} |"
    )
  return "\n".join(lines) + "\n"


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--quick", action="store_true", help="n = 2,000 only; print, don't write")
  args = parser.parse_args()
  if args.quick:
    sizes, compare_sizes = (1000, 2000), (2000,)
  else:
    sizes, compare_sizes = (1000, 2000, 5000, 10000), (10000,)
  scaling, compare = [], []
  for n in sizes:
    in_compare = n in compare_sizes
    row = measure(
      n,
      numpy_repeats=1 if n >= 5000 else 3,
      jax_repeats=3 if n >= 5000 else 5,
      run_numpy=in_compare,
    )
    print(f"n={n}: {row}", flush=True)
    scaling.append(row)
    if in_compare:
      compare.append(row)
  command = "python benchmarks/bench_cdh.py" + (" --quick" if args.quick else "")
  text = tables(compare, scaling, command)
  print(text)
  if not args.quick:
    _report.replace_section(text)


if __name__ == "__main__":
  main()
