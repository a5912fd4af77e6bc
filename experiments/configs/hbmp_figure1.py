"""HBMP, the paper's Figure 1(c-e) on real labels: class-level vs instance-level inference.

Command:  python -m experiments.main --config experiments/configs/hbmp_figure1.py --workdir runs/hbmp_figure1
Quick:    ... --config experiments/configs/hbmp_figure1.py:quick   (1 repeat, 500 instances, 16 bits)
Runtime:  about 2 minutes on 2 CPU cores (quick: about 30 s), mostly compiling the two
          pursuits and the instance-level steps (about 70 ms a bit at 1,000 items).
Expected: class-level residual falls to ~0 by 48 bits, instance-level stalls near 0.8 of its
          initial norm; default solver: mAP 1.0 from 8 bits on at both levels (this
          affinity is class-structured); budget solver: class-level 1.0, instance-level
          about 0.18 at 8 bits and 0.22 at 16; class-level inference about 12x faster
          one call per step (32 steps about 0.04 vs 0.50 s: at 10 items a step's time is
          the call itself) and about 100x as one compiled 64-bit pursuit (8 vs 808 ms).
Protocol: 10 Fashion-MNIST classes; per repeat, 1,000 images (100 per class) drawn from the
          training set; items are the 10 classes (R = b (2I - 1)) or the 1,000 instances
          (R_ij = b (2 [y_i = y_j] - 1)); regress step sizes; one pursuit of max_bits per
          level and repeat, the codes and alphas after b bits giving the b-bit results;
          100 random instances query the other 900 with the inferred target codes (the
          paper's Figure 1(d)), tie-aware mAP with weighted (alphas) and plain Hamming
          ranking; time = wall time of the first b pursuit steps (jitted, after a warm-up,
          one call per step), and of the whole max_bits pursuit as one compiled call
          (``infer_codes``), whose instance / class ratio the table prints.
"""

import ml_collections


def get_config(arg=None):
  config = ml_collections.ConfigDict()
  config.trainer = "experiments.hbmp_figure1"
  config.seed = 0
  config.repeats = 5
  config.num_classes = 10
  config.instances_per_class = 100
  config.num_queries = 100
  config.max_bits = 64
  config.map_bits = (4, 8, 16, 24, 32, 48, 64)
  config.step_size = "regress"
  # Solver settings of the pursuit (``hbmp`` keyword arguments) to compare.
  config.solvers = {
    "default": {},
    "budget": {"num_restarts": 1, "num_iters": 8, "local_search": False},
  }
  if arg == "quick":
    config.repeats = 1
    config.instances_per_class = 50
    config.num_queries = 100
    config.max_bits = 16
    config.map_bits = (8, 16)
  elif arg:
    raise ValueError(f"unknown config argument {arg!r}; use 'quick' or nothing.")
  return config.lock()
