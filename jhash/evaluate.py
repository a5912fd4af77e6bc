"""``jhash evaluate``: jhash's exact retrieval metrics for codes made anywhere.

Run as ``jhash evaluate ...`` or ``python -m jhash.evaluate ...``::

    jhash evaluate --query-codes q.npy --db-codes db.npy \\
        --query-labels q_labels.npy --db-labels db_labels.npy --compare-presets

Files (``.npy`` is read with ``allow_pickle=False``: never unpickled):

* codes ``[n, K]``: ``.npy`` or ``.mat`` of -1/+1 (any integer or float dtype, e.g. the
  float32 of ``torch.sign``), of bits (bool, or only 0 and 1: 1 is +1; the table says
  when a file was read as bits), or packed ``uint32`` words ``[n, ceil(K / 32)]`` in
  ``jhash.codes.pack_bits``'s layout, with ``--num-bits K``;
* labels: class ids ``[n]`` (integers; also a ``[n, 1]`` or ``[1, n]`` matrix, as MATLAB
  saves vectors) or multi-hot ``[n, C]`` (0/1 numbers or bool), one row per code;
* a ``.mat`` file (v4 to v7 through scipy, v7.3 through h5py, with ``jhash.data``'s own
  reader) names its variable with ``--query-key``, ``--db-key``, ``--query-labels-key``,
  ``--db-labels-key``; a file holding a single variable needs none.

Conventions: ``--preset`` (``PRESETS``: jhash's tie-aware mAP and three toolboxes',
each with its source), or explicit ``--ties``, ``--normalizer``, ``--no-relevant`` for
``jhash.metrics.mean_average_precision``; ``--top-k K`` adds mAP@K. The table gives mAP
over the whole ranking, mAP@K, precision@k for ``--ks`` and precision and recall within
Hamming radius 2; ``--compare-presets`` adds mAP under every preset, for these codes.
``--json PATH`` writes the numbers, ``--curves PATH`` the precision-recall curve by
radius and the precision@k curve (and a PNG beside it when matplotlib imports).

A bad file or option ends the command with one line on stderr naming the file or option,
what was expected and what came, and exit status 2.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.metadata
import io
import json
import math
import os
import pathlib
import sys
import warnings
from typing import NamedTuple

import numpy as np

from jhash import files
from jhash import metrics

__all__ = [
  "main",
  "PRESETS",
  "Preset",
  "hashnet_map",
  "InputError",
  "Loaded",
  "load_codes",
  "load_labels",
]

from jhash._evaluate_files import DEFAULT_KS
from jhash._evaluate_files import RADIUS
from jhash._evaluate_files import InputError
from jhash._evaluate_files import Loaded
from jhash._evaluate_files import _CURVE_POINTS
from jhash._evaluate_files import check_corpus
from jhash._evaluate_files import load_codes
from jhash._evaluate_files import load_labels
from jhash import _evaluate_presets
from jhash._evaluate_presets import PRESETS
from jhash._evaluate_presets import PRESETS_DOC
from jhash._evaluate_presets import Preset
from jhash._evaluate_presets import hashnet_map

# ------------------------------------------------------------------------------------------
# The evaluation


class Convention(NamedTuple):
  """The mAP rule of a run: a preset, or explicit options (name "options")."""

  preset: Preset
  top_k: int | None  # mAP@K's K (None: no mAP@K row)
  note: str  # how K was chosen, when it was not given


def _custom_preset(args) -> Preset:
  options = {
    "ties": args.ties or "aware",
    "relevance": "auto",
    "normalizer": args.normalizer or "relevant",
    "no_relevant": args.no_relevant or "zero",
  }
  return Preset(
    "options",
    "jhash.metrics.mean_average_precision",
    ", ".join(f"{k}={v}" for k, v in options.items()),
    None,
    options,
    functools.partial(_evaluate_presets.tie_aware, **options),
  )


def _cutoff(preset: Preset, top_k: int | None, n: int) -> tuple[int | None, str]:
  """mAP@K's K for ``preset``: --top-k, else the preset's own (clipped to n), else None."""
  if top_k is not None:
    return top_k, ""
  if preset.default_k is None:
    return None, ""
  if preset.default_k > n:
    return n, f"{preset.name}'s K={preset.default_k} clipped to the {n} database items"
  return preset.default_k, ""


def resolve_convention(args, n: int) -> Convention:
  """The mAP rule ``args`` ask for: ``--preset`` or explicit options (not both), and mAP@K's K."""
  names = ("ties", "normalizer", "no_relevant")
  given = [f"--{o.replace('_', '-')}" for o in names if getattr(args, o) is not None]
  if given and args.preset is not None:
    raise InputError(f"--preset {args.preset} and {', '.join(given)}: give one or the other.")
  if args.top_k is not None and not 1 <= args.top_k <= n:
    raise InputError(f"--top-k {args.top_k}: expected an int in [1, {n}], the database size.")
  preset = _custom_preset(args) if given else PRESETS[args.preset or "tie-aware"]
  return Convention(preset, *_cutoff(preset, args.top_k, n))


