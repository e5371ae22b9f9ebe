"""Fitzpatrick17k: load and validate the CSV (and its `<md5hash>.jpg` images); MEDFAIR preprocessing."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from engine.data.common import as_int_column, bad_values, check_images, line_numbers, read_csv, require_columns
from engine.data.formats import (
    FITZ_COLUMNS,
    FITZ_REQUIRED,
    FITZ_SCALES,
    NINE_PARTITIONS,
    QC_VALUES,
    THREE_PARTITIONS,
)
from engine.errors import DataError
from engine.task import fitzpatrick_to_group

WHAT = "Fitzpatrick17k"


def image_file(md5hash: str) -> str:
    return f"{md5hash}.jpg"


def load_fitzpatrick(
    csv: Path | str, images_dir: Path | str | None = None, check_images: bool = True
) -> pd.DataFrame:
    """Read a Fitzpatrick17k-format CSV and validate it.

    Checks the columns, fitzpatrick_scale / fitzpatrick_centaur in {-1, 1..6}, the three- and
    nine-partition values (and that they agree), qc values, unique non-empty md5hash; with
    check_images, that every `<md5hash>.jpg` exists in images_dir (default: `images/` beside the
    CSV) and opens as an image. Raises DataError with a one-line message naming what is wrong.
    The frame keeps the CSV's columns (missing optional ones are added empty);
    `df.attrs["images_dir"]` records the image folder.
    """
    csv = Path(csv)
    df = read_csv(csv, WHAT, dtype={"md5hash": str, "qc": str, "url": str, "url_alphanum": str})
    require_columns(df, FITZ_REQUIRED, WHAT, csv)
    for col in FITZ_COLUMNS:
        if col not in df.columns:
            df[col] = pd.NA
    md5 = df["md5hash"]
    if md5.isna().any() or (md5.astype(str).str.strip() == "").any():
        rows = line_numbers(md5.isna() | (md5.astype(str).str.strip() == ""))
        raise DataError(f"{WHAT} CSV {csv}: empty md5hash on line(s) {rows}")
    df["md5hash"] = md5.astype(str).str.strip()
    dup = df["md5hash"].duplicated(keep=False)
    if dup.any():
        vals = list(pd.unique(df.loc[dup, "md5hash"]))[:5]
        raise DataError(f"{WHAT} CSV {csv}: md5hash values are not unique ({int(dup.sum())} rows), e.g. {vals}")
    for col in ("fitzpatrick_scale", "fitzpatrick_centaur"):
        df[col] = as_int_column(df[col], col, WHAT, csv)
        bad_values(df[col], set(FITZ_SCALES), col, WHAT, csv)
    bad_values(df["three_partition_label"], set(THREE_PARTITIONS), "three_partition_label", WHAT, csv)
    bad_values(df["nine_partition_label"], set(NINE_PARTITIONS), "nine_partition_label", WHAT, csv)
    expected = df["nine_partition_label"].map(NINE_PARTITIONS)
    clash = expected != df["three_partition_label"]
    if clash.any():
        pos = int(np.flatnonzero(clash.to_numpy(dtype=bool))[0])
        raise DataError(
            f"{WHAT} CSV {csv}: nine_partition_label {df['nine_partition_label'].iloc[pos]!r} does not belong "
            f"to three_partition_label {df['three_partition_label'].iloc[pos]!r} (line {pos + 2}; "
            f"{int(clash.sum())} such rows)"
        )
    if df["label"].isna().any():
        rows = line_numbers(df["label"].isna())
        raise DataError(f"{WHAT} CSV {csv}: empty label on line(s) {rows}")
    qc = df["qc"].dropna()
    bad_values(qc, set(QC_VALUES), "qc", WHAT, csv)
    images = Path(images_dir) if images_dir is not None else csv.parent / "images"
    if check_images:
        _check(images, [image_file(h) for h in df["md5hash"]])
    df.attrs["images_dir"] = str(images)
    df.attrs["source"] = str(csv)
    return df


def _check(images: Path, files: list[str]) -> None:
    check_images(images, files, WHAT)


def medfair_preprocess(df: pd.DataFrame) -> pd.DataFrame:
    """MEDFAIR's Fitzpatrick17k preparation: drop unknown skin type, binary label, skin_type, group.

    Adds `binary_label` (1 = three_partition_label "malignant"), `skin_type` (fitzpatrick_scale - 1,
    0..5) and `group` (group_0..2: I-II, III-IV, V-VI). Accepts the original column names.
    """
    for col in ("fitzpatrick_scale", "three_partition_label"):
        if col not in df.columns:
            raise DataError(f"MEDFAIR preprocessing needs the column {col!r}")
    out = df[df["fitzpatrick_scale"] != -1].copy()
    out["binary_label"] = (out["three_partition_label"] == "malignant").astype("int64")
    out["skin_type"] = out["fitzpatrick_scale"].astype("int64") - 1
    out["group"] = out["fitzpatrick_scale"].map(fitzpatrick_to_group)
    out.attrs.update(df.attrs)
    return out.reset_index(drop=True)
