"""HBMP on Fashion-MNIST with the CIFAR-10 protocol: linear, MLP and CNN hash functions vs ITQ, LSH.

Command:  python -m experiments.main --config experiments/configs/hbmp_single_label.py --workdir runs/hbmp_single_label
Quick:    ... --config experiments/configs/hbmp_single_label.py:quick   (12 bits, linear and CNN
          hash functions, 1,000 training images, a 5,000-image database, 8 epochs)
Runtime:  about 10 minutes on 2 CPU cores (quick: about 45 s): per code length, the CNN's 20
          epochs (about 1.5 s each), encoding 70,000 images, and compiling each method.
Expected: mAP over the whole database, tie-aware (measured, seed 0): CNN 0.76-0.78 > MLP
          0.75-0.77 > linear 0.62-0.69 >> ITQ 0.42-0.48 > LSH 0.29-0.37 at every length;
          weighted ranking within 0.02 of plain Hamming ranking.
Protocol: the 70,000 images (train and test pooled), pixels in [0, 1]; 1,000 queries (100 per
          class) and 5,000 training images (500 per class) drawn per class; the database is
          the other 69,000 images (training images included). HBMP: class-level items
          (R = b (2I - 1)), regress step sizes, then the hash functions on the training
          images with their class's target code (hinge loss, Adam); ITQ and LSH on the
          flattened pixels of the same training images.
"""

from experiments.harness import ConfigDict


def get_config(arg=None):
  config = ConfigDict(
      trainer="experiments.hbmp_single_label",
      seed=0,
      bits=[12, 24, 32, 48],
      hash_functions=["linear", "mlp", "cnn"],
      # hash_functions(kind, bits, **options): learning rates default to 1e-2 (linear)
      # and 1e-3 (mlp, cnn).
      hash_options={"linear": {"num_epochs": 20, "batch_size": 128},
                    "mlp": {"num_epochs": 20, "batch_size": 128, "hidden": [512]},
                    "cnn": {"num_epochs": 20, "batch_size": 128, "channels": [16, 32],
                            "dense": 128}},
      step_size="regress",
      baselines={"itq": {"num_iters": 50}, "lsh": {}},
      dataset={"query_per_class": 100, "train_per_class": 500, "database_limit": None},
      checkpoint_every=8,
  )
  if arg == "quick":
    config.bits = [12]
    config.hash_functions = ["linear", "cnn"]   # the MLP shares the linear one's code path
    config.hash_options = {
        "linear": {"num_epochs": 8, "batch_size": 100},
        "cnn": {"num_epochs": 8, "batch_size": 100, "channels": [8, 16], "dense": 64}}
    config.baselines = {"itq": {"num_iters": 20}, "lsh": {}}
    config.dataset = {"query_per_class": 20, "train_per_class": 100, "database_limit": 5000}
    config.checkpoint_every = 6
  elif arg:
    raise ValueError(f"unknown config argument {arg!r}; use 'quick' or nothing.")
  return config
