"""HBMP inference (binary matrix pursuit): jhash against a plain NumPy port, same run.

Command, from the repository root with jhash installed (``./install.sh bench``):
``python benchmarks/bench_hbmp.py`` (about 10-20 minutes on 2 CPU cores);
``--quick`` runs a small smoke version (1,000 items, 16 bits, about 2 minutes) and only
prints; ``--figure-only`` runs only the Figure 1(c) comparison below at full size (about
1-2 minutes) and only prints. The full run writes its tables into the ``## HBMP inference`` section of
``benchmarks/RESULTS.md`` (only that section is replaced; the file is created if absent)
and prints them.

Workload: a random multi-label set over 21 labels (label ``l`` present with
probability rising from 0.03 to 0.35), reduced to 4,850 unique label sets (the size of
NUS-WIDE's item set in the paper); affinity "share a label", ``R = b (2S - 1)``;
64 bits with ``regress`` step sizes and the defaults: 4 power-iteration starts, at most
20 updates per power-iteration run, tolerance 1e-4, single-flip local search.

* jhash: ``jhash.methods.hbmp_parts.infer_codes`` (all bits in one jitted scan): the
  first call (compile and run) and a second call (run only) are timed.
* NumPy: ``numpy_pursuit`` below, the same algorithm written for this benchmark as one
  would port the paper to NumPy (or MATLAB): the residual formed each bit, power
  iteration from several starts (shifted when it finds a negative eigenvalue), sign and
  single-flip local search, and the paper's refit, ``np.linalg.lstsq`` on the
  ``(n^2 - n) x t`` matrix of ``vec(v_k v_k^T)`` (``O(t^2 n^2)`` per bit). Its 64 bits
  would take hours and ``8 t (n^2 - n)`` bytes for that matrix (12 GB at t = 64, twice
  that with ``lstsq``'s copy: more than this machine's memory), so it runs the first
  bits only and the rest is extrapolated: the residual's time linear in ``t``, the
  direction's time constant (mean of bits 2..T), and the refit's time ``c1 t + c2 t^2``
  fitted to the measured bits and to the port's refit step (append a column, ``lstsq``)
  timed on its own at larger ``t``. The port serves this timing only; the tests keep
  their own, separate NumPy reference of HBMP.

Also the paper's Figure 1(c): the residual fraction ``||Q_t||_F / ||Q_0||_F`` of class-
level inference (10 classes, ``R = 32 (2I - 1)``) against instance-level inference
(1,000 instances, 100 per class, the same class affinity between instances), mean of
5 runs, as the paper reports, and the time of each 48-bit inference (median of 15 runs,
the rows alternating): class level with the default solver (the dense path at 10 items)
and with the power-iteration loops forced, against instance level.
"""

from __future__ import annotations

import argparse
import datetime
import os
import time

import jax
import numpy as np

import _report
from jhash.methods import hbmp_parts as hb

SECTION = "## HBMP inference"
POWER = {"num_restarts": 4, "num_iters": 20, "tol": 1e-4}
SETTINGS = {"step_size": "regress", "local_search": True, **POWER}


# ----------------------------------------------------------------------------- NumPy port


def power_run(q, x, shift, num_iters, tol):
  """Power iteration on ``Q - shift I``, every column of ``x`` [n, r] a start."""
  for _ in range(num_iters):
    y = q @ x - shift * x
    y /= np.maximum(np.linalg.norm(y, axis=0), 1e-300)
    change = np.minimum(np.linalg.norm(y - x, axis=0), np.linalg.norm(y + x, axis=0))
    x = y
    if change.max() <= tol:
      break
  return x


