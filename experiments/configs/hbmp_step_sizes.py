"""HBMP step sizes (constant / line / regress) and weighted vs plain Hamming ranking.

Command:  python -m experiments.main --config experiments/configs/hbmp_step_sizes.py --workdir runs/hbmp_step_sizes
Quick:    ... --config experiments/configs/hbmp_step_sizes.py:quick   (12 bits, linear hash
          functions, 1,000 training images, a 5,000-image database)
Runtime:  about 3 minutes on 2 CPU cores (quick: about 40 s): twelve HBMP fits (one
          compilation each) and their whole-database mAP.
Expected: residual of the 10-class affinity (measured, seed 0): regress ~0 from 48 bits
          (0.03-0.05 at 32), line 0.51 at 32 bits and 0.23 at 64, constant falling slowly
          (0.95 at 32 bits, 0.89 at 64); regress at or below line at every bit. mAP with
          the learned hash functions: the three rules within about 0.012 of each other,
          weighted ranking within about 0.006 of plain Hamming ranking.
Protocol: residual curves: the pursuit on R = b (2I - 1) for 10 classes, max_bits bits, per
          rule, mean over `repeats` seeds. mAP: Fashion-MNIST, the protocol of
          hbmp_single_label (1,000 queries, 5,000 training images, 69,000 in the database),
          class-level HBMP with each rule and MLP hash functions.
"""

import ml_collections
from ml_collections import config_dict


def get_config(arg=None):
  config = ml_collections.ConfigDict()
  config.trainer = "experiments.hbmp_step_sizes"
  config.seed = 0
  config.step_sizes = ("constant", "line", "regress")
  config.max_bits = 64
  config.repeats = 5
  config.bits = (12, 24, 32, 48)
  config.hash_function = "mlp"
  config.hash_options = {"mlp": {"num_epochs": 20, "batch_size": 128, "hidden": (512,)}}
  # jhash.data.load_protocol("fashion-mnist", images=True) options.
  config.dataset = {
    "query_per_class": 100,
    "train_per_class": 500,
    "database_limit": config_dict.placeholder(int),
  }
  config.checkpoint_every = 200  # steps: the pursuit's bits, then minibatches
  if arg == "quick":
    # regress first, 16 bits: the residual cell's pursuit is then hbmp_figure1:quick's
    # class-level one (the same compiled whole pursuit when both run in one process).
    config.step_sizes = ("regress", "line", "constant")
    config.max_bits = 16
    config.repeats = 2
    config.bits = (12,)
    config.hash_function = "linear"
    config.hash_options = {"linear": {"num_epochs": 8, "batch_size": 100}}
    config.dataset.query_per_class = 20
    config.dataset.train_per_class = 100
    config.dataset.database_limit = 5000
    config.checkpoint_every = 20
  elif arg:
    raise ValueError(f"unknown config argument {arg!r}; use 'quick' or nothing.")
  return config.lock()
