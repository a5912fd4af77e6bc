"""CDH's exact B-step against the paper's chunks on all 60,000 Fashion-MNIST items.

Command (from the repository root, which holds ``experiments/``):
``PYTHONPATH=. python benchmarks/bench_cdh_exact_fashion.py chunked OUT.json``, then ``exact``
(each in its own process, so that each one's peak memory is its own; ``--quick`` after
them: 3,000 items, a smoke run), then
``python benchmarks/bench_cdh_exact_fashion.py table CHUNKED.json EXACT.json`` writes the
section of ``benchmarks/RESULTS.md``.

The setting of ``experiments/configs/cdh_fashion.py`` at 32 bits: the two halves of each
image as views, all 60,000 training images as the training set and the database, 1,000
test queries, gamma = 0.003, 16 inner updates a bit, 300 W-step iterations, two sweeps,
one key. ``chunked``: the B-step on random chunks of 10,000 (new ones each sweep);
``exact``: ``chunk_size=None``, the n x n objective matrix-free. Reports each sweep's
wall time (the first includes compiling), the objective J after each sweep and the
second sweep's change ``|J_2 - J_1| / |J_1|``, the cross-view mAPs, XLA's temporary
memory of one B-step sweep (its memory analysis) and the process's peak resident memory.
"""

from __future__ import annotations

import json
import resource
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import _report
import jhash
from experiments import cdh_common as common
from experiments import cdh_fashion
from jhash.methods import cdh_parts

BITS, GAMMA, SWEEPS = 32, 0.003, 2
OPTIONS = {"max_inner": 16, "w_iters": 300, "num_sweeps": SWEEPS}


def bstep_temp_bytes(train, chunk_size) -> int:
  """XLA's temporary bytes for one B-step sweep over ``chunk_size`` items (all: exact)."""
  n = train["labels"].shape[0] if chunk_size is None else chunk_size
  codes = jax.ShapeDtypeStruct((n, BITS), jnp.int8)
  z = jax.ShapeDtypeStruct((n, BITS), jnp.float32)
  uniforms = jax.ShapeDtypeStruct((BITS, OPTIONS["max_inner"]), jnp.float32)
  labels = jnp.asarray(train["labels"][:n])

  def sweep(c, zz, u):
    sup = cdh_parts.supervision_from_labels(labels)
    return cdh_parts.bstep_sweep(c, zz, sup, jnp.float32(GAMMA), u, matrix_free=chunk_size is None)

  return int(
    jax.jit(sweep).lower(codes, z, uniforms).compile().memory_analysis().temp_size_in_bytes
  )


def run(mode: str, out: str, quick: bool = False) -> None:
  """One mode's fit and scores, written to ``out``; ``quick``: 3,000 items in chunks of
  1,000 (a smoke run)."""
  chunk_size = None if mode == "exact" else (1_000 if quick else 10_000)
  spec = {"train_per_class": 300 if quick else 0, "query_per_class": 100}
  data = cdh_fashion.fashion_data(spec, 0)
  train = data["train"]
  method = common.cdh_method(BITS, {**OPTIONS, "chunk_size": chunk_size}, GAMMA)
  stamps = [time.perf_counter()]
  state, history = jhash.fit(
    method,
    jax.random.key(0),
    train,
    SWEEPS,
    progress=False,
    on_step=lambda *_: stamps.append(time.perf_counter()),
  )
  jax.block_until_ready(state)
  objective = np.asarray(history["objective"], np.float64)
  result = {
    "mode": mode,
    "n": int(train["labels"].shape[0]),
    "sweep_seconds": np.diff(stamps).tolist(),
    "objective": objective.tolist(),
    "objective_before": float(np.asarray(history["objective_before"])[0]),
    "second_sweep_change": common.second_sweep_change(objective),
    "maps": common.scores(method, state, data, state.codes),
    "bstep_temp_bytes": bstep_temp_bytes(train, chunk_size),
    "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "machine": _report.machine(),
  }
  with open(out, "w") as f:
    json.dump(result, f, indent=2)
  print(json.dumps(result, indent=2))


def table(chunked_path: str, exact_path: str, note: str = "") -> None:
  """The section of RESULTS.md from the two runs' files; ``note``: how they ran (load)."""
  with open(chunked_path) as f:
    chunked = json.load(f)
  with open(exact_path) as f:
    exact = json.load(f)
  names = list(exact["maps"])
  lines = [
    "| B-step | sweep 1 (s, compiling included) | sweep 2 (s) | J after sweep 1 | J after "
    "sweep 2 | abs(J2 - J1) / abs(J1) | "
    + " | ".join(f"mAP {m}" for m in names)
    + " | B-step temporaries (MB, XLA) | peak RSS (MB) |",
    "|---" * (8 + len(names)) + "|",
  ]
  for name, r in (("chunks of 10,000", chunked), ("exact, matrix-free", exact)):
    s, j = r["sweep_seconds"], r["objective"]
    lines.append(
      f"| {name} | {s[0]:.0f} | {s[1]:.0f} | {j[0]:.5f} | {j[1]:.5f} | "
      f"{100 * r['second_sweep_change']:.2f}% | "
      + " | ".join(f"{r['maps'][m]:.4f}" for m in names)
      + f" | {r['bstep_temp_bytes'] / 1e6:.1f} | {r['peak_rss_bytes'] / 1e6:.0f} |"
    )
  ratio = exact["sweep_seconds"][1] / chunked["sweep_seconds"][1]
  body = (
    f"Fashion-MNIST's {exact['n']:,} training images (two halves as views; the database), "
    "1,000 test queries, 32 bits, gamma = 0.003, 16 inner updates a bit, 300 W-step "
    "iterations, two sweeps, key 0 (`experiments/configs/cdh_fashion.py`'s setting). Each "
    "mode ran in its own process, on "
    + (
      chunked["machine"]
      if chunked["machine"] == exact["machine"]
      else f"{chunked['machine']} (chunked) and {exact['machine']} (exact)"
    )
    + (f". {note}" if note else "")
    + ".\n\n"
    + "\n".join(lines)
    + f"\n\nSecond sweep, exact / chunked: {ratio:.1f}x the time (the n^2 work alone: 6x, "
    "six chunks' pairs against all pairs)."
  )
  command = (
    "PYTHONPATH=. python benchmarks/bench_cdh_exact_fashion.py chunked|exact OUT.json; ... table"
  )
  _report.write_section("CDH's exact B-step on all of Fashion-MNIST", command, body)


if __name__ == "__main__":
  if sys.argv[1] == "table":  # table CHUNKED.json EXACT.json [NOTE]
    table(sys.argv[2], sys.argv[3], " ".join(sys.argv[4:]))
  else:
    run(sys.argv[1], sys.argv[2], quick="--quick" in sys.argv[3:])