def _ks(text: str | None, n: int) -> list[int]:
  """precision@k's ks: ``--ks`` (each in [1, n]), else 100 and 1000 clipped to n."""
  if text is None:
    return sorted({min(k, n) for k in DEFAULT_KS})
  try:
    ks = [int(k) for k in text.split(",")]
  except ValueError:
    raise InputError(
      f"--ks {text}: expected comma-separated ints, e.g. 100,1000 (no empty entries)."
    ) from None
  bad = [k for k in ks if not 1 <= k <= n]
  if not ks or bad:
    raise InputError(f"--ks {text}: expected ints in [1, {n}], the database size; got {bad}.")
  repeated = sorted({k for k in ks if ks.count(k) > 1})
  if repeated:
    raise InputError(f"--ks {text}: each cut-off once; {repeated[0]} repeats.")
  return ks


def _run(preset: Preset, data: tuple, top_k: int | None) -> float:
  try:
    return preset.compute(*data, top_k)
  except ValueError as e:  # jhash's checks of an option combination
    raise InputError(f"{preset.name} ({preset.summary}): {e}") from None


def without_relevant(query_labels: np.ndarray, db_labels: np.ndarray) -> int:
  """How many queries share no label with any database item (class ids, or multi-hot)."""
  if query_labels.ndim == 1:
    return int((~np.isin(query_labels, db_labels)).sum())
  present = np.asarray(db_labels, bool).any(axis=0)
  return int((~(np.asarray(query_labels, bool) & present[None, :]).any(axis=1)).sum())


def _quiet(fn, *args):
  """``fn(*args)`` without the metrics' warning that no query has a relevant item: the
  report says so in a note of its own."""
  with warnings.catch_warnings():
    warnings.filterwarnings(
      "ignore", message=".*no query has a relevant item", category=RuntimeWarning
    )
    return fn(*args)


def compute(data: tuple, convention: Convention, ks: list[int], compare: bool, top_k=None) -> dict:
  """Every number of the report.

  Args:
    data: (query codes int8 [q, K], db codes int8 [n, K], query labels, db labels).
    convention: the mAP rule; ks: precision@k's cut-offs; compare: add every preset's mAP,
      at ``top_k`` (--top-k) or each preset's own cut-off.
  Returns:
    dict: ``map``, ``map_at_k`` ({k, value} or None), ``precision_at_k`` {k: value},
    ``radius`` {radius, precision, recall}, ``presets`` {name: {map, map_at_k, k}}.
  """
  preset, k = convention.preset, convention.top_k
  ties = preset.options["ties"]
  radius = min(RADIUS, data[0].shape[1])
  p_at_k = metrics.precision_at_k(*data, ks, ties=ties)
  p_r, r_r = metrics.precision_recall_at_radius(*data, radius)
  out = {
    "map": _run(preset, data, None),
    "map_at_k": None if k is None else {"k": k, "value": _run(preset, data, k)},
    "precision_at_k": {str(kk): float(v) for kk, v in zip(ks, np.asarray(p_at_k))},
    "radius": {"radius": radius, "precision": float(p_r), "recall": float(r_r)},
  }
  if compare:
    out["presets"] = compare_presets(data, top_k)
  return out


