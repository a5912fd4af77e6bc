"""CDH: Coordinate Discrete Hashing for cross-view retrieval.

From "Coordinate Discrete Optimization for Efficient Cross-View Image Retrieval"
(IJCAI 2016).

``cdh(num_bits, ...)`` is the method (``_method``); the parts are usable alone:
the bit-by-bit B-step (``bstep_sweep``, ``update_bit``; over data chunks in
``_chunks``), Algorithm 2
(``reduce_active_set``), the vmapped W-step (``wstep``), generative encoding
(``generative_encode``) and the supervision ``Y`` (``Supervision`` and its
constructors).
"""

from jhash.methods._cdh._active_set import active_set
from jhash.methods._cdh._active_set import reduce_active_set
from jhash.methods._cdh._bstep import BitStats
from jhash.methods._cdh._bstep import SweepCarry
from jhash.methods._cdh._bstep import start_sweep
from jhash.methods._cdh._bstep import sweep as bstep_sweep
from jhash.methods._cdh._bstep import update_bit
from jhash.methods._cdh._encode import encode as generative_encode
from jhash.methods._cdh._encode import generative_terms
from jhash.methods._cdh._encode import log_prior_odds
from jhash.methods._cdh._method import CDHExtras
from jhash.methods._cdh._method import CDHState
from jhash.methods._cdh._method import cdh
from jhash.methods._cdh._objective import generative_term
from jhash.methods._cdh._objective import semantic_term
from jhash.methods._cdh._supervision import Supervision
from jhash.methods._cdh._supervision import from_labels as supervision_from_labels
from jhash.methods._cdh._supervision import from_matrix as supervision_from_matrix
from jhash.methods._cdh._supervision import from_pairs as supervision_from_pairs
from jhash.methods._cdh._wstep import wstep
