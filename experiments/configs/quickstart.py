"""Quickstart: LSH and ITQ at 16/32/64 bits on UCI Multiple Features and Fashion-MNIST.

Command:  python -m experiments.main --config experiments/configs/quickstart.py --workdir runs/quickstart
Quick:    ... --config experiments/configs/quickstart.py:quick   (smaller splits; 'tiny' for tests)
Runtime:  about a minute on 2 CPU cores (mostly compilation and the 69,000-item mAP).
Expected: ITQ above LSH at every length on both sets; mAP rises with the code length.
Protocol: queries drawn per class (mfeat: 20 per class = 200; Fashion-MNIST, the
          CIFAR-10 protocol over all 70,000 images: 100 per class = 1,000), training
          items drawn from the database (mfeat: all of it; Fashion-MNIST: 500 per
          class = 5,000), mAP over the whole database, tie-aware.
"""

from experiments.harness import ConfigDict


def get_config(arg=None):
  config = ConfigDict(
      trainer="experiments.quickstart",
      seed=0,
      bits=[16, 32, 64],
      methods=["lsh", "itq"],
      method_kwargs={"lsh": {}, "itq": {"num_iters": 50}},
      datasets={
          # mfeat: the six views side by side (649 standardised features).
          "mfeat": {"query_per_class": 20, "train_per_class": 180},
          # Fashion-MNIST: pixels scaled to [0, 1], train and test sets pooled.
          "fashion-mnist": {"query_per_class": 100, "train_per_class": 500,
                            "database_limit": None},
      },
      map_ties="aware",
      checkpoint_every=10,
      pr_curve_bits=32,
  )
  if arg == "quick":
    config.datasets = {
        "mfeat": {"query_per_class": 10, "train_per_class": 100},
        "fashion-mnist": {"query_per_class": 20, "train_per_class": 100,
                          "database_limit": 5000},
    }
    config.method_kwargs = {"lsh": {}, "itq": {"num_iters": 20}}
    config.checkpoint_every = 5
  elif arg == "tiny":  # the resume test: mfeat only, checkpoints inside ITQ's loop
    config.datasets = {"mfeat": {"query_per_class": 10, "train_per_class": 60}}
    config.bits = [8, 16]
    config.method_kwargs = {"lsh": {}, "itq": {"num_iters": 12}}
    config.checkpoint_every = 4
    config.pr_curve_bits = 16
  elif arg:
    raise ValueError(f"unknown config argument {arg!r}; use 'quick', 'tiny' or nothing.")
  return config