def compare_presets(data: tuple, top_k: int | None) -> dict:
  """mAP and mAP@K of every preset on the same codes: {name: {map, map_at_k, k, source}}.

  K is ``top_k`` (--top-k) when given, else each preset's own cut-off (clipped to n).
  """
  table = {}
  for p in PRESETS.values():
    k, _ = _cutoff(p, top_k, len(data[1]))
    table[p.name] = {
      "map": _run(p, data, None),
      "map_at_k": None if k is None else _run(p, data, k),
      "k": k,
      "source": p.source,
    }
  return table


# ------------------------------------------------------------------------------------------
# Output


def _number(v) -> str:
  return "-" if v is None else ("nan" if math.isnan(v) else f"{v:.4f}")


def _format_table(rows: list[tuple[str, ...]]) -> str:
  widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
  return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def _metric_rows(result: dict, convention: Convention) -> list[tuple[str, str]]:
  ties = convention.preset.options["ties"]
  rows = [("metric", "value"), ("mAP (whole ranking)", _number(result["map"]))]
  if result["map_at_k"] is not None:
    rows.append((f"mAP@{result['map_at_k']['k']}", _number(result["map_at_k"]["value"])))
  for k, v in result["precision_at_k"].items():
    rows.append((f"precision@{k} (ties {ties})", _number(v)))
  r = result["radius"]
  rows.append((f"precision (Hamming radius <= {r['radius']})", _number(r["precision"])))
  rows.append((f"recall (Hamming radius <= {r['radius']})", _number(r["recall"])))
  return rows


def _delta(value, base) -> str:
  if value is None or base is None or math.isnan(value) or math.isnan(base):
    return "-"
  return f"{value - base:+.4f}"


def _preset_rows(presets: dict) -> list[tuple[str, ...]]:
  """One row per preset: mAP and mAP@K, each with its change from tie-aware's."""
  base = presets["tie-aware"]
  rows = [("preset", "mAP", "change", "mAP@K", "change", "K", "source")]
  for name, p in presets.items():
    cells = (_number(p["map"]), _delta(p["map"], base["map"]), _number(p["map_at_k"]))
    k = "-" if p["k"] is None else str(p["k"])
    at_k = _delta(p["map_at_k"], base["map_at_k"] if base["k"] == p["k"] else None)
    rows.append((name, *cells, at_k, k, p["source"]))
  return rows


def format_report(report: dict, convention: Convention) -> str:
  """The table printed to stdout."""
  shape = f"{report['queries']} queries, {report['items']} database items, {report['bits']} bits"
  lines = [f"jhash evaluate: {shape}"]
  for option, entry in report["inputs"].items():
    lines.append(f"  --{option.replace('_', '-')} {entry['path']}: {entry['read_as']}")
  c = convention.preset
  lines.append(f"convention: {c.name} ({c.summary}); source: {c.source}")
  if convention.note:
    lines.append(f"  note: {convention.note}")
  lost = report.get("queries_without_relevant", 0)
  if lost:
    rule = c.options.get("no_relevant", "zero")
    effect = (
      "each counts as 0 in the mAP (--no-relevant zero)"
      if rule == "zero"
      else "they are left out of the mAP (--no-relevant skip; nan when every query is)"
    )
    lines.append(
      f"  note: {lost} of the {report['queries']} queries have no relevant item in the "
      f"database; {effect}."
    )
  lines += ["", _format_table(_metric_rows(report["metrics"], convention))]
  if "presets" in report["metrics"]:
    lines += [
      "",
      "mAP of the same codes under each preset (change: from tie-aware's at the same K; "
      "K: --top-k, else the preset's own):",
    ]
    lines.append(_format_table(_preset_rows(report["metrics"]["presets"])))
  return "\n".join(lines)


