"""Claims: the metric an agent printed, against its run's output and the measured one.

`parse_claimed_metric` is the one reader of a printed AUC (last one wins). `check_claim` marks a
claim unsupported only when the claimed number appears nowhere in the run's output (allowing
rounding to the printed precision and percent forms); a run that crashed or printed nothing, without
the number in its output, is unsupported as before. A claim that differs from the measured metric by
CLAIM_DIFFERENCE_FLAG or more is said so (the console's "≠" badge reads the same constant).
"""
from __future__ import annotations

import math
import re
from typing import Any

# a claim this far (or further) from the measured metric is flagged
CLAIM_DIFFERENCE_FLAG = 0.05


_NUM = r"([-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)\s*(%?)"
_AUC_WORD = r"(?:roc[\s_-]*auc|auc[\s_-]*roc|au[\s_-]?roc|auroc|auc)"
# between the metric's name and its ":" — words, and digits inside words (EfficientNet-B0, ResNet50)
_GAP = r"(?:[^:=\n\d]|(?<=[A-Za-z])\d+){0,60}?"
_CLAIM = re.compile(
    r"(?<![a-z])" + _AUC_WORD + r"(?:[\s_-]*score)?(?![a-z])(?:\s*\([^)\n]{0,40}\))?"
    r"(?:" + _GAP + r"[:=]|\s+(?:is|of|was|reached|achieved)\s+(?:about\s+|approximately\s+|~)?|\s*->)"
    r"\s*" + _NUM,
    re.IGNORECASE,
)
_PER_GROUP_LINE = re.compile(r"(group|skin|tone|fitz|type\s+[ivx]|gap|worst|best\s+group|class\s+\d)", re.I)
_ANY_NUMBER = re.compile(r"(?<![\w.])([-+]?(?:\d+\.\d*|\.\d+|\d+))(?:[eE]([-+]?\d+))?\s*(%?)")


def parse_claimed_metric(output: str | list[str] | None) -> float | None:
    """The AUC a run printed, the last one winning ("Validation AUC: 0.81", "val_auc=0.8",
    "AUROC: 0.79", "Final Validation AUROC: 0.8", "ROC AUC score is 81.2%"). Per-group, gap and
    worst-group lines are not claims of the headline metric."""
    if output is None:
        return None
    if isinstance(output, (list, tuple)):
        output = "".join(str(x) for x in output)
    if output.strip() == "<OMITTED>":
        return None
    found: float | None = None
    for line in output.splitlines():
        if _PER_GROUP_LINE.search(line):
            continue
        for m in _CLAIM.finditer(line):
            try:
                value = float(m.group(1))
            except ValueError:
                continue
            if m.group(2) == "%" or 1.0 < value <= 100.0:
                value /= 100.0
            if 0.0 <= value <= 1.0 and not math.isnan(value):
                found = value
    return found


def _decimals(text: str) -> int:
    return len(text.split(".", 1)[1]) if "." in text else 0


def _claim_decimals(value: float) -> int:
    text = repr(float(value))
    if "e" in text or "E" in text:
        return 10
    return min(_decimals(text.rstrip("0")) if "." in text else 0, 10)


def claimed_number_in_output(claimed: float, output: str) -> str | None:
    """The printed number that backs a claim, or None.

    A printed number backs the claim when they agree to the coarser of the two precisions (a
    claim of 0.9145 is backed by "0.91" and by "0.9145"; a claim of 0.91 by "0.9145"), directly or
    as a percent ("91.45%" or "91.45" backs 0.9145; "0.9145" backs a claim of 91.45)."""
    c = float(claimed)
    cd = _claim_decimals(c)
    for m in _ANY_NUMBER.finditer(output or ""):
        mant, exp, pct = m.group(1), m.group(2), m.group(3)
        try:
            v = float(mant + (f"e{exp}" if exp else ""))
        except ValueError:
            continue
        d = _decimals(mant) - (int(exp) if exp else 0)
        candidates = [(v, d)]
        if pct or (1.0 < abs(v) <= 100.0 and "." in mant):  # "91.45%", "91.45" (not "90 images")
            candidates.append((v / 100.0, d + 2))
        if 1.0 < abs(c) <= 100.0 and abs(v) <= 1.0:
            candidates.append((v * 100.0, d - 2))
        for value, digits in candidates:
            if digits < 1 and abs(value) < 10:  # "5" (an epoch count) backs no AUC
                continue
            tol = 0.5 * 10 ** (-min(max(digits, 0), cd if cd >= 2 else max(digits, 0))) + 1e-9
            if abs(value - c) <= tol:
                return m.group(0).strip()
    return None


def check_claim(claimed: float | None, measured: float | None, *, ran_ok: bool,
                output: str | list[str] | None) -> dict[str, Any]:
    """Claimed vs measured, for the `audited` event's `claim`.

    A claim is unsupported only when the claimed number appears nowhere in the run's output
    (rounding to the printed precision and percent forms allowed): the number cannot come from
    that code. A run that crashed or printed nothing without the number is unsupported as before.
    An omitted output (an imported journal without it) cannot be checked and is not flagged.
    """
    if isinstance(output, (list, tuple)):
        output = "".join(str(x) for x in output)
    text = (output or "").strip()
    omitted = text == "<OMITTED>"
    difference = None if claimed is None or measured is None else float(claimed) - float(measured)
    out: dict[str, Any] = {"claimed": claimed, "measured": measured, "difference": difference,
                           "unsupported": False, "reason": None}
    if claimed is None:
        out["reason"] = "no metric claimed"
        return out
    printed = None if omitted else claimed_number_in_output(float(claimed), text)
    if printed is None and not omitted:
        if not ran_ok:
            out.update(unsupported=True, reason=f"claimed {claimed:.4g} but the run crashed or did not finish")
        elif not text:
            out.update(unsupported=True, reason=f"claimed {claimed:.4g} but the run produced no output")
        else:
            out.update(unsupported=True, reason=f"claimed {claimed:.4g} but the output never prints that number")
        return out
    if omitted and not ran_ok:
        out.update(unsupported=True, reason=f"claimed {claimed:.4g} but the run crashed or did not finish")
        return out
    if measured is None:
        out["reason"] = "nothing measured to compare with"
    elif difference is not None and abs(difference) >= CLAIM_DIFFERENCE_FLAG:  # claimed and measured are known here
        out["reason"] = f"claimed {claimed:.3f}, measured {measured:.3f} ({difference:+.3f})"
    return out
