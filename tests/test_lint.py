"""The linter configuration in pyproject.toml (ruff) holds for the whole tree."""

import ast
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


def test_every_named_tuple_has_a_docstring():
  missing = []
  for path in sorted((ROOT / "jhash").rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text())):
      bases = [getattr(b, "id", getattr(b, "attr", None)) for b in getattr(node, "bases", ())]
      if isinstance(node, ast.ClassDef) and "NamedTuple" in bases and not ast.get_docstring(node):
        missing.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
  assert not missing, missing
