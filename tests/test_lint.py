"""The linter configuration in pyproject.toml (ruff) holds for the whole tree."""

import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
  command = ([shutil.which("ruff")] if shutil.which("ruff") else [sys.executable, "-m", "ruff"])
  out = subprocess.run(command + ["check", "--no-cache", "jhash", "experiments", "benchmarks",
                                  "tests"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
  assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
