"""Hardware tags (`cpu`, `h100`, `h200`, ...) that key the perf thresholds of an assignment."""

from __future__ import annotations

import functools
import os
import re

ENV_VAR = "AUTOGRADER_HARDWARE"

# Checked in order: the first pattern found in the lower-cased CUDA device name wins.
KNOWN_DEVICES: tuple[tuple[str, str], ...] = (
    (r"gh200", "gh200"),
    (r"h200", "h200"),
    (r"h100", "h100"),
    (r"h800", "h800"),
    (r"b200", "b200"),
    (r"a100", "a100"),
    (r"a10g", "a10g"),
    (r"l40s", "l40s"),
    (r"\bl4\b", "l4"),
    (r"rtx\s*4090", "rtx4090"),
    (r"rtx\s*4070", "rtx4070"),
    (r"rtx\s*3090", "rtx3090"),
    (r"\bt4\b", "t4"),
    (r"v100", "v100"),
)


# GPU generations. A same-run ratio (student vs a baseline timed beside it) carries over within one
# generation far better than across them, so a runner without bars of its own may use a sibling's,
# marked provisional, until `calibrate --write` on that runner records its own.
FAMILIES: dict[str, str] = {
    "gh200": "hopper", "h200": "hopper", "h100": "hopper", "h800": "hopper",
    "b200": "blackwell",
    "a100": "ampere", "a10g": "ampere", "rtx3090": "ampere",
    "l40s": "ada", "l4": "ada", "rtx4090": "ada", "rtx4070": "ada",
}


def family(tag: str) -> str | None:
    """'h100' -> 'hopper'; None for cpu and unknown GPUs (their bars never stand in for another's)."""
    return FAMILIES.get(tag)


def tag_from_device_name(name: str) -> str:
    """'NVIDIA H200' -> 'h200'; an unknown GPU gets a slug of its name, so it never matches a bar."""
    lowered = name.lower()
    for pattern, tag in KNOWN_DEVICES:
        if re.search(pattern, lowered):
            return tag
    return "gpu-" + re.sub(r"[^a-z0-9]+", "-", lowered).strip("-")


def hardware_tag(override: str | None = None) -> str:
    """The tag of this machine: the override, else $AUTOGRADER_HARDWARE, else detected."""
    if override:
        return override.lower()
    if env := os.environ.get(ENV_VAR):
        return env.lower()
    if not _nvidia_device_present():
        return "cpu"  # skip importing torch (seconds) where no GPU can exist
    try:
        import torch
    except ImportError:
        return "cpu"
    if not torch.cuda.is_available():
        return "cpu"
    return tag_from_device_name(torch.cuda.get_device_name(0))


def _nvidia_device_present() -> bool:
    """A cheap pre-check: NVIDIA's driver exposes /dev/nvidia0 (or /proc/driver/nvidia) when a GPU
    is usable; CUDA_VISIBLE_DEVICES="" hides them all, as torch would."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return False
    return os.path.exists("/dev/nvidia0") or os.path.exists("/proc/driver/nvidia/gpus")


@functools.cache
def has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def cuda_device_count() -> int:
    """GPUs torch sees here (0 without CUDA or torch)."""
    if not has_cuda():
        return 0
    import torch

    return torch.cuda.device_count()
