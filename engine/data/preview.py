"""A textual preview of the agent's data (files, columns, a few rows, value counts) for prompts."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from engine.data.workspace import AGENT_CSV
from engine.errors import DataError


def data_preview(agent_input_dir: Path | str, max_rows: int = 5) -> str:
    root = Path(agent_input_dir)
    if not root.is_dir():
        raise DataError(f"agent input folder not found: {root}")
    lines = [f"Data folder: {root.name}/"]
    csvs = sorted(root.glob("*.csv"))
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        files = sorted(f.name for f in sub.iterdir())
        exts = sorted({Path(f).suffix for f in files})
        shown = ", ".join(files[:3]) + (", …" if len(files) > 3 else "")
        lines.append(f"  {sub.name}/  {len(files)} files ({', '.join(exts) or 'no files'}): {shown}")
        if files and Path(files[0]).suffix.lower() in {".jpg", ".jpeg", ".png"}:
            try:
                from PIL import Image

                with Image.open(sub / files[0]) as im:
                    lines.append(f"    e.g. {files[0]}: {im.format} {im.size[0]}x{im.size[1]} {im.mode}")
            except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
                pass  # the preview only describes the data; the loaders report unreadable images
    for c in csvs:
        lines.append(f"  {c.name}")
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
    if (root / AGENT_CSV).exists():
        lines.append("")
        lines.append("Images are <image_name>.jpg in images/.")
    return "\n".join(lines)