def top_directions(q, rng, num_restarts, num_iters, tol):
  """One unit eigenvector per random start for Q's algebraically largest eigenvalue.

  Plain power iteration finds the eigenvalue of largest magnitude; a start that ends
  on a negative one ``lam`` runs again on ``Q - lam I``, whose top is Q's largest.
  """
  starts = rng.standard_normal((q.shape[0], num_restarts))
  starts /= np.linalg.norm(starts, axis=0)
  x = power_run(q, starts, 0.0, num_iters, tol)
  lam = np.einsum("ij,ij->j", x, q @ x)
  negative = lam < 0
  if negative.any():
    x[:, negative] = power_run(q, starts[:, negative], lam[negative], num_iters, tol)
  return x


def is_repeat(v, codes):
  """Whether ``v`` equals an earlier code or its negation."""
  return codes.shape[1] > 0 and np.abs(codes.T @ v).max() == v.size


def flip_polish(q, v):
  """Single flips, the best first, while one raises ``v^T Q v`` beyond rounding."""
  qv = q @ v
  for _ in range(v.size):
    gain = -4.0 * v * qv  # change of v^T Q v when bit i flips (Q's diagonal is 0)
    best = gain.argmax()
    if gain[best] <= 1e-5 * abs(qv).max():
      return v
    v[best] *= -1.0
    qv += 2.0 * v[best] * q[best]  # Q is symmetric: its row is its column, and contiguous
  return v


def random_new_code(codes, rng, draws=16):
  """The first of 16 random codes that repeats no earlier code (the first if all do)."""
  candidates = rng.choice([-1.0, 1.0], size=(draws, codes.shape[0]))
  fresh = [not is_repeat(c, codes) for c in candidates]
  return candidates[fresh.index(True) if any(fresh) else 0]


def new_code(q, codes, rng):
  """Eq. 6 by its spectral relaxation: the best start's sign, polished; a random new
  code when that repeats an earlier one or does not raise ``v^T Q v`` above 0."""
  x = top_directions(q, rng, **POWER)
  signs = np.where(x < 0, -1.0, 1.0)
  gains = np.einsum("ij,ij->j", signs, q @ signs)
  ok = [gains[j] > 0 and not is_repeat(signs[:, j], codes) for j in range(x.shape[1])]
  pick = np.argmax(np.where(ok, gains, -np.inf)) if any(ok) else np.argmax(gains)
  v = flip_polish(q, signs[:, pick].copy())
  degenerate = is_repeat(v, codes) or v @ q @ v <= 0
  return random_new_code(codes, rng) if degenerate else v


def numpy_pursuit(r, num_bits, rng):
  """HBMP's inference (Alg. 1, ``regress`` step sizes) in NumPy, float64, timed per part.

  Per bit: ``Q = M .* (R - V diag(alpha) V^T)`` formed, the new code (``new_code``),
  then the paper's refit (Eq. 9-10): append ``vec(v v^T)`` on the off-diagonal entries
  to the design matrix and solve for all alphas with ``np.linalg.lstsq``.
  Returns a dict: ``residual_norms`` [t], ``initial_norm`` and the seconds of each bit's
  residual, direction and refit (``time_residual``, ``time_direction``, ``time_refit``).
  """
  n = r.shape[0]
  off = ~np.eye(n, dtype=bool)
  target = r[off]
  codes, alphas, design = np.zeros((n, 0)), np.zeros(0), np.zeros((target.size, 0))
  out = {k: [] for k in ("time_residual", "time_direction", "time_refit", "residual_norms")}
  for _ in range(num_bits):
    t0 = time.perf_counter()
    q = r - (codes * alphas) @ codes.T
    np.fill_diagonal(q, 0.0)
    t1 = time.perf_counter()
    v = new_code(q, codes, rng)
    t2 = time.perf_counter()
    design = np.column_stack([design, np.outer(v, v)[off]])
    alphas = np.linalg.lstsq(design, target, rcond=None)[0]
    t3 = time.perf_counter()
    codes = np.column_stack([codes, v])
    for name, seconds in zip(
      ("time_residual", "time_direction", "time_refit"), (t1 - t0, t2 - t1, t3 - t2)
    ):
      out[name].append(seconds)
    out["residual_norms"].append(np.linalg.norm(design @ alphas - target))
  return {**{k: np.asarray(v) for k, v in out.items()}, "initial_norm": np.linalg.norm(target)}


