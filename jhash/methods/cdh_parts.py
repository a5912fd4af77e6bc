"""CDH's building blocks, public for use on their own (benchmarks, experiments, research).

``jhash.methods.cdh`` is the whole method (Coordinate Discrete Hashing, IJCAI 2016); these
are its parts:

* the supervision ``Y``: ``Supervision`` (class ids, multi-hot labels or an explicit
  matrix) and its constructors ``supervision_from_labels``, ``supervision_from_matrix``,
  ``supervision_from_pairs``;
* the B-step, bit by bit: ``bstep_sweep`` (one sweep over all bits), ``start_sweep``,
  ``update_bit``, the carried ``SweepCarry`` and per-bit ``BitStats``;
* Algorithm 2 on the active set: ``active_set``, ``reduce_active_set``;
* the W-step (the bit-by-view logistic problems, solved together): ``wstep``;
* the generative side: ``generative_terms`` (``Z``), ``log_prior_odds`` and
  ``generative_encode`` (codes of new items);
* the objective's two terms: ``semantic_term``, ``generative_term``;
* the method and its state: ``cdh``, ``CDHState``, ``CDHExtras``.
"""

from jhash.methods._cdh import BitStats
from jhash.methods._cdh import CDHExtras
from jhash.methods._cdh import CDHState
from jhash.methods._cdh import Supervision
from jhash.methods._cdh import SweepCarry
from jhash.methods._cdh import active_set
from jhash.methods._cdh import bstep_sweep
from jhash.methods._cdh import cdh
from jhash.methods._cdh import generative_encode
from jhash.methods._cdh import generative_term
from jhash.methods._cdh import generative_terms
from jhash.methods._cdh import log_prior_odds
from jhash.methods._cdh import reduce_active_set
from jhash.methods._cdh import semantic_term
from jhash.methods._cdh import start_sweep
from jhash.methods._cdh import supervision_from_labels
from jhash.methods._cdh import supervision_from_matrix
from jhash.methods._cdh import supervision_from_pairs
from jhash.methods._cdh import update_bit
from jhash.methods._cdh import wstep
from jhash.methods._cdh._shard import RowShard

__all__ = [
  "cdh",
  "CDHState",
  "CDHExtras",
  "Supervision",
  "supervision_from_labels",
  "supervision_from_matrix",
  "supervision_from_pairs",
  "bstep_sweep",
  "start_sweep",
  "update_bit",
  "SweepCarry",
  "BitStats",
  "RowShard",
  "active_set",
  "reduce_active_set",
  "wstep",
  "generative_terms",
  "log_prior_odds",
  "generative_encode",
  "semantic_term",
  "generative_term",
]
