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
import ctypes
import importlib
import importlib.util
import json
import os
import resource
import signal
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


def run_tasks(solution: str, tasks: list[tuple[str, str]]) -> None:
    """Import the solution once and write one result per (images, out) task."""
    solution = os.path.abspath(solution)
    sys.path.insert(0, os.path.dirname(solution))
    sys.path.insert(0, os.getcwd())
    with contextlib.redirect_stdout(sys.stderr):
        try:
            module = _import_solution(solution)
        except BaseException as exc:  # SystemExit too: a solution must not exit on import
            traceback.print_exc()
            for _, out in tasks:
                _write(out, {"verdict": "import_error", "reason": "importing the solution failed: " + _short_exc(exc)})
            return
        predict = getattr(module, "predict", None)
        for images, out in tasks:
            if predict is None or not callable(predict):
                _write(out, {"verdict": "no_predict", "reason": "the solution defines no predict(folder) function"})
            else:
                _predict_one(predict, images, out)


# --------------------------------------------------------------------------- the warm worker
# `--serve`: started once inside the sandbox, it imports the heavy libraries, then forks one
# child per evaluation request read from stdin. Only the child runs model code; after it exits,
# every other process in the sandbox is killed and /tmp emptied, so nothing of one evaluation
# reaches the next. The server is not dumpable: a child cannot ptrace it or read its memory.

PRELOAD = ("numpy", "pandas", "PIL.Image", "torch", "torchvision", "sklearn.linear_model", "sklearn.ensemble",
           "sklearn.metrics", "sklearn.model_selection", "sklearn.preprocessing", "scipy.ndimage")
_PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 4, 36


def _prctl(option: int, value: int) -> None:

    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except Exception:
        pass


def _address_space() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _child(request: dict[str, Any]) -> None:
    """In the forked child: limits, the request's log as stdout/stderr, then the tasks."""
    os.setsid()
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    for fd in (null, log):
        os.close(fd)
    fsize = 256 * 1024 * 1024  # predictions are read up to 64 MiB; the log's tail only
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    limit = int(request.get("memory_limit_mb") or 0) * 1024 * 1024
    if limit and request.get("address_limit", True):  # on top of the libraries already mapped
        resource.setrlimit(resource.RLIMIT_AS, (_address_space() + limit,) * 2)
    sys.stdin = open(os.devnull)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    os.chdir(request["cwd"])
    run_tasks(request["solution"], [(a, b) for a, b in request["tasks"]])


def _clean_up() -> None:
    """Kill every process of the sandbox but its init and this server; empty /tmp."""
    me = os.getpid()
    for _ in range(50):
        others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
        for pid in others:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        while True:  # orphans re-parent to this server (a subreaper): reap them
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if not others:
            break
    _empty_tmpfs("/tmp", os.stat("/tmp").st_dev)


def _empty_tmpfs(folder: str, device: int) -> None:
    """Remove what lives on the private /tmp itself; the folders the sandbox mounts under it
    (another device) are the engine's, and left alone."""
    for entry in os.scandir(folder):
        try:
            if entry.stat(follow_symlinks=False).st_dev != device:
                continue
            if entry.is_dir(follow_symlinks=False):
                _empty_tmpfs(entry.path, device)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass  # a folder holding a mount stays


def serve() -> int:
    """The warm worker's loop: one JSON request a line on stdin, one reply a line on stdout."""
    _prctl(_PR_SET_DUMPABLE, 0)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    with contextlib.redirect_stdout(sys.stderr):
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except Exception:
                pass
    _clean_up()  # anything the imports left in /tmp
    channel = sys.stdout
    channel.write(json.dumps({"ready": True}) + "\n")
    channel.flush()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _child(request)
            except BaseException:
                code = 1
            finally:
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except BaseException:
                        pass
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        _clean_up()
        channel.write(json.dumps({"nonce": request["nonce"], "exit": os.waitstatus_to_exitcode(status)}) + "\n")
        channel.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:] == ["--serve"]:
        return serve()
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

    real_stdout = sys.stdout
    run_tasks(args.solution, tasks)
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
