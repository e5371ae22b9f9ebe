"""Running a node's `python solution.py`: the executor interface and the local executor."""
from engine.execution.base import (  # noqa: F401
    DEFAULT_MEMORY_LIMIT_MB, DEFAULT_OUTPUT_CAP, ExecResult, Executor, Job, OutputChunk, exception_type,
)
from engine.execution.local import LocalExecutor, kill_group, kill_tree, node_env  # noqa: F401
from engine.execution.sandbox import (  # noqa: F401
    RunSpec, Sandbox, SandboxCheck, SandboxUnavailable, run_env,
)
from engine.execution.workspace import (  # noqa: F401
    check_isolated, guard_runs_root, prepare_node_dir, prepare_session_input, session_run_dir,
)
