"""The obfuscation the study applied before giving Fitzpatrick17k to agents (DESIGN.md, Data).

Drop label, url, url_alphanum; rename fitzpatrick_scale -> skin_tone, fitzpatrick_centaur ->
alternative_skin_tone, nine_partition_label -> super_label, three_partition_label -> label,
qc -> expert_opinion; shuffle the rows (seeded); md5hash -> image_name `image_<N>` (N = 1..n in
the shuffled order) with the image files renamed `image_<N>.jpg`. The mapping back to md5hash is
returned separately and must be kept outside the agent's folder.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from engine.errors import DataError

DROP = ("label", "url", "url_alphanum")
RENAME = {
    "fitzpatrick_scale": "skin_tone",
    "fitzpatrick_centaur": "alternative_skin_tone",
    "nine_partition_label": "super_label",
    "three_partition_label": "label",
    "qc": "expert_opinion",
}
AGENT_COLUMNS = ("image_name", "skin_tone", "alternative_skin_tone", "super_label", "label", "expert_opinion")


def image_name(n: int) -> str:
    return f"image_{n}"


def obfuscate(df: pd.DataFrame, seed: int = 0, start: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(agent frame, mapping). agent: AGENT_COLUMNS; mapping: image_name, md5hash (same order)."""
    missing = [c for c in ("md5hash", *RENAME) if c not in df.columns]
    if missing:
        raise DataError(f"cannot obfuscate: missing column(s) {', '.join(missing)}")
    order = np.random.default_rng(seed).permutation(len(df))
    shuffled = df.iloc[order].reset_index(drop=True)
    names = [image_name(start + i) for i in range(len(shuffled))]
    agent = shuffled.drop(columns=[c for c in DROP if c in shuffled.columns]).rename(columns=RENAME)
    agent.insert(0, "image_name", names)
    agent = agent[list(AGENT_COLUMNS)]
    mapping = pd.DataFrame({"image_name": names, "md5hash": shuffled["md5hash"].to_numpy()})
    return agent, mapping