# ----------------------------------------------------------------------------- benchmark


def random_label_sets(rng, num_sets: int, num_labels: int = 21) -> np.ndarray:
  """``num_sets`` distinct multi-hot rows, drawn with label frequencies 0.03 .. 0.35."""
  p = np.linspace(0.03, 0.35, num_labels)
  seen: dict[bytes, np.ndarray] = {}
  while len(seen) < num_sets:
    for row in rng.random((20_000, num_labels)) < p[None, :]:
      seen.setdefault(row.tobytes(), row)
      if len(seen) == num_sets:
        break
  return np.stack(list(seen.values()))


def run_jhash(r, num_bits):
  key = jax.random.key(0)
  start = time.perf_counter()
  res = jax.block_until_ready(hb.infer_codes(r, num_bits, key, **SETTINGS))
  first = time.perf_counter() - start
  start = time.perf_counter()
  res = jax.block_until_ready(hb.infer_codes(r, num_bits, key, **SETTINGS))
  second = time.perf_counter() - start
  res = jax.tree.map(np.asarray, res)
  return {
    "first": first,
    "run": second,
    "fraction": res.residual_norms / res.initial_norm,
    "iterations": res.metrics["power_iterations"],
    "flips": res.metrics["flips"],
    "degenerate": int(res.metrics["degenerate"].sum()),
  }


def refit_seconds(r, num_made):
  """The port's refit at bit ``num_made``: append the new column, then ``lstsq``."""
  n = r.shape[0]
  codes = np.where(np.random.default_rng(num_made).random((n, num_made)) < 0.5, -1.0, 1.0)
  mask = ~np.eye(n, dtype=bool)
  target = np.asarray(r, np.float64)[mask]
  columns = np.empty((int(mask.sum()), num_made - 1))
  for k in range(num_made - 1):
    columns[:, k] = np.outer(codes[:, k], codes[:, k])[mask]
  v = codes[:, -1]
  start = time.perf_counter()
  columns = np.concatenate([columns, np.outer(v, v)[mask][:, None]], axis=1)
  np.linalg.lstsq(columns, target, rcond=None)
  return time.perf_counter() - start


def run_numpy(r, num_bits, measured, check_bits):
  out = numpy_pursuit(np.asarray(r, np.float64), measured, np.random.default_rng(0))
  t = np.arange(1, measured + 1, dtype=np.float64)
  residual = np.polyfit(t, out["time_residual"], 1)
  direction = float(np.mean(out["time_direction"][1:]))
  checks = {k: refit_seconds(r, k) for k in check_bits}
  ts = np.concatenate([t, np.asarray(check_bits, np.float64)])
  times = np.concatenate([out["time_refit"], list(checks.values())])
  refit = np.maximum(np.linalg.lstsq(np.stack([ts, ts * ts], axis=1), times, rcond=None)[0], 0.0)
  every = np.arange(1, num_bits + 1, dtype=np.float64)
  predicted = np.polyval(residual, every) + direction + refit[0] * every + refit[1] * every**2
  predicted[:measured] = out["time_residual"] + out["time_direction"] + out["time_refit"]
  return {
    "measured_bits": measured,
    "measured_time": float(predicted[:measured].sum()),
    "total": float(predicted.sum()),
    "refit_model": refit,
    "direction": direction,
    "fraction": out["residual_norms"] / out["initial_norm"],
    "checks": checks,
    "refit_times": out["time_refit"],
  }


