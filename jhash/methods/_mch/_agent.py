"""MCH's crop agent, written for a minibatch: states, rewards, one policy-gradient step.

A minibatch's images ``x`` [b, H, W, C] and one random crop of each are passed through
the frozen base model (evaluation mode); the agent's state of item ``i`` is
``h_i = [f(x_i); f(x_i*); b_i; b_i*]`` (features, then codes in {-1, +1}); the reward of
keeping the crop's code is ``jhash.losses.keep_rewards`` against the other items of the
minibatch and the memory (the whole-image codes of the training items seen so far), 0
for discarding it. The policy takes one REINFORCE step (``jhash.losses.reinforce_loss``)
with advantages ``(R_i - m) / s``: ``m`` a running mean of the rewards (the baseline)
and ``s`` a running root mean square of ``R - m``, so that one learning rate suits base
losses of any scale. Both are updated after the step from the minibatch's rewards, so
neither depends on the actions they weigh.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jhash import _checks
from jhash import coder as coder_lib
from jhash import codes as codes_lib
from jhash import losses
from jhash import models
from jhash.methods import _memory


class AgentState(NamedTuple):
  """The policy network's state and the running reward statistics."""

  policy: coder_lib.CoderState  # the policy's variables, optimiser state (a coder's)
  reward_mean: jax.Array  # float32 []: running mean of the rewards (the baseline)
  reward_scale: jax.Array  # float32 []: running RMS of reward minus baseline


def agent_inputs(whole, crop) -> tuple[jax.Array, jax.Array, jax.Array]:
  """States ``[f(x); f(x*); b; b*]`` float32 [b, 2F + 2K] and the codes (float32 [b, K])
  of the images and crops, from their base-model ``HashOutputs``."""
  b = codes_lib.sign(whole.logits).astype(jnp.float32)
  c = codes_lib.sign(crop.logits).astype(jnp.float32)
  h = jnp.concatenate([whole.features, crop.features, b, c], axis=1).astype(jnp.float32)
  return h, b, c


def policy_coder(
  model: models.Model, optimizer: optax.GradientTransformation, name: str = "mch"
) -> coder_lib.Coder:
  """The policy network as a network coder: states [b, D] in, two action logits out, the
  states read as they come (no standardisation)."""
  return coder_lib.coder(
    models.NUM_ACTIONS,
    network=model,
    optimizer=optimizer,
    standardize=False,
    name=f"{name}'s policy",
  )


def empty_agent(policy: coder_lib.CoderState) -> AgentState:
  """An agent with a fresh policy, baseline 0 and scale 1."""
  return AgentState(policy, jnp.zeros((), jnp.float32), jnp.ones((), jnp.float32))


def minibatch_rewards(codes, crop_codes, labels, index, memory, table):
  """Keep rewards float32 [b] against the minibatch's other items and the memory."""
  similarity, weights = _memory.pairs_with_memory(labels, index, memory)
  others = codes if memory is None else jnp.concatenate([codes, memory.outputs], axis=0)
  return losses.keep_rewards(codes, crop_codes, others, similarity, weights, table)


def policy_step(policy: coder_lib.Coder, agent: AgentState, states, rewards, key, momentum):
  """One REINFORCE step of the policy (``policy_coder``) on states [b, D] with keep
  rewards [b].

  Returns (agent, metrics): the loss, the mean reward of the actions taken, the
  fraction kept and the mean keep probability.
  """

  def loss_fn(logits, context):
    key, rewards, mean, scale = context
    actions = jax.random.categorical(key, jax.lax.stop_gradient(logits))
    taken = rewards * actions.astype(jnp.float32)
    advantages = (taken - mean) / scale
    keep = jax.nn.softmax(logits)[:, 1]
    return losses.reinforce_loss(logits, actions, advantages), {
      "taken": taken,
      "kept": actions,
      "keep_probability": keep,
    }

  new, value, aux, _ = policy.step(
    agent.policy, states, loss_fn, (key, rewards, agent.reward_mean, agent.reward_scale)
  )
  taken = aux["taken"]
  mean = momentum * agent.reward_mean + (1 - momentum) * jnp.mean(taken)
  spread = jnp.sqrt(jnp.mean((taken - agent.reward_mean) ** 2))
  scale = momentum * agent.reward_scale + (1 - momentum) * jnp.maximum(spread, 1e-6)
  metrics = {
    "agent_loss": value,
    "reward": jnp.mean(taken),
    "kept": jnp.mean(aux["kept"].astype(jnp.float32)),
    "keep_probability": jnp.mean(aux["keep_probability"]),
  }
  return AgentState(new, mean, scale), metrics


def keep_probability(
  policy: coder_lib.Coder, state: coder_lib.CoderState, states: jax.Array
) -> jax.Array:
  """pi(keep | h), float32 [b], in evaluation mode."""
  logits = policy.outputs(state, states)
  return jax.nn.softmax(logits, axis=-1)[:, 1]


def dedupe_mask(codes: jax.Array, keep: jax.Array) -> jax.Array:
  """bool [n, m]: ``keep`` with any code equal to an earlier kept code of its item dropped.

  Args:
    codes: int8 [n, m, K].
    keep: bool [n, m] (the first column, the whole image's code, should be True).
  Raises:
    ValueError: ``codes`` not [n, m, K], or ``keep`` not bool of shape [n, m] (shapes
      only: free under jit).
  """
  _checks.rank(codes, 3, "codes", "(int8 [n, m, K]: m codes per item)")
  if tuple(np.shape(keep)) != tuple(np.shape(codes)[:2]) or _checks.dtype_of(keep) != np.bool_:
    raise ValueError(
      f"keep must be bool of codes' [n, m] = {list(np.shape(codes)[:2])} (one flag per "
      f"code); got {_checks.describe(keep)} for codes {_checks.describe(codes)}."
    )
  m = codes.shape[1]
  same = jnp.all(codes[:, :, None, :] == codes[:, None, :, :], axis=-1)  # [n, m, m]
  earlier = jnp.tril(jnp.ones((m, m), bool), k=-1)  # j < i
  repeated = jnp.any(same & earlier[None] & keep[:, None, :], axis=-1)
  return keep & ~repeated
