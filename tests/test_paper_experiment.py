"""The papers' configs (``experiments/configs/papers.py``) end to end on a cut-down CIFAR-10
binary release written here: images of one colour per class, so both methods can learn."""

import numpy as np
import pytest

import _experiment_runs as runs
import jhash
from experiments import harness

FILES = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
RECORDS = 20  # per file: 120 images, 12 per class


def _write_colour_cifar(folder, rng):
  """Six batch files in the binary release's layout, each image its class's colour + noise."""
  folder.mkdir(parents=True)
  palette = rng.integers(0, 256, (10, 3))
  for f, name in enumerate(FILES):
    labels = (np.arange(RECORDS) + f) % 10
    noise = rng.integers(-20, 21, (RECORDS, 32, 32, 3))
    images = np.clip(palette[labels][:, None, None, :] + noise, 0, 255).astype(np.uint8)
    planes = images.transpose(0, 3, 1, 2).reshape(RECORDS, -1)  # R, G, B planes, row-major
    (folder / name).write_bytes(np.concatenate([labels[:, None], planes], 1).astype(np.uint8))


def test_the_papers_quick_config_learns_on_a_copy_of_cifar10(tmp_path):
  rng = np.random.default_rng(0)
  _write_colour_cifar(tmp_path / "cifar-10-batches-bin", rng)
  config = runs.load_config("papers", "quick").unlock()
  config.datasets.cifar10.root = str(tmp_path)
  results = runs.run_config(config.lock(), tmp_path / "run")
  itq, lsh = (results["metrics"][f"cifar10/{m}/16"] for m in ("itq", "lsh"))
  # 10 classes of distinct colours: chance is about 0.1; ITQ on the pixels separates them.
  assert itq["map"] > 0.3, itq["map"]
  for cell in (itq, lsh):  # CIFAR-10's K is the whole database: mAP@K is the mAP
    assert cell["map_k"] == 120 - 20 - 50 and cell["map_at_k"] == pytest.approx(cell["map"])
  # P@N and R@N at 16 bits (the first seed's curve): N as asked, P@5 the table's P@5,
  # recall not falling with N, ITQ's first items mostly of the query's class.
  topn = itq["per_seed"]["0"]["topn"]
  assert topn["n"] == [1, 5, 10, 20]
  assert topn["precision"][1] == pytest.approx(itq["precision_at_5"])
  assert np.all(np.diff(topn["recall"]) >= 0) and topn["recall"][0] < topn["recall"][-1]
  assert topn["precision"][0] > 0.3
  assert (tmp_path / "run" / "topn.png").stat().st_size > 0


def test_the_papers_configs_need_a_root_and_name_it(tmp_path):
  for name in jhash.data.PAPER_PRESETS:
    config = runs.load_config("papers", name)
    key = name.replace("-", "_")  # a Python name: --config.datasets.cifar10_1.root=... parses
    assert config.evaluation.map_at == "protocol" and config.datasets[key].root is None
    assert config.datasets[key].protocol == name
  config = runs.load_config("papers", "nuswide_21")
  with pytest.raises((harness.ConfigError, ValueError), match="root"):
    runs.run_config(config, tmp_path / "run")
