"""CDH, the paper's Figure 1 on mfeat (pix, fou): active sets, mAP per sweep, mAP against gamma.

Command:  python -m experiments.main --config experiments/configs/cdh_figure1.py --workdir runs/cdh_figure1
Quick:    ... --config experiments/configs/cdh_figure1.py:quick   (16 bits, 3 sweeps, a 4-value
          gamma grid, 100 W-step iterations)
Runtime:  about 45 s on 2 CPU cores, 52 s on 2 cores shared with other jobs (quick: about
          35 s), mostly compiling.
Expected: (a) at 32 bits the first sweep does all the work: every bit's active set is
          18-45% of n and the flips 24-51%; the later sweeps flip nothing. (b) training mAP
          0.38 from the initial codes, 1.0 after one sweep (class codes); query mAP 0.12
          before, about 0.84 / 0.81 (pix->fou / fou->pix) after one sweep, then slowly
          rising (the W-step keeps improving) to about 0.87 / 0.82 after four; J rises
          by under 0.3% per sweep after the first. (c) flat from 0 to 0.01 (0.86-0.87
          pix->fou), falling from 0.03 on to about 0.5 at gamma >= 1, where the generative
          term decides the codes.
Protocol: the split of cdh_mfeat (200 queries, 20 per class; the other 1,800 items are the
          training set and the database); 32 bits. (a, b): one CDH fit at gamma = 0.003
          (cdh_mfeat's choice) for 4 sweeps; per bit update the active-set size |I| at the
          bit's first inner update and the codes flipped, as fractions of n; after each
          sweep, training mAP (1,000 random training items' learned codes against the
          learned B, self included) and query mAP (pix->fou, fou->pix; also against B).
          (c): two sweeps at each gamma of the grid (0 is CDH-0), the same key, query mAP.
"""

import ml_collections


def get_config(arg=None):
  config = ml_collections.ConfigDict()
  config.trainer = "experiments.cdh_figure1"
  config.seed = 0
  config.bits = 32
  config.dataset = {"views": ("pix", "fou"), "query_per_class": 20, "validation_per_class": 0}
  config.gamma = 0.003
  config.num_sweeps = 4
  config.train_queries = 1000
  # jhash.methods.cdh options besides gamma and num_sweeps.
  config.cdh = {"max_inner": 16, "w_iters": 300}
  config.gamma_grid = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 10.0)
  config.gamma_sweeps = 2
  if arg == "quick":
    config.bits = 16
    config.num_sweeps = 3
    config.cdh.w_iters = 100
    config.gamma_grid = (0.0, 0.01, 0.1, 10.0)
  elif arg:
    raise ValueError(f"unknown config argument {arg!r}; use 'quick' or nothing.")
  return config.lock()
