"""Prompts of the LLM coder, structured as AIDE structures them (draft, improve, debug, review).

Each prompt is a nested dict of sections compiled to markdown; it goes out as two messages: a
system message with the role (the "Introduction") and a user message with everything else. The
instruction text and the metric line are the study's, verbatim; the human's guidance is a
section of its own, marked as coming from the domain expert. Deterministic: the same context
gives the same prompt (tests/fixtures/prompts/ holds one recorded sequence).
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.agent.coder import CoderContext, MemoryItem, NodeView
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
    from importlib import metadata

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
    if "fairlearn" in versions:
        text += (" fairlearn's metrics are `MetricFrame` and its helpers; for a per-group AUROC, call "
                 "`sklearn.metrics.roc_auc_score` on each group's rows.")
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

GUIDANCE_PREAMBLE = (
    "The following guidance comes from the human domain expert who is steering this search. It "
    "is the expert's, not part of the original task description. Follow it unless it is "
    "impossible, and say in your plan how you follow it."
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


def guidance_section(ctx: CoderContext, *, include_node: bool) -> str | None:
    """The human's guidance in force, marked as the domain expert's; None when there is none."""
    global_items = [g.strip() for g in ctx.guidance_global if g and g.strip()]
    node_items = [g.strip() for g in ctx.guidance_node if g and g.strip()] if include_node else []
    if not global_items and not node_items:
        return None
    parts = [GUIDANCE_PREAMBLE]
    if global_items:
        parts.append("For every step, the domain expert says:\n"
                     + "\n".join(f'- "{g}"' for g in global_items))
    if node_items:
        parts.append("For this step (about the solution below), the domain expert says:\n"
                     + "\n".join(f'- "{g}"' for g in node_items))
    return "\n\n".join(parts)


def memory_section(memory: list[MemoryItem]) -> str | None:
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
        if m.measured_auc is not None:
            measured = f"Measured validation AUROC: {m.measured_auc:.4f}"
            if m.measured_gap is not None:
                measured += f"; skin-tone AUROC gap (best - worst group): {m.measured_gap:.4f}"
            lines.append(measured)
        elif m.status == "ok":
            lines.append("Measured validation AUROC: not available (the evaluation failed)")
        parts.append("\n".join(lines))
    intro = (
        "Earlier solutions in this search. The measured values come from an independent "
        "evaluation of each solution's `predict` on held-out images, not from the script's output."
    )
    return intro + "\n\n" + ("\n" + "-" * 20 + "\n").join(parts)


def implementation_guideline(exec_timeout: float | None) -> list[str]:
    items = [
        "The code should **implement the proposed solution** and **print the value of the "
        "evaluation metric computed on a hold-out validation set**.",
        "No parts of the code should be skipped; don't terminate before finishing the script.",
        "Your response should only contain a single code block.",
    ]
    if exec_timeout:
        items.append(
            f"Be aware of the running time of the code: it must complete within "
            f"{_duration(exec_timeout)}."
        )
    return items + PIPELINE_CONTRACT


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


# -- the four prompts ------------------------------------------------------------------------

def draft_prompt(ctx: CoderContext, exec_timeout: float | None = None) -> dict[str, Any]:
    if isinstance(ctx, BeFairContext):
        return be_fair_draft_prompt(ctx, exec_timeout)
    prompt: dict[str, Any] = {
        "Introduction": (
            f"{ROLE} In order to solve the task below, you need to come up with an excellent "
            "and creative plan for a solution and then implement this solution in Python. We "
            "will now provide a description of the task."
        ),
        "Task description": task_section(ctx),
        "Data overview": _preview(ctx),
    }
    _with_guidance(prompt, ctx, include_node=False)
    mem = memory_section(ctx.memory)
    if mem:
        prompt["Memory"] = mem
    prompt["Instructions"] = {
        "Response format": RESPONSE_FORMAT,
        "Solution sketch guideline": [
            "This first solution design should be relatively simple, without ensembling or "
            "hyper-parameter optimization.",
            "Take the Memory section into consideration when proposing the design; don't propose "
            "the same modelling solution but keep the evaluation the same.",
            "The solution sketch should be 3-5 sentences.",
            "Don't suggest to do EDA.",
            "The data is already prepared and available in the `./input` directory. There is no "
            "need to unzip any files.",
        ],
        "Implementation guideline": implementation_guideline(exec_timeout),
        "Installed packages": environment_text(),
    }
    return prompt


def improve_prompt(ctx: CoderContext, parent: NodeView,
                   exec_timeout: float | None = None) -> dict[str, Any]:
    if isinstance(ctx, BeFairContext):
        return be_fair_improve_prompt(ctx, parent, exec_timeout)
    prompt: dict[str, Any] = {
        "Introduction": (
            f"{ROLE} You are provided with a previously developed solution below and should "
            "improve it in order to further increase its (test time) performance. For this you "
            "should first outline a brief plan in natural language for how the solution can be "
            "improved and then implement this improvement in Python based on the provided "
            "previous solution."
        ),
        "Task description": task_section(ctx),
    }
    _with_guidance(prompt, ctx, include_node=True)
    mem = memory_section(ctx.memory)
    if mem:
        prompt["Memory"] = mem
    previous: dict[str, Any] = {}
    if parent.plan:
        previous["Plan"] = parent.plan.strip()
    previous["Code"] = fence(parent.code, "python")
    measured = _measured_line(parent)
    if measured:
        previous["Measured result"] = measured
    prompt[f"Previous solution (node {parent.node_id})"] = previous
    prompt["Instructions"] = {
        "Response format": RESPONSE_FORMAT,
        "Solution improvement sketch guideline": [
            "The solution sketch should be a brief natural language description of how the "
            "previous solution can be improved.",
            "You should be very specific and should only propose a single actionable improvement.",
            "This improvement should be atomic so that we can experimentally evaluate the effect "
            "of the proposed change.",
            "Take the Memory section into consideration when proposing the improvement.",
            "The solution sketch should be 3-5 sentences.",
            "Don't suggest to do EDA.",
        ],
        "Implementation guideline": implementation_guideline(exec_timeout),
        "Installed packages": environment_text(),
    }
    return prompt


def debug_prompt(ctx: CoderContext, parent: NodeView,
                 exec_timeout: float | None = None) -> dict[str, Any]:
    if isinstance(ctx, BeFairContext):
        return be_fair_debug_prompt(ctx, parent, exec_timeout)
    prompt: dict[str, Any] = {
        "Introduction": (
            f"{ROLE} Your previous solution had a bug, so based on the information below, you "
            "should revise it in order to fix this bug. Your response should be an "
            "implementation outline in natural language, followed by a single markdown code "
            "block which implements the bugfix/solution."
        ),
        "Task description": task_section(ctx),
        "Data overview": _preview(ctx),
    }
    _with_guidance(prompt, ctx, include_node=True)
    prompt[f"Previous (buggy) implementation (node {parent.node_id})"] = fence(parent.code, "python")
    output = tail(parent.output, MAX_OUTPUT_CHARS).strip() or "(the run printed nothing)"
    status = f"Status: {parent.status}"
    if parent.exc_type:
        status += f"; exception: {parent.exc_type}"
    if parent.eval_failure:
        status += ("\n\nThe script ran, but the independent evaluation failed: it imported the module, called "
                   f"`predict(folder)` on held-out images and got {parent.eval_failure}. Fix predict() so that it "
                   "loads the saved model from ./working and returns {image file name: probability of malignant} "
                   "for every image in the folder.")
    prompt["Execution output"] = status + "\n\n" + fence(output)
    prompt["Instructions"] = {
        "Response format": RESPONSE_FORMAT,
        "Bugfix improvement sketch guideline": [
            "You should write a brief natural language description (3-5 sentences) of how the "
            "issue in the previous implementation can be fixed.",
            "Don't suggest to do EDA.",
        ],
        "Implementation guideline": implementation_guideline(exec_timeout),
        "Installed packages": environment_text(),
    }
    return prompt


REVIEW_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "submit_review",
        "description": "Submit a review evaluating the output of the training script.",
        "parameters": {
            "type": "object",
            "properties": {
                "is_bug": {
                    "type": "boolean",
                    "description": "true if the output log shows that the execution failed or "
                    "has some bug, otherwise false.",
                },
                "summary": {
                    "type": "string",
                    "description": "if there is a bug, propose a fix. Otherwise, write a short "
                    "summary (2-3 sentences) describing the empirical findings.",
                },
                "metric": {
                    "type": ["number", "null"],
                    "description": "If the code ran successfully, report the value of the "
                    "validation AUROC it printed. Otherwise, leave it null.",
                },
            },
            "required": ["is_bug", "summary", "metric"],
        },
    },
}

REVIEW_JSON_FORMAT = (
    "Reply with only a JSON object, no other text, of the form "
    '{"is_bug": true or false, "summary": "...", "metric": <number or null>}: is_bug is true if '
    "the output log shows that the execution failed or has some bug; summary proposes a fix if "
    "there is a bug and otherwise describes the empirical findings in 2-3 sentences; metric is "
    "the validation AUROC the code printed, or null if it printed none."
)


def review_prompt(ctx: CoderContext, node: NodeView, *, json_only: bool = False) -> dict[str, Any]:
    if isinstance(ctx, BeFairContext):
        return be_fair_review_prompt(ctx, node, json_only=json_only)
    prompt: dict[str, Any] = {
        "Introduction": (
            f"{ROLE} You have written code to solve the task below and now need to evaluate "
            "the output of the code execution. You should determine if there were any bugs as "
            "well as report the empirical findings."
        ),
        "Task description": task_section(ctx),
        "Implementation": fence(node.code, "python"),
        "Execution output": fence(tail(node.output, MAX_OUTPUT_CHARS).strip()
                                  or "(the run printed nothing)"),
    }
    if json_only:
        prompt["Response format"] = REVIEW_JSON_FORMAT
    else:
        prompt["Response format"] = (
            "Call the function `submit_review` with your evaluation. If you cannot call "
            "functions, " + REVIEW_JSON_FORMAT[0].lower() + REVIEW_JSON_FORMAT[1:]
        )
    return prompt


def _measured_line(node: NodeView) -> str | None:
    m = node.measured or {}
    auc = m.get("auc")
    if auc is None:
        return None
    line = f"validation AUROC {float(auc):.4f}"
    if m.get("auc_gap") is not None:
        line += f", skin-tone AUROC gap {float(m['auc_gap']):.4f}"
    groups = m.get("group_auc") or {}
    if groups:
        shown = ", ".join(f"{GROUP_LABELS.get(g, g)} {float(v):.3f}"
                          for g, v in sorted(groups.items()) if v is not None)
        if shown:
            line += f" (per group: {shown})"
    return line + " (measured independently on held-out images)"


# -- the be-fair protocol: AIDE's own prompts, as the study's agents got them ------------------
#
# Under `--protocol be-fair` an AIDE-style session is told exactly what the study's AIDE was told
# (its aide.log records every prompt): AIDE's sections and wording, its package list (without
# the product's fairlearn), its time and evaluation guideline, the study's config (predict()
# exposed, 5-fold cross-validation), AIDE's memory (the working nodes' design, results and
# reported metric) and AIDE's data overview; all of it in one system message, as AIDE sends it.
# Nothing of the product's own is added: no pipeline contract, no held-out set, no measured
# metric; the expert's guidance, when a human gives some, is the one addition, marked as such.


@dataclass
class BeFairContext(CoderContext):
    """A CoderContext for a session under the be-fair protocol: the prompts take AIDE's shape."""
    journal_summary: str = ""        # AIDE's Memory (aide_memory)
    k_fold_validation: int = 5       # the study's AIDE config
    expose_prediction: bool = True


