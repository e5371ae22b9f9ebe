"""Obfuscation, cleaning, split, workspaces, preview, the data CLI."""
from __future__ import annotations

import argparse
import json

import pandas as pd
import pytest

from engine.data.cleaning import clean, read_keep_list
from engine.data.fitzpatrick import load_fitzpatrick
from engine.data.obfuscate import AGENT_COLUMNS, RENAME, obfuscate
from engine.data.split import stratified_validation_split
from engine.data.agent_workspace import Workspace
from engine.errors import DataError
from engine.task import fitzpatrick_to_group


@pytest.fixture(scope="module")
def fitz(synth_dir):
    return load_fitzpatrick(synth_dir / "train" / "fitzpatrick17k.csv")


@pytest.fixture(scope="module")
def truth(synth_dir):
    return pd.read_csv(synth_dir / "train" / "synthderm_truth.csv", keep_default_na=False)


def test_obfuscation_round_trip(fitz):
    agent, mapping = obfuscate(fitz, seed=5)
    assert list(agent.columns) == list(AGENT_COLUMNS)
    assert agent.image_name.tolist() == [f"image_{i}" for i in range(1, len(fitz) + 1)]
    assert agent.label.tolist() != fitz.three_partition_label.tolist()   # shuffled
    back = deobfuscate(agent, mapping).set_index("md5hash").sort_index()
    orig = fitz.set_index("md5hash").sort_index()
    for col in ("fitzpatrick_scale", "fitzpatrick_centaur", "nine_partition_label", "three_partition_label"):
        assert back[col].tolist() == orig[col].tolist()
    a2, _ = obfuscate(fitz, seed=5)
    assert a2.equals(agent)


def test_agent_folder_leaks_nothing(workspace, fitz):
    agent = pd.read_csv(workspace.agent_csv)
    assert list(agent.columns) == list(AGENT_COLUMNS)
    text = workspace.agent_csv.read_text()
    for h in fitz.md5hash[:50]:
        assert h not in text
    for word in ("basal cell carcinoma", "psoriasis", "nevus", "http", "atlas"):   # conditions, urls
        assert word not in text
    files = {p.name for p in workspace.agent_images.iterdir()}
    assert files == {f"{n}.jpg" for n in agent.image_name}
    assert not any((workspace.agent_input / n).exists() for n in ("mapping.csv", "heldout", "labels.csv"))
    val_names = set(pd.read_csv(workspace.validation_labels).file)
    assert not val_names & files
    assert {p.name for p in workspace.validation_images.iterdir()} == val_names


def test_workspace_layout_and_mapping(workspace, fitz):
    m = workspace.manifest
    assert m["seed"] == 7 and m["counts"]["agent"] + m["counts"]["validation"] == len(fitz)
    assert m["counts"]["test"] == 164
    mapping = pd.read_csv(workspace.mapping)
    assert set(mapping.split) == {"agent", "validation"}
    assert set(mapping.md5hash) == set(fitz.md5hash) and mapping.md5hash.is_unique
    val = pd.read_csv(workspace.validation_labels)
    assert list(val.columns) == ["file", "label", "group", "skin_tone"]
    assert set(val.label) == {0, 1} and set(val.skin_tone) <= set(range(1, 7))
    # labels agree with the source through the mapping
    vm = mapping[mapping.split == "validation"].assign(file=lambda d: d.image_name + ".jpg")
    joined = val.merge(vm, on="file").merge(
        fitz[["md5hash", "fitzpatrick_scale", "three_partition_label"]], on="md5hash")
    assert (joined.label == (joined.three_partition_label == "malignant")).all()
    assert (joined.group == joined.fitzpatrick_scale.map(fitzpatrick_to_group)).all()
    test = pd.read_csv(workspace.test_labels)
    assert len(test) == 164 and set(test.group) == {"group_0", "group_1", "group_2"}
    assert (workspace.test_labels.parent / "ddi_metadata.csv").exists()
    assert Workspace.open(workspace.root).manifest == m


