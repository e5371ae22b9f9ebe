"""The "Be Fair!" study's task, exactly (protocol `be-fair`): its data layout and AIDE's preview of it.

The study's utils/obscure_fitzpatrick.ipynb (anna-richter/be-fair) made the agents' input from
the original Fitzpatrick17k CSV: drop label, url, url_alphanum; rename fitzpatrick_scale ->
skin_tone, fitzpatrick_centaur -> alternative_skin_tone, nine_partition_label -> super_label,
three_partition_label -> label, qc -> expert_opinion; keep md5hash, super_label, skin_tone,
alternative_skin_tone, expert_opinion, label in that order; shuffle with pandas
`sample(frac=1, random_state=4242)`; name the images image_1..image_N in the shuffled order
(copied to MyImages/image_<N>.jpg); drop md5hash, so image_name comes last; write mydataset.csv
with pandas' index as an unnamed first column (`to_csv` without index=False), which the agents
saw as "Unnamed: 0". Nothing was withheld for validation: every row went to the agent.

    WORKSPACE/manifest.json              protocol: be-fair, source, counts
    WORKSPACE/agent_input/mydataset.csv  the study's file, byte for byte for the same source CSV
    WORKSPACE/agent_input/MyImages/image_<N>.jpg
    WORKSPACE/heldout/test/...           the DDI-format test set, as in the default workspace
    WORKSPACE/mapping.csv                image_name,md5hash,split (outside the agent's reach)

Sessions under this protocol are measured on the test set only (blinded while they run): the
held-out splits of a be-fair workspace are the test set alone.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from engine.data.common import build_into, built_once, place, read_csv, refuse_nonempty, require_columns, require_parts
from engine.data.agent_workspace import Workspace, load_test_set, synth_data, write_manifest, write_test_set
from engine.errors import DataError

if TYPE_CHECKING:
    from engine.progress import ProgressFn

PROTOCOL = "be-fair"
DATASET_CSV = "mydataset.csv"
IMAGES_DIR = "MyImages"
SHUFFLE_SEED = 4242
DROPPED = ("label", "url", "url_alphanum")
RENAMED = {"fitzpatrick_scale": "skin_tone", "fitzpatrick_centaur": "alternative_skin_tone",
           "nine_partition_label": "super_label", "three_partition_label": "label", "qc": "expert_opinion"}
KEPT = ("md5hash", "super_label", "skin_tone", "alternative_skin_tone", "expert_opinion", "label")
# mydataset.csv's header: pandas' unnamed index column, then the kept columns less md5hash, then image_name
CSV_HEADER = ("", "super_label", "skin_tone", "alternative_skin_tone", "expert_opinion", "label", "image_name")


def study_layout(original: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the agents' frame, mapping image_name -> md5hash) from the original Fitzpatrick17k frame,
    step by step as the study's notebook did it. Write the frame with `write_dataset`."""
    missing = [c for c in ("md5hash", *RENAMED) if c not in original.columns]
    if missing:
        raise DataError(f"cannot lay out the be-fair dataset: missing column(s) {', '.join(missing)}")
    renamed = original.drop(columns=[c for c in DROPPED if c in original.columns]).rename(columns=RENAMED)
    shuffled = renamed[list(KEPT)].sample(frac=1, random_state=SHUFFLE_SEED).reset_index(drop=True)
    names = [f"image_{i}" for i in range(1, len(shuffled) + 1)]
    mapping = pd.DataFrame({"md5hash": shuffled["md5hash"], "image_name": names})
    agents = shuffled.copy()
    agents["image_name"] = agents["md5hash"].map(dict(zip(mapping["md5hash"], mapping["image_name"], strict=True)))
    return agents.drop(columns="md5hash"), mapping


def write_dataset(agents: pd.DataFrame, path: Path) -> None:
    agents.to_csv(path)  # with the index: the study's agents saw it as "Unnamed: 0"


def read_original(csv: str | Path) -> pd.DataFrame:
    """The source CSV as the study's notebook read it (pandas defaults; md5hash as text)."""
    df = read_csv(csv, "Fitzpatrick17k", dtype={"md5hash": str})
    require_columns(df, ("md5hash", *RENAMED), "Fitzpatrick17k", csv)
    if df["md5hash"].isna().any() or df["md5hash"].duplicated().any():
        raise DataError(f"Fitzpatrick17k CSV {csv}: md5hash must be present and unique on every row")
    return df


# --------------------------------------------------------------------------- the workspace


