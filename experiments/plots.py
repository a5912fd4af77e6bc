"""PNG plots shared by experiments (matplotlib, headless)."""

from __future__ import annotations

import io
import pathlib


def _figure():
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  return plt


def save(fig, path) -> None:
  """Save a figure as PNG atomically."""
  from experiments.harness import atomic_write_bytes

  buf = io.BytesIO()
  fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
  atomic_write_bytes(pathlib.Path(path), buf.getvalue())
  _figure().close(fig)


def lines(
  panels: dict,
  path,
  *,
  xlabel: str,
  ylabel: str,
  title: str = "",
  logx: bool = False,
  marker: str = "o",
) -> None:
  """One panel per key of ``panels``; each panel maps a label to (x, y) sequences."""
  plt = _figure()
  fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
  for ax, (name, series) in zip(axes[0], panels.items()):
    for label, (x, y) in series.items():
      ax.plot(x, y, marker=marker, markersize=3, label=label)
    ax.set_title(name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
      ax.set_xscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
  if title:
    fig.suptitle(title, y=1.04)
  save(fig, path)


def panels(specs: list[dict], path, title: str = "") -> None:
  """Panels side by side, one per dict of ``specs``.

  Each panel: ``title``, ``xlabel``, ``ylabel``, ``series`` (a list of ``{"label", "x",
  "y", "style" (default "o-"), "band" (optional (low, high), shaded)}``) and optionally
  ``logx`` (base 2), ``logy``, ``xticks``, ``xticklabels``, ``xtick_rotation`` (degrees)
  and ``vlines`` (x positions of dotted lines).
  """
  plt = _figure()
  fig, axes = plt.subplots(1, len(specs), figsize=(4.5 * len(specs), 3.6), squeeze=False)
  for ax, panel in zip(axes[0], specs):
    for s in panel["series"]:
      (line,) = ax.plot(s["x"], s["y"], s.get("style", "o-"), markersize=3, label=s["label"])
      if s.get("band") is not None:
        ax.fill_between(s["x"], s["band"][0], s["band"][1], alpha=0.2, color=line.get_color())
    for x in panel.get("vlines", ()):
      ax.axvline(x, color="grey", linestyle=":", linewidth=0.8)
    if panel.get("logx"):
      ax.set_xscale("log", base=2)
    if panel.get("logy"):
      ax.set_yscale("log")
    if panel.get("xticks") is not None:
      ax.set_xticks(panel["xticks"])
      ax.set_xticklabels(
        panel.get("xticklabels") or [str(t) for t in panel["xticks"]],
        rotation=panel.get("xtick_rotation", 0),
      )
      ax.minorticks_off()
    ax.set_title(panel.get("title", ""), fontsize=10)
    ax.set_xlabel(panel.get("xlabel", ""))
    ax.set_ylabel(panel.get("ylabel", ""))
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[1]:
      ax.legend(fontsize=7)
    if not any(len(line.get_xdata()) for line in ax.lines):  # a curve of no steps
      ax.text(0.5, 0.5, "no points", ha="center", va="center", transform=ax.transAxes)
  if title:
    fig.suptitle(title)
  save(fig, path)


def bars(specs: list[dict], path, title: str = "") -> None:
  """Horizontal bar panels side by side, one per dict of ``specs``.

  Each panel: ``title``, ``xlabel``, ``labels`` (one per bar group, top to bottom),
  ``series`` (a list of ``{"label", "values"}``, one bar per label in each group; NaN:
  no bar) and optionally ``vlines`` (x positions of dotted lines, e.g. chance). Each bar
  is annotated with its value.
  """
  import numpy as np

  plt = _figure()
  height = max(2.4, 0.45 * max(len(p["labels"]) * len(p["series"]) for p in specs) + 1.0)
  fig, axes = plt.subplots(1, len(specs), figsize=(5.2 * len(specs), height), squeeze=False)
  for ax, panel in zip(axes[0], specs):
    groups = np.arange(len(panel["labels"]))
    width = 0.8 / len(panel["series"])
    for i, s in enumerate(panel["series"]):
      at = groups - 0.4 + width * (i + 0.5)
      found = ax.barh(at, s["values"], height=width, label=s["label"])
      ax.bar_label(found, fmt="%.3f", fontsize=7, padding=2)
    for x in panel.get("vlines", ()):
      ax.axvline(x, color="grey", linestyle=":", linewidth=1.0)
    ax.set_yticks(groups)
    ax.set_yticklabels(panel["labels"], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.1)
    ax.set_title(panel.get("title", ""), fontsize=10)
    ax.set_xlabel(panel.get("xlabel", ""))
    ax.grid(axis="x", alpha=0.3)
    if len(panel["series"]) > 1:
      ax.legend(fontsize=7)
  if title:
    fig.suptitle(title, y=1.04)
  save(fig, path)
