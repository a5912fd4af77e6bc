"""MCH (Multiple Code Hashing): the method, its crop agent and its crops."""

from jhash.methods._mch._agent import AgentState
from jhash.methods._mch._agent import agent_inputs
from jhash.methods._mch._agent import dedupe_mask
from jhash.methods._mch._agent import keep_probability
from jhash.methods._mch._agent import minibatch_rewards
from jhash.methods._mch._agent import policy_coder
from jhash.methods._mch._agent import policy_step
from jhash.methods._mch._controls import keep_all
from jhash.methods._mch._controls import keep_at_random
from jhash.methods._mch._controls import kept_codes
from jhash.methods._mch._controls import matching_rate
from jhash.methods._mch._controls import oracle_keep
from jhash.methods._crops import crop_resize
from jhash.methods._crops import five_crops
from jhash.methods._crops import fixed_boxes
from jhash.methods._crops import fixed_crop
from jhash.methods._crops import random_boxes
from jhash.methods._crops import random_crops
from jhash.methods._mch._method import MCHExtras
from jhash.methods._mch._method import MCHState
from jhash.methods._mch._method import mch