@dataclass
class BeFairWorkspace:
    """A prepared be-fair workspace: no validation split, the test set held out."""
    root: Path
    manifest: dict[str, Any] = field(default_factory=dict)
    validation_images: None = None
    validation_labels: None = None

    @property
    def agent_input(self) -> Path:
        return self.root / "agent_input"

    @property
    def agent_csv(self) -> Path:
        return self.agent_input / DATASET_CSV

    @property
    def agent_images(self) -> Path:
        return self.agent_input / IMAGES_DIR

    @property
    def test_images(self) -> Path | None:
        return self.root / "heldout" / "test" / "images" if self.manifest.get("counts", {}).get("test") else None

    @property
    def test_labels(self) -> Path | None:
        return self.root / "heldout" / "test" / "labels.csv" if self.manifest.get("counts", {}).get("test") else None

    @property
    def mapping(self) -> Path:
        return self.root / "mapping.csv"

    @classmethod
    def open(cls, path: str | Path) -> BeFairWorkspace:
        root = Path(path)
        try:
            manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataError(f"{root} is not a prepared be-fair workspace ({exc})") from None
        if manifest.get("protocol") != PROTOCOL:
            raise DataError(f"{root} is not a be-fair workspace (its protocol is {manifest.get('protocol')!r}): "
                            "give a folder prepared for the be-fair protocol")
        ws = cls(root=root, manifest=manifest)
        require_parts(root, [ws.agent_csv, ws.agent_images, ws.mapping, ws.test_images, ws.test_labels],
                      "be-fair workspace")
        return ws

    def summary(self) -> str:
        c = self.manifest.get("counts", {})
        return (f"{self.root}: be-fair protocol, agent {c.get('agent', '?')} rows, no validation, "
                f"test {c.get('test', 0)}")


# A prepared workspace of either protocol: the product's own (engine.data.agent_workspace) or the study's.
AgentWorkspace = Workspace | BeFairWorkspace


def prepare_be_fair_workspace(fitz_csv: str | Path, fitz_images: str | Path, out: str | Path, *,
                              ddi_csv: str | Path | None = None, ddi_images: str | Path | None = None,
                              link: bool = True, overwrite: bool = False, source: str | None = None) -> BeFairWorkspace:
    """Lay out a Fitzpatrick17k-format set as the study did (and a DDI-format test set beside it),
    written into a temporary sibling folder renamed into place at the end. Every image the CSV
    names must exist (`<md5hash>.jpg` in fitz_images)."""
    started = time.perf_counter()
    out, images = Path(out), Path(fitz_images)
    refuse_nonempty(out, overwrite)
    agents, mapping = study_layout(read_original(fitz_csv))
    absent = [m for m in mapping["md5hash"] if not (images / f"{m}.jpg").is_file()]
    if absent:
        raise DataError(f"{len(absent)} image(s) named in {fitz_csv} are not in {images} (e.g. {absent[0]}.jpg)")
    with build_into(out, overwrite) as tmp:
        ws = BeFairWorkspace(root=tmp)
        ws.agent_images.mkdir(parents=True)
        write_dataset(agents, ws.agent_csv)
        for name, md5 in zip(mapping["image_name"], mapping["md5hash"], strict=True):
            place(images / f"{md5}.jpg", ws.agent_images / f"{name}.jpg", link)
        ddi = load_test_set(ddi_csv, ddi_images)
        n_test = write_test_set(tmp, ddi, ddi_csv, link) if ddi is not None and ddi_csv is not None else 0
        mapping.assign(split="agent")[["image_name", "md5hash", "split"]].to_csv(ws.mapping, index=False)
        write_manifest(tmp, {
            "format": 1, "protocol": PROTOCOL, "source": source or "fitzpatrick17k",
            "fitzpatrick_csv": str(Path(fitz_csv).resolve()), "fitzpatrick_images": str(images.resolve()),
            "shuffle": f"pandas sample(frac=1, random_state={SHUFFLE_SEED})",
            "counts": {"source_rows": len(agents), "agent": len(agents), "validation": 0, "test": n_test},
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - started, 2)})
    return BeFairWorkspace.open(out)


def be_fair_synth_workspace(*, seed: int = 0, n_train: int = 2000, n_test: int = 656, size: int = 96,
                            root: Path | str | None = None, progress: ProgressFn | None = None) -> BeFairWorkspace:
    """The be-fair layout of the SynthDerm set for these parameters, built once and reused."""
    paths = synth_data(seed=seed, n_train=n_train, n_test=n_test, size=size, root=root, progress=progress)
    wdir = paths.root.parent / f"{paths.root.name}-be-fair-workspace"
    return built_once(wdir, BeFairWorkspace.open, lambda: prepare_be_fair_workspace(
        paths.train_csv, paths.train_images, wdir, ddi_csv=paths.test_csv, ddi_images=paths.test_images,
        source="synthderm"))


# --------------------------------------------------------------------------- AIDE's data preview


def natural_size(n: int) -> str:
    """A byte count as AIDE's preview wrote it (humanize.naturalsize: decimal units, one decimal)."""
    if n == 1:
        return "1 Byte"
    if n < 1000:
        return f"{n} Bytes"
    for power, unit in enumerate(("kB", "MB", "GB", "TB", "PB"), start=1):
        if n < 1000 ** (power + 1) or unit == "PB":
            return f"{n / 1000 ** power:.1f} {unit}"
    raise AssertionError("unreachable")