def _jsonable(value):
  """NaN as null (JSON has no NaN), recursively."""
  if isinstance(value, dict):
    return {k: _jsonable(v) for k, v in value.items()}
  if isinstance(value, float) and math.isnan(value):
    return None
  return value


def _write(path: str, option: str, data: bytes) -> None:
  try:
    files.atomic_write_bytes(path, data)
  except OSError as e:
    raise InputError(f"{option} {path}: cannot write ({e.strerror or e}).") from None


def _png_path(path: str) -> str:
  """Where ``--curves PATH`` puts its PNG: PATH with ``.png`` for ``.json``, else PATH.png."""
  p = pathlib.Path(path)
  return str(p.with_suffix(".png") if p.suffix == ".json" else p.with_name(p.name + ".png"))


def _same_file(a: str, b: str) -> bool:
  """Whether the paths ``a`` and ``b`` name one file (links and ``..`` resolved)."""
  try:
    return pathlib.Path(a).resolve() == pathlib.Path(b).resolve()
  except (OSError, RuntimeError):
    return False


def check_outputs(args) -> None:
  """Refuse an output path (``--json``, ``--curves`` and the PNG beside the curves) that
  is empty, a folder, has no file name, or names one of the input files or the other
  output: the command would fail after computing, or write over its own input."""
  inputs = [
    (option, getattr(args, option[2:].replace("-", "_")))
    for option in ("--query-codes", "--db-codes", "--query-labels", "--db-labels")
  ]
  outputs = []
  for option in ("--json", "--curves"):
    path = getattr(args, option[2:])
    if path is None:
      continue
    if not path.strip():
      raise InputError(f"{option} {path!r}: expected a file path; got an empty one.")
    p = pathlib.Path(path)
    if p.is_dir() or not p.name or p.name in (".", "..") or path.endswith(("/", os.sep)):
      raise InputError(f"{option} {path}: names a folder; expected a file path (e.g. out.json).")
    parent = next((q for q in p.parents if q.exists()), None)
    if parent is not None and not parent.is_dir():
      raise InputError(f"{option} {path}: {parent} is a file, not a folder.")
    if option == "--curves" and p.suffix.lower() == ".png":
      raise InputError(
        f"{option} {path}: expected the JSON file's path (e.g. curves.json); the PNG is "
        "written beside it with the suffix .png."
      )
    outputs.append((option, path))
    if option == "--curves":
      outputs.append(("--curves (its PNG)", _png_path(path)))
  for i, (option, path) in enumerate(outputs):
    for other, input_path in inputs + outputs[:i]:
      if _same_file(path, input_path):
        raise InputError(
          f"{option} {path}: is the file given to {other}; writing it would overwrite "
          "an input. Choose another path."
          if other.startswith(("--query", "--db"))
          else f"{option} {path}: is also the path of {other}; choose another path."
        )


def curve_ks(n: int) -> list[int]:
  """The k of the precision@k curve: about 60 values from 1 to n, spaced evenly in log k."""
  return sorted({int(k) for k in np.round(np.geomspace(1, n, _CURVE_POINTS))})


def curves(data: tuple, ties: str) -> dict:
  """``pr_by_radius`` {radius, precision, recall} and ``precision_at_k`` {k, precision}."""
  pr = metrics.pr_curve_by_radius(*data)
  ks = curve_ks(len(data[1]))
  p_at_k = metrics.precision_at_k(*data, ks, ties=ties)
  return {
    "pr_by_radius": {key: np.asarray(v).tolist() for key, v in pr.items()},
    "precision_at_k": {"k": ks, "precision": np.asarray(p_at_k).tolist(), "ties": ties},
  }


