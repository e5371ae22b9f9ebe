"""`befair prompts`: what a session's agent would be sent at each stage, and the audit of it."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from engine.agent.session_config import SessionConfig
from engine.agent.settings import OPTIONS, help_text
from engine.errors import BefairError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "prompts", help="print what the agent would be sent at each stage, and audit it",
        description="Build the prompts a session with these settings would send its agent (draft, improve, "
                    "debug, review), from an example session of two earlier nodes, one measured with every figure "
                    "(skin-tone groups included) and one failed, through the runner's own code. --audit lists any "
                    "word about skin tone, groups or fairness outside the instruction, the expert's guidance and "
                    "the data overview, and exits 1 when there is one.")
    for name in ("level", "custom_text", "protocol", "feedback", "best"):
        OPTIONS[name].add_to(p, help_text=help_text(OPTIONS[name]))
    p.add_argument("--scaffold", action="store_true", help="the LLM coder's scaffold (befair protocol only)")
    OPTIONS["guidance"].add_to(p, help_text="expert guidance in force")
    p.add_argument("--stage", choices=["draft", "improve", "debug", "review", "all"], default="all")
    for name in ("data", "synth_n_train", "synth_n_test", "synth_size", "step_timeout"):
        OPTIONS[name].add_to(p, help_text=help_text(OPTIONS[name]))
    p.add_argument("--audit", action="store_true", help="print the audit's findings only; exit 1 when there are any")
    p.add_argument("--json", action="store_true", help="the prompts (and findings) as JSON")
    p.set_defaults(func=prompts_command)


def _config(args: argparse.Namespace) -> SessionConfig:
    from engine.agent.task_protocol import task_protocol

    criteria = task_protocol(args.protocol).criteria
    best = args.best or (criteria[0] if criteria else None)
    synth = {k: v for k, v in (("n_train", args.synth_n_train), ("n_test", args.synth_n_test),
                               ("size", args.synth_size)) if v is not None}
    kw: dict[str, Any] = {"level": args.level, "custom_text": args.custom_text, "protocol": args.protocol,
                          "feedback": args.feedback, "data": args.data, "step_timeout": args.step_timeout or 0.0,
                          "extra": {"synth": synth} if args.data == "synth" else {}}
    if best:
        kw["best"] = best
    try:
        return SessionConfig(**kw)
    except ValueError as exc:
        raise BefairError(str(exc)) from None


def data_preview(config: SessionConfig) -> str:
    """The data overview the session's agent would get, from the workspace its settings name."""
    from engine.agent.session_setup import resolve_workspace
    from engine.agent.task_protocol import task_protocol

    workspace = resolve_workspace(config)
    return task_protocol(config.protocol).data_preview(Path(workspace.agent_input))


def prompts_command(args: argparse.Namespace) -> int:
    from engine.agent.prompt_audit import EXAMPLE_NOTE, audit, stage_prompts

    config = _config(args)
    built = stage_prompts(config, data_preview(config), scaffold=args.scaffold, guidance=tuple(args.guidance))
    chosen = [p for p in built if args.stage in ("all", p.stage)]
    findings = audit(chosen)
    if args.json:
        print(json.dumps({"settings": _settings(config, args), "example": EXAMPLE_NOTE, "prompts": [
            {"stage": p.stage, "messages": p.messages} for p in chosen], "findings": [str(f) for f in findings]},
            indent=2))
    elif args.audit:
        _print_audit(config, args, findings)
    else:
        print(f"# {EXAMPLE_NOTE}")
        for p in chosen:
            print(f"===== {p.stage} =====\n{p.text}")
    return 1 if args.audit and findings else 0


def _settings(config: SessionConfig, args: argparse.Namespace) -> dict[str, Any]:
    return {"level": config.level, "protocol": config.protocol, "feedback": config.feedback, "best": config.best,
            "scaffold": bool(args.scaffold), "guidance": list(args.guidance)}


def _print_audit(config: SessionConfig, args: argparse.Namespace, findings: list[Any]) -> None:
    head = ", ".join(f"{k} {v}" for k, v in _settings(config, args).items() if v not in ([], None))
    if not findings:
        print(f"{head}: no word about skin tone, groups or fairness outside the instruction, the guidance and "
              "the data overview")
        return
    print(f"{head}: {len(findings)} line(s) about skin tone, groups or fairness:")
    for f in findings:
        print(f"  {f}")
