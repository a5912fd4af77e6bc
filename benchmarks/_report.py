"""Shared by the benchmark scripts: interleaved timing, the machine's description, and
rewriting one section of benchmarks/RESULTS.md in place.

The scripts run from the repository root with jhash installed (``./install.sh bench``),
e.g. ``python benchmarks/bench_index.py``; Python puts a script's own folder on the
import path, so they import this file as ``import _report``.
"""

from __future__ import annotations

import os
import pathlib
import platform
import re
import statistics
import time
from typing import Callable

RESULTS = pathlib.Path(__file__).resolve().parent / "RESULTS.md"


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


def cores() -> int:
  """The cores this process may run on (``taskset`` and container limits count)."""
  if hasattr(os, "sched_getaffinity"):
    return len(os.sched_getaffinity(0))
  return os.cpu_count() or 1


def _cpu_info() -> tuple[str, str]:
  """(model name with its family and model numbers where /proc/cpuinfo gives them, e.g.
  'AMD EPYC, family 25 model 17'; widest popcount: 'AVX-512 VPOPCNTDQ', 'AVX2', 'no AVX2'
  or 'unknown')."""
  fields = {}
  try:
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
      key, _, value = line.partition(":")
      fields.setdefault(key.strip(), value.strip())
  except OSError:
    pass
  cpu = fields.get("model name") or platform.processor() or "unknown CPU"
  if "cpu family" in fields and "model" in fields:
    cpu += f", family {fields['cpu family']} model {fields['model']}"
  if "flags" not in fields:
    return cpu, "unknown"
  flags = set(fields["flags"].split())
  return cpu, (
    "AVX-512 VPOPCNTDQ" if "avx512_vpopcntdq" in flags else "AVX2" if "avx2" in flags else "no AVX2"
  )


def cpu_model() -> str:
  """The CPU's model name and the widest popcount it has (what jhash's native kernels and
  FAISS build for), e.g. 'AMD EPYC, AVX2'."""
  cpu, level = _cpu_info()
  return cpu if level == "unknown" else f"{cpu}, {level}"


def popcount_level() -> str:
  """The widest popcount of this CPU: 'AVX-512 VPOPCNTDQ', 'AVX2', 'no AVX2' or 'unknown'."""
  return _cpu_info()[1]


def machine() -> str:
  """Cores, CPU model and package versions, for the head of a results section."""
  cpu = cpu_model()
  import jax

  versions = f"jax {jax.__version__} ({jax.default_backend()}, {jax.device_count()} device(s))"
  try:
    import faiss

    versions += f", faiss {faiss.__version__}"
  except ImportError:
    pass
  return (
    f"{cores()} cores, {cpu}; Python {platform.python_version()}, numpy "
    f"{__import__('numpy').__version__}, {versions}"
  )


def table(header: list[str], rows: list[list]) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
  lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
  return "\n".join(lines)


def backend_suffix() -> str:
  """`` (gpu: NVIDIA H200)`` off the CPU, `` (cpu: 2 cores, AVX-512 VPOPCNTDQ)`` on a CPU
  without AVX2 or with AVX-512's popcount (`` (cpu: 2 cores, Intel, AVX-512 VPOPCNTDQ)`` on
  an Intel one), so results of other devices and CPU kinds get sections of their own;
  nothing on an AVX2 CPU (the README's reference kind)."""
  import jax

  if jax.default_backend() == "cpu":
    level = popcount_level()
    # AMD's AVX-512 sections came first and carry no vendor; Intel's name it (FAISS and
    # XLA run other code paths there, so the two must not replace each other's results).
    vendor = "Intel, " if "intel" in _cpu_info()[0].lower() else ""
    return "" if level == "AVX2" else f" (cpu: {cores()} cores, {vendor}{level})"
  return f" ({jax.default_backend()}: {jax.devices()[0].device_kind})"


def replace_section(section: str) -> str:
  """Replace (or append) the section of RESULTS.md that ``section`` (``## Title ...``) heads.

  Off the CPU, and on CPU kinds other than AVX2, the title gains the backend or the CPU
  kind (``backend_suffix``), so one file keeps their results side by side. Written atomically.
  """
  first, _, rest = section.partition("\n")
  if not first.startswith("## "):
    raise ValueError(f"a section starts with '## Title'; got {first!r}")
  first += backend_suffix()
  section = first + "\n" + rest.rstrip("\n") + "\n"
  text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
  pattern = re.compile(rf"^{re.escape(first)}\n.*?(?=^## |\Z)", re.S | re.M)
  if pattern.search(text):
    text = pattern.sub(lambda _: section + "\n", text, count=1)
  else:
    text = text.rstrip("\n") + "\n\n" + section
  tmp = RESULTS.with_suffix(".md.tmp")
  tmp.write_text(text)
  os.replace(tmp, RESULTS)
  return section


def write_section(title: str, command: str, body: str) -> str:
  """A section with the command, machine and date heading ``body``; print and return it."""
  stamp = time.strftime("%Y-%m-%d", time.gmtime())
  section = (
    f"## {title}\n\nCommand: `{command}`  \nMachine: {machine()}  \nDate: {stamp}\n\n"
    f"{body.strip()}\n"
  )
  section = replace_section(section)
  print(section)
  return section
