"""Agent workspaces: obfuscated training data for the agent, held-out validation and test sets.

    WORKSPACE/manifest.json                    source, seed, counts, created
    WORKSPACE/agent_input/skin_lesions.csv     obfuscated training rows (validation rows removed)
    WORKSPACE/agent_input/images/image_<N>.jpg
    WORKSPACE/heldout/validation/images/val_<N>.jpg   neutral names, no labels in the folder
    WORKSPACE/heldout/validation/labels.csv    file,label,group,skin_tone
    WORKSPACE/heldout/test/images/NNNNNN.png   DDI images (only with a DDI set)
    WORKSPACE/heldout/test/labels.csv          file,label,group,skin_tone (+ ddi_metadata.csv)
    WORKSPACE/mapping.csv                      image_name,md5hash,split

An agent is given agent_input/ only; heldout/ and mapping.csv stay outside its reach.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from engine.data.common import build_into, built_once, place, refuse_nonempty, require_parts
from engine.data.ddi import load_ddi
from engine.data.fitzpatrick import image_file, load_fitzpatrick
from engine.data.obfuscate import obfuscate
from engine.data.split import stratified_validation_split
from engine.errors import DataError
from engine.paths import cache_dir
from engine.task import fitzpatrick_to_group

if TYPE_CHECKING:
    from engine.data.synth import SynthPaths
    from engine.progress import ProgressFn

FORMAT = 1
AGENT_CSV = "skin_lesions.csv"


@dataclass
class Workspace:
    root: Path
    agent_input: Path
    validation_images: Path
    validation_labels: Path
    test_images: Path | None
    test_labels: Path | None
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def agent_csv(self) -> Path:
        return self.agent_input / AGENT_CSV

    @property
    def agent_images(self) -> Path:
        return self.agent_input / "images"

    @property
    def mapping(self) -> Path:
        return self.root / "mapping.csv"

    @classmethod
    def at(cls, root: Path | str, manifest: dict[str, Any] | None = None) -> "Workspace":
        root = Path(root)
        test = root / "heldout" / "test"
        has_test = (manifest or {}).get("counts", {}).get("test", 0) > 0 or (test / "labels.csv").exists()
        return cls(
            root=root,
            agent_input=root / "agent_input",
            validation_images=root / "heldout" / "validation" / "images",
            validation_labels=root / "heldout" / "validation" / "labels.csv",
            test_images=test / "images" if has_test else None,
            test_labels=test / "labels.csv" if has_test else None,
            manifest=manifest or {},
        )

    @classmethod
    def open(cls, path: Path | str) -> "Workspace":
        """Open a prepared workspace, checking that its parts are there."""
        root = Path(path)
        if not root.is_dir():
            raise DataError(f"workspace not found: {root}")
        mpath = root / "manifest.json"
        if not mpath.is_file():
            raise DataError(f"{root} is not a prepared workspace (no manifest.json); "
                            f"build one with `befair data prepare`")
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataError(f"workspace manifest {mpath} is not valid JSON: {exc}") from None
        ws = cls.at(root, manifest)
        needed: list[Path | None] = [ws.agent_csv, ws.agent_images, ws.validation_images, ws.validation_labels,
                                     ws.mapping]
        if manifest.get("counts", {}).get("test", 0):
            needed += [ws.test_images, ws.test_labels]
        require_parts(root, needed, "workspace")
        return ws

    def summary(self) -> str:
        c = self.manifest.get("counts", {})
        return (f"{self.root}: agent {c.get('agent', '?')} rows, validation {c.get('validation', '?')}, "
                f"test {c.get('test', 0)}")


def _labels_frame(files: Iterable[Any], labels: Iterable[Any], groups: Iterable[Any],
                  tones: Iterable[Any]) -> pd.DataFrame:
    return pd.DataFrame({"file": list(files), "label": [int(x) for x in labels],
                         "group": list(groups), "skin_tone": [int(x) for x in tones]})


def prepare_workspace(
    fitz_csv: Path | str,
    fitz_images: Path | str,
    out: Path | str,
    *,
    ddi_csv: Path | str | None = None,
    ddi_images: Path | str | None = None,
    seed: int = 0,
    val_fraction: float = 0.2,
    link: bool = True,
    overwrite: bool = False,
    source: str | None = None,
) -> Workspace:
    """Build a workspace from a Fitzpatrick17k-format set (and optionally a DDI-format test set).

    Validates the inputs (every image must exist and open), splits off a skin-tone-stratified
    validation set, obfuscates the rest for the agent, and writes everything into a temporary
    sibling folder that is renamed into place at the end, so an interrupted run leaves nothing
    half-written at `out`. Images are hard-linked when possible, copied otherwise.
    """
    started = time.perf_counter()
    out = Path(out)
    refuse_nonempty(out, overwrite)
    fitz = load_fitzpatrick(fitz_csv, fitz_images, check_images=True)
    ddi = load_test_set(ddi_csv, ddi_images)
    fitz_images = Path(fitz.attrs["images_dir"])

    train, val = stratified_validation_split(fitz, val_fraction, seed)
    agent, amap = obfuscate(train, seed)

    with build_into(out, overwrite) as tmp:
        ws = Workspace.at(tmp)
        _write_agent_input(ws, agent, amap, fitz_images, link)
        val, vnames = _write_validation(ws, val, fitz_images, seed, link)
        n_test = write_test_set(tmp, ddi, ddi_csv, link) if ddi is not None and ddi_csv is not None else 0
        _write_mapping(ws, amap, val, vnames)
        manifest = {
            "format": FORMAT,
            "source": source or "fitzpatrick17k",
            "fitzpatrick_csv": str(Path(fitz_csv).resolve()),
            "fitzpatrick_images": str(fitz_images.resolve()),
            "ddi_csv": str(Path(ddi_csv).resolve()) if ddi_csv is not None else None,
            "ddi_images": str(Path(ddi.attrs["images_dir"]).resolve()) if ddi is not None else None,
            "seed": seed,
            "val_fraction": val_fraction,
            "counts": _counts(fitz, agent, val, n_test),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - started, 2),
        }
        write_manifest(tmp, manifest)
    return Workspace.open(out)


def load_test_set(ddi_csv: Path | str | None, ddi_images: Path | str | None) -> pd.DataFrame | None:
    """The DDI-format test set given (its images checked), or None when none is."""
    if ddi_csv is None:
        if ddi_images is not None:
            raise DataError("DDI images were given without the DDI metadata CSV (--ddi)")
        return None
    return load_ddi(ddi_csv, ddi_images, check_images=True)


def write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def _write_agent_input(ws: Workspace, agent: pd.DataFrame, amap: pd.DataFrame, fitz_images: Path,
                       link: bool) -> None:
    """The agent's obfuscated rows and their images, under the names the rows give them."""
    ws.agent_images.mkdir(parents=True)
    agent.to_csv(ws.agent_csv, index=False)
    for name, md5 in zip(amap["image_name"], amap["md5hash"], strict=True):
        place(fitz_images / image_file(md5), ws.agent_images / f"{name}.jpg", link)


