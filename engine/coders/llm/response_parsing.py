"""Reading an LLM's reply: plan and code, a review as JSON.

Nothing here raises on a bad reply: the functions return None (or an empty plan) and the coder
turns that into a failed step with a clear error.
"""
from __future__ import annotations

import ast
import json
import math
import re
import textwrap
from dataclasses import dataclass
from typing import Any

_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w+.#-]*)[^\n]*\n", re.MULTILINE)
PY_LANGS = {"", "python", "py", "python3", "py3", "ipython", "sh-session-python"}


@dataclass
class CodeBlock:
    lang: str
    code: str
    start: int        # offset of the opening fence in the reply
    end: int          # offset just after the closing fence (or the end, when unclosed)
    closed: bool


def find_code_blocks(text: str) -> list[CodeBlock]:
    """Fenced blocks in order; an unclosed final fence runs to the end of the text."""
    blocks: list[CodeBlock] = []
    pos = 0
    while True:
        m = _FENCE.search(text, pos)
        if m is None:
            break
        fence, lang = m.group(1), m.group(2).lower()
        body_start = m.end()
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        c = close.search(text, body_start)
        if c is None:
            blocks.append(CodeBlock(lang, text[body_start:], m.start(), len(text), False))
            break
        blocks.append(CodeBlock(lang, text[body_start:c.start()], m.start(), c.end(), True))
        pos = c.end()
    return blocks


