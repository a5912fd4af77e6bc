"""A results page from a run: ``python -m experiments.report RUN_DIR [...] [--out FILE]``.

Turns the ``results.json`` of each run directory into a Markdown section: the table the
run printed (mean, and ``± std`` over seeds where it ran several), then the command that
ran it, the seeds, the machine (CPU model and cores, accelerator), the wall time, the
date and the versions of jhash and JAX. The docs' results pages are made this way, so
their tables come from runs and cannot drift from the code:

    python -m experiments.main --config experiments/configs/quickstart.py --workdir runs/quickstart
    python -m experiments.report runs/quickstart --title "Quickstart" --out docs/results/quickstart.md

A retrieval run's sweeps (``evaluation.sweep``) get a table per cell and parameter
(``sweep_tables``). Without ``--out`` the page is printed. A run directory without a finished
``results.json`` is an error naming it, as is a retrieval run's ``results.json`` whose
metrics are not numbers, or whose contents differ from the digest written with them
(hand-edited); so is an ``--out`` that is a folder or a run's
own ``results.json``, ``config.json`` or ``progress.json`` (the page would replace it).
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import re
import sys
from typing import Any, Mapping

from jhash import files


def load(run_dir) -> dict:
  """``results.json`` of ``run_dir``, or a ValueError naming what is missing or damaged."""
  if pathlib.Path(run_dir).is_file():
    raise ValueError(
      f"{run_dir} is a file, not a run directory (give the folder that holds results.json)."
    )
  if not pathlib.Path(run_dir).exists():
    raise ValueError(f"{run_dir} does not exist (expected a run directory holding results.json).")
  path = pathlib.Path(run_dir) / "results.json"
  if path.is_dir():
    raise ValueError(f"{path} is a folder, not the results file a run writes.")
  if not path.is_file():
    started = any((pathlib.Path(run_dir) / name).exists() for name in RUN_FILES[1:])
    raise ValueError(
      f"{path} does not exist: the run in {run_dir} has not finished, or the file was "
      "deleted (run the experiment again on it: finished cells are kept)."
      if started
      else f"{run_dir} is not a run directory: it holds no results.json, config.json or "
      "progress.json (give the --workdir of a finished run)."
    )
  try:
    results = json.loads(path.read_text())
  except (json.JSONDecodeError, UnicodeDecodeError) as error:
    raise ValueError(
      f"{path} is not readable JSON ({error}). Run the experiment again on its run "
      "directory (the same command): results.json is written again from the finished "
      "cells in progress.json, none trained again."
    ) from None
  if not isinstance(results, dict):
    raise ValueError(
      f"{path} is damaged: a run's results are a JSON object; got {type(results).__name__}."
    )
  if "table" not in results:
    raise ValueError(
      f"{path} holds no results table (written by an older jhash, or damaged). Delete it "
      "and run the experiment again on its run directory (the same command): it is "
      "written again from the finished cells in progress.json, none trained again."
    )
  if not isinstance(results["table"], str):
    raise ValueError(
      f"{path} is damaged: its 'table' must be text; got {type(results['table']).__name__}."
    )
  if not results["table"].strip():
    raise ValueError(f"{path} is damaged: its 'table' is empty.")
  for key, kind, what in _FIELDS:
    value = results.get(key)
    if value is not None and not isinstance(value, kind):
      raise ValueError(
        f"{path} is damaged: its {key!r} must be {what}; got {type(value).__name__} {value!r:.60}."
      )
  _check_metrics(results, path)
  _check_digest(results, path)
  _check_run(results, path)
  return results


def _check_run(results: Mapping[str, Any], path: pathlib.Path) -> None:
  """Refuse ``results.json`` in a folder whose files record more than one config
  fingerprint (files of another run copied in), or that was written from finished cells
  that ``progress.json`` beside it does not hold (another folder's results)."""
  recorded = {"results.json": results.get("fingerprint")}
  progress = None
  for name in RUN_FILES[1:]:
    try:
      record = json.loads((path.parent / name).read_text())
      recorded[name] = record.get("fingerprint")
    except (OSError, ValueError, AttributeError):
      continue
    progress = record if name == "progress.json" else progress
  recorded = {name: f for name, f in recorded.items() if isinstance(f, str)}
  if len(set(recorded.values())) > 1:
    each = ", ".join(f"{name} {f}" for name, f in sorted(recorded.items()))
    raise ValueError(
      f"{path.parent} holds files of two runs (config fingerprints: {each}). Run the "
      "experiment's own command on it: the runner, which knows its config, names the files "
      "that are another run's and how to go on."
    )
  _check_cells(results, progress, path)


def _check_cells(results: Mapping[str, Any], progress: Any, path: pathlib.Path) -> None:
  """Refuse ``results.json`` whose cells (their digests, ``cell_digests``) are not the
  finished cells of the ``progress.json`` beside it."""
  written = results.get("cell_digests")
  held = progress.get("digests") if isinstance(progress, dict) else None
  if not isinstance(written, dict) or not isinstance(held, dict):
    return  # written before jhash kept them, or no progress.json to compare with
  other = sorted(cell for cell, digest in written.items() if held.get(cell) != digest)
  if other:
    raise ValueError(
      f"{path} and the progress.json beside it disagree: {len(other)} of its "
      f"{len(written)} cells (e.g. {other[0]!r}) are not finished in progress.json, or "
      "finished with other results; one of the two files was copied from another folder "
      "or changed. Run the experiment's own command on this folder: the runner checks "
      "progress.json (naming its damage, if any), finishes the cells and writes "
      "results.json again."
    )


def _check_digest(results: Mapping[str, Any], path: pathlib.Path) -> None:
  """Refuse ``results.json`` whose contents differ from the digest written with them (a
  number or the table edited), or that has none (an older jhash's, or edited)."""
  from experiments import harness  # pylint: disable=import-outside-toplevel

  digest = results.get("digest")
  if digest == harness.with_digest(results)["digest"]:
    return
  what = (
    "has no digest (an older jhash wrote it, or it was edited)"
    if digest is None
    else "differs from the digest jhash wrote with it (a number, the table or a record was changed)"
  )
  raise ValueError(
    f"{path} {what}. Delete it and run the experiment again on its run directory (the "
    "same command): results.json is written again from the finished cells in "
    "progress.json, none trained again."
  )


def _check_metrics(results: Mapping[str, Any], path: pathlib.Path) -> None:
  """Refuse a retrieval run's ``metrics`` whose numbers are not numbers (hand-edited),
  naming the cell and the metric (``experiments.retrieval.results_problem``)."""
  config = results.get("config")
  if config is None:
    return  # no config recorded: nothing says how the metrics are laid out
  if not isinstance(config, dict):
    problem = f"its 'config' must be an object; got {type(config).__name__}"
  elif config.get("trainer") != "experiments.retrieval":
    # Other trainers' metrics have layouts of their own, each an object.
    metrics = results.get("metrics")
    problem = (
      None
      if isinstance(metrics, dict)
      else f"its 'metrics' must be an object; got {type(metrics).__name__}"
    )
  else:
    from experiments import retrieval

    problem = retrieval.results_problem(results.get("metrics"))
  if problem is not None:
    raise ValueError(
      f"{path} is damaged: {problem}; jhash writes it, so something else changed it. "
      "Restore it from a copy, or run the experiment again on its run directory (same "
      "config): results.json is written again from the finished cells in progress.json."
    )


#: The provenance fields of results.json that ``provenance`` reads: key, type, in words.
_FIELDS = (
  ("command", str, "a string"),
  ("seeds", list, "a list of seeds"),
  ("machine", dict, "an object (cpu, cores, accelerator)"),
  ("wall_time_s", (int, float), "a number of seconds"),
  ("versions", dict, "an object (package: version)"),
)

#: Files of a run directory that ``--out`` must not write over.
RUN_FILES = ("results.json", "config.json", "progress.json")
#: What ``--out`` may end in: the page is Markdown.
PAGE_SUFFIXES = (".md", ".markdown", ".txt")


def _repeated(run_dirs) -> str | None:
  """The first run directory given a second time (the same folder by another path too)."""
  seen = set()
  for run_dir in run_dirs:
    key = pathlib.Path(run_dir).resolve()
    if key in seen:
      return run_dir
    seen.add(key)
  return None


def check_out(out: str, run_dirs) -> None:
  """Refuse an ``--out`` that is empty, a folder, not a Markdown name (``PAGE_SUFFIXES``:
  a run's plot is not overwritten), or a run's own file (``RUN_FILES``, of any run
  directory given or any run directory at all): the page would replace it."""
  if not out.strip():
    raise ValueError(f"--out {out!r}: expected a file path; got an empty one.")
  path = pathlib.Path(out)
  if path.is_dir() or not path.name or path.name in (".", "..") or out.endswith("/"):
    raise ValueError(f"--out {out}: names a folder; expected a file path (e.g. page.md).")
  parent = next((p for p in path.parents if p.exists()), None)
  if parent is not None and not parent.is_dir():
    raise ValueError(f"--out {out}: {parent} is a file, not a folder to write the page in.")
  target = path.resolve()
  inputs = {(pathlib.Path(d) / name).resolve() for d in run_dirs for name in RUN_FILES}
  if target in inputs or (target.name in RUN_FILES and (target.parent / "results.json").exists()):
    raise ValueError(
      f"--out {out}: is a run's {target.name}; writing the page there would overwrite it. "
      "Choose another path (e.g. page.md)."
    )
  if path.suffix.lower() not in PAGE_SUFFIXES:
    raise ValueError(
      f"--out {out}: the page is Markdown; expected a name ending in "
      f"{', '.join(PAGE_SUFFIXES)} (e.g. page.md); got {path.suffix or 'no suffix'}."
    )


def provenance(results: Mapping[str, Any]) -> str:
  """One paragraph: command, seeds, machine, wall time, date, versions."""
  parts = []
  if results.get("command"):
    parts.append(f"Command: `{results['command']}`.")
  seeds = results.get("seeds") or ([results["seed"]] if results.get("seed") is not None else [])
  if seeds:
    parts.append(f"Seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}.")
  machine = results.get("machine") or {}
  where = machine.get("cpu") or "an unrecorded machine"
  if isinstance(machine.get("cores"), int) and not isinstance(machine.get("cores"), bool):
    where = f"{machine['cores']} cores of {where}"
  if machine.get("accelerator"):
    where += f", {machine.get('num_devices', 1)} x {machine['accelerator']}"
  wall = results.get("wall_time_s")
  known = isinstance(wall, (int, float)) and math.isfinite(wall)
  timing = f"{wall:.0f} s wall" if known else "wall time unknown"
  when = str(results.get("finished", ""))[:10]
  parts.append(f"{timing} on {where}{', ' + when if when else ''}.")
  versions = results.get("versions") or {}
  named = [f"{k} {versions[k]}" for k in ("jhash", "jax") if k in versions]
  if named:
    parts.append(", ".join(named) + ".")
  return " ".join(parts)


def _escape_cells(rows: list[str]) -> list[str]:
  """Rows of one aligned table (``harness.format_table``): a ``|`` inside a cell (at a
  column the separator row has no ``|``) escaped as ``\\|``, so ``|J2-J1|`` stays a cell."""
  separator = next((r for r in rows if set(r.strip()) <= set("|-: ") and "-" in r), None)
  if separator is None:
    return rows
  bars = {i for i, c in enumerate(separator) if c == "|"}
  out = []
  for row in rows:
    if len(row) != len(separator):  # not aligned: leave it as it is
      out.append(row)
      continue
    out.append("".join("\\|" if c == "|" and i not in bars else c for i, c in enumerate(row)))
  return out


def markdown_blocks(table: str) -> str:
  """A run's printed table as Markdown: a blank line before and after each run of table
  rows (``|`` lines), so a caption line above a table stays a paragraph of its own, and
  ``|`` inside a cell escaped (``_escape_cells``)."""
  blocks: list[tuple[bool, list[str]]] = []
  for line in table.strip().splitlines():
    is_row = line.lstrip().startswith("|")
    if blocks and blocks[-1][0] == is_row and (is_row or line.strip()):
      blocks[-1][1].append(line)
    else:
      blocks.append((is_row, [line]))
  out = []
  for is_row, lines in blocks:
    if out and out[-1] != "" and lines[0].strip():
      out.append("")
    out += _escape_cells(lines) if is_row else lines
  return "\n".join(out)


_SWEPT = re.compile(r"^(?P<metric>.+)_multi@(?P<param>\w+)=(?P<value>.+)$")


def _number(value: Any) -> str:
  return "-" if not isinstance(value, (int, float)) else f"{value:.4f}"


def sweep_tables(results: Mapping[str, Any]) -> str:
  """Tables of a retrieval run's sweeps (``evaluation.sweep``: a multi-code method's cell
  re-encoded with each value of a parameter, ``METRIC_multi@PARAM=VALUE``): per cell and
  parameter, a row per metric, a column per value, and the cell's single code ("base":
  the base model's number; 1 code per item)."""
  blocks = []
  for cell, numbers in sorted(results.get("metrics", {}).items()):
    if not isinstance(numbers, dict):  # a number of another trainer's metrics
      continue
    swept: dict[str, dict[str, dict[str, Any]]] = {}
    for key, value in numbers.items():
      match = _SWEPT.match(key)
      if match:
        by_value = swept.setdefault(match["param"], {})
        by_value.setdefault(match["value"], {})[match["metric"]] = value
    for param, by_value in swept.items():
      values = list(by_value)
      metrics = list(dict.fromkeys(m for v in values for m in by_value[v]))
      rows = [f"| {param} | " + " | ".join(values) + " | base |", "|---" * (len(values) + 2) + "|"]
      for metric in metrics:
        base = 1.0 if metric == "codes_per_item" else numbers.get(metric)
        cells = [_number(by_value[v].get(metric)) for v in values] + [_number(base)]
        rows.append(f"| {metric} | " + " | ".join(cells) + " |")
      blocks.append(f"{cell}, re-encoded with each {param}:\n\n" + "\n".join(rows))
  return "\n\n".join(blocks)


def section(results: Mapping[str, Any], title: str, level: int = 2) -> str:
  table = markdown_blocks(results["table"])
  sweeps = sweep_tables(results)
  sweeps = f"\n\n{sweeps}" if sweeps else ""
  return f"{'#' * level} {title}\n\n{table}{sweeps}\n\n{provenance(results)}\n"


def page(run_dirs, titles=None) -> str:
  """The Markdown of one page: a section per run directory (the page's title when one)."""
  titles = list(titles or [])
  if titles and len(titles) != len(run_dirs):
    raise ValueError(
      f"--title is given {len(titles)} time(s) for {len(run_dirs)} run directories: give "
      "one per run directory, in their order (or none: each section takes its folder's name)."
    )
  level = 1 if len(run_dirs) == 1 else 2
  out = []
  for i, run_dir in enumerate(run_dirs):
    results = load(run_dir)
    title = titles[i] if i < len(titles) else pathlib.Path(run_dir).name
    out.append(section(results, title, level))
  return "\n".join(out)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(prog="python -m experiments.report", description=__doc__)
  parser.add_argument("run_dirs", nargs="+", help="run directories holding results.json")
  parser.add_argument("--title", action="append", help="a section title, one per run dir")
  parser.add_argument("--out", help="write the page here (atomically) instead of printing")
  args = parser.parse_args(argv)
  try:
    again = _repeated(args.run_dirs)
    if again is not None:
      raise ValueError(f"{again} is given twice: its section would appear twice.")
    if args.out is not None:
      check_out(args.out, args.run_dirs)
    text = page(args.run_dirs, args.title)
    if args.out is not None:
      try:
        files.atomic_write_bytes(pathlib.Path(args.out), text.encode())
      except OSError as error:
        raise ValueError(f"--out {args.out}: cannot write ({error.strerror or error}).") from None
  except ValueError as error:
    print(f"error: {' '.join(str(error).split())}", file=sys.stderr)
    return 2
  if args.out is None:
    print(text, end="")
  return 0


if __name__ == "__main__":
  sys.exit(main())
