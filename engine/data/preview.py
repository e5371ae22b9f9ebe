"""A textual preview of the agent's data (files, columns, a few rows, value counts) for prompts."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from engine.data.agent_workspace import AGENT_CSV
from engine.errors import DataError


def data_preview(agent_input_dir: Path | str, max_rows: int = 5) -> str:
    """The data as the code must read it: paths under `./input` (the folder's own name on disk
    is not what the code sees), the image layout (flat: no class subfolders), the target said in
    words, then each CSV's columns, first rows and value counts."""
    root = Path(agent_input_dir)
    if not root.is_dir():
        raise DataError(f"agent input folder not found: {root}")
    lines = ["Data folder: ./input (read-only; your code reads every file through this path)"]
    csvs = sorted(root.glob("*.csv"))
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        files = sorted(f.name for f in sub.iterdir())
        exts = sorted({Path(f).suffix for f in files})
        nested = any((sub / f).is_dir() for f in files[:50])
        shown = ", ".join(files[:3]) + (", …" if len(files) > 3 else "")
        layout = "" if nested else "; flat: no class subfolders"
        lines.append(f"  ./input/{sub.name}/  {len(files)} files ({', '.join(exts) or 'no files'}{layout}): {shown}")
        if files and Path(files[0]).suffix.lower() in {".jpg", ".jpeg", ".png"}:
            try:
                from PIL import Image

                with Image.open(sub / files[0]) as im:
                    lines.append(f"    e.g. ./input/{sub.name}/{files[0]}: {im.format} {im.size[0]}x{im.size[1]} "
                                 f"{im.mode}")
            except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
                pass  # the preview only describes the data; the loaders report unreadable images
    for c in csvs:
        lines.append(f"  ./input/{c.name}")
    if (root / AGENT_CSV).exists():
        lines += ["", *how_to_read(root / AGENT_CSV)]
    for c in csvs:
        df = pd.read_csv(c)
        lines.append("")
        lines.append(f"{c.name}: {len(df)} rows x {len(df.columns)} columns")
        for col in df.columns:
            s = df[col]
            lines.append(f"  {col:<22} {str(s.dtype):<8} {int(s.isna().sum()):>6} missing  "
                         f"{s.nunique(dropna=True):>6} unique")
        lines.append("")
        lines.append(f"First {min(max_rows, len(df))} rows:")
        lines.append(df.head(max_rows).to_string(index=False, max_colwidth=30))
        for col in ("label", "skin_tone", "super_label"):
            if col in df.columns:
                vc = df[col].value_counts(dropna=False).sort_index() if col == "skin_tone" else \
                    df[col].value_counts(dropna=False)
                lines.append("")
                lines.append(f"Value counts of {col}:")
                lines.extend(f"  {k!s:<30} {v}" for k, v in vc.head(12).items())
    if not csvs:
        lines.append("  (no CSV files)")
    return "\n".join(lines)


def how_to_read(csv: Path) -> list[str]:
    """The layout and the target in words, for a model that would guess them otherwise."""
    df = pd.read_csv(csv, nrows=2000)
    first = str(df["image_name"].iloc[0]) if "image_name" in df.columns and len(df) else "image_1"
    labels = sorted(str(v) for v in df["label"].dropna().unique()) if "label" in df.columns else []
    text_cols = [c for c in df.columns if c not in ("image_name", "label") and not pd.api.types.is_numeric_dtype(df[c])]
    code_cols = [c for c in df.columns if c not in ("image_name", "label") and pd.api.types.is_numeric_dtype(df[c])]
    out = [
        "How to read it:",
        f"- One row per image. The image of a row is ./input/images/<image_name>.jpg "
        f"(e.g. ./input/images/{first}.jpg); the images are not sorted into class subfolders, so "
        "read the CSV and load each row's file (do not use torchvision's ImageFolder).",
    ]
    if labels:
        out.append(f"- The target: a lesion is malignant when `label == \"malignant\"`. `label` holds text "
                   f"({', '.join(repr(v) for v in labels)}), never numbers: make the target with "
                   "`y = (df[\"label\"] == \"malignant\").astype(int)` and do not cast `label` to int or float.")
    if code_cols or text_cols:
        out.append("- The other columns hold integer codes (" + (", ".join(code_cols) or "none") + ") or text ("
                   + (", ".join(text_cols) or "none") + "), as shown below; skin_tone is the Fitzpatrick type "
                   "1-6 (-1: unknown).")
    return out
