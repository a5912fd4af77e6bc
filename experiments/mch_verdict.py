"""MCH's fair test, summed up: tables of MCH and its controls per base, and the verdict.

Command:  python -m experiments.mch_verdict RUN_DIR [--bits 32] [--out PAGE.md]
Reads:    RUN_DIR/results.json of ``experiments/configs/mch.py:scenes`` (any subset of its
          bits; every seed it holds). A missing run, a run without MCH's scenes cells, a
          length it does not hold, or a metric of a seed that is missing or not a finite
          number (a NaN is written as null) is refused: one line, ``error: ...``, exit
          status 2; no table or verdict is drawn from it.
Prints:   per base, the base model, MCH and each control (keep all, random at MCH's rate,
          oracle, the objects alone) on R@r0, P@r0, R@r2, P@r2, mAP and codes per item, mean
          and spread over the seeds; the paired difference of MCH's R@r0 from its base's
          with its 95% interval (Student's t over the seeds); the split by the query's number
          of objects; and the verdict by the rule fixed before the runs (``RULE``).
"""

from __future__ import annotations

import argparse
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
  """float64 [seeds]: ``key`` of each seed of a results.json cell; a ValueError naming the
  seed and the metric when it is missing or not a finite number (results.json writes NaN
  as null): a mean, interval or verdict would silently read it as a result."""
  seeds = cell.get("per_seed") or {}
  if not seeds:
    raise ValueError("it holds no seed (per_seed is empty)")
  values = []
  for seed, result in seeds.items():
    if not isinstance(result, dict) or key not in result:
      raise ValueError(f"seed {seed} has no {key} (a run without evaluation.controls?)")
    v = result[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
      shown = "NaN (null in results.json)" if v is None else repr(v)
      raise ValueError(
        f"seed {seed}'s {key} is {shown}, not a number: no mean, interval or verdict is "
        "drawn from it (rerun that seed's cell, or drop the seed from the cell)"
      )
    values.append(float(v))
  return np.array(values, np.float64)


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
  tests = {}
  for b, c in cells.items():
    try:
      tests[b] = base_verdict(c)
    except ValueError as error:
      raise ValueError(f"{NAMES.get(b, b)}'s cell: {error}.") from None
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
    try:
      out += _section(base, cell, bits)
    except ValueError as error:
      raise ValueError(f"cell scenes/mch_{base}/{bits}: {error}.") from None
  if len(cells) == len(BASES):
    word, reason = verdict(cells)
    out.append(f"**Verdict at {bits} bits: the claim {word}**: {reason} ({RULE})\n")
  else:
    missing = ", ".join(NAMES[b] for b in BASES if b not in cells)
    out.append(
      f"**No verdict at {bits} bits**: the rule reads all five bases; the run holds "
      f"{len(cells)} (no {missing}).\n"
    )
  return "\n".join(out)


def _section(base: str, cell: dict, bits: int) -> list[str]:
  """One base's table, its paired differences and its split by query objects."""
  out = []
  seeds = len(per_seed(cell, "map"))
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
  return out


def load(run_dir) -> dict:
  """``RUN_DIR/results.json``, or a ValueError naming RUN_DIR and what is wrong: missing,
  not a directory, no (readable) results.json, or no metrics."""
  run = pathlib.Path(run_dir)
  if not run.exists():
    raise ValueError(f"RUN_DIR {str(run)!r} does not exist.")
  if not run.is_dir():
    raise ValueError(f"RUN_DIR {str(run)!r} is a file, not a run directory.")
  path = run / "results.json"
  if not path.is_file():
    raise ValueError(
      f"RUN_DIR {str(run)!r} is not a finished run: it holds no results.json (a run of "
      "experiments/configs/mch.py:scenes writes it when it ends)."
    )
  try:
    results = json.loads(path.read_text())
  except (json.JSONDecodeError, UnicodeDecodeError) as error:
    raise ValueError(f"RUN_DIR: {path} is not readable JSON ({error}).") from None
  metrics = results.get("metrics") if isinstance(results, dict) else None
  if not isinstance(metrics, dict):
    raise ValueError(f"RUN_DIR: {path} holds no metrics (not a results.json of a run).")
  if not metrics:
    raise ValueError(f"RUN_DIR: {path} holds no metrics: the run finished no cell.")
  return results


def check_bits(results: dict, bits: int) -> None:
  """A ValueError unless the run holds MCH's scenes cells (``scenes/mch_BASE/BITS``) at
  ``bits``, naming the lengths it holds."""
  held = sorted(
    {
      int(name.rsplit("/", 1)[1])
      for name in results["metrics"]
      for b in BASES
      if name.startswith(f"scenes/mch_{b}/") and name.rsplit("/", 1)[1].isdigit()
    }
  )
  if not held:
    some = ", ".join(list(results["metrics"])[:3])
    raise ValueError(
      f"RUN_DIR: the run holds no MCH cells on scenes (scenes/mch_BASE/BITS, of "
      f"experiments/configs/mch.py:scenes); its cells: {some}..."
    )
  if bits not in held:
    raise ValueError(
      f"--bits {bits}: the run holds no cells at {bits} bits; it holds {', '.join(map(str, held))}."
    )


def _out_path(out: str | None) -> pathlib.Path | None:
  if out is None:
    return None
  if not out.strip():
    raise ValueError(
      f"--out: expected the page's file path; got {out!r} (an empty path would write "
      "into the current directory)."
    )
  path = pathlib.Path(out)
  if path.is_dir():
    raise ValueError(f"--out: {out!r} is a directory; give the page's file path.")
  return path


def main(argv: list[str] | None = None) -> int:
  """The command (module docstring) on ``argv`` (default ``sys.argv[1:]``); the exit status."""
  parser = harness.ArgumentParser(
    prog="python -m experiments.mch_verdict",
    description=__doc__,
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory holding results.json")
  parser.add_argument("--bits", type=int, default=32, help="code length read (default 32)")
  parser.add_argument("--out", metavar="PAGE", help="also write the page, with its header")
  try:
    args = parser.parse_args(argv)
    out = _out_path(args.out)
    results = load(args.run_dir)
    check_bits(results, args.bits)
    text = tables(results, args.bits)
    if out is not None:
      try:
        harness.atomic_write_bytes(out, (header(results, args.bits) + text).encode())
      except OSError as error:
        raise ValueError(f"--out: cannot write {str(out)!r} ({error}).") from None
  except ValueError as error:
    return harness.script_error(error)
  print(text)
  return 0


def header(results: dict, bits: int) -> str:
  """A results page's title and provenance: the command, seeds, machine and wall time."""
  machine = results.get("machine") or {}
  seeds = sorted({int(s) for c in results["metrics"].values() for s in c.get("per_seed", {})})
  wall = results.get("wall_time_s")
  wall = f"{wall / 60:.0f} min wall" if isinstance(wall, (int, float)) else "wall time unrecorded"
  return (
    f"# MCH on scenes, {bits} bits: MCH and its controls per base\n\n"
    f"Command: `{results.get('command')}`; seeds {seeds}; {machine.get('cores')} cores of an "
    f"{machine.get('cpu')} ({machine.get('accelerator') or 'no accelerator'}); "
    f"{wall}; finished {results.get('finished')}. "
    f"Page made by `python -m experiments.mch_verdict RUN_DIR --bits {bits} --out PAGE`.\n\n"
  )


if __name__ == "__main__":
  sys.exit(main())
