"""Prompts of the LLM coder, structured as AIDE structures them (draft, improve, debug, review).

Each prompt is a nested dict of sections compiled to markdown; it goes out as two messages: a
system message with the role (the "Introduction") and a user message with everything else. The
instruction text and the metric line are the study's, verbatim; the human's guidance is a
section of its own, marked as coming from the domain expert. Deterministic: the same context
gives the same prompt (tests/fixtures/prompts/ holds one recorded sequence).
"""
from __future__ import annotations

import functools
from importlib import metadata
from typing import Any

from engine.coders.llm import scaffold
from engine.coders.llm.prompt_common import REVIEW_JSON_FORMAT, PromptSet, guidance_section
from engine.coders.llm.prompt_common import REVIEW_TOOL as REVIEW_TOOL  # the LLM coder's review tool
from engine.coders.llm.prompts_be_fair import (
    AIDE_DEBUG_INTRODUCTION,
    AIDE_DEBUG_SKETCH,
    AIDE_IMPROVE_SKETCH,
    AIDE_PROMPTS,
    AidePrompt,
    aide_compile,
)

# the runner builds AIDE's memory and a be-fair session's context from these
from engine.coders.llm.prompts_be_fair import BeFairContext as BeFairContext
from engine.coders.llm.prompts_be_fair import aide_memory as aide_memory
from engine.coders.protocol import CoderContext, MemoryItem, NodeView
from engine.task import GROUP_LABELS

MAX_OUTPUT_CHARS = 8_000        # execution output shown to the model (the tail is kept)
MAX_PREVIEW_CHARS = 6_000       # data preview shown to the model
MAX_PLAN_CHARS = 1_200          # one remembered plan

ROLE = "You are an expert machine-learning engineer and Kaggle grandmaster."

PIPELINE_CONTRACT = [
    "The solution is a single self-contained Python file. It is saved as `solution.py` and run as "
    "`python solution.py` with the current working directory holding `./input` and `./working`.",
    "`./input` is read-only training data: `./input/skin_lesions.csv` with the columns "
    "image_name, skin_tone, alternative_skin_tone, super_label, label, expert_opinion, and the "
    "images in `./input/images/`, named `image_<N>.jpg` after the image_name column. The images all "
    "lie in that one folder, with no class subfolders (torchvision's ImageFolder cannot read them): "
    "read the CSV and open `./input/images/<image_name>.jpg` for each row. The target is "
    "`label == \"malignant\"`; `label` holds text, not numbers.",
    "Save the trained model and anything else it needs (preprocessing statistics, thresholds) in "
    "`./working`; use `./working` for every other file the code writes too.",
    "When run as a script, the code trains the model, measures it on a hold-out validation split "
    "of the training data that it makes itself and prints the validation AUROC on one line as "
    "`Validation AUROC: <value>` (for example `Validation AUROC: 0.7312`).",
    "Define `predict(folder)` at module level: it takes the path of a folder of images (.jpg or "
    ".png) and returns a dict mapping each image's file name (e.g. `000123.png`) to the predicted "
    "probability (0-1) that the lesion is malignant. It loads the saved model from the `working` "
    "folder next to the module (`os.path.join(os.path.dirname(os.path.abspath(__file__)), "
    "'working')`) and must work when the module is imported, not run.",
    "Put the training under `if __name__ == \"__main__\":` so that importing the module does not "
    "retrain; `predict` must not depend on variables that only the training code sets.",
    "The held-out test images are not available to you; do not look for them.",
]

# The packages a pipeline may want, by distribution name (the name to import in brackets); the
# environment section lists those installed, with versions where APIs drift between releases.
ML_PACKAGES = (("numpy", "numpy"), ("scipy", "scipy"), ("pandas", "pandas"), ("scikit-learn", "sklearn"),
               ("torch", "torch"), ("torchvision", "torchvision"), ("pillow", "PIL"), ("fairlearn", "fairlearn"))
