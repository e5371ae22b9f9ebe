"""The be-fair protocol's prompts: AIDE's own, as the study's agents got them.

Under `--protocol be-fair` an AIDE-style session is told exactly what the study's AIDE was told
(its aide.log records every prompt): AIDE's sections and wording, its package list (without
the product's fairlearn), its time and evaluation guideline, the study's config (predict()
exposed, 5-fold cross-validation), AIDE's memory (the working nodes' design, results and
reported metric) and AIDE's data overview; all of it in one system message, as AIDE sends it.
Nothing of the product's own is added: no pipeline contract, no held-out set, no measured
metric; the expert's guidance, when a human gives some, is the one addition, marked as such.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from engine.coders.llm.prompt_common import PromptSet, guidance_section
from engine.coders.protocol import CoderContext, NodeView


@dataclass
class BeFairContext(CoderContext):
    """A CoderContext for a session under the be-fair protocol: the prompts take AIDE's shape."""
    protocol: ClassVar[str] = "be-fair"
    scaffoldable: ClassVar[bool] = False   # AIDE's prompts, byte for byte: never the scaffold
    journal_summary: str = ""        # AIDE's Memory (aide_memory)
    k_fold_validation: int = 5       # the study's AIDE config
    expose_prediction: bool = True
    packages: tuple[str, ...] | None = None   # the Installed Packages in a given order (replaying a
                                              # recorded prompt); None: shuffled, as AIDE does

    @classmethod
    def of(cls, ctx: CoderContext) -> BeFairContext:
        """`ctx` with AIDE's settings: its own, or the study's defaults for a context without them."""
        return ctx if isinstance(ctx, BeFairContext) else cls(**vars(ctx))


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
    """A duration as AIDE words its time limit: humanize.naturaldelta (4.8, months=True) for a
    whole number of seconds ("an hour", "10 minutes", "1 year, 2 months")."""
    days, secs = divmod(abs(int(seconds)), 86_400)
    years, days = divmod(days, 365)
    months = int(days // 30.5)
    if not years and not days:
        return _seconds_words(secs)
    if not years:
        return "a day" if days == 1 else _plural(days, "day") if not months else \
            "a month" if months == 1 else _plural(months, "month")
    if years == 1:
        if not months:
            return "a year" if not days else f"1 year, {_plural(days, 'day')}"
        return f"1 year, {_plural(months, 'month')}"
    return f"{years:,} years"


def _seconds_words(s: int) -> str:
    for size, one, unit in ((3600, "an hour", "hour"), (60, "a minute", "minute"), (1, "a second", "second")):
        if s >= size:
            return one if s < 2 * size else _plural(s // size, unit)
    return "a moment"


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def _wrap(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code}\n```"


def trim_output(text: str, threshold: int = 5100, keep: int = 2500) -> str:
    """An execution output as AIDE shows it (its trim_long_string): over `threshold` characters,
    the first and last `keep` with the number cut between them."""
    if len(text) <= threshold:
        return text
    return f"{text[:keep]}\n ... [{len(text) - 2 * keep} characters truncated] ... \n{text[-keep:]}"


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
    aide = BeFairContext.of(ctx)
    k_fold, expose = aide.k_fold_validation, aide.expose_prediction
    if expose:
        items.append("The implementation should include a predict() function, allowing users to seamlessly reuse "
                     "the code to make predictions on new data. The prediction function should be well-documented, "
                     "especially the function signature.")
    if k_fold > 1:
        items.append(f"The evaluation should be based on {k_fold}-fold cross-validation but only if that's an "
                     "appropriate evaluation for the task at hand.")
    return items


def _aide_packages(ctx: CoderContext) -> str:

    given = BeFairContext.of(ctx).packages
    packages = list(given) if given is not None else list(AIDE_PACKAGES)
    if given is None:  # AIDE shuffles them for every prompt (with its global generator)
        random.Random(f"{ctx.seed}:{ctx.step}").shuffle(packages)
    listed = ", ".join(f"`{p}`" for p in packages)
    return (f"Your solution can use any relevant machine learning packages such as: {listed}. Feel free to use any "
            "other packages too (all packages are already installed!). For neural networks we suggest using PyTorch "
            "rather than TensorFlow.")


def _with_expert(prompt: AidePrompt, ctx: CoderContext, *, include_node: bool) -> AidePrompt:
    g = guidance_section(ctx, include_node=include_node)
    if g is not None:
        prompt["Guidance from the domain expert"] = g
    return prompt


def _aide_instructions(ctx: CoderContext, exec_timeout: float | None, sketch_title: str,
                       sketch: list[str]) -> dict[str, Any]:
    """AIDE's Instructions section: its response format, the step's sketch guideline, its implementation guideline."""
    return {"Response format": AIDE_RESPONSE_FORMAT, sketch_title: sketch,
            "Implementation guideline": _aide_guideline(ctx, exec_timeout)}


def _memory(ctx: CoderContext) -> str:
    return BeFairContext.of(ctx).journal_summary


# AIDE's wording of each step, verbatim (aide.log)
AIDE_DRAFT_INTRODUCTION = (
    "In order to win this competition, you need to come up with an excellent and creative plan for a solution and "
    "then implement this solution in Python. We will now provide a description of the task.")
AIDE_DRAFT_SKETCH = [
    "This first solution design should be relatively simple, without ensembling or hyper-parameter optimization.",
    "Take the Memory section into consideration when proposing the design, don't propose the same modelling "
    "solution but keep the evaluation the same.",
    "The solution sketch should be 3-5 sentences.",
    "Propose an evaluation metric that is reasonable for this task.",
    "Don't suggest to do EDA.",
    "The data is already prepared and available in the `./input` directory. There is no need to unzip any files.",
]
AIDE_IMPROVE_INTRODUCTION = (
    "You are provided with a previously developed solution below and should improve it in order to further "
    "increase the (test time) performance. For this you should first outline a brief plan in natural language for "
    "how the solution can be improved and then implement this improvement in Python based on the provided previous "
    "solution. ")
AIDE_IMPROVE_SKETCH = [
    "The solution sketch should be a brief natural language description of how the previous solution can be "
    "improved.",
    "You should be very specific and should only propose a single actionable improvement.",
    "This improvement should be atomic so that we can experimentally evaluate the effect of the proposed change.",
    "Take the Memory section into consideration when proposing the improvement.",
    "The solution sketch should be 3-5 sentences.",
    "Don't suggest to do EDA.",
]
AIDE_DEBUG_INTRODUCTION = (
    "Your previous solution had a bug, so based on the information below, you should revise it in order to fix this "
    "bug. Your response should be an implementation outline in natural language, followed by a single markdown code "
    "block which implements the bugfix/solution.")
AIDE_DEBUG_SKETCH = [
    "You should write a brief natural language description (3-5 sentences) of how the issue in the previous "
    "implementation can be fixed.",
    "Don't suggest to do EDA.",
]


def be_fair_draft_prompt(ctx: CoderContext, exec_timeout: float | None = None) -> AidePrompt:
    instructions = _aide_instructions(ctx, exec_timeout, "Solution sketch guideline", AIDE_DRAFT_SKETCH)
    instructions["Installed Packages"] = _aide_packages(ctx)
    prompt = AidePrompt({"Introduction": f"{AIDE_ROLE} {AIDE_DRAFT_INTRODUCTION}", "Task description": _aide_task(ctx),
                         "Memory": _memory(ctx), "Instructions": instructions, "Data Overview": ctx.data_preview})
    return _with_expert(prompt, ctx, include_node=False)


def be_fair_improve_prompt(ctx: CoderContext, parent: NodeView, exec_timeout: float | None = None) -> AidePrompt:
    prompt = AidePrompt({
        "Introduction": f"{AIDE_ROLE} {AIDE_IMPROVE_INTRODUCTION}",
        "Task description": _aide_task(ctx),
        "Memory": _memory(ctx),
        "Instructions": _aide_instructions(ctx, exec_timeout, "Solution improvement sketch guideline",
                                           AIDE_IMPROVE_SKETCH),
        "Previous solution": {"Code": _wrap(parent.code)},
    })
    return _with_expert(prompt, ctx, include_node=True)


def be_fair_debug_prompt(ctx: CoderContext, parent: NodeView, exec_timeout: float | None = None) -> AidePrompt:
    return _with_expert(AidePrompt({
        "Introduction": f"{AIDE_ROLE} {AIDE_DEBUG_INTRODUCTION}",
        "Task description": _aide_task(ctx),
        "Previous (buggy) implementation": _wrap(parent.code),
        "Execution output": _wrap(trim_output(parent.output), lang=""),
        "Instructions": _aide_instructions(ctx, exec_timeout, "Bugfix improvement sketch guideline", AIDE_DEBUG_SKETCH),
        "Data Overview": ctx.data_preview,
    }), ctx, include_node=True)


# AIDE's review function (agent.py's review_func_spec, as the OpenAI backend sends it), verbatim
AIDE_REVIEW_FIELDS: dict[str, tuple[str, str]] = {
    "is_bug": ("boolean", "true if the output log shows that the execution failed or has some bug, otherwise false."),
    "summary": ("string", "if there is a bug, propose a fix. Otherwise, write a short summary (2-3 sentences) "
                          "describing the empirical findings."),
    "metric": ("number", "If the code ran successfully, report the value of the validation metric. Otherwise, "
                         "leave it null."),
    "lower_is_better": ("boolean", "true if the metric should be minimized (i.e. a lower metric value is better, "
                                   "such as with MSE), false if the metric should be maximized (i.e. a higher metric "
                                   "value is better, such as with accuracy)."),
}
AIDE_REVIEW_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "submit_review",
        "description": "Submit a review evaluating the output of the training script.",
        "parameters": {
            "type": "object",
            "properties": {name: {"type": kind, "description": words}
                           for name, (kind, words) in AIDE_REVIEW_FIELDS.items()},
            "required": list(AIDE_REVIEW_FIELDS),
        },
    },
}
# Not AIDE's: a server without function calling is told the same fields in words
AIDE_REVIEW_JSON_FORMAT = (
    "Reply with only a JSON object, no other text, with these keys: "
    + " ".join(f"{name} ({kind}): {words}" for name, (kind, words) in AIDE_REVIEW_FIELDS.items())
)


def be_fair_review_prompt(ctx: CoderContext, node: NodeView, json_only: bool = False) -> AidePrompt:
    prompt = AidePrompt({
        "Introduction": (f"{AIDE_ROLE} You have written code to solve this task and now need to evaluate the output "
                         "of the code execution. You should determine if there were any bugs as well as report the "
                         "empirical findings."),
        "Task description": _aide_task(ctx),
        "Implementation": _wrap(node.code),
        "Execution output": _wrap(trim_output(node.output), lang=""),
    })
    if json_only:  # AIDE asks through function calling; a server without it needs the format said
        prompt["Response format"] = AIDE_REVIEW_JSON_FORMAT
    return prompt


AIDE_PROMPTS = PromptSet(draft=be_fair_draft_prompt, improve=be_fair_improve_prompt, debug=be_fair_debug_prompt,
                         review=be_fair_review_prompt, review_tool=AIDE_REVIEW_TOOL)


def aide_closing_line(status: str, exec_time: float, timeout: float) -> str:
    """The line AIDE's interpreter ends every run's output with (its term_out), words and quirks
    as they are ("Execution time: 5 seconds seconds (time limit is an hour).")."""
    if status == "timeout":
        return f"TimeoutError: Execution exceeded the time limit of {natural_delta(timeout)}"
    return f"Execution time: {natural_delta(exec_time)} seconds (time limit is {natural_delta(timeout)})."
