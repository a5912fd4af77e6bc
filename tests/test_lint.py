"""The linter configuration in pyproject.toml (ruff) holds for the whole tree."""

import ast
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


TREE = ["jhash", "experiments", "benchmarks", "tests"]


def _ruff(*args):
  command = [shutil.which("ruff")] if shutil.which("ruff") else [sys.executable, "-m", "ruff"]
  return subprocess.run(command + list(args), cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_finds_nothing():
  out = _ruff("check", "--no-cache", *TREE)
  assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_the_tree_is_formatted_by_ruff_format():
  # pyproject.toml's [tool.ruff] and [tool.ruff.format] say how (2-space indents, 100
  # columns); `ruff format jhash experiments benchmarks tests` fixes a failure.
  out = _ruff("format", "--check", "--no-cache", *TREE)
  assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_every_named_tuple_has_a_docstring():
  missing = []
  for path in sorted((ROOT / "jhash").rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text())):
      bases = [getattr(b, "id", getattr(b, "attr", None)) for b in getattr(node, "bases", ())]
      if isinstance(node, ast.ClassDef) and "NamedTuple" in bases and not ast.get_docstring(node):
        missing.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
  assert not missing, missing
