"""CDH at scale on Fashion-MNIST halves (top / bottom as two views): CDH, CDH-0, CVH, SCM, CMFH.

Command:  python -m experiments.main --config experiments/configs/cdh_fashion.py --workdir runs/cdh_fashion
Quick:    ... --config experiments/configs/cdh_fashion.py:quick   (16 bits, 3,000 training
          images in 3 chunks of 1,000, 200 queries, 100 W-step iterations, CMFH 25 rounds)
Runtime:  about 27 minutes on 2 CPU cores shared with another job (quick: about 30 s); 55
          minutes at a load of 5-6 on 2 cores (there CDH and CDH-0 took 2.4-6.6 minutes per
          fit, CMFH 5.3-6.4, SCM 1-5.7). Under the lighter sharing, per code length CDH and
          CDH-0 take 2.2-3 minutes each (two sweeps of about 70-90 s:
          the B-step on 6 chunks, plus J over all n^2 pairs, which ``update`` evaluates
          twice per sweep for its metrics, about 30 s each at n = 60,000 when measured,
          before 64-row blocks made it about 1.6x faster; so 64 bits costs about what 32
          does), CMFH 2-3 minutes (100 rounds on 60,000 items), SCM 25-40 s.
          128 bits is left out to stay near 30 minutes.
Expected: cross-view mAP (both directions) CDH 0.59-0.63, CDH-0 within 0.02 of CDH, SCM
          0.50-0.54, CMFH 0.36-0.42, CVH 0.21-0.27 (falling with bits); against the learned
          B, CDH 0.78-0.80 (top) and 0.74-0.75 (bottom). Chunked, the second sweep still
          gains 30-50% of what the first did (|J2 - J1| / |J1| 5-9%): every sweep draws new
          chunks, so pairs across the previous chunks are optimised for the first time.
Protocol: the 60,000 training images are the training set and the database; 1,000 queries
          (100 per class) from the 10,000 test images. Views: rows 0-13 and 14-27 of each
          image (392 pixels each), centred per pixel and scaled by the view's RMS (training
          statistics). Queries coded from one half only, the database from the other
          ("top->bottom", "bottom->top"), or by the learned codes ("top->B", "bottom->B":
          CDH's B, CMFH's sign(V)). Relevance = same class, tie-aware mAP over the whole
          database. CDH: the B-step on chunks of 10,000 items (a new random split each
          sweep, the paper's chunk trick), two sweeps, gamma fixed at 0.003 (cdh_mfeat's
          validation choice at 32 and 128 bits; J is normalised so that gamma's scale does
          not depend on n); CDH-0 the same with gamma = 0 and the same key. Fit times are
          wall times of the fits, compilation included.
"""

import ml_collections


def get_config(arg=None):
  config = ml_collections.ConfigDict()
  config.trainer = "experiments.cdh_fashion"
  config.seed = 0
  config.bits = (16, 32, 64)
  # train_per_class 0: all 60,000 training images; else drawn per class.
  config.dataset = {"train_per_class": 0, "query_per_class": 100}
  config.gamma = 0.003
  # jhash.methods.cdh options besides gamma.
  config.cdh = {"max_inner": 16, "w_iters": 300, "num_sweeps": 2, "chunk_size": 10_000}
  config.baselines = ("cvh", "scm", "cmfh")
  config.baseline_options = {"cvh": {}, "scm": {}, "cmfh": {"num_iters": 100}}
  config.checkpoint_every = 1  # CDH: a checkpoint after every sweep
  config.baseline_checkpoint_every = 25  # the baselines' cheap steps (SCM: one per bit)
  if arg == "quick":
    config.bits = (16,)
    config.dataset = {"train_per_class": 300, "query_per_class": 20}
    config.cdh.w_iters = 100
    config.cdh.chunk_size = 1_000
    config.baseline_options.cmfh.num_iters = 25
  elif arg:
    raise ValueError(f"unknown config argument {arg!r}; use 'quick' or nothing.")
  return config.lock()