def test_workspace_open_errors(workspace, tmp_path):
    with pytest.raises(DataError, match="not found"):
        Workspace.open(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no manifest.json"):
        Workspace.open(tmp_path / "empty")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text(json.dumps(workspace.manifest))
    with pytest.raises(DataError, match="incomplete: missing agent_input/skin_lesions.csv"):
        Workspace.open(broken)


def test_prepare_refuses_non_empty_out_and_leaves_nothing_on_error(synth_dir, tmp_path):
    from engine.data.agent_workspace import prepare_workspace

    out = tmp_path / "ws"
    out.mkdir()
    (out / "x").write_text("x")
    with pytest.raises(DataError, match="not empty"):
        prepare_workspace(synth_dir / "train" / "fitzpatrick17k.csv", synth_dir / "train" / "images", out)
    with pytest.raises(DataError):
        prepare_workspace(synth_dir / "train" / "fitzpatrick17k.csv", tmp_path / "no-images", tmp_path / "ws2")
    assert not (tmp_path / "ws2").exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_split_stratified_and_disjoint(fitz):
    train, val = stratified_validation_split(fitz, 0.2, seed=1)
    assert len(train) + len(val) == len(fitz)
    assert not set(train.md5hash) & set(val.md5hash)
    assert (val.fitzpatrick_scale != -1).all()
    known = fitz[fitz.fitzpatrick_scale != -1]

    def key(d):
        malignant = (d.three_partition_label == "malignant").astype(str)
        return d.fitzpatrick_scale.map(fitzpatrick_to_group) + "/" + malignant

    share = key(val).value_counts() / key(known).value_counts()
    assert share.between(0.1, 0.35).all(), share
    assert len(val) == pytest.approx(0.2 * len(known), abs=4)
    t2, v2 = stratified_validation_split(fitz, 0.2, seed=1)
    assert v2.md5hash.tolist() == val.md5hash.tolist()
    with pytest.raises(DataError):
        stratified_validation_split(fitz, 1.5)


def test_clean_filtered_and_none(fitz):
    out, rep = clean(fitz, "none")
    assert len(out) == len(fitz) and rep.rows_out == len(fitz)
    out, rep = clean(fitz, "filtered")
    assert (out.three_partition_label != "non-neoplastic").all()
    assert rep.removed == {"non-neoplastic": int((fitz.three_partition_label == "non-neoplastic").sum())}
    with pytest.raises(DataError, match="unknown cleaning variant"):
        clean(fitz, "magic")


def test_dedup_finds_planted_duplicates(fitz, truth):
    out, rep = clean(fitz, "dedup")
    planted = truth[truth.duplicate_kind != ""]
    assert rep.removed["exact duplicates"] == (truth.duplicate_kind == "exact").sum()
    removed = set(fitz.md5hash) - set(out.md5hash)
    assert len(removed & set(planted.md5hash)) >= 0.85 * len(planted)   # recall
    assert len(removed - set(planted.md5hash)) <= 2                     # false positives
    assert rep.rows_out == len(out) == len(fitz) - sum(rep.removed.values())
    assert "removed" in rep.summary()


def test_dedup_with_keep_list(fitz, synth_dir, tmp_path):
    keep_csv = synth_dir / "train" / "fitzpatrick17k_c_keep.csv"
    out, rep = clean(fitz, "dedup", keep_list=keep_csv)
    assert set(out.md5hash) == read_keep_list(keep_csv)
    assert rep.removed["not in keep-list"] == len(fitz) - len(out)
    txt = tmp_path / "keep.txt"
    txt.write_text("\n".join(fitz.md5hash[:10]) + "\n")
    out, _ = clean(fitz, "dedup", keep_list=txt)
    assert len(out) == 10
    bad = tmp_path / "bad.txt"
    bad.write_text("hello\nworld\n")
    with pytest.raises(DataError, match="no md5hashes"):
        clean(fitz, "dedup", keep_list=bad)


def test_preview(workspace):
    from engine.data.preview import data_preview

    text = data_preview(workspace.agent_input, max_rows=3)
    assert "skin_lesions.csv" in text and "image_name" in text and "Value counts of label" in text
    assert "images/" in text and "malignant" in text
    assert "md5hash" not in text and "fitzpatrick" not in text
    # the layout as the code must read it, and the target in words (a small model guesses otherwise)
    assert "./input/images/image_" in text and "no class subfolders" in text and "ImageFolder" in text
    assert 'label == "malignant"' in text and "do not cast `label` to int" in text
    assert "agent_input" not in text


def test_synth_workspace_cached(tmp_path, monkeypatch):
    from engine.data import agent_workspace as wsmod

    ws = wsmod.synth_workspace(seed=1, n_train=60, n_test=24, size=24, root=tmp_path)
    assert ws.root.name == "s1-n60-t24-px24-workspace" and ws.manifest["source"] == "synthderm"
    assert (tmp_path / "s1-n60-t24-px24" / "train" / "fitzpatrick17k.csv").exists()
    created = ws.manifest["created"]
    monkeypatch.setattr("engine.data.synth.generate", lambda *a, **k: pytest.fail("regenerated"))
    again = wsmod.synth_workspace(seed=1, n_train=60, n_test=24, size=24, root=tmp_path)
    assert again.manifest["created"] == created
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_cli(tmp_path, capsys):
    from befair_tui.cli import data as cli

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["data", "synth", "--out", str(tmp_path / "s"), "--n-train", "40",
                              "--n-test", "20", "--size", "24", "--seed", "2"])
    assert args.func(args) == 0
    assert "40 training images" in capsys.readouterr().out
    args = parser.parse_args(["data", "prepare", "--fitzpatrick", str(tmp_path / "s/train/fitzpatrick17k.csv"),
                              "--images", str(tmp_path / "s/train/images"), "--out", str(tmp_path / "w"),
                              "--ddi", str(tmp_path / "s/test/ddi_metadata.csv"),
                              "--ddi-images", str(tmp_path / "s/test/images")])
    assert args.func(args) == 0
    assert "validation" in capsys.readouterr().out
    args = parser.parse_args(["data", "prepare", "--fitzpatrick", str(tmp_path / "missing.csv"),
                              "--images", str(tmp_path), "--out", str(tmp_path / "w2")])
    with pytest.raises(DataError, match="not found"):
        args.func(args)
    full = parser.parse_args(["data", "synth", "--out", "x", "--full"])
    assert full.full is True

def deobfuscate(agent: pd.DataFrame, mapping: pd.DataFrame) -> pd.DataFrame:
    """Back to the original column names (and md5hash) for the rows of an obfuscated frame."""
    back = {v: k for k, v in RENAME.items()}
    out = agent.merge(mapping[["image_name", "md5hash"]], on="image_name", how="left", validate="one_to_one")
    if out["md5hash"].isna().any():
        raise DataError("some image names are not in the mapping")
    return out.drop(columns=["image_name"]).rename(columns=back)