def _file_tree(path: Path, depth: int = 0) -> str:
    entries = sorted(path.iterdir()) if path.is_dir() else []
    files, dirs = [p for p in entries if not p.is_dir()], [p for p in entries if p.is_dir()]
    shown = 4 if len(files) > 30 else 8
    indent = " " * depth * 4
    out = []
    for p in files[:shown]:
        out.append(f"{indent}{p.name} ({_size(p)})")
    if len(files) > shown:
        out.append(f"{indent}... and {len(files) - shown} other files")
    for d in dirs:
        out += [f"{indent}{d.name}/", _file_tree(d, depth + 1)]
    return "\n".join(out)


def _size(path: Path) -> str:
    """Lines for a text file, bytes otherwise (AIDE's get_file_len_size)."""
    if path.suffix in _TEXT:
        with path.open(errors="replace") as fh:
            return f"{sum(1 for _ in fh)} lines"
    return natural_size(path.stat().st_size)


_TEXT = {".txt", ".csv", ".json", ".tsv", ".py", ".sh", ".yaml", ".yml", ".md", ".html", ".xml", ".log", ".rst"}


def _column_line(df: pd.DataFrame, col: str) -> str:
    s = df[col]
    dtype = "object" if pd.api.types.is_string_dtype(s.dtype) and s.dtype != bool else str(s.dtype)
    name = f"{col} ({dtype})"
    if s.dtype == bool:
        v = s[s.notnull()].mean()
        return f"{name} is {v * 100:.2f}% True, {100 - v * 100:.2f}% False"
    if s.nunique() < 10:
        return f"{name} has {s.nunique()} unique values: {s.astype(object).unique().tolist()}"
    if pd.api.types.is_numeric_dtype(s):
        return f"{name} has range: {s.min():.2f} - {s.max():.2f}, {int(s.isnull().sum())} nan values"
    examples = s.astype(object).value_counts().head(4).index.tolist()
    return f"{name} has {s.nunique()} unique values. Some example values: {examples}"


def _csv_preview(path: Path, name: str, simple: bool) -> str:
    df = pd.read_csv(path)
    out = [f"-> {name} has {df.shape[0]} rows and {df.shape[1]} columns."]
    if simple:
        cols = [str(c) for c in df.columns]
        out.append(f"The columns are: {', '.join(cols[:15])}" + (f"... and {len(cols) - 15} more columns"
                                                                  if len(cols) > 15 else ""))
    else:
        out.append("Here is some information about the columns:")
        out += [_column_line(df, col) for col in sorted(df.columns)]
    return "\n".join(out)


def aide_data_preview(agent_input: str | Path, *, simple: bool = False) -> str:
    """The "Data Overview" AIDE gave its agent, for a workspace with `input/` (the agent's input)
    and an empty `working/`: the file tree, then each CSV's columns; the shorter form when the
    preview passes 6,000 characters, as AIDE does. One difference remains: where every value of
    a text column is unique (image_name), the four examples are the first four here, while the
    study's pandas 2 listed four in hash order."""
    agent_input = Path(agent_input)
    tree = "\n".join(["input/", _file_tree(agent_input, 1), "working/", ""])
    parts = [f"```\n{tree}```"]
    for path in sorted(p for p in agent_input.rglob("*") if p.is_file() and p.suffix == ".csv"):
        parts.append(_csv_preview(path, f"input/{path.relative_to(agent_input).as_posix()}", simple))
    text = "\n\n".join(parts)
    return aide_data_preview(agent_input, simple=True) if len(text) > 6_000 and not simple else text


# --------------------------------------------------------------------------- a session under a protocol
#
# What the runner uses where the protocol decides: the workspace, the held-out splits a node is
# measured on (and whose labels are fingerprinted), the read-only input copy, the evaluator and
# the data preview. For the default protocol each is the product's own.


def open_workspace(path: str | Path) -> AgentWorkspace:
    """A prepared workspace of either protocol (its manifest says which)."""
    try:
        manifest = json.loads((Path(path) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        manifest = {}
    return BeFairWorkspace.open(path) if manifest.get("protocol") == PROTOCOL else Workspace.open(path)


def workspace_for(data: str, synth: dict[str, int], progress: ProgressFn | None = None) -> BeFairWorkspace:
    """The be-fair workspace a be-fair session's `data` names: SynthDerm's (with these generator
    settings) for "synth", else a prepared folder."""
    if data == "synth":
        return be_fair_synth_workspace(seed=synth["seed"], n_train=synth["n_train"], n_test=synth["n_test"],
                                       size=synth["size"], progress=progress)
    return BeFairWorkspace.open(Path(data))
