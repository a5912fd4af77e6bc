"""HBMP's and MCH's configs on the papers' data sets (``experiments/configs/hbmp_papers.py``,
``mch_papers.py``): every argument validates, and each quick config learns end to end on
files written here (a cut-down CIFAR-10 binary release; NUS-WIDE-shaped lists of tiny PNGs)."""

import numpy as np
import pytest

import _experiment_runs as runs
import jhash
from _data_files import write_image_list
from experiments import retrieval
from test_paper_experiment import _write_colour_cifar

CONFIGS = {
  "hbmp_papers": ("cifar10-1", "cifar10-2", "nuswide_21", "quick"),
  "mch_papers": ("nuswide_21", "coco", "mirflickr_21", "mirflickr", "quick"),
}
LIST_SIZES = {"test.txt": 40, "database.txt": 200}  # the first 120 of the database train
NUM_LABELS, USED = 21, 4  # NUS-WIDE's 21 label columns; 4 of them in use


@pytest.mark.parametrize("name, arg", [(n, a) for n, args in CONFIGS.items() for a in args])
def test_every_argument_loads_and_validates(name, arg):
  config = runs.load_config(name, arg)
  retrieval.validate(config)
  dataset = next(iter(config.datasets))
  protocol = {"quick": "cifar10-1" if name == "hbmp_papers" else "nuswide_21"}.get(arg, arg)
  assert config.datasets[dataset].protocol == protocol
  assert dataset.isidentifier()  # --config.datasets.KEY.root=... must parse as Python
  assert config.evaluation.map_at == "protocol" and config.datasets[dataset].root is None
  # mAP@K, P@N / R@N and the ranking's PR curve, at a length the run has.
  assert config.evaluation.topn and config.plots.pr_curve_bits in config.bits


def test_mch_papers_trains_mch_over_each_base_on_one_network_switch():
  config = runs.load_config("mch_papers", "coco").unlock()
  assert config.arch == "vgg16" and retrieval.map_at(config.evaluation, "coco") == 5000
  papers = runs.load_config("papers", "coco")
  for base in ("ksh", "hashnet", "adsh", "dch", "mmhh"):  # each base as papers.py trains it
    alone = {k: v for k, v in papers.methods[base].to_dict().items() if k != "method"}
    assert config.methods[f"mch_{base}"].base_options.to_dict() == dict(alone, backbone="vgg16")
  config.arch, config.pretrained = "alexnet", "weights.npz"
  for spec in config.methods.values():
    network = spec.base_options
    assert (network.backbone, network.init_variables) == ("alexnet", "weights.npz")


def test_hbmp_papers_pursues_classes_on_cifar10_and_label_sets_on_nuswide():
  levels = {
    arg: runs.load_config("hbmp_papers", arg).methods.hbmp.level for arg in CONFIGS["hbmp_papers"]
  }
  assert levels == {
    "cifar10-1": "class",
    "cifar10-2": "class",
    "nuswide_21": "label_sets",
    "quick": "class",
  }
  assert (
    retrieval.map_at(runs.load_config("hbmp_papers", "nuswide_21").evaluation, "nuswide_21") == 5000
  )


def test_hbmp_papers_network_follows_pretrained_and_arch(tmp_path):
  config = runs.load_config("hbmp_papers", "cifar10-1").unlock()
  options = config.methods.hbmp.hash_options
  assert (options.model, options.init_variables) == ("vgg16", None)
  weights = tmp_path / "w.npz"
  weights.write_bytes(b"")
  config.arch, config.pretrained = "alexnet", str(weights)
  assert (options.model, options.init_variables) == ("alexnet", str(weights))
  retrieval.validate(config)  # HBMP is a network method: arch and pretrained reach it
  quick = runs.load_config("hbmp_papers", "quick").methods.hbmp.hash_options
  assert quick.model is None  # the small CNN


@pytest.mark.slow  # faster tests cover its parts: the config's checks above, the CIFAR-10
# copy in test_paper_experiment.py, HBMP's CNN in test_hbmp_experiments.py
def test_hbmp_papers_quick_learns_on_a_copy_of_cifar10(tmp_path):
  _write_colour_cifar(tmp_path / "cifar-10-batches-bin", np.random.default_rng(0))
  config = runs.load_config("hbmp_papers", "quick").unlock()
  config.datasets.cifar10_1.root = str(tmp_path)
  results = runs.run_config(config.lock(), tmp_path / "run")
  hbmp = results["metrics"]["cifar10_1/hbmp/12"]
  # 10 classes of distinct colours, chance mAP about 0.1: HBMP's codes separate them.
  assert hbmp["map"] > 0.6 and hbmp["map_weighted"] > 0.6, hbmp
  # Split 1: the database is every non-query image (120 - 20), training images included.
  assert hbmp["map_k"] == 100 and hbmp["map_at_k"] == pytest.approx(hbmp["map"])
  assert hbmp["per_seed"]["0"]["topn"]["n"] == [1, 5, 10, 20]
  runs.assert_pngs(tmp_path / "run", ["topn.png", "pr_radius.png"])