def figure_1c(num_instances, repeats, timing_repeats, bits=(8, 16, 24, 32, 40, 48)):
  """Residual fractions (seeds ``0..repeats-1``) and median times (seeds
  ``0..timing_repeats-1``) of each row; the rows' runs alternate, so machine noise hits
  them alike."""
  num_bits = max(bits)
  classes = hb.class_affinity(10, 32)
  labels = (np.arange(num_instances) % 10).astype(np.int32)
  instances = hb.instance_affinity(labels, 32)
  runs = {  # name -> (affinity, infer_codes options)
    "class, regress": (classes, {"step_size": "regress"}),
    "class, regress, power iteration": (classes, {"step_size": "regress", "eigensolver": "power"}),
    "class, line": (classes, {"step_size": "line"}),
    f"instance ({num_instances}), regress": (instances, {"step_size": "regress"}),
  }
  for r, options in runs.values():
    jax.block_until_ready(hb.infer_codes(r, num_bits, jax.random.key(99), **options))
  load = os.getloadavg()[0]
  fractions = {name: [] for name in runs}
  seconds = {name: [] for name in runs}
  for seed in range(max(repeats, timing_repeats)):
    key = jax.block_until_ready(jax.random.key(seed))  # made outside the timed call
    for name, (r, options) in runs.items():
      start = time.perf_counter()
      res = jax.block_until_ready(hb.infer_codes(r, num_bits, key, **options))
      seconds[name].append(time.perf_counter() - start)
      if seed < repeats:
        fractions[name].append(np.asarray(res.residual_norms) / float(res.initial_norm))
  rows = {}
  for name in runs:
    every = np.asarray(fractions[name])
    rows[name] = {
      "fraction": [float(every[:, b - 1].mean()) for b in bits],
      "worst": [float(every[:, b - 1].max()) for b in bits],
      "seconds": float(np.median(seconds[name][:timing_repeats])),
    }
  return bits, rows, (load, os.getloadavg()[0])


def figure_1c_table(args, fig):
  """The lines of the Figure 1(c) table."""
  bits, rows, load = fig
  lines = [
    "Figure 1(c): residual fraction `||Q_t||_F / ||Q_0||_F` (mean over seeds 0.."
    f"{args.repeats - 1}; worst seed in brackets), 10 classes, `R = 32 (2I - 1)`, and "
    "instances with the same class affinity; time per run after compilation, median of "
    f"{args.timing_repeats} runs (seeds 0..{args.timing_repeats - 1}, the rows' runs "
    'alternating). Rows without a solver named use `eigensolver="auto"`: the dense '
    "path (one `eigh` per bit, the power iterations in closed form) at 10 items, power "
    "iteration at 1,000; the power-iteration row forces the loops at 10 items (the same "
    f"codes). Load average (1 min) before and after the timed runs: {load[0]:.1f}, "
    f"{load[1]:.1f}.",
    "",
    "| inference | "
    + " | ".join(f"{b} bits" for b in bits)
    + " | time per run (48 bits) | time / class-level regress time |",
    "|---|" + "---|" * len(bits) + "---|---|",
  ]
  base = rows["class, regress"]["seconds"]
  for name, row in rows.items():
    cells = " | ".join(f"{m:.4f} ({w:.4f})" for m, w in zip(row["fraction"], row["worst"]))
    lines.append(
      f"| {name} | {cells} | {1e3 * row['seconds']:.1f} ms | {row['seconds'] / base:.1f} |"
    )
  return lines


