"""DDI (Diverse Dermatology Images): load and validate the metadata CSV and its `NNNNNN.png` images."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from engine.data.common import as_int_column, bad_values, check_images, read_csv, require_columns
from engine.data.formats import DDI_REQUIRED, DDI_SKIN_TONES
from engine.errors import DataError
from engine.task import DDI_SKIN_TONE_TO_GROUP

WHAT = "DDI"
_TRUE = {"true": True, "false": False, "1": True, "0": False}


def load_ddi(csv: Path | str, images_dir: Path | str | None = None, check_images: bool = True) -> pd.DataFrame:
    """Read a DDI-format metadata CSV (`,DDI_ID,DDI_file,skin_tone,malignant,disease`) and validate it.

    skin_tone must be 12, 34 or 56, malignant True/False, DDI_file unique; with check_images every
    DDI_file exists in images_dir (default: `images/` beside the CSV) and opens as an image.
    Returns the columns as in the file (the unnamed first column becomes the index) with
    `malignant` as bool, plus `group` (group_0..2). Raises DataError with a one-line message.
    """
    csv = Path(csv)
    df = read_csv(csv, WHAT, dtype={"DDI_file": str, "disease": str})
    first = df.columns[0]
    if first == "" or str(first).startswith("Unnamed: 0"):
        df = df.set_index(first)
        df.index.name = None
    require_columns(df, DDI_REQUIRED, WHAT, csv)
    files = df["DDI_file"]
    if files.isna().any():
        raise DataError(f"{WHAT} CSV {csv}: empty DDI_file on {int(files.isna().sum())} row(s)")
    df["DDI_file"] = files.astype(str).str.strip()
    dup = df["DDI_file"].duplicated(keep=False)
    if dup.any():
        raise DataError(f"{WHAT} CSV {csv}: DDI_file values are not unique, e.g. "
                        f"{list(pd.unique(df.loc[dup, 'DDI_file']))[:5]}")
    df["skin_tone"] = as_int_column(df["skin_tone"], "skin_tone", WHAT, csv)
    bad_values(df["skin_tone"], set(DDI_SKIN_TONES), "skin_tone", WHAT, csv)
    mal = df["malignant"]
    if mal.dtype != bool:
        norm = mal.astype(str).str.strip().str.lower()
        bad_values(norm, set(_TRUE), "malignant", WHAT, csv)
        df["malignant"] = norm.map(_TRUE).astype(bool)
    df["group"] = df["skin_tone"].map(DDI_SKIN_TONE_TO_GROUP)
    images = Path(images_dir) if images_dir is not None else csv.parent / "images"
    if check_images:
        check_images_fn(images, list(df["DDI_file"]), WHAT)
    df.attrs["images_dir"] = str(images)
    df.attrs["source"] = str(csv)
    return df


check_images_fn = check_images
