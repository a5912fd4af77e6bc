"""MCH's fair test, summed up: tables of MCH and its controls per base, and the verdict.

Command:  python -m experiments.mch_verdict RUN_DIR [--bits 32] [--out PAGE.md]
Reads:    RUN_DIR/results.json of ``experiments/configs/mch.py:scenes`` (any subset of its
          bits; every seed it holds).
Prints:   per base, the base model, MCH and each control (keep all, random at MCH's rate,
          oracle, the objects alone) on R@r0, P@r0, R@r2, P@r2, mAP and codes per item, mean
          and spread over the seeds; the paired difference of MCH's R@r0 from its base's
          with its 95% interval (Student's t over the seeds); the split by the query's number
          of objects; and the verdict by the rule fixed before the runs (``RULE``).
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

from experiments import harness

BASES = ("ksh", "hashnet", "adsh", "dch", "mmhh")
NAMES = {"ksh": "KSH", "hashnet": "HashNet", "adsh": "ADSH", "dch": "DCH", "mmhh": "MMHH"}
METRICS = (
  ("recall_radius_0", "R@r0"),
  ("precision_radius_0", "P@r0"),
  ("recall_radius_2", "R@r2"),
  ("precision_radius_2", "P@r2"),
  ("map", "mAP"),
)
ROWS = (
  ("base", ""),
  ("MCH", "_multi"),
  ("keep all", "_multi@control=all"),
  ("random, MCH's rate", "_multi@control=random"),
  ("oracle", "_multi@control=oracle"),
  ("objects alone", "_multi@control=items"),
)
#: The rule, stated in the issue before any run (at 32 bits).
RULE = (
  "The claim holds if, for at least four of five bases, R@r0 rises (paired over seeds, its "
  "95% interval above 0), P@r0 and mAP each fall by at most 0.01, and MCH beats random "
  "keeping at equal codes per item (the F1-bucket curve and codes per item against sigma "
  "are read from their plot and the sensitivity run); it is refuted if the positive control "
  "gains and MCH does not; inconclusive if the positive control fails too."
)


def per_seed(cell: dict, key: str) -> np.ndarray:
  """float64 [seeds]: ``key`` of each seed of a results.json cell."""
  return np.array([seed[key] for seed in cell["per_seed"].values()], np.float64)


def paired_interval(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
  """(mean, low, high) of ``a - b`` over the seeds, a 95% Student-t interval (none for one
  seed: low = high = mean)."""
  d = a - b
  if d.size < 2:
    return float(d.mean()), float(d.mean()), float(d.mean())
  from scipy import stats  # a jhash dependency

  half = stats.t.ppf(0.975, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)
  return float(d.mean()), float(d.mean() - half), float(d.mean() + half)


def base_verdict(cell: dict) -> dict:
  """The rule's tests for one base: each a bool, with the numbers they read."""
  r0 = paired_interval(per_seed(cell, "recall_radius_0_multi"), per_seed(cell, "recall_radius_0"))
  p0 = paired_interval(
    per_seed(cell, "precision_radius_0_multi"), per_seed(cell, "precision_radius_0")
  )
  m = paired_interval(per_seed(cell, "map_multi"), per_seed(cell, "map"))
  rand = paired_interval(
    per_seed(cell, "recall_radius_0_multi"),
    per_seed(cell, "recall_radius_0_multi@control=random"),
  )
  items = paired_interval(
    per_seed(cell, "recall_radius_0_multi@control=items"), per_seed(cell, "recall_radius_0")
  )
  return {
    "r0_rises": r0[1] > 0,
    "p0_holds": p0[0] >= -0.01,
    "map_holds": m[0] >= -0.01,
    "beats_random": rand[1] > 0,
    "positive_control_gains": items[1] > 0,
    "r0": r0,
    "p0": p0,
    "map": m,
    "vs_random": rand,
    "items_r0": items,
  }


def verdict(cells: dict) -> tuple[str, str]:
  """(verdict, reason) by ``RULE`` over the bases' cells at one length."""
  tests = {b: base_verdict(c) for b, c in cells.items()}
  holds = [
    b
    for b, t in tests.items()
    if t["r0_rises"] and t["p0_holds"] and t["map_holds"] and t["beats_random"]
  ]
  control = [b for b, t in tests.items() if t["positive_control_gains"]]
  if len(holds) >= 4:
    return "holds", f"MCH passes every test for {', '.join(map(NAMES.get, holds))}."
  if control:
    return "refuted", (
      f"the positive control raises R@r0 for {', '.join(map(NAMES.get, control))}, and MCH "
      f"passes every test for {len(holds)} of {len(tests)} bases "
      f"({', '.join(map(NAMES.get, holds)) or 'none'})."
    )
  return "inconclusive", "the positive control does not raise R@r0 either."


