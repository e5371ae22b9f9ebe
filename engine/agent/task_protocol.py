"""The task a session's agent is given, chosen once per session: the product's own or the study's.

    protocol = task_protocol(config.protocol)          # "befair" or "be-fair" (engine.agent.session_config.PROTOCOLS)
    protocol.prompts.draft(ctx, exec_timeout)          # its prompt set (engine.coders.llm.prompts)
    protocol.context(ctx, state)                       # the coder's context in its shape
    protocol.data_preview(agent_input)                 # the data overview its prompts show
    protocol.workspace(data, synth, progress)          # the data workspace, in its layout

"befair" is the product's task: a withheld validation split to measure and choose by, the
product's prompts, its data layout (engine.data.agent_workspace). "be-fair" is the "Be Fair!" study's
task, exactly: AIDE's prompts and memory, the study's layout (engine.data.be_fair_layout), nothing
withheld for validation, so nodes are measured on the test set only (blinded while the session
runs), only the agent's own score can choose the best node, and the search follows AIDE's rule.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.agent.environment import require_be_fair_packages
from engine.coders.llm.prompt_common import PromptSet
from engine.coders.llm.prompts import PROMPT_SETS
from engine.coders.llm.prompts_be_fair import BeFairContext, aide_memory
from engine.coders.protocol import CoderContext
from engine.errors import BefairError

if TYPE_CHECKING:
    from engine.data.be_fair_layout import AgentWorkspace
    from engine.progress import ProgressFn
    from engine.session.state import SessionState


@dataclass(frozen=True)
class TaskProtocol:
    """One task protocol: what its agent is told and given, and the rules its sessions follow."""
    name: str                                   # SessionConfig.protocol
    prompts: PromptSet
    context: Callable[[CoderContext, SessionState], CoderContext]   # the coder's context in this protocol's shape
    data_preview: Callable[[Path], str]         # the data overview, from the agent's input folder
    workspace: Callable[[str, dict[str, int], ProgressFn | None], AgentWorkspace]  # (data, synth settings, progress)
    refused_coders: frozenset[str] = frozenset()  # coders that cannot work on this task (their name)
    reviews_crashes: bool = False               # a crashed run is reviewed too (AIDE's way), not summarised
    closes_output: bool = False                 # a run's output ends with AIDE's execution-time line
    checks_contract: bool = True                # a run that exits 0 without predict() or a printed metric
                                                # fails before any review (engine.agent.contract)
    llm_defaults: Mapping[str, Any] = field(default_factory=dict)   # the LLM coder's settings before any
                                                # file, environment or flag sets them (engine.coders.llm.config)
    test_only: bool = False                     # nothing withheld for validation: measured on the test set,
                                                # blinded while the session runs
    criteria: tuple[str, ...] | None = None     # the criteria that may choose the best node (None: all)
    policy: str | None = None                   # the search policy it imposes (None: the session's)
    check_environment: Callable[[], None] | None = None  # refuses to start when the agent's
                                                # environment lacks what the prompts promise

    def check_coder(self, coder_name: str | None) -> None:
        """BefairError when this protocol's task is not one the named coder can work on."""
        if coder_name in self.refused_coders:
            raise BefairError(f"the {coder_name} coder writes pipelines for the product's own task layout; under "
                              f"the {self.name} protocol use an LLM coder (--coder openai)")

    def allows_criterion(self, criterion: str) -> bool:
        return self.criteria is None or criterion in self.criteria


def _product_context(ctx: CoderContext, state: SessionState) -> CoderContext:
    return ctx


def _aide_context(ctx: CoderContext, state: SessionState) -> CoderContext:
    """AIDE's context: its memory of the good nodes (journal.good_nodes: not buggy, which by AIDE's
    rule means the run raised nothing and the review gave a metric), in the journal's order."""
    good = [(n.plan, n.review_summary or "", n.claimed_metric) for n in sorted(state.nodes.values(),
            key=lambda n: n.node_id) if n.status == "ok" and not n.is_bug and n.claimed_metric is not None]
    return BeFairContext(**vars(ctx), journal_summary=aide_memory(good))


# The study's AIDE config (anna-richter/aideml 989e8e2, the runs' config.yaml): code and feedback
# at temperature 0.5, and no token cap on any reply (AIDE sends no max_tokens)
AIDE_LLM_DEFAULTS: dict[str, Any] = {"temperature": 0.5, "review_temperature": 0.5, "max_tokens": 0,
                                     "review_max_tokens": 0}


def _product_preview(agent_input: Path) -> str:
    from engine.data.preview import data_preview

    return data_preview(agent_input)


def _aide_preview(agent_input: Path) -> str:
    from engine.data.be_fair_layout import aide_data_preview

    return aide_data_preview(agent_input)


def _product_workspace(data: str, synth: dict[str, int], progress: ProgressFn | None) -> AgentWorkspace:
    from engine.data.agent_workspace import workspace_for

    return workspace_for(data, synth, progress)


def _study_workspace(data: str, synth: dict[str, int], progress: ProgressFn | None) -> AgentWorkspace:
    from engine.data.be_fair_layout import workspace_for

    return workspace_for(data, synth, progress)


def _aide_packages() -> None:
    """AIDE's prompt says "all packages are already installed!": they must be (befair[agent])."""
    require_be_fair_packages()


BEFAIR = TaskProtocol(name="befair", prompts=PROMPT_SETS["befair"], context=_product_context,
                      data_preview=_product_preview, workspace=_product_workspace)
BE_FAIR = TaskProtocol(name="be-fair", prompts=PROMPT_SETS["be-fair"], context=_aide_context,
                       data_preview=_aide_preview, workspace=_study_workspace, refused_coders=frozenset({"offline"}),
                       reviews_crashes=True, checks_contract=False, closes_output=True, test_only=True,
                       criteria=("claimed",),
                       policy="aide", check_environment=_aide_packages, llm_defaults=AIDE_LLM_DEFAULTS)
TASK_PROTOCOLS: dict[str, TaskProtocol] = {p.name: p for p in (BEFAIR, BE_FAIR)}


def task_protocol(name: str) -> TaskProtocol:
    """The task protocol a session's settings name (SessionConfig.protocol)."""
    try:
        return TASK_PROTOCOLS[name]
    except KeyError:
        raise BefairError(f"unknown task protocol {name!r}; one of {', '.join(TASK_PROTOCOLS)}") from None


__all__ = ["BEFAIR", "BE_FAIR", "TASK_PROTOCOLS", "TaskProtocol", "task_protocol"]
