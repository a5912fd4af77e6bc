"""MCH's building blocks, public for use on their own (benchmarks, experiments, research).

``jhash.methods.mch`` is the whole method (Multiple Code Hashing); these are its parts:

* crops: ``five_crops`` (the fixed crops of encoding), ``fixed_boxes``, ``fixed_crop``,
  ``random_crops`` and ``random_boxes`` (training), ``crop_resize`` (any box);
* the agent: ``agent_inputs`` (its states), ``minibatch_rewards``, ``policy_coder`` (the policy
  network as a ``jhash.coder.Coder``), ``policy_step`` (one REINFORCE step), ``keep_probability``, ``AgentState``;
* encoding: ``dedupe_mask`` (a repeated code of an item is not kept twice), ``kept_codes``
  (an item's code and the extra codes kept);
* controls, other keep rules on the same crops (``MCHExtras.crop_codes``): ``keep_all``,
  ``keep_at_random`` at ``matching_rate``, ``oracle_keep`` (the crops of positive reward);
* the method and its state: ``mch``, ``MCHState``, ``MCHExtras``.

The reward and the policy-gradient loss are in ``jhash.losses`` (``keep_rewards``,
``code_loss_table``, ``reinforce_loss``) and the policy network in ``jhash.models``
(``PolicyMLP``).
"""

from jhash.methods._mch import AgentState
from jhash.methods._mch import MCHExtras
from jhash.methods._mch import MCHState
from jhash.methods._mch import agent_inputs
from jhash.methods._mch import crop_resize
from jhash.methods._mch import dedupe_mask
from jhash.methods._mch import five_crops
from jhash.methods._mch import keep_all
from jhash.methods._mch import keep_at_random
from jhash.methods._mch import kept_codes
from jhash.methods._mch import matching_rate
from jhash.methods._mch import oracle_keep
from jhash.methods._mch import fixed_boxes
from jhash.methods._mch import fixed_crop
from jhash.methods._mch import keep_probability
from jhash.methods._mch import mch
from jhash.methods._mch import minibatch_rewards
from jhash.methods._mch import policy_coder
from jhash.methods._mch import policy_step
from jhash.methods._mch import random_boxes
from jhash.methods._mch import random_crops

__all__ = [
  "mch",
  "MCHState",
  "MCHExtras",
  "five_crops",
  "fixed_boxes",
  "fixed_crop",
  "random_crops",
  "random_boxes",
  "crop_resize",
  "agent_inputs",
  "minibatch_rewards",
  "policy_coder",
  "policy_step",
  "keep_probability",
  "AgentState",
  "dedupe_mask",
  "kept_codes",
  "keep_all",
  "keep_at_random",
  "matching_rate",
  "oracle_keep",
]
