"""Running a node's `python solution.py`: the executor interface and the local executor."""
from engine.execution.base import (
    DEFAULT_MEMORY_LIMIT_MB, DEFAULT_OUTPUT_CAP, ExecResult, Executor, Job, OutputChunk, exception_type,
)
from engine.execution.local import LocalExecutor, kill_group, kill_tree, node_env
from engine.execution.sandbox import (
    RunSpec, Sandbox, SandboxCheck, SandboxUnavailable, run_env,
)
from engine.execution.run_dirs import (
    check_isolated, guard_runs_root, prepare_node_dir, prepare_session_input,
)

__all__ = [
    "DEFAULT_MEMORY_LIMIT_MB", "DEFAULT_OUTPUT_CAP", "ExecResult", "Executor", "Job", "OutputChunk", "exception_type",
    "LocalExecutor", "kill_group", "kill_tree", "node_env",
    "RunSpec", "Sandbox", "SandboxCheck", "SandboxUnavailable", "run_env",
    "check_isolated", "guard_runs_root", "prepare_node_dir", "prepare_session_input",
]
