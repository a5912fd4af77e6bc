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
