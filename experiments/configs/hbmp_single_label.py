"""HBMP on Fashion-MNIST with the CIFAR-10 protocol: linear, MLP and CNN hash functions vs ITQ, LSH.

Command:  python -m experiments.main --config experiments/configs/hbmp_single_label.py --workdir runs/hbmp_single_label
Quick:    ... --config experiments/configs/hbmp_single_label.py:quick   (12 bits, linear and CNN
          hash functions, 1,000 training images, a 5,000-image database, 8 epochs)
Runtime:  about 5.5 minutes on 2 CPU cores (quick: about 45 s): per code length, the CNN's 20
          epochs (about 1.5 s each), encoding 70,000 images, and compiling each method.
Expected: mAP over the whole database, tie-aware (seed 0): CNN 0.76-0.79 > MLP 0.74-0.78 >
          linear 0.65-0.71 >> ITQ 0.41-0.48 > LSH 0.26-0.37 at every length; weighted
          ranking within 0.02 of plain Hamming ranking.
Protocol: ``load_protocol("fashion-mnist", images=True)``: the 70,000 images (train and
          test pooled), pixels in [0, 1]; 1,000 queries (100 per class) and 5,000 training
          images (500 per class) drawn per class; the database is the other 69,000 images
          (training images included). HBMP: class-level items (R = b (2I - 1)), regress
          step sizes, then the hash functions on the training images with their class's
          target code (hinge loss, Adam); the three HBMP entries share their key, so they
          fit the same target codes. ITQ and LSH on the flattened pixels of the same
          training images. Trainer: ``experiments.retrieval``.
"""

import ml_collections
from ml_collections import config_dict


def hbmp(kind: str, **options) -> dict:
  """Class-level HBMP with hash functions ``kind`` (``hash_functions`` options)."""
  return {"method": "hbmp", "step_size": "regress", "hash_function": kind, "hash_options": options}


def get_config(arg=None):
  config = ml_collections.ConfigDict()
  config.trainer = "experiments.retrieval"
  config.seed = 0
  config.num_seeds = 1
  config.bits = (12, 24, 32, 48)
  config.datasets = {
    "fashion_mnist": {
      "protocol": "fashion-mnist",
      "query_per_class": 100,
      "train_per_class": 500,
      "images": True,
      "database_limit": config_dict.placeholder(int),
    }
  }
  # Learning rates default to 1e-2 (linear) and 1e-3 (mlp, cnn).
  config.methods = {
    "hbmp_linear": hbmp("linear", num_epochs=20, batch_size=128),
    "hbmp_mlp": hbmp("mlp", num_epochs=20, batch_size=128, hidden=(512,)),
    "hbmp_cnn": hbmp("cnn", num_epochs=20, batch_size=128, channels=(16, 32), dense=128),
    "itq": {"method": "itq", "num_iters": 50},
    "lsh": {"method": "lsh"},
  }
  config.evaluation = {
    "map_ties": ("aware",),
    "precision_at": (),
    "radius": config_dict.placeholder(int),
    "ndcg_at": config_dict.placeholder(int),
    "weighted": True,
  }
  config.tables = ("map", "map_weighted")
  config.plots = {
    "pr_curve_bits": config_dict.placeholder(int),
    "curves": {
      "training": {"metric": "bit_error", "methods": ("hbmp_linear", "hbmp_mlp", "hbmp_cnn")}
    },
  }
  config.checkpoint_every = 200  # steps: HBMP's minibatches, ITQ's iterations
  if arg == "quick":
    config.bits = (12,)
    del config.methods["hbmp_mlp"]  # the MLP shares the linear one's code path
    config.methods.hbmp_linear = hbmp("linear", num_epochs=8, batch_size=100)
    config.methods.hbmp_cnn = hbmp("cnn", num_epochs=8, batch_size=100, channels=(8, 16), dense=64)
    config.methods.itq.num_iters = 20
    config.plots.curves.training.methods = ("hbmp_linear", "hbmp_cnn")
    config.datasets.fashion_mnist.query_per_class = 20
    config.datasets.fashion_mnist.train_per_class = 100
    config.datasets.fashion_mnist.database_limit = 5000
    config.checkpoint_every = 20
  elif arg:
    raise ValueError(f"unknown config argument {arg!r}; use 'quick' or nothing.")
  return config.lock()
