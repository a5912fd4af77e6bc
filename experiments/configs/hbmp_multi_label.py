"""HBMP on yeast (multi-label): label-set items, linear and MLP hash functions vs ITQ, LSH.

Command:  python -m experiments.main --config experiments/configs/hbmp_multi_label.py --workdir runs/hbmp_multi_label
Quick:    ... --config experiments/configs/hbmp_multi_label.py:quick   (12 bits, linear and MLP,
          10 epochs)
Runtime:  about 4.5 minutes on 2 CPU cores (quick: about 35 s), mostly compiling one pursuit
          per code length and hash function.
Expected: HBMP (either hash function) above ITQ and LSH in mAP and NDCG@100 at every length;
          the gaps are small in mAP (78% of pairs share a label, so a random ranking already
          scores about 0.75) and larger in NDCG.
Protocol: the 2,417 genes, 103 features standardised with the training statistics; 417 random
          queries, the other 2,000 are the database and the training set. HBMP's items are
          the unique label sets of the training set (about 180); their affinity is the
          number of shared labels scaled into [-b, b] (``metric``), regress step sizes; each
          training gene gets its label set's code. mAP: relevant = shares a label, whole
          database, tie-aware. NDCG@100: gain 2^g - 1 with g = number of shared labels,
          tie-aware. HBMP ranks with the alphas (weighted) and with plain Hamming distance.
"""

from experiments.harness import ConfigDict


def get_config(arg=None):
  config = ConfigDict(
      trainer="experiments.hbmp_multi_label",
      seed=0,
      bits=[12, 24, 32, 48],
      hash_functions=["linear", "mlp"],
      hash_options={"linear": {"num_epochs": 40, "batch_size": 100},
                    "mlp": {"num_epochs": 40, "batch_size": 100, "hidden": [256],
                            "weight_decay": 1e-4}},
      metric="shared_count",
      step_size="regress",
      baselines={"itq": {"num_iters": 50}, "lsh": {}},
      num_queries=417,
      ndcg_k=100,
      checkpoint_every=10,
  )
  if arg == "quick":
    config.bits = [12]
    config.hash_options = {"linear": {"num_epochs": 10, "batch_size": 100},
                           "mlp": {"num_epochs": 10, "batch_size": 100, "hidden": [128]}}
    config.baselines = {"itq": {"num_iters": 20}, "lsh": {}}
    config.checkpoint_every = 8
  elif arg:
    raise ValueError(f"unknown config argument {arg!r}; use 'quick' or nothing.")
  return config