def is_valid_python(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def _looks_like_python(code: str) -> bool:
    return bool(re.search(r"^\s*(import |from \S+ import |def |class |if __name__)", code, re.M))


def _has_predict(code: str) -> bool:
    return re.search(r"^def\s+predict\s*\(", code, re.M) is not None


def _has_imports(code: str) -> bool:
    return re.search(r"^(import |from \S+ import )", code, re.M) is not None


def extract_all_code(text: str) -> str | None:
    """All the reply's Python blocks joined, when the result parses (a small model writes one
    function per block, and sometimes indents the blocks under a numbered list); else what
    extract_code finds. For replies that hold parts of a file."""
    blocks = [textwrap.dedent(b.code).rstrip() for b in find_code_blocks(text or "")
              if b.code.strip() and b.lang in PY_LANGS and (b.lang or _looks_like_python(b.code))]
    joined = "\n\n\n".join(blocks)
    return _clean(joined) if blocks and is_valid_python(joined) else extract_code(text)


def extract_code(text: str) -> str | None:
    """The pipeline's code from a reply, or None when there is none.

    Preference: a valid, self-contained Python block (imports and `def predict`; the longest),
    else all Python blocks joined when the result is valid and has `def predict` (replies that
    split a script across blocks, as AIDE joins them), else a valid block with `def predict`,
    else the longest valid Python block, else the longest
    Python-looking block even if it does not parse (the run then shows the SyntaxError and the
    debug step can fix it), else the whole reply when it is bare Python.
    """
    if not text or not text.strip():
        return None
    py_blocks = [
        b for b in find_code_blocks(text)
        if b.code.strip() and b.lang in PY_LANGS and (b.lang or _looks_like_python(b.code))
    ]
    if py_blocks:
        valid = [b for b in py_blocks if is_valid_python(b.code)]
        with_predict = [b for b in valid if _has_predict(b.code)]
        complete = [b for b in with_predict if _has_imports(b.code)]
        if complete:
            return _clean(max(complete, key=lambda b: len(b.code)).code)
        if len(py_blocks) > 1:
            joined = "\n\n".join(b.code.rstrip() for b in py_blocks)
            if is_valid_python(joined) and _has_predict(joined):
                return _clean(joined)
        if with_predict:
            return _clean(max(with_predict, key=lambda b: len(b.code)).code)
        if valid:
            return _clean(max(valid, key=lambda b: len(b.code)).code)
        return _clean(max(py_blocks, key=lambda b: len(b.code)).code)
    if not find_code_blocks(text):
        stripped = text.strip()
        if _looks_like_python(stripped) and is_valid_python(stripped):
            return _clean(stripped)
    return None


def extract_plan(text: str) -> str:
    """The natural-language part: the text before the first code block (else after it)."""
    if not text:
        return ""
    blocks = find_code_blocks(text)
    if not blocks:
        return "" if (_looks_like_python(text) and is_valid_python(text.strip())) else text.strip()
    before = text[: blocks[0].start].strip()
    if before:
        return _strip_headings(before)
    after = text[blocks[-1].end:].strip()
    return _strip_headings(after)


def _strip_headings(text: str) -> str:
    lines = [ln for ln in text.splitlines()
             if not re.fullmatch(r"\s*(#+\s*)?(\*\*)?(plan|solution sketch|implementation|code)"
                                 r"(\*\*)?\s*:?\s*(\*\*)?\s*", ln, re.I)]
    return "\n".join(lines).strip()


def _clean(code: str) -> str:
    return code.strip("\n").rstrip() + "\n"


# -- reviews ---------------------------------------------------------------------------------

def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a reply: a ```json block, the whole text, or the outermost {...}."""
    if not text:
        return None
    candidates: list[str] = []
    for b in find_code_blocks(text):
        if b.lang in ("json", "", "javascript", "js"):
            candidates.append(b.code)
    candidates.append(text)
    first, last = text.find("{"), text.rfind("}")
    if 0 <= first < last:
        candidates.append(text[first : last + 1])
    for cand in candidates:
        try:
            data = json.loads(cand.strip())
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    # Python-style literals (True/False/None, single quotes) from weaker models.
    if 0 <= first < last:
        try:
            data = ast.literal_eval(text[first : last + 1])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
        if isinstance(data, dict):
            return data
    return None


def to_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("true", "yes", "y", "1"):
            return True
        if v in ("false", "no", "n", "0"):
            return False
    return None


def to_metric(value: Any) -> float | None:
    """A finite float, or None (null, 'N/A', NaN, inf, garbage)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        m = re.search(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", value)
        if not m:
            return None
        value = m.group(0)
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def review_from_dict(data: dict[str, Any]) -> tuple[bool, str, float | None] | None:
    """(is_bug, summary, metric) from a submit_review payload, or None when unusable."""
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("arguments"), (dict, str)) and "is_bug" not in data:
        inner = data["arguments"]
        if isinstance(inner, str):
            inner = parse_json_object(inner) or {}
        data = inner
    is_bug = to_bool(data.get("is_bug"))
    if is_bug is None:
        return None
    summary = data.get("summary")
    summary = "" if summary is None else str(summary).strip()
    metric = to_metric(data.get("metric", data.get("claimed_metric")))
    return is_bug, summary, metric



# -- AIDE's reading of a reply (the be-fair protocol: aide/utils/response.py, aide/agent.py) ----

_AIDE_FENCED = re.compile(r"```(python)?\n*(.*?)\n*```", re.DOTALL)
_AIDE_BARE = re.compile(r"^(```(python)?)?\n?(.*?)\n?(```)?$", re.DOTALL)


def aide_extract_code(text: str) -> str:
    """AIDE's extract_code: every ``` or ```python block (else the whole reply) that compiles,
    each formatted by black, joined by a blank line and formatted again; "" when none compiles."""
    blocks = [m[1] for m in _AIDE_FENCED.findall(text)]
    if not blocks:
        bare = _AIDE_BARE.findall(text)
        blocks = [bare[0][2]] if bare else []
    valid = [aide_format_code(code) for code in blocks if _compiles(code)]
    return aide_format_code("\n\n".join(valid))


def aide_extract_plan(text: str) -> str:
    """AIDE's extract_text_up_to_code: the text before the first ``` ("" when there is none)."""
    return text[: text.find("```")].strip() if "```" in text else ""


def _compiles(code: str) -> bool:
    try:
        compile(code, "<string>", "exec")
    except (SyntaxError, ValueError):  # AIDE catches SyntaxError only (a NUL byte would stop its run)
        return False
    return True


def aide_format_code(code: str) -> str:
    """AIDE's format_code: black's default style; the code unchanged when black cannot parse it,
    or when black is not installed (then the join is AIDE's, unformatted: aide_code_formatter says)."""
    try:
        import black
    except ImportError:
        return code
    try:
        return str(black.format_str(code, mode=black.FileMode()))
    except Exception:  # noqa: BLE001 - AIDE catches black's InvalidInput; nothing else may stop a step
        return code


def aide_code_formatter() -> str | None:
    """What formats extracted code as AIDE does ("black 24.3.0"), or None when black is missing."""
    try:
        import black
    except ImportError:
        return None
    return f"black {black.__version__}"


@dataclass(frozen=True)
class AideReview:
    """A submit_review answer read as AIDE reads it (agent.py's parse_exec_result)."""
    is_bug: bool
    summary: str
    metric: float | None            # only a JSON float counts: an int, a string or null is no metric
    lower_is_better: bool

    def verdict(self, exc_type: str | None) -> bool:
        """AIDE's is_buggy: the model says so, the run raised, or there is no metric."""
        return self.is_bug or exc_type is not None or self.metric is None


def aide_review(data: dict[str, Any]) -> AideReview | None:
    """The review in a submit_review payload, by AIDE's rules; None without is_bug (AIDE would stop
    with a KeyError; befair then judges the run from its output)."""
    if not isinstance(data, dict) or "is_bug" not in data:
        return None
    metric = data.get("metric")
    summary = data.get("summary")
    return AideReview(is_bug=bool(data["is_bug"]), summary="" if summary is None else str(summary),
                      metric=metric if isinstance(metric, float) and math.isfinite(metric) else None,
                      lower_is_better=bool(data.get("lower_is_better")))
