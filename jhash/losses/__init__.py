"""Pairwise hashing losses and their pair weights: pure, jittable functions.

Each loss is a function of a minibatch's continuous outputs (and of the other side
of its pairs: the minibatch itself, a memory of the training set, or target codes),
with its paper's hyperparameters as defaults and the paper named in its docstring.
A new pairwise method is one such function handed to ``jhash.methods.pairwise``.
"""

from jhash.losses._adsh import adsh_loss
from jhash.losses._adsh import adsh_objective
from jhash.losses._adsh import adsh_update_codes
from jhash.losses._dch import cosine_hamming_distance
from jhash.losses._dch import dch_loss
from jhash.losses._hashnet import hashnet_beta
from jhash.losses._hashnet import hashnet_loss
from jhash.losses._hinge import bit_error
from jhash.losses._hinge import hinge_loss
from jhash.losses._hinge import instance_hinge
from jhash.losses._hinge import mean_bit_error
from jhash.losses._hinge import mean_hinge
from jhash.losses._ksh import ksh_greedy_fit
from jhash.losses._ksh import ksh_loss
from jhash.losses._ksh import rbf_anchor_features
from jhash.losses._ksh import rbf_anchor_statistics
from jhash.losses._likelihood import pairwise_likelihood
from jhash.losses._mch import code_loss_table
from jhash.losses._mch import codes_at_distance
from jhash.losses._mch import hamming_of_signs
from jhash.losses._mch import keep_rewards
from jhash.losses._mch import saturated
from jhash.losses._mch import TANH_SATURATION
from jhash.losses._mch import reinforce_loss
from jhash.losses._mmhh import mmhh_loss
from jhash.losses._mmhh import mmhh_margin_weights
from jhash.losses._pairs import balanced_pair_weights
from jhash.losses._pairs import label_similarity
from jhash.losses._pairs import off_diagonal

__all__ = [
  "label_similarity",
  "balanced_pair_weights",
  "off_diagonal",
  "pairwise_likelihood",
  "ksh_loss",
  "ksh_greedy_fit",
  "rbf_anchor_features",
  "rbf_anchor_statistics",
  "hashnet_loss",
  "hashnet_beta",
  "adsh_loss",
  "adsh_objective",
  "adsh_update_codes",
  "dch_loss",
  "cosine_hamming_distance",
  "mmhh_loss",
  "mmhh_margin_weights",
  "hinge_loss",
  "instance_hinge",
  "bit_error",
  "mean_hinge",
  "mean_bit_error",
  "keep_rewards",
  "code_loss_table",
  "saturated",
  "TANH_SATURATION",
  "codes_at_distance",
  "hamming_of_signs",
  "reinforce_loss",
]