VERSIONED = ("pandas", "scikit-learn", "torch")
NOT_INSTALLED_CHECK = ("xgboost", "lightgbm", "timm", "tensorflow", "opencv-python", "scikit-image")


@functools.lru_cache(maxsize=1)
def installed_versions() -> dict[str, str]:
    """{distribution: version} of the ML packages installed here (the sandbox runs pipelines with
    this Python, so this is the agent's environment)."""
    found = {}
    for dist in (*(d for d, _ in ML_PACKAGES), *NOT_INSTALLED_CHECK):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return found


def environment_text(versions: dict[str, str] | None = None) -> str:
    """Exactly what is installed: the ML packages present (versions for the drifting APIs), the
    common ones that are not, and the hardware rule."""
    versions = installed_versions() if versions is None else versions
    listed = []
    for dist, module in ML_PACKAGES:
        if dist in versions:
            name = f"`{dist}` {versions[dist]}" if dist in VERSIONED else f"`{dist}`"
            listed.append(name + (f" (import {module})" if module != dist else ""))
    missing = [d for d in NOT_INSTALLED_CHECK if d not in versions]
    text = "Installed packages, and only these: " + ", ".join(listed) + "."
    if missing:
        text += " Not installed (do not import them): " + ", ".join(f"`{d}`" for d in missing) + "."
    sk = versions.get("scikit-learn", "")
    if sk and tuple(int(p) for p in sk.split(".")[:2] if p.isdigit()) >= (1, 2):
        text += " In this scikit-learn, `OneHotEncoder` takes `sparse_output=`, not `sparse=`."
    return text + (" Use the GPU when `torch.cuda.is_available()`, otherwise the CPU. The machine has no "
                   "internet access: train without pretrained weights, or fall back to that when they "
                   "cannot be downloaded.")

RESPONSE_FORMAT = (
    "Your response should be a brief outline/sketch of your proposed solution in natural language "
    "(3-5 sentences), followed by a single markdown code block (wrapped in ```python ... ```) which "
    "implements this solution and prints out the evaluation metric. There should be no additional "
    "headings or text in your response. Just natural language text followed by a newline and then "
    "the markdown code block."
)


# -- compiling -------------------------------------------------------------------------------

def compile_md(prompt: Any, level: int = 1) -> str:
    """A nested dict of sections -> markdown (headings for keys, bullets for lists)."""
    if isinstance(prompt, str):
        return prompt.strip() + "\n"
    if isinstance(prompt, list):
        return "".join(f"- {item.strip()}\n" for item in prompt)
    out: list[str] = []
    for key, value in prompt.items():
        out.append(f"{'#' * level} {key}\n\n{compile_md(value, level + 1).rstrip()}\n")
    return "\n".join(out)


def to_messages(prompt: dict[str, Any]) -> list[dict[str, str]]:
    """System message: the Introduction; user message: every other section. A prompt in AIDE's
    shape (the be-fair protocol) goes as AIDE sends it: one system message, no user message."""
    if isinstance(prompt, AidePrompt):
        return [{"role": "system", "content": aide_compile(prompt)}]
    rest = {k: v for k, v in prompt.items() if k != "Introduction"}
    return [
        {"role": "system", "content": str(prompt["Introduction"]).strip()},
        {"role": "user", "content": compile_md(rest).rstrip() + "\n"},
    ]


def fence(text: str, lang: str = "") -> str:
    text = (text or "").rstrip("\n")
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text}\n{ticks}"


def tail(text: str, limit: int) -> str:
    text = text or ""
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} characters omitted ...]\n" + text[-limit:]


# -- sections --------------------------------------------------------------------------------

def task_section(ctx: CoderContext) -> str:
    return f"{ctx.instruction.strip()}\n\nEvaluation metric: {ctx.metric_line.strip()}"