def _mean_std(cell, key) -> str:
  values = per_seed(cell, key)
  return f"{values.mean():.4f} ± {values.std(ddof=1) if values.size > 1 else 0.0:.4f}"


def tables(results: dict, bits: int) -> str:
  """The Markdown of one length: a table per base, then the verdict."""
  cells = {
    b: results["metrics"][f"scenes/mch_{b}/{bits}"]
    for b in BASES
    if f"scenes/mch_{b}/{bits}" in results["metrics"]
  }
  out = []
  for base, cell in cells.items():
    seeds = len(cell["per_seed"])
    header = ["rule"] + [title for _, title in METRICS] + ["codes per item"]
    rows = []
    for name, suffix in ROWS:
      if f"map{suffix}" not in cell:
        continue
      codes = "1.000" if not suffix else _mean_std(cell, f"codes_per_item{suffix}")
      rows.append([name] + [_mean_std(cell, f"{k}{suffix}") for k, _ in METRICS] + [codes])
    out.append(f"**{NAMES[base]}**, {bits} bits, {seeds} seeds (mean ± std):\n")
    out.append(harness.format_table(rows, header))
    t = base_verdict(cell)
    out.append(
      f"\nMCH - base, paired: R@r0 {t['r0'][0]:+.4f} [{t['r0'][1]:+.4f}, {t['r0'][2]:+.4f}], "
      f"P@r0 {t['p0'][0]:+.4f}, mAP {t['map'][0]:+.4f}; MCH - random R@r0 "
      f"{t['vs_random'][0]:+.4f} [{t['vs_random'][1]:+.4f}, {t['vs_random'][2]:+.4f}]; "
      f"objects alone - base R@r0 {t['items_r0'][0]:+.4f} [{t['items_r0'][1]:+.4f}, "
      f"{t['items_r0'][2]:+.4f}]; crops of positive reward "
      f"{_mean_std(cell, 'oracle_keep_fraction')}.\n"
    )
    split = [
      [count]
      + [
        _mean_std(cell, f"{k}{s}@query_objects={count}")
        for k in ("recall_radius_0", "map")
        for s in ("", "_multi")
      ]
      for count in (1, 2, 3)
      if f"map@query_objects={count}" in cell
    ]
    if split:
      header = ["query objects", "R@r0 base", "R@r0 MCH", "mAP base", "mAP MCH"]
      out.append(harness.format_table(split, header) + "\n")
  if len(cells) == len(BASES):
    word, reason = verdict(cells)
    out.append(f"**Verdict at {bits} bits: the claim {word}**: {reason} ({RULE})\n")
  return "\n".join(out)


def main(argv: list[str]) -> None:
  args = argv[1:]
  if not args:
    raise SystemExit("usage: python -m experiments.mch_verdict RUN_DIR [--bits 32] [--out PAGE]")
  run = pathlib.Path(args[0])
  bits = int(args[args.index("--bits") + 1]) if "--bits" in args else 32
  results = json.loads((run / "results.json").read_text())
  text = tables(results, bits)
  if "--out" in args:
    pathlib.Path(args[args.index("--out") + 1]).write_text(header(results, bits) + text)
  print(text)


def header(results: dict, bits: int) -> str:
  """A results page's title and provenance: the command, seeds, machine and wall time."""
  machine = results.get("machine") or {}
  seeds = sorted({int(s) for c in results["metrics"].values() for s in c.get("per_seed", {})})
  return (
    f"# MCH on scenes, {bits} bits: MCH and its controls per base\n\n"
    f"Command: `{results.get('command')}`; seeds {seeds}; {machine.get('cores')} cores of an "
    f"{machine.get('cpu')} ({machine.get('accelerator') or 'no accelerator'}); "
    f"{results['wall_time_s'] / 60:.0f} min wall; finished {results.get('finished')}. "
    f"Page made by `python -m experiments.mch_verdict RUN_DIR --bits {bits} --out PAGE`.\n\n"
  )


if __name__ == "__main__":
  main(sys.argv)
