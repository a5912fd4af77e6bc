"""HBMP's building blocks, public for use on their own (benchmarks, experiments, research).

``jhash.methods.hbmp`` is the whole method (hashing with binary matrix pursuit, Cakir et
al., ECCV 2018); these are its parts:

* affinities ``R`` between items: ``class_affinity``, ``instance_affinity``,
  ``label_set_affinity`` (with ``unique_label_sets``, ``LabelSets``,
  ``shared_label_counts``), ``feature_affinity``, ``affinity_from_distances``,
  ``affinity_from_similarity``, ``euclidean_distances``, ``item_centroids``,
  ``check_affinity``;
* one bit's direction: ``power_iteration``, ``shifted_power_iteration``,
  ``top_eigenvector``, ``random_starts``, ``dense_operator``; the same iterations in
  closed form from one ``eigh`` for small problems, ``dense_top_eigenvector``,
  ``eigenbasis_power_iteration``, ``eigenbasis_shifted_power_iteration``; then
  ``binarize`` and the single-flip polish ``local_search`` / ``flip_gains``
  (``PowerResult``, ``LocalSearchResult``);
* step sizes: ``STEP_SIZES``, ``regress_alphas``, ``gram_row``, ``residual_norm``;
  ``new_alphas`` as the pursuit sets them, with ``regress``'s bordered inverse Cholesky
  factor (``RegressFactor``, ``new_factor``, ``extend_factor``, ``factored_alphas``)
  and the minimum-norm solve of an exact fit ``pair_alphas``;
* stage (i), the pursuit: ``infer_codes`` (all bits in one call), ``matrix_pursuit``
  (``MatrixPursuit``, ``PursuitState``, ``PursuitResult``, ``StepDraws``),
  ``residual_operator``,
  ``dense_residual``, ``direct_residual_norm``, ``random_new_code``;
* stage (ii), hash functions fitted to the target codes by the hinge bound:
  ``hash_functions`` (a network coder, ``jhash.coder.Coder``), ``hinge_step``,
  ``fit_to_targets`` (stage ii alone, as a method; ``TargetFitState``), ``network``,
  with the losses ``hinge_loss``,
  ``instance_hinge``, ``bit_error`` (from ``jhash.losses``);
* the method and its state: ``hbmp``, ``HBMPState``, ``HBMPExtras``, ``target_codes``,
  ``retrieval_weights``.
"""

from jhash.losses import bit_error
from jhash.losses import hinge_loss
from jhash.losses import instance_hinge
from jhash.methods._hbmp import HBMPExtras
from jhash.methods._hbmp import HBMPState
from jhash.methods._hbmp import TargetFitState
from jhash.methods._hbmp import hinge_step
from jhash.methods._hbmp import LabelSets
from jhash.methods._hbmp import LocalSearchResult
from jhash.methods._hbmp import MatrixPursuit
from jhash.methods._hbmp import PowerResult
from jhash.methods._hbmp import PursuitResult
from jhash.methods._hbmp import PursuitState
from jhash.methods._hbmp import RegressFactor
from jhash.methods._hbmp import STEP_SIZES
from jhash.methods._hbmp import StepDraws
from jhash.methods._hbmp import affinity_from_distances
from jhash.methods._hbmp import affinity_from_similarity
from jhash.methods._hbmp import binarize
from jhash.methods._hbmp import check_affinity
from jhash.methods._hbmp import class_affinity
from jhash.methods._hbmp import dense_operator
from jhash.methods._hbmp import dense_residual
from jhash.methods._hbmp import dense_top_eigenvector
from jhash.methods._hbmp import direct_residual_norm
from jhash.methods._hbmp import eigenbasis_power_iteration
from jhash.methods._hbmp import eigenbasis_shifted_power_iteration
from jhash.methods._hbmp import euclidean_distances
from jhash.methods._hbmp import extend_factor
from jhash.methods._hbmp import factored_alphas
from jhash.methods._hbmp import feature_affinity
from jhash.methods._hbmp import fit_to_targets
from jhash.methods._hbmp import flip_gains
from jhash.methods._hbmp import gram_row
from jhash.methods._hbmp import hash_functions
from jhash.methods._hbmp import hbmp
from jhash.methods._hbmp import infer_codes
from jhash.methods._hbmp import instance_affinity
from jhash.methods._hbmp import item_centroids
from jhash.methods._hbmp import label_set_affinity
from jhash.methods._hbmp import local_search
from jhash.methods._hbmp import matrix_pursuit
from jhash.methods._hbmp import network
from jhash.methods._hbmp import new_alphas
from jhash.methods._hbmp import new_factor
from jhash.methods._hbmp import pair_alphas
from jhash.methods._hbmp import power_iteration
from jhash.methods._hbmp import random_new_code
from jhash.methods._hbmp import random_starts
from jhash.methods._hbmp import regress_alphas
from jhash.methods._hbmp import residual_norm
from jhash.methods._hbmp import residual_operator
from jhash.methods._hbmp import retrieval_weights
from jhash.methods._hbmp import shared_label_counts
from jhash.methods._hbmp import shifted_power_iteration
from jhash.methods._hbmp import target_codes
from jhash.methods._hbmp import top_eigenvector
from jhash.methods._hbmp import unique_label_sets

__all__ = [
  "hbmp",
  "HBMPState",
  "HBMPExtras",
  "target_codes",
  "retrieval_weights",
  "class_affinity",
  "instance_affinity",
  "label_set_affinity",
  "unique_label_sets",
  "LabelSets",
  "shared_label_counts",
  "feature_affinity",
  "affinity_from_distances",
  "affinity_from_similarity",
  "euclidean_distances",
  "item_centroids",
  "check_affinity",
  "power_iteration",
  "shifted_power_iteration",
  "top_eigenvector",
  "random_starts",
  "dense_operator",
  "dense_top_eigenvector",
  "eigenbasis_power_iteration",
  "eigenbasis_shifted_power_iteration",
  "binarize",
  "local_search",
  "flip_gains",
  "PowerResult",
  "LocalSearchResult",
  "STEP_SIZES",
  "regress_alphas",
  "gram_row",
  "residual_norm",
  "new_alphas",
  "RegressFactor",
  "new_factor",
  "extend_factor",
  "factored_alphas",
  "pair_alphas",
  "infer_codes",
  "matrix_pursuit",
  "MatrixPursuit",
  "PursuitState",
  "PursuitResult",
  "StepDraws",
  "residual_operator",
  "dense_residual",
  "direct_residual_norm",
  "random_new_code",
  "hash_functions",
  "hinge_step",
  "fit_to_targets",
  "TargetFitState",
  "network",
  "hinge_loss",
  "instance_hinge",
  "bit_error",
]