def _png(curve: dict) -> bytes | None:
  """The two curves as a PNG, or None when matplotlib does not import."""
  try:  # optional: by name, so the library never imports matplotlib unasked
    agg = importlib.import_module("matplotlib.backends.backend_agg")
    figure = importlib.import_module("matplotlib.figure")
  except ImportError:
    return None
  fig = figure.Figure(figsize=(9, 3.6))
  agg.FigureCanvasAgg(fig)
  left, right = fig.subplots(1, 2)
  pr = curve["pr_by_radius"]
  left.plot(pr["recall"], pr["precision"], marker="o")
  left.set(xlabel="recall", ylabel="precision", title="within Hamming radius r")
  pk = curve["precision_at_k"]
  right.plot(pk["k"], pk["precision"])
  right.set(xscale="log", xlabel="k", ylabel="precision@k", title="Hamming ranking")
  fig.tight_layout()
  buffer = io.BytesIO()
  fig.savefig(buffer, format="png", dpi=100)
  return buffer.getvalue()


def write_curves(path: str, data: tuple, ties: str) -> list[str]:
  """Write the curves' JSON (and a PNG beside it when matplotlib imports): paths written."""
  curve = curves(data, ties)
  _write(path, "--curves", json.dumps(_jsonable(curve), indent=2).encode())
  png = _png(curve)
  if png is None:
    return [path]
  png_path = _png_path(path)
  _write(png_path, "--curves", png)
  return [path, png_path]


# ------------------------------------------------------------------------------------------
# The command


class _Parser(argparse.ArgumentParser):
  """argparse that raises ``InputError`` (one line) instead of printing usage and exiting."""

  def error(self, message):
    raise InputError(f"{message} (see {self.prog} --help)")


