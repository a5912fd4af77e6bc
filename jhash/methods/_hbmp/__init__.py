"""HBMP: hashing with binary matrix pursuit (Cakir, He, Bargal, Sclaroff, ECCV 2018).

Stage (i), the binary inference of target codes for items: the items of each level
(``_items``), affinities between items (``_affinity``), the direction of each bit by
shifted power iteration and a single-flip polish (``_power``), step sizes (``_steps``),
the pursuit itself (``_pursuit``: ``matrix_pursuit``, ``infer_codes``) and the method
wrapper (``_method``: ``hbmp``).

Stage (ii), the hash functions ``sign(psi(x))`` fitted to the target codes by the hinge
bound: ``jhash.models`` networks (linear, MLP, small CNN) trained on the shared train
step (``_hashfn``: ``hash_functions``, ``fit_to_targets``); ``hbmp(...,
hash_function=...)`` runs both stages as two phases of one schedule.
"""

from jhash.methods._hbmp._affinity import LabelSets
from jhash.methods._hbmp._affinity import affinity_from_distances
from jhash.methods._hbmp._affinity import affinity_from_similarity
from jhash.methods._hbmp._affinity import check_affinity
from jhash.methods._hbmp._affinity import class_affinity
from jhash.methods._hbmp._affinity import euclidean_distances
from jhash.methods._hbmp._affinity import feature_affinity
from jhash.methods._hbmp._affinity import instance_affinity
from jhash.methods._hbmp._affinity import item_centroids
from jhash.methods._hbmp._affinity import label_set_affinity
from jhash.methods._hbmp._affinity import shared_label_counts
from jhash.methods._hbmp._affinity import unique_label_sets
from jhash.methods._hbmp._hashfn import TargetFitState
from jhash.methods._hbmp._hashfn import hinge_step
from jhash.losses import bit_error
from jhash.methods._hbmp._hashfn import fit_to_targets
from jhash.methods._hbmp._hashfn import hash_functions
from jhash.losses import hinge_loss
from jhash.methods._hbmp._hashfn import network
from jhash.losses import instance_hinge
from jhash.methods._hbmp._method import HBMPExtras
from jhash.methods._hbmp._method import HBMPState
from jhash.methods._hbmp._method import hbmp
from jhash.methods._hbmp._method import retrieval_weights
from jhash.methods._hbmp._method import target_codes
from jhash.methods._hbmp._power import LocalSearchResult
from jhash.methods._hbmp._power import PowerResult
from jhash.methods._hbmp._power import binarize
from jhash.methods._hbmp._power import dense_top_eigenvector
from jhash.methods._hbmp._power import dense_operator
from jhash.methods._hbmp._power import eigenbasis_power_iteration
from jhash.methods._hbmp._power import eigenbasis_shifted_power_iteration
from jhash.methods._hbmp._power import flip_gains
from jhash.methods._hbmp._power import local_search
from jhash.methods._hbmp._power import power_iteration
from jhash.methods._hbmp._power import random_starts
from jhash.methods._hbmp._power import shifted_power_iteration
from jhash.methods._hbmp._power import top_eigenvector
from jhash.methods._hbmp._pursuit import MatrixPursuit
from jhash.methods._hbmp._pursuit import PursuitResult
from jhash.methods._hbmp._pursuit import PursuitState
from jhash.methods._hbmp._pursuit import StepDraws
from jhash.methods._hbmp._pursuit import dense_residual
from jhash.methods._hbmp._pursuit import direct_residual_norm
from jhash.methods._hbmp._pursuit import infer_codes
from jhash.methods._hbmp._pursuit import matrix_pursuit
from jhash.methods._hbmp._pursuit import random_new_code
from jhash.methods._hbmp._pursuit import residual_operator
from jhash.methods._hbmp._steps import STEP_SIZES
from jhash.methods._hbmp._steps import RegressFactor
from jhash.methods._hbmp._steps import extend_factor
from jhash.methods._hbmp._steps import factored_alphas
from jhash.methods._hbmp._steps import gram_row
from jhash.methods._hbmp._steps import new_alphas
from jhash.methods._hbmp._steps import new_factor
from jhash.methods._hbmp._steps import pair_alphas
from jhash.methods._hbmp._steps import regress_alphas
from jhash.methods._hbmp._steps import residual_norm
