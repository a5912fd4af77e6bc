"""Shared by the benchmark scripts: interleaved timing, the machine's description, and
rewriting one section of benchmarks/RESULTS.md in place."""

from __future__ import annotations

import os
import pathlib
import platform
import re
import statistics
import sys
import time
from typing import Callable

RESULTS = pathlib.Path(__file__).resolve().parent / "RESULTS.md"
sys.path.insert(0, str(RESULTS.parents[1]))  # run from a checkout without installing


def block(x):
  """Wait for JAX results (any pytree) before stopping a clock."""
  import jax
  return jax.block_until_ready(x)


def interleaved(runs: dict[str, Callable], repeats: int) -> dict[str, float]:
  """Median seconds per run, the runs alternating so machine noise hits all alike."""
  times = {name: [] for name in runs}
  for _ in range(repeats):
    for name, fn in runs.items():
      t0 = time.perf_counter()
      block(fn())
      times[name].append(time.perf_counter() - t0)
  return {name: statistics.median(ts) for name, ts in times.items()}


def machine() -> str:
  cpu = platform.processor() or "unknown CPU"
  try:
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
      if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
  except OSError:
    pass
  import jax
  versions = f"jax {jax.__version__} ({jax.default_backend()}, {jax.device_count()} device(s))"
  try:
    import faiss
    versions += f", faiss {faiss.__version__}"
  except ImportError:
    pass
  return (f"{os.cpu_count()} cores, {cpu}; Python {platform.python_version()}, numpy "
          f"{__import__('numpy').__version__}, {versions}")


def table(header: list[str], rows: list[list]) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
  lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
  return "\n".join(lines)


def write_section(title: str, command: str, body: str) -> str:
  """Replace (or append) the ``## title`` section of RESULTS.md; print and return it."""
  stamp = time.strftime("%Y-%m-%d", time.gmtime())
  section = (f"## {title}\n\nCommand: `{command}`  \nMachine: {machine()}  \nDate: {stamp}\n\n"
             f"{body.strip()}\n")
  text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
  pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
  if pattern.search(text):
    text = pattern.sub(lambda _: section + "\n", text, count=1)
  else:
    text = text.rstrip("\n") + "\n\n" + section
  tmp = RESULTS.with_suffix(".md.tmp")
  tmp.write_text(text)
  os.replace(tmp, RESULTS)
  print(section)
  return section