def memory_section(memory: list[MemoryItem], feedback: str = "auc") -> str | None:
    """Earlier nodes: design, review and, as the session's feedback setting allows, what befair measured."""
    if not memory:
        return None
    parts = []
    for m in memory:
        lines = [f"Node {m.node_id} ({m.stage}, {m.status})"]
        plan = (m.plan or "").strip()
        if len(plan) > MAX_PLAN_CHARS:
            plan = plan[:MAX_PLAN_CHARS] + " [...]"
        lines.append(f"Design: {plan or '(no plan)'}")
        if m.summary:
            lines.append(f"Results: {m.summary.strip()}")
        if feedback != "none":
            lines += _memory_measured(m, feedback)
        parts.append("\n".join(lines))
    intro = "Earlier solutions in this search."
    if feedback != "none":
        intro += (" The measured values come from an independent evaluation of each solution's `predict` on "
                  "held-out images, not from the script's output.")
    return intro + "\n\n" + ("\n" + "-" * 20 + "\n").join(parts)


def _memory_measured(m: MemoryItem, feedback: str) -> list[str]:
    if m.measured_auc is None:
        return ["Measured validation AUROC: not available (the evaluation failed)"] if m.status == "ok" else []
    measured = f"Measured validation AUROC: {m.measured_auc:.4f}"
    if feedback == "groups" and m.measured_gap is not None:
        measured += f"; skin-tone AUROC gap (best - worst group): {m.measured_gap:.4f}"
    return [measured]


def implementation_guideline(exec_timeout: float | None) -> list[str]:
    items = [
        "The code should **implement the proposed solution** and **print the value of the "
        "evaluation metric computed on a hold-out validation set**.",
        "No parts of the code should be skipped; don't terminate before finishing the script.",
        "Your response should only contain a single code block.",
    ]
    return items + time_limit(exec_timeout) + PIPELINE_CONTRACT


def time_limit(exec_timeout: float | None) -> list[str]:
    """The guideline line on the step's time limit (none without one)."""
    if not exec_timeout:
        return []
    return [f"Be aware of the running time of the code: it must complete within {_duration(exec_timeout)}."]