class AidePrompt(dict[str, Any]):
    """A prompt in AIDE's shape: compiled as AIDE compiles it and sent as one system message."""


AIDE_ROLE = "You are a Kaggle grandmaster attending a competition."
AIDE_PACKAGES = ("numpy", "pandas", "scikit-learn", "statsmodels", "xgboost", "lightGBM", "torch", "torchvision",
                 "torch-geometric", "bayesian-optimization", "timm")
AIDE_RESPONSE_FORMAT = (
    "Your response should be a brief outline/sketch of your proposed solution in natural language (3-5 sentences), "
    "followed by a single markdown code block (wrapped in ```) which implements this solution and prints out the "
    "evaluation metric. There should be no additional headings or text in your response. Just natural language text "
    "followed by a newline and then the markdown code block. "
)
AIDE_MEMORY_SEPARATOR = "\n-------------------------------\n"


def aide_compile(prompt: Any, depth: int = 1) -> str:
    """A prompt compiled to markdown exactly as AIDE does (aide.log holds the result)."""
    if isinstance(prompt, str):
        return prompt.strip() + "\n"
    if isinstance(prompt, list):
        return "\n".join([f"- {item.strip()}" for item in prompt] + ["\n"])
    out: list[str] = []
    for key, value in prompt.items():
        out += [f"{'#' * depth} {key}\n", aide_compile(value, depth + 1)]
    return "\n".join(out)


