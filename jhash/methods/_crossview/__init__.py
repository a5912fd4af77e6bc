"""Linear cross-view hashing baselines: CVH, SCM-seq and CMFH.

The baselines of CDH's comparison (Section 4 of "Coordinate Discrete
Optimization for Efficient Cross-View Image Retrieval", IJCAI 2016), each a
method-API factory over two or more aligned views:

* ``cvh``: cross-view hashing (Kumar and Udupa, IJCAI 2011), unsupervised, one
  generalised eigenproblem (CCA for two views), closed form in ``init``.
* ``scm``: semantic correlation maximisation, sequential (Zhang and Li, AAAI
  2014), supervised by labels, one bit per ``update``.
* ``cmfh``: collective matrix factorisation hashing (Ding, Guo and Zhou, CVPR
  2014), unsupervised, one alternation round per ``update``.

All three hash view ``v`` by ``sign(A_v^T (x - m_v))`` and encode from any
non-empty subset of views (``_common``).
"""

from jhash.methods._crossview._cmfh import CMFHExtras
from jhash.methods._crossview._cmfh import CMFHState
from jhash.methods._crossview._cmfh import cmfh
from jhash.methods._crossview._cvh import CVHState
from jhash.methods._crossview._cvh import cvh
from jhash.methods._crossview._scm import SCMState
from jhash.methods._crossview._scm import scm
