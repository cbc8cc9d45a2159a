"""RoPE frequency scaling for contexts longer than the one a model was trained on.

RoPE rotates each pair of query/key dimensions i (i = 0 .. d/2 - 1) by the angle
position * inv_freq[i], inv_freq[i] = base ** (-2i / d). A model trained on L positions has seen
every angle of the low frequencies only up to L * inv_freq[i]; each method below changes inv_freq
so that a longer context stays within (or close to) the angles seen in training:

  linear   (position interpolation): every frequency divided by the factor s.
  dynamic  (NTK-aware, applied at the current length): the base raised so that the lowest
           frequency is divided by s while the highest stays: base * s_eff ** (d / (d - 2)).
  yarn     NTK-by-parts: high frequencies kept, low ones divided by s, a linear ramp in between;
           plus an attention factor (0.1 ln s + 1) that sharpens softmax again.
  llama3   wavelength bands: short wavelengths kept, long ones divided by s, a smooth blend between.

The parameter dict uses transformers' `rope_parameters` keys, so a model config's entry can be
passed as is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

KINDS = ("default", "linear", "dynamic", "yarn", "llama3")


@dataclass(frozen=True)
class RopeScaling:
    """A validated RoPE scaling configuration (transformers' `rope_parameters` keys)."""

    rope_type: str = "default"
    factor: float = 1.0
    original_max_position_embeddings: int | None = None  # the training context L
    low_freq_factor: float | None = None                 # llama3: wavelengths over L / low_freq_factor are scaled
    high_freq_factor: float | None = None                # llama3: wavelengths under L / high_freq_factor are kept
    beta_fast: float = 32.0                              # yarn: rotations in L above which a pair is kept
    beta_slow: float = 1.0                               # yarn: rotations in L below which a pair is interpolated
    attention_factor: float | None = None                # yarn: given explicitly, else derived from mscale
    mscale: float | None = None
    mscale_all_dim: float | None = None

    def __post_init__(self) -> None:
        if self.rope_type not in KINDS:
            raise ValueError(f"rope_type {self.rope_type!r}: expected one of {KINDS}")
        if not self.factor >= 1.0:
            raise ValueError(f"factor {self.factor}: a context extension factor is >= 1")
        if self.rope_type in ("dynamic", "yarn", "llama3") and not self.original_max_position_embeddings:
            raise ValueError(f"{self.rope_type} needs original_max_position_embeddings (the training context)")
        if self.rope_type == "llama3":
            lo, hi = self.low_freq_factor, self.high_freq_factor
            if lo is None or hi is None or not 0 < lo < hi:
                raise ValueError(f"llama3 needs 0 < low_freq_factor < high_freq_factor, got {lo} and {hi}")
        if self.rope_type == "yarn" and not self.beta_slow < self.beta_fast:
            raise ValueError(f"yarn needs beta_slow < beta_fast, got {self.beta_slow} and {self.beta_fast}")

    @classmethod
    def from_dict(cls, params: dict | None) -> RopeScaling:
        """From a `rope_parameters`-style dict; `rope_theta` (the base) is read elsewhere."""
        if not params:
            return cls()
        known = set(cls.__dataclass_fields__)
        kept = {k: v for k, v in params.items() if k in known and v is not None}
        unknown = set(params) - known - {"rope_theta", "type", "truncate", "partial_rotary_factor"}
        if unknown:
            raise ValueError(f"unknown RoPE scaling keys {sorted(unknown)}")
        if "type" in params and "rope_type" not in params:
            kept["rope_type"] = params["type"]
        return cls(**kept)


def default_inv_freq(dim: int, base: float) -> Tensor:
    """inv_freq[i] = base ** (-2i / dim), i = 0 .. dim/2 - 1; fp32, shape (dim // 2,)."""
    if dim <= 0 or dim % 2:
        raise ValueError(f"rotary dim {dim}: must be a positive even number")
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    return 1.0 / (base ** exponents)


def linear_inv_freq(dim: int, base: float, factor: float) -> Tensor:
    """Position interpolation: position p is read as p / factor."""
    return default_inv_freq(dim, base) / factor


def dynamic_ntk_inv_freq(dim: int, base: float, factor: float, original_max: int, seq_len: int | None) -> Tensor:
    """NTK-aware scaling at the current length: s_eff = factor * L_cur / L - (factor - 1) with
    L_cur = max(seq_len, L) (no change up to the training length), and the base becomes
    base * s_eff ** (dim / (dim - 2)): the lowest frequency (i = dim/2 - 1) is divided by s_eff,
    the highest (i = 0) is unchanged."""
    current = original_max if seq_len is None else max(seq_len, original_max)
    s_eff = factor * current / original_max - (factor - 1)
    return default_inv_freq(dim, base * s_eff ** (dim / (dim - 2)))


def yarn_attention_factor(factor: float, mscale: float | None = None, mscale_all_dim: float | None = None) -> float:
    """YaRN's softmax sharpening: 0.1 * ln(factor) + 1 (1 for factor <= 1); with DeepSeek's
    mscale and mscale_all_dim both given, the ratio get(factor, mscale) / get(factor, mscale_all_dim)
    where get(s, m) = 0.1 * m * ln(s) + 1."""
    def get(s: float, m: float = 1.0) -> float:
        return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0

    if mscale and mscale_all_dim:
        return get(factor, mscale) / get(factor, mscale_all_dim)
    return get(factor)


def yarn_inv_freq(dim: int, base: float, cfg: RopeScaling) -> Tensor:
    """NTK-by-parts. Pair i turns L / (2 pi / inv_freq[i]) times over the training context L.
    The boundary pairs are where it turns beta_fast and beta_slow times:
        d(r) = dim * ln(L / (2 pi r)) / (2 ln base),  low = floor(d(beta_fast)), high = ceil(d(beta_slow)),
    clamped to [0, dim - 1]. ramp[i] = clamp((i - low) / (high - low), 0, 1) (high - low at least
    0.001); inv_freq = (1 - ramp) * original + ramp * original / factor: pairs below `low` turn
    fast enough to keep, pairs above `high` are interpolated."""
    length = cfg.original_max_position_embeddings

    def boundary(rotations: float) -> float:
        return dim * math.log(length / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(boundary(cfg.beta_fast)), 0)
    high = min(math.ceil(boundary(cfg.beta_slow)), dim - 1)
    if low == high:
        high += 0.001  # a one-pair band would divide by zero
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    original = default_inv_freq(dim, base)
    return (1 - ramp) * original + ramp * original / cfg.factor


def llama3_inv_freq(dim: int, base: float, cfg: RopeScaling) -> Tensor:
    """Llama 3.1's bands by wavelength w = 2 pi / inv_freq, with L the training context:
    w < L / high_freq_factor: kept; w > L / low_freq_factor: divided by factor; in between
    (both edges included) a blend with smooth = (L / w - low_freq_factor) / (high_freq_factor - low_freq_factor):
    (1 - smooth) * inv_freq / factor + smooth * inv_freq."""
    length = cfg.original_max_position_embeddings
    inv_freq = default_inv_freq(dim, base)
    wavelen = 2 * math.pi / inv_freq
    low_edge, high_edge = length / cfg.low_freq_factor, length / cfg.high_freq_factor
    scaled = torch.where(wavelen > low_edge, inv_freq / cfg.factor, inv_freq)
    smooth = (length / wavelen - cfg.low_freq_factor) / (cfg.high_freq_factor - cfg.low_freq_factor)
    blended = (1 - smooth) * inv_freq / cfg.factor + smooth * inv_freq
    middle = (wavelen >= high_edge) & (wavelen <= low_edge)
    return torch.where(middle, blended, scaled)


def rope_inv_freq(dim: int, base: float, scaling: dict | None = None,
                  seq_len: int | None = None) -> tuple[Tensor, float]:
    """(inv_freq of shape (dim // 2,) in fp32, attention factor) for a `rope_parameters`-style
    dict (None: plain RoPE). The attention factor multiplies cos and sin (so the logits by its
    square); it is 1 except for yarn. seq_len matters only to dynamic scaling."""
    cfg = RopeScaling.from_dict(scaling)
    if cfg.rope_type == "linear":
        return linear_inv_freq(dim, base, cfg.factor), 1.0
    if cfg.rope_type == "dynamic":
        return dynamic_ntk_inv_freq(dim, base, cfg.factor, cfg.original_max_position_embeddings, seq_len), 1.0
    if cfg.rope_type == "yarn":
        attention = cfg.attention_factor
        if attention is None:
            attention = yarn_attention_factor(cfg.factor, cfg.mscale, cfg.mscale_all_dim)
        return yarn_inv_freq(dim, base, cfg), attention
    if cfg.rope_type == "llama3":
        return llama3_inv_freq(dim, base, cfg), 1.0
    return default_inv_freq(dim, base), 1.0