def aide_memory(nodes: Sequence[tuple[str, str, float | None]]) -> str:
    """AIDE's Memory from the working nodes' (plan, review summary, reported metric)."""
    parts = [f"Design: {plan}\nResults: {summary}\nValidation Metric: {metric}\n" for plan, summary, metric in nodes]
    return AIDE_MEMORY_SEPARATOR.join(parts)


def natural_delta(seconds: float) -> str:
    """A duration as AIDE words its time limit (humanize.naturaldelta: "an hour", "10 minutes")."""
    s = int(seconds)
    for size, one, many in ((86_400, "a day", "days"), (3600, "an hour", "hours"), (60, "a minute", "minutes")):
        if s >= size:
            return one if s < 2 * size else f"{s // size} {many}"
    return "a second" if s == 1 else f"{s} seconds" if s > 1 else "a moment"


def _wrap(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code}\n```"


def _aide_task(ctx: CoderContext) -> dict[str, str]:
    return {"Task goal": ctx.instruction, "Task evaluation": ctx.metric_line}


def _aide_guideline(ctx: CoderContext, exec_timeout: float | None) -> list[str]:
    items = [
        "The code should **implement the proposed solution** and **print the value of the evaluation metric "
        "computed on a hold-out validation set**.",
        "The code should be a single-file python program that is self-contained and can be executed as-is.",
        "No parts of the code should be skipped, don't terminate the before finishing the script.",
        "Your response should only contain a single code block.",
        f"Be aware of the running time of the code, it should complete within {natural_delta(exec_timeout or 3600)}.",
        'All the provided input data is stored in "./input" directory.',
        '**If there is test data provided for this task, please save the test predictions in a `submission.csv` file '
        'in the "./working" directory as described in the task description** This is extremely important since this '
        "file is used for grading/evaluation. DO NOT FORGET THE submission.csv file!",
        'You can also use the "./working" directory to store any temporary files that your code needs to create.',
    ]
    k_fold, expose = (ctx.k_fold_validation, ctx.expose_prediction) if isinstance(ctx, BeFairContext) else (5, True)
    if expose:
        items.append("The implementation should include a predict() function, allowing users to seamlessly reuse "
                     "the code to make predictions on new data. The prediction function should be well-documented, "
                     "especially the function signature.")
    if k_fold > 1:
        items.append(f"The evaluation should be based on {k_fold}-fold cross-validation but only if that's an "
                     "appropriate evaluation for the task at hand.")
    return items


def _aide_packages(ctx: CoderContext) -> str:
    import random

    packages = list(AIDE_PACKAGES)
    random.Random(f"{ctx.seed}:{ctx.step}").shuffle(packages)  # AIDE shuffles them for every prompt
    listed = ", ".join(f"`{p}`" for p in packages)
    return (f"Your solution can use any relevant machine learning packages such as: {listed}. Feel free to use any "
            "other packages too (all packages are already installed!). For neural networks we suggest using PyTorch "
            "rather than TensorFlow.")


def _with_expert(prompt: AidePrompt, ctx: CoderContext, *, include_node: bool) -> AidePrompt:
    g = guidance_section(ctx, include_node=include_node)
    if g is not None:
        prompt["Guidance from the domain expert"] = g
    return prompt


def _memory(ctx: CoderContext) -> str:
    return ctx.journal_summary if isinstance(ctx, BeFairContext) else ""


def be_fair_draft_prompt(ctx: CoderContext, exec_timeout: float | None = None) -> AidePrompt:
    prompt = AidePrompt({
        "Introduction": (f"{AIDE_ROLE} In order to win this competition, you need to come up with an excellent and "
                         "creative plan for a solution and then implement this solution in Python. We will now "
                         "provide a description of the task."),
        "Task description": _aide_task(ctx),
        "Memory": _memory(ctx),
        "Instructions": {
            "Response format": AIDE_RESPONSE_FORMAT,
            "Solution sketch guideline": [
                "This first solution design should be relatively simple, without ensembling or hyper-parameter "
                "optimization.",
                "Take the Memory section into consideration when proposing the design, don't propose the same "
                "modelling solution but keep the evaluation the same.",
                "The solution sketch should be 3-5 sentences.",
                "Propose an evaluation metric that is reasonable for this task.",
                "Don't suggest to do EDA.",
                "The data is already prepared and available in the `./input` directory. There is no need to unzip "
                "any files.",
            ],
            "Implementation guideline": _aide_guideline(ctx, exec_timeout),
            "Installed Packages": _aide_packages(ctx),
        },
        "Data Overview": ctx.data_preview,
    })
    return _with_expert(prompt, ctx, include_node=False)


def be_fair_improve_prompt(ctx: CoderContext, parent: NodeView, exec_timeout: float | None = None) -> AidePrompt:
    prompt = AidePrompt({
        "Introduction": (f"{AIDE_ROLE} You are provided with a previously developed solution below and should improve "
                         "it in order to further increase the (test time) performance. For this you should first "
                         "outline a brief plan in natural language for how the solution can be improved and then "
                         "implement this improvement in Python based on the provided previous solution. "),
        "Task description": _aide_task(ctx),
        "Memory": _memory(ctx),
        "Instructions": {
            "Response format": AIDE_RESPONSE_FORMAT,
            "Solution improvement sketch guideline": [
                "The solution sketch should be a brief natural language description of how the previous solution "
                "can be improved.",
                "You should be very specific and should only propose a single actionable improvement.",
                "This improvement should be atomic so that we can experimentally evaluate the effect of the "
                "proposed change.",
                "Take the Memory section into consideration when proposing the improvement.",
                "The solution sketch should be 3-5 sentences.",
                "Don't suggest to do EDA.",
            ],
            "Implementation guideline": _aide_guideline(ctx, exec_timeout),
        },
        "Previous solution": {"Code": _wrap(parent.code)},
    })
    return _with_expert(prompt, ctx, include_node=True)


def be_fair_debug_prompt(ctx: CoderContext, parent: NodeView, exec_timeout: float | None = None) -> AidePrompt:
    prompt = AidePrompt({
        "Introduction": (f"{AIDE_ROLE} Your previous solution had a bug, so based on the information below, you "
                         "should revise it in order to fix this bug. Your response should be an implementation "
                         "outline in natural language, followed by a single markdown code block which implements "
                         "the bugfix/solution."),
        "Task description": _aide_task(ctx),
        "Previous (buggy) implementation": _wrap(parent.code),
        "Execution output": _wrap(parent.output, lang=""),
        "Instructions": {
            "Response format": AIDE_RESPONSE_FORMAT,
            "Bugfix improvement sketch guideline": [
                "You should write a brief natural language description (3-5 sentences) of how the issue in the "
                "previous implementation can be fixed.",
                "Don't suggest to do EDA.",
            ],
            "Implementation guideline": _aide_guideline(ctx, exec_timeout),
        },
        "Data Overview": ctx.data_preview,
    })
    return _with_expert(prompt, ctx, include_node=True)


def be_fair_review_prompt(ctx: CoderContext, node: NodeView, *, json_only: bool = False) -> AidePrompt:
    prompt = AidePrompt({
        "Introduction": (f"{AIDE_ROLE} You have written code to solve this task and now need to evaluate the output "
                         "of the code execution. You should determine if there were any bugs as well as report the "
                         "empirical findings."),
        "Task description": _aide_task(ctx),
        "Implementation": _wrap(node.code),
        "Execution output": _wrap(node.output, lang=""),
    })
    if json_only:  # AIDE asks through function calling; a server without it needs the format said
        prompt["Response format"] = REVIEW_JSON_FORMAT
    return prompt
