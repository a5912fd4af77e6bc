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


def lines(panels: dict, path, *, xlabel: str, ylabel: str, title: str = "",
          logx: bool = False, marker: str = "o") -> None:
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
