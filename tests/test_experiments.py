"""The quickstart experiment end to end: what it learned, its files, and resuming after a kill."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
CONFIG = "experiments/configs/quickstart.py"


def _run(workdir, arg, env_extra=None):
  env = dict(os.environ, **(env_extra or {}))
  env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
  return subprocess.run([sys.executable, "-m", "experiments.main", "--config",
                         f"{CONFIG}:{arg}", "--workdir", str(workdir)],
                        cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


def _maps(workdir):
  results = json.loads((pathlib.Path(workdir) / "results.json").read_text())
  return {cell: r["map"] for cell, r in results["metrics"].items()}, results


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("tiny")
  proc = _run(workdir, "tiny")
  assert proc.returncode == 0, proc.stderr[-3000:]
  return workdir, proc


def test_quickstart_learns_and_writes_its_files(tiny_run):
  workdir, proc = tiny_run
  maps, results = _maps(workdir)
  assert set(maps) == {f"mfeat/{m}/{b}" for m in ("lsh", "itq") for b in (8, 16)}
  # ITQ's learned rotation beats random projections, and both beat chance (0.1).
  for bits in (8, 16):
    assert maps[f"mfeat/itq/{bits}"] > maps[f"mfeat/lsh/{bits}"] + 0.05
    assert maps[f"mfeat/lsh/{bits}"] > 0.15
  assert maps["mfeat/itq/16"] > 0.5
  loss = results["metrics"]["mfeat/itq/16"]["history"]["quantization_loss"]
  assert len(loss) == 12 and loss[-1] < loss[0]
  for key in ("config", "seed", "versions", "wall_time_s"):
    assert key in results
  assert results["versions"]["jax"]
  for png in ("map_vs_bits.png", "pr_radius.png", "itq_loss.png"):
    data = (workdir / png).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000
  assert "| mfeat" in proc.stdout and "mAP@16 bits" in proc.stdout


def test_killed_run_resumes_to_the_same_results(tiny_run, tmp_path):
  reference, _ = tiny_run
  # Saves: lsh/8, lsh/16 (finished cells), then itq/8 at steps 4 and 8: the kill
  # lands inside ITQ's loop, with a mid-cell checkpoint on disk.
  killed = _run(tmp_path, "tiny", {"JHASH_KILL_AFTER_SAVES": "4"})
  assert killed.returncode == -9, killed.stderr[-2000:]
  assert not (tmp_path / "results.json").exists()
  progress = json.loads((tmp_path / "progress.json").read_text())
  assert sorted(progress["cells"]) == ["mfeat/lsh/16", "mfeat/lsh/8"]
  assert (tmp_path / "checkpoints" / "mfeat_itq_8.npz").exists()
  resumed = _run(tmp_path, "tiny")
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "2 of 4 cells already done" in resumed.stdout
  got, results = _maps(tmp_path)
  want, ref_results = _maps(reference)
  assert got == want
  assert (results["metrics"]["mfeat/itq/8"]["history"]
          == ref_results["metrics"]["mfeat/itq/8"]["history"])
  assert not list((tmp_path / "checkpoints").glob("*.npz"))


def test_resume_refuses_a_different_config(tiny_run):
  workdir, _ = tiny_run
  proc = _run(workdir, "quick")
  assert proc.returncode != 0 and "different config" in proc.stderr
