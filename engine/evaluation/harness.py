"""The evaluation harness: run a node's `predict(folder)` in its own process and score it here.

The pipeline contract: a node's ``solution.py`` trains when run as a script and defines
``predict(folder) -> {filename: probability}`` (a DataFrame with a filename and a probability
column is accepted too).

`evaluate` stages the held-out images (hard links, no labels) in a temporary folder, starts
``python -m engine.evaluation.harness_worker`` with cwd = the node's directory in its own process
group (killed as a group on timeout), reads the predictions the worker wrote, and scores them
against the labels, which stay in this process. Every failure becomes a verdict, never an
exception: ok, no_predict, import_error, exception, timeout, missing_files, extra_files, nan,
out_of_range, wrong_type.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from engine.data.common import read_csv
from engine.errors import DataError
from engine.evaluation.harness_worker import normalise
from engine.evaluation.metrics import MetricSet, compute_metrics
from engine.task import DDI_SKIN_TONE_TO_GROUP

VERDICTS = (
    "ok", "no_predict", "import_error", "exception", "timeout", "missing_files", "extra_files",
    "nan", "out_of_range", "wrong_type",
)
_REPO_ROOT = str(Path(__file__).resolve().parents[2])
_LOG_TAIL = 2000


@dataclass
class EvalOutcome:
    ok: bool
    verdict: str
    reason: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    medfair: dict[str, Any] = field(default_factory=dict)
    predictions: dict[str, float] = field(default_factory=dict)
    elapsed: float = 0.0
    metrics: MetricSet | None = None
    log_tail: str = ""

    def event_payload(self, node_id: int, split: str, *, blinded: bool = False) -> dict[str, Any]:
        """The payload of an `evaluated` event (see engine.session.events)."""
        summary = self.summary or {"group_auc": {}, "group_auc_reason": {}, "n": 0}
        return {
            "node_id": node_id,
            "split": split,
            "ok": self.ok,
            "verdict": self.verdict,
            "reason": self.reason,
            "summary": summary,
            "medfair": self.medfair,
            "blinded": blinded,
        }


# --------------------------------------------------------------------------- labels and scoring


def load_labels(labels: str | os.PathLike | pd.DataFrame) -> pd.DataFrame:
    """Held-out labels as a DataFrame (file, label 0/1, group).

    Accepts the workspace format (file,label,group[,skin_tone]) and DDI metadata
    (DDI_file,skin_tone,malignant).
    """
    if isinstance(labels, pd.DataFrame):
        df, where = labels, "labels"
    else:
        where = str(labels)
        df = read_csv(labels, "labels")
    cols = set(df.columns)
    if {"file", "label", "group"} <= cols:
        out = pd.DataFrame({"file": df["file"].astype(str), "label": df["label"], "group": df["group"].astype(str)})
    elif {"DDI_file", "malignant", "skin_tone"} <= cols:
        tones = pd.to_numeric(df["skin_tone"], errors="coerce")
        unknown = sorted(set(df.loc[~tones.isin(list(DDI_SKIN_TONE_TO_GROUP)), "skin_tone"].astype(str)))
        if unknown:
            raise DataError(f"{where}: unknown skin_tone value(s) {', '.join(unknown[:5])} (expected 12, 34, 56)")
        out = pd.DataFrame({
            "file": df["DDI_file"].astype(str),
            "label": df["malignant"],
            "group": tones.astype(int).map(DDI_SKIN_TONE_TO_GROUP),
        })
    else:
        raise DataError(
            f"{where}: expected columns file,label,group (workspace) or DDI_file,malignant,skin_tone "
            f"(DDI); found {', '.join(map(str, df.columns))}"
        )
    lab = out["label"]
    if lab.dtype == object:
        lab = lab.astype(str).str.strip().str.lower().map(
            {"true": 1, "false": 0, "1": 1, "0": 0, "malignant": 1, "benign": 0, "1.0": 1, "0.0": 0})
    lab = pd.to_numeric(lab, errors="coerce")
    if lab.isna().any() or not lab.isin([0, 1]).all():
        bad = out.loc[lab.isna() | ~lab.isin([0, 1]), "file"].head(3).tolist()
        raise DataError(f"{where}: labels must be 0/1 (or True/False); bad rows: {', '.join(bad)}")
    out["label"] = lab.astype(int)
    if out["file"].duplicated().any():
        dup = out.loc[out["file"].duplicated(), "file"].head(3).tolist()
        raise DataError(f"{where}: duplicate file names: {', '.join(dup)}")
    return out.reset_index(drop=True)


def _names(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(sorted(names)[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def score_predictions(
    predictions: Mapping[str, Any] | pd.DataFrame, labels_csv: str | os.PathLike | pd.DataFrame
) -> tuple[str, str | None, MetricSet | None]:
    """(verdict, reason, metrics) for predictions against held-out labels; never raises on bad
    predictions (bad labels are a DataError: that is the engine's problem, not the node's)."""
    labels = load_labels(labels_csv)
    verdict, reason, preds = normalise(predictions)
    if verdict != "ok" or preds is None:
        return verdict, reason, None
    expected = set(labels["file"])
    missing = sorted(expected - set(preds))
    extra = sorted(set(preds) - expected)
    if extra:
        also = f"; {len(missing)} held-out image(s) have none" if missing else ""
        return "extra_files", f"{len(extra)} prediction(s) for unknown images ({_names(extra)}){also}", None
    if missing:
        return "missing_files", f"no prediction for {len(missing)} of {len(expected)} images ({_names(missing)})", None
    scores = [preds[f] for f in labels["file"]]
    nan = [f for f, s in zip(labels["file"], scores) if math.isnan(s)]
    if nan:
        return "nan", f"{len(nan)} prediction(s) are NaN ({_names(nan)})", None
    bad = [f for f, s in zip(labels["file"], scores) if not 0.0 <= s <= 1.0]
    if bad:
        example = preds[sorted(bad)[0]]
        return "out_of_range", f"{len(bad)} prediction(s) outside [0, 1] (e.g. {sorted(bad)[0]}: {example:.4g})", None
    return "ok", None, compute_metrics(labels["label"].to_numpy(), scores, labels["group"].tolist())


# --------------------------------------------------------------------------- the process


def _stage_images(src: Path, dst: Path) -> int:
    """Hard-link (or copy) the image files of src into dst: a folder holding nothing else."""
    dst.mkdir(parents=True)
    n = 0
    for entry in os.scandir(src):
        if not entry.is_file() or entry.name.startswith("."):
            continue
        if entry.name.lower().endswith((".csv", ".json", ".txt")):
            continue  # never let anything label-like through
        target = dst / entry.name
        try:
            os.link(entry.path, target)
        except OSError:
            shutil.copy2(entry.path, target)
        n += 1
    return n


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - _LOG_TAIL))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover
        proc.kill()


def _env(device: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_REPO_ROOT, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    if device:
        env["BEFAIR_DEVICE"] = device
        if device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def evaluate(
    node_dir: str | os.PathLike,
    solution_file: str | os.PathLike,
    images_dir: str | os.PathLike,
    labels_csv: str | os.PathLike | pd.DataFrame,
    *,
    timeout: float = 600,
    device: str | None = None,
    python: str = sys.executable,
) -> EvalOutcome:
    """Import the node's solution in a separate process, call predict on the held-out images and
    score the result. GPUs stay visible unless device == "cpu"."""
    return evaluate_splits(node_dir, solution_file, {"split": (images_dir, labels_csv)},
                           timeout=timeout, device=device, python=python)["split"]


def evaluate_splits(
    node_dir: str | os.PathLike,
    solution_file: str | os.PathLike,
    splits: Mapping[str, tuple[str | os.PathLike, str | os.PathLike | pd.DataFrame]],
    *,
    timeout: float = 600,
    device: str | None = None,
    python: str = sys.executable,
) -> dict[str, EvalOutcome]:
    """`evaluate` for several held-out sets ({name: (images_dir, labels)}) with ONE import of the
    solution: the process start, imports and model load are paid once. `timeout` covers them all;
    the splits predicted before it ran out keep their results."""
    started = time.perf_counter()
    node_dir = Path(node_dir).resolve()
    solution = Path(solution_file)
    if not solution.is_absolute():
        solution = node_dir / solution
    labels = {name: load_labels(lab) for name, (_, lab) in splits.items()}  # DataErrors are the engine's

    def done(verdict: str, reason: str | None, *, preds=None, metrics=None, log="") -> EvalOutcome:
        return EvalOutcome(
            ok=verdict == "ok",
            verdict=verdict,
            reason=reason,
            summary=metrics.summary() if metrics else {},
            medfair=metrics.medfair() if metrics else {},
            predictions=preds or {},
            elapsed=time.perf_counter() - started,
            metrics=metrics,
            log_tail=log,
        )

    if not solution.is_file():
        return {name: done("import_error", f"no solution file at {solution.name}") for name in splits}
    for images_dir, _ in splits.values():
        if not Path(images_dir).is_dir():
            raise DataError(f"held-out images folder not found: {images_dir}")

    tmp = Path(tempfile.mkdtemp(prefix="befair-eval-"))
    try:
        cmd = [python, "-m", "engine.evaluation.harness_worker", "--solution", str(solution)]
        outputs: dict[str, Path] = {}
        for i, (name, (images_dir, _)) in enumerate(splits.items()):
            staged, outputs[name] = tmp / f"images_{i}", tmp / f"predictions_{i}.json"
            _stage_images(Path(images_dir), staged)
            cmd += ["--task", str(staged), str(outputs[name])]
        log_file = tmp / "worker.log"
        timed_out, code = False, None
        with open(log_file, "wb") as log:
            proc = subprocess.Popen(cmd, cwd=node_dir, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=_env(device), start_new_session=True)
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                timed_out = True
            except BaseException:
                _kill_group(proc)
                raise
        log_text = _tail(log_file)
        return {name: _outcome(outputs[name], labels[name], done, log_text, code, timed_out, timeout)
                for name in splits}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _outcome(out_file: Path, labels: pd.DataFrame, done, log_text: str, code: int | None,
             timed_out: bool, timeout: float) -> EvalOutcome:
    try:
        result = json.loads(out_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        if timed_out:
            return done("timeout", f"predict did not finish within {timeout:g} s", log=log_text)
        why = _last_line(log_text) or "no output"
        return done("exception", f"the evaluation process ended (exit code {code}) without predictions: {why}",
                    log=log_text)
    if result.get("verdict") != "ok":
        return done(result.get("verdict", "exception"), result.get("reason"), log=log_text)
    preds = {str(k): float(v) for k, v in result["predictions"].items()}
    verdict, reason, metrics = score_predictions(preds, labels)
    return done(verdict, reason, preds=preds, metrics=metrics, log=log_text)