def _duration(seconds: float) -> str:
    seconds = float(seconds)
    if seconds >= 3600 and seconds % 3600 == 0:
        n = int(seconds // 3600)
        return f"{n} hour{'s' if n != 1 else ''}"
    if seconds >= 60 and seconds % 60 == 0:
        n = int(seconds // 60)
        return f"{n} minute{'s' if n != 1 else ''}"
    return f"{seconds:g} seconds"


def _with_guidance(prompt: dict[str, Any], ctx: CoderContext, *, include_node: bool) -> None:
    g = guidance_section(ctx, include_node=include_node)
    if g is not None:
        prompt["Guidance from the domain expert"] = g


def _preview(ctx: CoderContext) -> str:
    text = (ctx.data_preview or "").strip() or "(no preview available)"
    if len(text) > MAX_PREVIEW_CHARS:
        text = text[:MAX_PREVIEW_CHARS] + "\n[... preview truncated ...]"
    return text


def _instructions(ctx: CoderContext, sketch_title: str, sketch: list[str],
                  exec_timeout: float | None) -> dict[str, Any]:
    """The Instructions section: the response format, the step's sketch guideline, the pipeline
    contract (with the scaffold: what features() and train() take and give) and the installed
    packages."""
    if ctx.scaffold:
        guideline = scaffold.GUIDELINE + time_limit(exec_timeout)
        return {"Response format": scaffold.RESPONSE_FORMAT, sketch_title: sketch,
                "Implementation guideline": guideline, "Packages": scaffold.packages_text(installed_versions())}
    return {
        "Response format": RESPONSE_FORMAT,
        sketch_title: sketch,
        "Implementation guideline": implementation_guideline(exec_timeout),
        "Installed packages": environment_text(),
    }


def _opening(ctx: CoderContext, introduction: str, *, include_node: bool, with_preview: bool,
             with_memory: bool) -> dict[str, Any]:
    """The sections before the step's own: the role and task, the data, the expert's guidance, the memory."""
    prompt: dict[str, Any] = {"Introduction": f"{ROLE} {introduction}", "Task description": task_section(ctx)}
    if with_preview:
        prompt["Data overview"] = _preview(ctx)
    if ctx.scaffold:
        sc = scaffold.load()
        prompt["Scaffold"] = (f"{scaffold.FRAME_TEXT}\n\n{fence(sc.shown, 'python')}\n\n{scaffold.EXAMPLE_TEXT}\n\n"
                              f"{fence(sc.example, 'python')}")
    _with_guidance(prompt, ctx, include_node=include_node)
    mem = memory_section(ctx.memory, ctx.feedback) if with_memory else None
    if mem:
        prompt["Memory"] = mem
    return prompt


# -- the product's four prompts --------------------------------------------------------------

DRAFT_INTRODUCTION = (
    "In order to solve the task below, you need to come up with an excellent and creative plan for a solution and "
    "then implement this solution in Python. We will now provide a description of the task.")
DRAFT_SKETCH = [
    "This first solution design should be relatively simple, without ensembling or hyper-parameter optimization.",
    "Take the Memory section into consideration when proposing the design; don't propose the same modelling "
    "solution but keep the evaluation the same.",
    "The solution sketch should be 3-5 sentences.",
    "Don't suggest to do EDA.",
    "The data is already prepared and available in the `./input` directory. There is no need to unzip any files.",
]
IMPROVE_INTRODUCTION = (
    "You are provided with a previously developed solution below and should improve it in order to further "
    "increase its (test time) performance. For this you should first outline a brief plan in natural language for "
    "how the solution can be improved and then implement this improvement in Python based on the provided previous "
    "solution.")
# AIDE's own wording (engine.coders.llm.prompts_be_fair), word for word
IMPROVE_SKETCH = AIDE_IMPROVE_SKETCH
SCAFFOLDED_CODE = "Its imports, features(X) and train(X, y, skin_tone), as they ran inside the scaffold above:"
DEBUG_INTRODUCTION = AIDE_DEBUG_INTRODUCTION
DEBUG_SKETCH = AIDE_DEBUG_SKETCH


def _parent_code(ctx: CoderContext, parent: NodeView) -> str:
    """The parent's code; with the scaffold, only the reply's part of it (Scaffold.written)."""
    written = scaffold.load().written(parent.code) if ctx.scaffold else None
    if written is None:
        return fence(parent.code, "python")
    return f"{SCAFFOLDED_CODE}\n\n{fence(written, 'python')}"


def product_draft_prompt(ctx: CoderContext, exec_timeout: float | None = None) -> dict[str, Any]:
    prompt = _opening(ctx, DRAFT_INTRODUCTION, include_node=False, with_preview=True, with_memory=True)
    prompt["Instructions"] = _instructions(ctx, "Solution sketch guideline", DRAFT_SKETCH, exec_timeout)
    return prompt


def product_improve_prompt(ctx: CoderContext, parent: NodeView,
                           exec_timeout: float | None = None) -> dict[str, Any]:
    prompt = _opening(ctx, IMPROVE_INTRODUCTION, include_node=True, with_preview=False, with_memory=True)
    previous: dict[str, Any] = {}
    if parent.plan:
        previous["Plan"] = parent.plan.strip()
    previous["Code"] = _parent_code(ctx, parent)
    measured = _measured_line(parent, ctx.feedback)
    if measured:
        previous["Measured result"] = measured
    prompt[f"Previous solution (node {parent.node_id})"] = previous
    prompt["Instructions"] = _instructions(ctx, "Solution improvement sketch guideline", IMPROVE_SKETCH,
                                           exec_timeout)
    return prompt


def product_debug_prompt(ctx: CoderContext, parent: NodeView,
                         exec_timeout: float | None = None) -> dict[str, Any]:
    prompt = _opening(ctx, DEBUG_INTRODUCTION, include_node=True, with_preview=True, with_memory=False)
    prompt[f"Previous (buggy) implementation (node {parent.node_id})"] = _parent_code(ctx, parent)
    prompt["Execution output"] = _run_status(parent) + "\n\n" + fence(_output(parent))
    prompt["Instructions"] = _instructions(ctx, "Bugfix improvement sketch guideline", DEBUG_SKETCH, exec_timeout)
    return prompt


def product_review_prompt(ctx: CoderContext, node: NodeView, json_only: bool = False) -> dict[str, Any]:
    prompt: dict[str, Any] = {
        "Introduction": (
            f"{ROLE} You have written code to solve the task below and now need to evaluate "
            "the output of the code execution. You should determine if there were any bugs as "
            "well as report the empirical findings."
        ),
        "Task description": task_section(ctx),
        "Implementation": fence(node.code, "python"),
        "Execution output": fence(_output(node)),
    }
    if json_only:
        prompt["Response format"] = REVIEW_JSON_FORMAT
    else:
        prompt["Response format"] = (
            "Call the function `submit_review` with your evaluation. If you cannot call "
            "functions, " + REVIEW_JSON_FORMAT[0].lower() + REVIEW_JSON_FORMAT[1:]
        )
    return prompt


def _output(node: NodeView) -> str:
    return tail(node.output, MAX_OUTPUT_CHARS).strip() or "(the run printed nothing)"


def _run_status(parent: NodeView) -> str:
    status = f"Status: {parent.status}"
    if parent.exc_type:
        status += f"; exception: {parent.exc_type}"
    if parent.eval_failure:
        status += ("\n\nThe script ran, but the independent evaluation failed: it imported the module, called "
                   f"`predict(folder)` on held-out images and got {parent.eval_failure}. Fix predict() so that it "
                   "loads the saved model from ./working and returns {image file name: probability of malignant} "
                   "for every image in the folder.")
    return status


PRODUCT_PROMPTS = PromptSet(draft=product_draft_prompt, improve=product_improve_prompt, debug=product_debug_prompt,
                            review=product_review_prompt)
# Each task protocol's prompt set (engine.agent.task_protocol), by the name its coder context carries
# (CoderContext.protocol): the product's own, or AIDE's as the "Be Fair!" study's agents got them.
PROMPT_SETS: dict[str, PromptSet] = {CoderContext.protocol: PRODUCT_PROMPTS, BeFairContext.protocol: AIDE_PROMPTS}


# -- the four prompts, in the shape of the context's protocol ---------------------------------

def draft_prompt(ctx: CoderContext, exec_timeout: float | None = None) -> dict[str, Any]:
    return PROMPT_SETS[ctx.protocol].draft(ctx, exec_timeout)


def improve_prompt(ctx: CoderContext, parent: NodeView, exec_timeout: float | None = None) -> dict[str, Any]:
    return PROMPT_SETS[ctx.protocol].improve(ctx, parent, exec_timeout)


def debug_prompt(ctx: CoderContext, parent: NodeView, exec_timeout: float | None = None) -> dict[str, Any]:
    return PROMPT_SETS[ctx.protocol].debug(ctx, parent, exec_timeout)


def review_prompt(ctx: CoderContext, node: NodeView, *, json_only: bool = False) -> dict[str, Any]:
    return PROMPT_SETS[ctx.protocol].review(ctx, node, json_only)


def _measured_line(node: NodeView, feedback: str = "auc") -> str | None:
    m = node.measured
    auc = m.auc if m is not None else None
    if m is None or auc is None or feedback == "none":
        return None
    line = f"validation AUROC {float(auc):.4f}"
    if feedback != "groups":
        return line + " (measured independently on held-out images)"
    if m.auc_gap is not None:
        line += f", skin-tone AUROC gap {m.auc_gap:.4f}"
    groups = m.group_auc
    if groups:
        shown = ", ".join(f"{GROUP_LABELS.get(g, g)} {float(v):.3f}"
                          for g, v in sorted(groups.items()) if v is not None)
        if shown:
            line += f" (per group: {shown})"
    return line + " (measured independently on held-out images)"