def _write_mapping(ws: Workspace, amap: pd.DataFrame, val: pd.DataFrame, vnames: list[str]) -> None:
    """mapping.csv: each image's name in the workspace, its md5hash and its split."""
    pd.concat([
        amap.assign(split="agent"),
        pd.DataFrame({"image_name": [n[:-4] for n in vnames], "md5hash": val["md5hash"].to_numpy(),
                      "split": "validation"}),
    ], ignore_index=True).to_csv(ws.mapping, index=False)


def _write_validation(ws: Workspace, val: pd.DataFrame, fitz_images: Path, seed: int,
                      link: bool) -> tuple[pd.DataFrame, list[str]]:
    """The held-out validation images, shuffled under neutral names, and their labels."""
    ws.validation_images.mkdir(parents=True)
    val = val.iloc[np.random.default_rng(seed + 1).permutation(len(val))]
    vnames = [f"val_{i + 1}.jpg" for i in range(len(val))]
    for name, md5 in zip(vnames, val["md5hash"], strict=True):
        place(fitz_images / image_file(md5), ws.validation_images / name, link)
    _labels_frame(
        vnames, val["three_partition_label"] == "malignant",
        [fitzpatrick_to_group(s) for s in val["fitzpatrick_scale"]], val["fitzpatrick_scale"],
    ).to_csv(ws.validation_labels, index=False)
    return val, vnames