def _write_tiny_nuswide(root, rng) -> tuple:
  """NUS-WIDE-shaped lists of 32 x 32 PNGs: each image holds 1 or 2 of ``USED`` labels,
  one colour per label, a two-label image half in each. Returns the query and database
  label rows (bool [40, 21], [200, 21])."""
  from PIL import Image

  palette = rng.integers(0, 256, (USED, 3))
  n = sum(LIST_SIZES.values())
  labels = np.zeros((n, NUM_LABELS), bool)
  lines = []
  for i in range(n):
    first, second = rng.integers(0, USED, 2) if i % 2 else [rng.integers(0, USED)] * 2
    labels[i, [first, second]] = True
    image = np.empty((32, 32, 3))
    image[:, :16], image[:, 16:] = palette[first], palette[second]
    image = np.clip(image + rng.integers(-20, 21, image.shape), 0, 255).astype(np.uint8)
    Image.fromarray(image).save(root / f"{i}.png")
    lines.append(f"{i}.png " + " ".join(str(int(v)) for v in labels[i]))
  q = LIST_SIZES["test.txt"]
  write_image_list(root / "test.txt", lines[:q])
  write_image_list(root / "database.txt", lines[q:])
  write_image_list(root / "train.txt", lines[q : q + 120])
  return labels[:q], labels[q:]


@pytest.mark.parametrize(
  "stream",
  [  # in memory: slow; the trainer's in-memory path runs in every other experiment test,
    # the lists decoded in memory in test_paper_data.py
    pytest.param(False, marks=pytest.mark.slow),
    True,  # read from the files as it trains (crops of 28 from 32, flips) and codes
  ],
)
def test_mch_papers_quick_learns_on_nuswide_shaped_lists(tmp_path, stream):
  rng = np.random.default_rng(0)
  q_labels, db_labels = _write_tiny_nuswide(tmp_path, rng)
  config = runs.load_config("mch_papers", "quick").unlock()
  config.datasets.nuswide_21.root = str(tmp_path)
  if stream:
    config.datasets.nuswide_21.stream = True
    config.datasets.nuswide_21.resize = 32
  with pytest.warns(UserWarning, match="preset"):  # the lists' sizes are not NUS-WIDE's
    results = runs.run_config(config.lock(), tmp_path / "run")
  cell = results["metrics"]["nuswide_21/mch_dch/16"]
  # K = 5,000 clipped to the 200 database items; the base model (DCH) well above the mAP
  # of random codes on the same labels.
  assert cell["map_k"] == 200 and cell["map_at_k"] == pytest.approx(cell["map"])
  random = lambda m: rng.choice(np.array([-1, 1], np.int8), (m, 16))
  chance = float(jhash.metrics.mean_average_precision(random(40), random(200), q_labels, db_labels))
  assert cell["map_at_k"] > chance + 0.1, (cell["map_at_k"], chance)
  # ... and it learned them: a network left at its start scores above chance too on these
  # colours, so the base's loss must fall (its last steps a quarter below its first).
  loss = [v for v in cell["per_seed"]["0"]["history"]["loss"] if v is not None]
  loss = np.asarray(loss)[np.isfinite(loss)]
  assert loss[-4:].mean() < 0.75 * loss[:4].mean(), loss
  # MCH's database codes: extra codes only bring items nearer, 1 to 6 codes an item.
  for r in (0, 2):
    assert cell[f"recall_radius_{r}_multi"] >= cell[f"recall_radius_{r}"]
  assert 1.0 <= cell["codes_per_item_multi"] <= 6.0 and "map_at_k_multi" in cell
  # sigma = 1: the crops are the image, every repeated code dropped: the base model.
  for metric in retrieval.SWEEP_METRICS:
    single = 1.0 if metric == "codes_per_item" else cell[metric]
    assert cell[f"{metric}_multi@sigma=1.0"] == single, metric
  assert cell["map_multi@sigma=0.5"] == cell["map_multi"]  # the config's own sigma
  assert np.all(np.isfinite(cell["per_seed"]["0"]["history"]["agent_loss"]))
  per_seed = cell["per_seed"]["0"]
  assert len(per_seed["f1_buckets_multi"]["f1"]) == 17 and per_seed["topn"]["n"] == [1, 5, 10, 20]
  runs.assert_pngs(tmp_path / "run", ["f1_buckets.png", "topn.png", "agent.png"])
