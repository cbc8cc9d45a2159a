"""faulttol: fault tolerance for training. A checkpoint of everything a resume needs, written
atomically and asynchronously, straggler detection, and the supervisor of an elastic restart."""

from .async_writer import AsyncCheckpointer
from .files import commit_checkpoint, decode, encode, is_valid, latest_valid, read_checkpoint, step_dir
from .loader import ResumableLoader
from .rng import capture_rng, restore_rng
from .state import capture_training_state, common_resume_step, restore_training_state
from .straggler import find_stragglers, gather_step_times
from .supervisor import Beat, Kill, Launch, Stop, Supervisor, SupervisorConfig

__all__ = [
    "AsyncCheckpointer", "Beat", "Kill", "Launch", "ResumableLoader", "Stop", "Supervisor", "SupervisorConfig",
    "capture_rng", "capture_training_state", "commit_checkpoint", "common_resume_step", "decode", "encode",
    "find_stragglers", "gather_step_times", "is_valid", "latest_valid", "read_checkpoint", "restore_rng",
    "restore_training_state", "step_dir",
]
