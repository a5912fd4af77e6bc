"""The five deep base models of MCH (KSH, HashNet, ADSH, DCH, MMHH) against LSH and ITQ.

Command:  python -m experiments.main --config experiments/configs/base_models.py:fashion --workdir runs/base_fashion
          python -m experiments.main --config experiments/configs/base_models.py:canvases --workdir runs/base_canvases
Quick:    ... --config experiments/configs/base_models.py:quick   (Fashion-MNIST, 16 bits,
          1,000 training images, a 5,000-image database, 3 epochs; the tests run it)
Runtime:  see the README (measured on 2 CPU cores): each deep model trains 20 epochs of
          5,000 images with the small CNN, then encodes the database.
Expected: every deep model far above ITQ and LSH on the same pixels at every length (the
          README gives the measured table and margins).
Protocol: Fashion-MNIST, the CIFAR-10 protocol over all 70,000 images: 100 queries and 500
          training images per class, the database every other image (69,000), images
          28 x 28 in [0, 1]. Canvases: 10,000 multi-label 56 x 56 canvases of 1 to 3
          Fashion-MNIST items on a 2 x 2 grid (labels: the set of their classes), 1,000
          queries, 5,000 training canvases from the database, similar = share at least one
          label. The deep models read the images with the small CNN (``jhash.models``,
          chosen by the input), Adam at 1e-3, batch 64, in-batch pairs with balanced
          weights (ADSH: 10 rounds of 156 network steps and a discrete code update over
          2,000 drawn items). mAP over the whole database (tie-aware), precision within
          Hamming radius 2, PR curves by radius. Trainer: ``experiments.retrieval``.
"""

import ml_collections
from ml_collections import config_dict

DEEP = ("ksh", "hashnet", "adsh", "dch", "mmhh")


def _methods(epochs: int, adsh_steps: int) -> dict:
  deep = {name: {"method": name, "batch_size": 64, "num_epochs": epochs} for name in DEEP}
  deep["adsh"] = {
    "method": "adsh",
    "batch_size": 64,
    "rounds": 10,
    "steps_per_round": adsh_steps,
    "num_samples": 2000,
  }
  return {**deep, "itq": {"method": "itq", "num_iters": 50}, "lsh": {"method": "lsh"}}


def get_config(arg=None):
  arg = arg or "fashion"
  config = ml_collections.ConfigDict()
  config.trainer = "experiments.retrieval"
  config.seed = 0
  config.num_seeds = 1
  config.bits = (16, 32, 64)
  if arg in ("fashion", "quick"):
    config.datasets = {
      "fashion_mnist": {
        "protocol": "fashion-mnist",
        "query_per_class": 100,
        "train_per_class": 500,
        "images": True,
        "database_limit": config_dict.placeholder(int),
      }
    }
  elif arg == "canvases":
    config.datasets = {
      "canvases": {
        "protocol": "canvases",
        "num_items": 10000,
        "num_queries": 1000,
        "num_train": 5000,
        "grid": (2, 2),
        "num_objects": (1, 3),
        "images": True,
        "database_limit": config_dict.placeholder(int),
      }
    }
  else:
    raise ValueError(f"unknown config argument {arg!r}; use 'fashion', 'canvases' or 'quick'.")
  # 20 epochs of 5,000 images at batch 64 is 1,560 steps; ADSH gets as many (10 x 156).
  config.methods = _methods(epochs=20, adsh_steps=156)
  config.evaluation = {
    "map_ties": ("aware",),
    "precision_at": (100,),
    "radius": 2,
    "ndcg_at": config_dict.placeholder(int),
    "weighted": False,
  }
  config.tables = ("map", "precision_radius_2")
  config.plots = {"pr_curve_bits": 32, "curves": {"training": {"metric": "loss", "methods": DEEP}}}
  config.checkpoint_every = 400
  if arg == "quick":
    config.bits = (16,)
    config.datasets.fashion_mnist.query_per_class = 20
    config.datasets.fashion_mnist.train_per_class = 100
    config.datasets.fashion_mnist.database_limit = 5000
    config.methods = _methods(epochs=3, adsh_steps=15)
    config.methods.adsh.rounds = 2
    config.methods.adsh.num_samples = 500
    config.plots.pr_curve_bits = 16
  return config.lock()
