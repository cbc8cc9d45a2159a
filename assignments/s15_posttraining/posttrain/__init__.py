"""posttrain: the losses of RL and preference fine-tuning (PPO with GAE, GRPO and its length
normalisations, DPO and SimPO), checked against TRL, and the weight sync between a trainer and a
rollout worker built on the P1 engine `minivllm` (given code)."""

from .grpo import LOSS_TYPES, GRPOConfig, aggregate, group_advantages, grpo_loss, per_token_loss
from .logprobs import completion_logprobs
from .ppo import gae, masked_mean, ppo_policy_loss, ppo_value_loss
from .preference import dpo_loss, simpo_loss
from .sync import RolloutWorker, StaleWeightsError, SyncReport, send_weights, weight_payload

__all__ = [
    "completion_logprobs", "masked_mean", "gae", "ppo_policy_loss", "ppo_value_loss",
    "LOSS_TYPES", "GRPOConfig", "group_advantages", "per_token_loss", "aggregate", "grpo_loss",
    "dpo_loss", "simpo_loss",
    "RolloutWorker", "StaleWeightsError", "SyncReport", "send_weights", "weight_payload",
]