def write_test_set(root: Path, ddi: pd.DataFrame, ddi_csv: Path | str, link: bool) -> int:
    """The held-out DDI-format test set: its images, labels and the metadata file as given."""
    test_dir = root / "heldout" / "test"
    (test_dir / "images").mkdir(parents=True)
    ddi_dir = Path(ddi.attrs["images_dir"])
    for f in ddi["DDI_file"]:
        place(ddi_dir / f, test_dir / "images" / f, link)
    _labels_frame(ddi["DDI_file"], ddi["malignant"], ddi["group"], ddi["skin_tone"]).to_csv(
        test_dir / "labels.csv", index=False)
    shutil.copyfile(ddi_csv, test_dir / "ddi_metadata.csv")
    return len(ddi)


def _counts(fitz: pd.DataFrame, agent: pd.DataFrame, val: pd.DataFrame, n_test: int) -> dict[str, Any]:
    groups = pd.Series([fitzpatrick_to_group(s) for s in val["fitzpatrick_scale"]]).value_counts().sort_index()
    return {
        "source_rows": len(fitz),
        "agent": len(agent),
        "agent_unknown_skin_tone": int((agent["skin_tone"] == -1).sum()),
        "validation": len(val),
        "validation_by_group": {g: int(n) for g, n in groups.items()},
        "validation_malignant": int((val["three_partition_label"] == "malignant").sum()),
        "test": n_test,
    }


# ----------------------------------------------------------------------------- SynthDerm default


def synth_key(seed: int, n_train: int, n_test: int, size: int) -> str:
    return f"s{seed}-n{n_train}-t{n_test}-px{size}"


def synth_data(*, seed: int = 0, n_train: int = 2000, n_test: int = 656, size: int = 96,
               root: Path | str | None = None, progress: ProgressFn | None = None) -> SynthPaths:
    """The generated SynthDerm set for these parameters, generated once and reused (SynthPaths)."""
    from engine.data.synth import SynthPaths, generate, is_complete

    base = Path(root) if root is not None else cache_dir() / "synthderm"
    target = base / synth_key(seed, n_train, n_test, size)
    if is_complete(target, n_train, n_test):
        return SynthPaths.at(target)
    base.mkdir(parents=True, exist_ok=True)
    if target.exists():          # a stale or partial set: replace it
        shutil.rmtree(target, ignore_errors=True)
    tmp = base / f".{target.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        generate(tmp, seed=seed, n_train=n_train, n_test=n_test, size=size, progress=progress)
        try:
            os.replace(tmp, target)
        except OSError:          # another process finished first
            if not is_complete(target, n_train, n_test):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return SynthPaths.at(target)


def synth_workspace(*, seed: int = 0, n_train: int = 2000, n_test: int = 656, size: int = 96,
                    root: Path | str | None = None, progress: ProgressFn | None = None) -> Workspace:
    """A workspace on SynthDerm (the default data of `befair run`), cached by its parameters;
    `progress(stage, done, total)` hears about a generation in progress."""
    paths = synth_data(seed=seed, n_train=n_train, n_test=n_test, size=size, root=root, progress=progress)
    wdir = paths.root.parent / f"{paths.root.name}-workspace"
    return built_once(
        wdir, Workspace.open,
        lambda: prepare_workspace(paths.train_csv, paths.train_images, wdir, ddi_csv=paths.test_csv,
                                  ddi_images=paths.test_images, seed=seed, source="synthderm"),
        usable=lambda ws: ws.manifest.get("seed") == seed and ws.manifest.get("source") == "synthderm",
    )


def workspace_for(data: str, synth: dict[str, int], progress: ProgressFn | None = None) -> Workspace:
    """The workspace a session's `data` names: SynthDerm's (with these generator settings) for
    "synth", else a prepared folder (engine.data.be_fair_layout.workspace_for: the be-fair layout's)."""
    if data == "synth":
        return synth_workspace(seed=synth["seed"], n_train=synth["n_train"], n_test=synth["n_test"],
                               size=synth["size"], progress=progress)
    return Workspace.open(Path(data))