def table(args, n, num_bits, sets, jx, npy, fig):
  measured = npy["measured_bits"]
  speedup = npy["total"] / jx["run"]
  lines = [
    SECTION,
    "",
    f"Command: `python benchmarks/bench_hbmp.py{' --quick' if args.quick else ''}`. "
    f"Machine: {_report.cores()} cores ({_report.cpu_model()}); "
    f"jax {jax.__version__} ({jax.default_backend()}), numpy {np.__version__}; "
    f"{datetime.date.today().isoformat()}.",
    "",
    f"Inference of {num_bits} bits over n = {n:,} items: the unique label sets of a random "
    f"multi-label set ({sets.shape[1]} labels, {sets.sum(1).mean():.1f} labels per set on "
    'average), affinity "share a label" `R = b (2S - 1)`, `regress` step sizes, '
    "4 power-iteration starts, at most 20 updates per run, tolerance 1e-4, local search. "
    "NumPy: the same algorithm with the paper's vectorised least-squares refit "
    "(`numpy_pursuit` in `benchmarks/bench_hbmp.py`), timed on its first "
    f"{measured} bits and **extrapolated** to {num_bits} bits from its own timings "
    "(residual time linear in t, direction time constant, refit time `c1 t + c2 t^2` "
    "fitted to the measured bits and to its refit step timed alone at larger t). At 64 "
    "bits its least-squares matrix alone is 12 GB (24 GB with `lstsq`'s copy), more than "
    "this machine's memory: the extrapolation assumes it fits.",
    "",
    "| implementation | time | residual fraction after "
    f"{measured} bits | residual fraction after {num_bits} bits |",
    "|---|---|---|---|",
    f"| jhash `infer_codes`, first call (compile + run) | {jx['first']:.1f} s "
    f"| {jx['fraction'][measured - 1]:.4f} | {jx['fraction'][-1]:.4f} |",
    f"| jhash `infer_codes`, run | {jx['run']:.1f} s | | |",
    f"| NumPy port, first {measured} bits (measured) | {npy['measured_time']:.1f} s "
    f"| {npy['fraction'][-1]:.4f} | |",
    f"| NumPy port, {num_bits} bits (extrapolated) | {npy['total']:.0f} s "
    f"({npy['total'] / 3600:.1f} h) | | |",
    "",
    f"Speed-up of jhash (run) over the NumPy port: **{speedup:.0f}x** (extrapolated; over "
    f"the first {measured} bits alone, both measured: "
    f"{npy['measured_time'] / (jx['run'] * measured / num_bits):.1f}x against jhash's "
    "mean time per bit). NumPy refit model: "
    f"{npy['refit_model'][0]:.3g} t + {npy['refit_model'][1]:.3g} t^2 s per bit "
    f"(measured refits {', '.join(f'{x:.2f}' for x in npy['refit_times'])} s at t = 1.."
    f"{measured}; alone: "
    + ", ".join(f"{v:.1f} s at t = {k}" for k, v in npy["checks"].items())
    + f"); direction {npy['direction']:.2f} s per bit.",
  ]
  lines += [
    f"jhash per bit: power-iteration products (slowest start) median "
    f"{int(np.median(jx['iterations']))}, local-search flips median "
    f"{int(np.median(jx['flips']))}, degenerate steps {jx['degenerate']}.",
    "",
  ]
  return "\n".join(lines + figure_1c_table(args, fig)) + "\n"


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="small smoke run; prints only")
  parser.add_argument(
    "--figure-only", action="store_true", help="Figure 1(c) alone (full size); prints only"
  )
  args = parser.parse_args()
  if args.quick:
    n, num_bits, measured, check = 1_000, 16, 3, (6,)
    instances, args.repeats, args.timing_repeats = 300, 1, 3
  else:
    n, num_bits, measured, check = 4_850, 64, 6, (10, 14, 18)
    instances, args.repeats, args.timing_repeats = 1_000, 5, 15
  if args.figure_only:
    print("\n".join(figure_1c_table(args, figure_1c(instances, args.repeats, args.timing_repeats))))
    return
  sets = random_label_sets(np.random.default_rng(0), n)
  r = np.asarray(hb.label_set_affinity(sets, num_bits))
  print(f"{n} label sets; timing jhash ...", flush=True)
  jx = run_jhash(r, num_bits)
  print(f"jhash: first call {jx['first']:.1f} s, run {jx['run']:.1f} s; NumPy port ...", flush=True)
  npy = run_numpy(r, num_bits, measured, check)
  print("Figure 1(c) ...", flush=True)
  fig = figure_1c(instances, args.repeats, args.timing_repeats)
  text = table(args, n, num_bits, sets, jx, npy, fig)
  print(text)
  if not args.quick:
    _report.replace_section(text)


if __name__ == "__main__":
  main()
