"""The evaluation worker: runs in its own process, inside a node's directory.

    python -m engine.evaluation.harness_worker --solution solution.py --images DIR --out FILE

It imports the solution as a module named ``solution`` (never as ``__main__``, so a training
block under ``if __name__ == "__main__":`` does not run), calls ``predict(DIR)`` and writes a JSON
result to FILE: ``{"verdict": "ok", "predictions": {name: value}}`` or ``{"verdict": <code>,
"reason": <text>}``. It never sees labels; the engine scores the predictions. Anything the
solution prints goes to stderr, so stdout stays quiet.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import sys
import traceback
from typing import Any

FILENAME_COLUMNS = ("filename", "file", "file_name", "image", "image_name", "image_id", "name", "id",
                    "ddi_file", "path", "image_path")
PROB_COLUMNS = ("probability", "prob", "proba", "malignancy_probability", "prediction", "pred",
                "score", "predicted_probability", "malignant", "probabilities")


def _short_exc(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) <= 300 else text[:297] + "..."


def _write(path: str, result: dict[str, Any]) -> None:
    tmp = path + ".part"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    os.replace(tmp, path)


def _to_float(value: Any) -> float:
    """A probability from a Python/numpy/torch scalar; TypeError for anything else."""
    if isinstance(value, (bool, str, bytes)) or value is None:
        raise TypeError(type(value).__name__)
    if hasattr(value, "item") and callable(value.item):
        size = getattr(value, "size", None)
        numel = value.numel() if hasattr(value, "numel") else (size if isinstance(size, int) else 1)
        if numel != 1:
            raise TypeError(f"{type(value).__name__} with {numel} values")
        value = value.item()
        if isinstance(value, bool):
            raise TypeError("bool")
    return float(value)


def _pick_column(columns: list[str], preferred: tuple[str, ...]) -> str | None:
    lower = {str(c).lower(): c for c in columns}
    for name in preferred:
        if name in lower:
            return lower[name]
    return None


def normalise(result: Any) -> tuple[str, str | None, dict[str, float] | None]:
    """(verdict, reason, {filename: float}) from whatever predict returned."""
    pairs: list[tuple[Any, Any]]
    try:
        import pandas as pd  # the solution environment always has pandas
    except Exception:  # pragma: no cover
        pd = None
    if isinstance(result, dict):
        pairs = list(result.items())
    elif pd is not None and isinstance(result, pd.DataFrame):
        cols = list(result.columns)
        if len(cols) < 2:
            return ("wrong_type", f"predict returned a DataFrame with {len(cols)} column(s); "
                    "need filename and probability", None)
        fcol = _pick_column(cols, FILENAME_COLUMNS)
        pcol = _pick_column([c for c in cols if c != fcol], PROB_COLUMNS)
        if fcol is None or pcol is None:
            if len(cols) != 2:
                return ("wrong_type", f"predict returned a DataFrame with columns {cols}; "
                        "expected filename and probability", None)
            fcol, pcol = (fcol, [c for c in cols if c != fcol][0]) if fcol is not None else (cols[0], cols[1])
        pairs = list(zip(result[fcol].tolist(), result[pcol].tolist(), strict=True))
    elif pd is not None and isinstance(result, pd.Series):
        pairs = list(result.items())
    else:
        return ("wrong_type", f"predict returned {type(result).__name__}; "
                "expected a dict {filename: probability} or a DataFrame", None)

    out: dict[str, float] = {}
    for key, value in pairs:
        if not isinstance(key, (str, os.PathLike)):
            return "wrong_type", f"a filename key is {type(key).__name__} ({key!r:.60}), not a string", None
        name = os.path.basename(os.fspath(key))
        try:
            prob = _to_float(value)
        except (TypeError, ValueError) as exc:
            return "wrong_type", f"the value for {name!r} is not a number ({exc})", None
        if name in out:
            return "wrong_type", f"{name!r} appears more than once", None
        out[name] = prob
    return "ok", None, out


def _import_solution(solution: str) -> Any:
    spec = importlib.util.spec_from_file_location("solution", solution)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {solution}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["solution"] = module
    spec.loader.exec_module(module)
    # Pickles written while training ran as a script refer to __main__.<Class>: resolve them.
    main_mod = sys.modules.get("__main__")
    if main_mod is not None:
        for name, value in vars(module).items():
            if not name.startswith("__") and not hasattr(main_mod, name):
                setattr(main_mod, name, value)
    return module


def _predict_one(predict: Any, images: str, out: str) -> None:
    try:
        result = predict(images)
    except BaseException as exc:
        traceback.print_exc()
        _write(out, {"verdict": "exception", "reason": "predict raised " + _short_exc(exc)})
        return
    try:
        verdict, reason, preds = normalise(result)
    except Exception as exc:  # a pathological return value
        verdict, reason, preds = "wrong_type", f"could not read predict's result: {_short_exc(exc)}", None
    if verdict != "ok":
        _write(out, {"verdict": verdict, "reason": reason})
    else:
        # NaN / inf are kept (as JSON NaN/Infinity) so the engine can name them.
        _write(out, {"verdict": "ok", "predictions": preds})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="harness_worker")
    ap.add_argument("--solution", required=True)
    ap.add_argument("--task", nargs=2, action="append", metavar=("IMAGES", "OUT"), default=[],
                    help="a folder to predict and the file for its result (repeatable: one import)")
    ap.add_argument("--images")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    tasks = list(args.task) + ([(args.images, args.out)] if args.images and args.out else [])
    if not tasks:
        ap.error("give --task IMAGES OUT (or --images and --out)")

    solution = os.path.abspath(args.solution)
    sys.path.insert(0, os.path.dirname(solution))
    sys.path.insert(0, os.getcwd())
    real_stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        try:
            module = _import_solution(solution)
        except BaseException as exc:  # SystemExit too: a solution must not exit on import
            traceback.print_exc()
            for _, out in tasks:
                _write(out, {"verdict": "import_error", "reason": "importing the solution failed: " + _short_exc(exc)})
            return 0
        predict = getattr(module, "predict", None)
        for images, out in tasks:
            if predict is None or not callable(predict):
                _write(out, {"verdict": "no_predict", "reason": "the solution defines no predict(folder) function"})
            else:
                _predict_one(predict, images, out)
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