def build_parser(prog: str) -> argparse.ArgumentParser:
  parser = _Parser(
    prog=prog,
    description="Exact retrieval metrics (mAP, precision@k, precision/recall within a "
    "Hamming radius) of binary codes saved as .npy or .mat files.",
    epilog=PRESETS_DOC.replace("``", "'"),
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  files_group = parser.add_argument_group("files")
  for name, what in (
    ("query-codes", "query codes [q, K]: -1/+1, 0/1 bits or packed uint32 words"),
    ("db-codes", "database codes [n, K], as the query codes"),
    ("query-labels", "query labels: class ids [q] or multi-hot [q, C]"),
    ("db-labels", "database labels: class ids [n] or multi-hot [n, C]"),
  ):
    files_group.add_argument(f"--{name}", required=True, metavar="FILE", help=what + ".")
    files_group.add_argument(
      f"--{name.replace('-codes', '')}-key" if name.endswith("codes") else f"--{name}-key",
      metavar="NAME",
      help=f"the variable of a .mat {name.replace('-', ' ')} file.",
    )
  files_group.add_argument(
    "--num-bits", type=int, metavar="K", help="code length of packed uint32 codes."
  )
  rule = parser.add_argument_group("convention")
  rule.add_argument("--preset", choices=list(PRESETS), help="default: tie-aware.")
  rule.add_argument("--ties", choices=["aware", "index"])
  rule.add_argument("--normalizer", choices=["relevant", "min", "retrieved"])
  rule.add_argument("--no-relevant", choices=["zero", "skip"])
  rule.add_argument("--top-k", type=int, metavar="K", help="also report mAP@K.")
  out = parser.add_argument_group("output")
  out.add_argument("--ks", metavar="K,K", help="precision@k cut-offs (default 100,1000).")
  out.add_argument("--compare-presets", action="store_true", help="mAP under every preset.")
  out.add_argument("--json", metavar="PATH", help="write the numbers as JSON.")
  out.add_argument("--curves", metavar="PATH", help="write PR-by-radius and P@k curves (JSON).")
  return parser


def load_inputs(args) -> tuple[Loaded, Loaded, Loaded, Loaded]:
  """The four files, checked against each other."""
  if args.num_bits is not None and args.num_bits < 1:
    raise InputError(f"--num-bits {args.num_bits}: expected the code length, an int >= 1.")
  qc = load_codes(args.query_codes, "--query-codes", args.query_key, args.num_bits)
  dc = load_codes(args.db_codes, "--db-codes", args.db_key, args.num_bits)
  ql = load_labels(
    args.query_labels, "--query-labels", len(qc.array), args.query_labels_key, codes=qc
  )
  dl = load_labels(args.db_labels, "--db-labels", len(dc.array), args.db_labels_key, codes=dc)
  check_corpus(qc, dc, ql, dl)
  return qc, dc, ql, dl


def _versions() -> dict:
  """jhash's and NumPy's versions (NumPy's argsort sets the toolbox presets' tie order)."""
  try:
    version = importlib.metadata.version("jhash")
  except importlib.metadata.PackageNotFoundError:
    version = "unknown"
  return {"jhash": version, "numpy": np.__version__}


def evaluate(args) -> tuple[dict, Convention]:
  """Read, check, compute and write what ``args`` asks for; return the report."""
  check_outputs(args)
  loaded = load_inputs(args)
  data = tuple(x.array for x in loaded)
  n = len(data[1])
  convention = resolve_convention(args, n)
  ks = _ks(args.ks, n)
  c = convention.preset
  report = {
    "versions": _versions(),
    "inputs": {
      name: {"path": x.path, "read_as": x.read_as}
      for name, x in zip(("query_codes", "db_codes", "query_labels", "db_labels"), loaded)
    },
    "queries": len(data[0]),
    "items": n,
    "bits": int(data[0].shape[1]),
    "convention": {"name": c.name, "source": c.source, **c.options, "top_k": convention.top_k},
    "queries_without_relevant": without_relevant(data[2], data[3]),
    "metrics": _quiet(compute, data, convention, ks, args.compare_presets, args.top_k),
  }
  if args.json:
    _write(args.json, "--json", json.dumps(_jsonable(report), indent=2).encode())
  if args.curves:
    report["curves_written"] = write_curves(args.curves, data, c.options["ties"])
  return report, convention


def _refuse_repeats(parser, argv) -> None:
  """An option given twice is an error (argparse keeps the last silently, and a report of
  the wrong K or the wrong files would look right)."""
  seen = {}
  for i, word in enumerate(argv):
    option, eq, value = word.partition("=")
    if option.startswith("--") and option in parser._option_string_actions:
      dest = parser._option_string_actions[option].dest
      given = word if eq or i + 1 >= len(argv) else f"{word} {argv[i + 1]}"
      if dest in seen:
        parser.error(f"{option} is given twice ({seen[dest]}, then {given}); give it once.")
      seen[dest] = given


def main(argv=None, prog: str = "python -m jhash.evaluate") -> int:
  """Run the command on ``argv`` (default ``sys.argv[1:]``); return the exit status."""
  parser = build_parser(prog)
  if argv is not None and (
    isinstance(argv, (str, bytes)) or not all(isinstance(a, str) for a in argv)
  ):
    raise TypeError(
      f"argv must be a list of str (the command's words, as sys.argv[1:]); got {argv!r:.200}."
    )
  try:
    _refuse_repeats(parser, sys.argv[1:] if argv is None else list(argv))
    args = parser.parse_args(argv)
    report, convention = evaluate(args)
  except InputError as e:
    print(f"{prog}: error: {' '.join(str(e).split())}", file=sys.stderr)
    return 2
  print(format_report(report, convention))
  for path in report.get("curves_written", []):
    print(f"wrote {path}")
  if args.json:
    print(f"wrote {args.json}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
