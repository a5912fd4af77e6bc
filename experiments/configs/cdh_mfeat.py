"""CDH on UCI mfeat (views pix, fou), the paper's Table 1: CDH, CDH-0, CVH, SCM, CMFH.

Command:  python -m experiments.main --config experiments/configs/cdh_mfeat.py --workdir runs/cdh_mfeat
Quick:    ... --config experiments/configs/cdh_mfeat.py:quick   (32 bits only, gamma from 2
          values, CMFH 50 rounds)
Runtime:  about 4 minutes on 2 CPU cores, 7 min 18 s on 2 cores shared with other jobs
          (quick: about 40 s), mostly compiling CDH's sweep twice per code length (the
          selection fits 1,600 items, the final fits 1,800).
Expected: CDH and CDH-0 far above every baseline at every length (cross-view mAP about
          0.81-0.89 pix->fou and 0.77-0.83 fou->pix; SCM 0.62-0.74, CMFH 0.45-0.56 (its
          cells move with the key: 0.01 typically, 0.05 at 16 bits for some keys), CVH
          0.18-0.33, falling with more bits); CDH and CDH-0 within about 0.03 of each other,
          either ahead; the learned-B database about 0.92-0.95 from pix. Validation picks
          gamma in 0.001-0.03; the paper's rule always picks the largest grid value.
          |J2 - J1| / |J1| under 1% at 32 and 64 bits (56% at 16 bits and 6% at 128, where J1 is
          near 0 because the two terms nearly cancel; |J2 - J1| / |J1 - J0| stays under 4%).
Protocol: mfeat's 2,000 digits (200 per class), each view standardised; 20 queries per
          class (200), the other 1,800 items are both the training set and the database.
          Cross-view: queries coded from one view only, the database from the other view
          only ("pix->fou", "fou->pix"); also the database coded by the codes the method
          learned for it ("pix->B", "fou->B": CDH's B, CMFH's sign(V)). Relevance = same
          class; tie-aware mAP over the whole database. CDH's gamma: per code length, 20
          items per class of the training set are held out as validation queries, CDH
          fits the other 1,600 at each value of the grid, and the best mean validation
          mAP (both directions) wins; the paper's rule (highest training J) is recorded
          too. CDH-0 is gamma = 0 with the same key (same initial weights). Two sweeps
          (the paper's); |J2 - J1| / |J1| checks "converged within two sweeps". CVH is
          skipped at 128 bits (one bit per canonical pair: at most 76, fou's width).
"""

import ml_collections


def get_config(arg=None):
  config = ml_collections.ConfigDict()
  config.trainer = "experiments.cdh_mfeat"
  config.seed = 0
  config.bits = (16, 32, 64, 128)
  config.dataset = {"views": ("pix", "fou"), "query_per_class": 20, "validation_per_class": 20}
  # jhash.methods.cdh options besides gamma (chunk_size above n: one chunk).
  config.cdh = {"max_inner": 16, "w_iters": 300, "num_sweeps": 2}
  config.gamma_grid = (0.001, 0.003, 0.01, 0.03, 0.1)
  config.select_bits = 0  # 0: choose gamma per code length; else at this length
  config.baselines = ("cvh", "scm", "cmfh")
  config.baseline_options = {"cvh": {}, "scm": {}, "cmfh": {"num_iters": 100}}
  config.checkpoint_every = 1  # CDH: a checkpoint after every sweep
  config.baseline_checkpoint_every = 25  # the baselines' cheap steps (SCM: one per bit)
  if arg == "quick":
    config.bits = (32,)
    config.gamma_grid = (0.01, 0.1)
    config.baseline_options.cmfh.num_iters = 50
  elif arg:
    raise ValueError(f"unknown config argument {arg!r}; use 'quick' or nothing.")
  return config.lock()
