"""Shared checks for the data loaders: reading a CSV and checking the images it names."""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from PIL import Image, UnidentifiedImageError

from engine.errors import DataError

W = TypeVar("W")  # a prepared folder (a Workspace of either layout)

SHOW = 5  # how many offending items an error message names


def show_list(items: Iterable[Any], total: int | None = None) -> str:
    items = list(items)
    total = len(items) if total is None else total
    shown = ", ".join(str(x) for x in items[:SHOW])
    return shown + (f" … and {total - SHOW} more" if total > SHOW else "")


def line_numbers(mask: Any, limit: int | None = SHOW) -> list[int]:
    """The CSV lines (1-based, header = line 1) of the rows where `mask` is true, by position: a
    frame's index may be a column of the file (an unnamed first column, a row with one cell more
    than the header), so it cannot number the lines."""
    rows = [int(i) + 2 for i in np.flatnonzero(np.asarray(mask, dtype=bool))]
    return rows if limit is None else rows[:limit]


def read_csv(path: str | os.PathLike[str], what: str, **kw: Any) -> pd.DataFrame:
    """pandas.read_csv with one-line DataError messages for the usual ways a file is wrong."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{what} CSV not found: {path}")
    if path.is_dir():
        raise DataError(f"{what} CSV is a folder, not a file: {path}")
    try:
        df = pd.read_csv(path, keep_default_na=True, **kw)
    except pd.errors.EmptyDataError:
        raise DataError(f"{what} CSV is empty: {path}") from None
    except pd.errors.ParserError as exc:
        msg = str(exc).strip().splitlines()[-1] if str(exc).strip() else "parse error"
        raise DataError(f"{what} CSV is malformed ({path}): {msg}") from None
    except UnicodeDecodeError:
        raise DataError(f"{what} CSV is not UTF-8 text: {path}") from None
    except OSError as exc:
        raise DataError(f"cannot read {what} CSV {path}: {exc.strerror or exc}") from None
    if df.empty:
        raise DataError(f"{what} CSV has a header but no rows: {path}")
    return df


def require_columns(df: pd.DataFrame, required: Iterable[str], what: str, path: Path | str) -> None:
    missing = [c for c in required if c not in df.columns]
    if missing:
        have = ", ".join(repr(c) for c in df.columns[:12])
        raise DataError(
            f"{what} CSV {path} is missing column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(repr(c) for c in missing)} (found: {have})"
        )


def bad_values(series: pd.Series, allowed: set[Any], column: str, what: str, path: Path | str) -> None:
    """Raise when a column holds values outside `allowed`, naming the values and first rows."""
    mask = ~series.isin(allowed)
    if mask.any():
        vals = [v.item() if hasattr(v, "item") else v for v in pd.unique(series[mask])]
        rows = line_numbers(mask)
        raise DataError(
            f"{what} CSV {path}: unknown {column} value{'s' if len(vals) > 1 else ''} "
            f"{show_list([repr(v) for v in vals])} on line{'s' if mask.sum() > 1 else ''} "
            f"{show_list(rows, int(mask.sum()))}; expected one of {sorted(map(str, allowed))}"
        )


def as_int_column(series: pd.Series, column: str, what: str, path: Path | str) -> pd.Series:
    num = pd.to_numeric(series, errors="coerce")
    bad = num.isna() | ~np.isfinite(num) | (num != num.round())
    if bad.any():
        vals = pd.unique(series[bad].astype(str))
        rows = line_numbers(bad)
        raise DataError(
            f"{what} CSV {path}: {column} must be an integer; found {show_list([repr(v) for v in vals])} "
            f"on line{'s' if bad.sum() > 1 else ''} {show_list(rows, int(bad.sum()))}"
        )
    return num.astype("int64")


UNREADABLE_IMAGE = (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError)


def image_error(path: Path | str, exc: BaseException) -> DataError:
    """One clear DataError naming the image for an error met opening it."""
    if isinstance(exc, Image.DecompressionBombError):
        detail = str(exc).split(",")[0].strip()  # "Image size (N pixels) exceeds limit of M pixels"
        return DataError(f"image {path} is too large to decode safely ({detail}; a possible "
                         "decompression bomb): remove or shrink it")
    if isinstance(exc, FileNotFoundError):
        return DataError(f"image not found: {path}")
    return DataError(f"image {path} cannot be read ({type(exc).__name__}: {str(exc)[:120]})")


IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp"}


def find_unreadable_image(roots: Iterable[Path | str]) -> tuple[Path, BaseException] | None:
    """The first image under `roots` (recursively, links not followed) that cannot be opened and
    verified, with its error; None when all open. Used to name the culprit after a decoder
    failed somewhere in a batch (PIL's errors do not name the file)."""
    for root in roots:
        for dirpath, _dirs, files in os.walk(root, followlinks=False):
            for name in sorted(files):
                p = Path(dirpath) / name
                if p.suffix.lower() not in IMAGE_SUFFIXES:
                    continue
                try:
                    with Image.open(p) as im:
                        im.verify()
                except UNREADABLE_IMAGE as exc:
                    return p, exc
    return None


def check_images(images_dir: Path | str, files: Sequence[str], what: str, verify: bool = True) -> None:
    """Every named file exists in images_dir and (verify) opens as an image."""
    images_dir = Path(images_dir)
    if not images_dir.is_dir():
        raise DataError(f"{what} image folder not found: {images_dir}")
    present = set(os.listdir(images_dir))
    missing = [f for f in files if f not in present]
    if missing:
        raise DataError(
            f"{len(missing)} of {len(files)} {what} image{'s' if len(files) > 1 else ''} missing in "
            f"{images_dir}: {show_list(missing)}"
        )
    if not verify:
        return
    unreadable: list[str] = []
    for f in files:
        p = images_dir / f
        try:
            with Image.open(p) as im:
                im.verify()
        except Image.DecompressionBombError:
            unreadable.append(f"{f} (too large: a possible decompression bomb)" if len(unreadable) < SHOW else f)
        except UNREADABLE_IMAGE as exc:
            unreadable.append(f"{f} ({type(exc).__name__})" if len(unreadable) < SHOW else f)
    if unreadable:
        raise DataError(
            f"{len(unreadable)} {what} image{'s' if len(unreadable) > 1 else ''} in {images_dir} "
            f"cannot be read: {show_list(unreadable)}"
        )


def place(src: Path, dst: Path, link: bool = True) -> None:
    """Hard-link src to dst (same filesystem), falling back to a copy."""
    if link:
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    shutil.copyfile(src, dst)


# --------------------------------------------------------------------------- building a prepared folder


def refuse_nonempty(out: Path, overwrite: bool) -> None:
    """A prepared folder is written only where nothing is, unless asked to overwrite."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise DataError(f"{out} already exists and is not empty (choose another --out)")


@contextmanager
def build_into(out: Path, overwrite: bool) -> Iterator[Path]:
    """A temporary sibling folder of `out` to write into, renamed into place when the block ends,
    removed when it raises: an interrupted build leaves nothing half-written at `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        yield tmp
        if out.exists():
            shutil.rmtree(out) if overwrite else out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def built_once(out: Path, open_existing: Callable[[Path], W], build: Callable[[], W],
               usable: Callable[[W], bool] = lambda found: True) -> W:
    """A cached prepared folder: the one at `out` when it opens and is usable, else `build()` it
    (into a temporary folder, renamed into place, never over an existing one). Never rebuilt over
    one another process may be reading: when several build at once, the second to finish keeps
    the first's."""
    try:
        found = open_existing(out)
        if usable(found):
            return found
    except DataError:
        pass
    shutil.rmtree(out, ignore_errors=True)  # an unusable one (an older version's)
    try:
        return build()
    except (OSError, DataError):
        if out.is_dir() and any(out.iterdir()):  # another process built it at the same moment
            return open_existing(out)
        raise


def require_parts(root: Path, needed: Iterable[Path | None], what: str) -> None:
    """DataError naming the parts of a prepared folder that are missing (None: a part it need not have)."""
    missing = [str(p.relative_to(root)) for p in needed if p is not None and not p.exists()]
    if missing:
        raise DataError(f"{what} {root} is incomplete: missing {', '.join(missing)}")
