"""Fitzpatrick17k and DDI loaders: schema validation, clear errors, the real CSVs' counts."""
from __future__ import annotations

import shutil

import pandas as pd
import pytest

from engine.data.ddi import load_ddi
from engine.data.fitzpatrick import load_fitzpatrick, medfair_preprocess
from engine.errors import DataError


@pytest.fixture()
def train_copy(synth_dir, tmp_path):
    """A writable copy of the small SynthDerm training set (CSV + images)."""
    shutil.copytree(synth_dir / "train", tmp_path / "train")
    return tmp_path / "train"


def test_loads_generated_sets(synth_dir):
    df = load_fitzpatrick(synth_dir / "train" / "fitzpatrick17k.csv")
    assert len(df) == 480 and df.fitzpatrick_scale.dtype == "int64"
    ddi = load_ddi(synth_dir / "test" / "ddi_metadata.csv")
    assert len(ddi) == 164 and ddi.malignant.dtype == bool
    assert set(ddi.group) == {"group_0", "group_1", "group_2"}


def test_missing_file_and_malformed_csv(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_fitzpatrick(tmp_path / "nope.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text('md5hash,fitzpatrick_scale\n"abc,1\n')
    with pytest.raises(DataError, match="malformed|missing column"):
        load_fitzpatrick(bad, check_images=False)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DataError, match="empty"):
        load_ddi(empty, check_images=False)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe\x00\x81garbage\x00\n\x90\x91")
    with pytest.raises(DataError):
        load_fitzpatrick(binary, check_images=False)


def test_missing_column_is_named(train_copy):
    csv = train_copy / "fitzpatrick17k.csv"
    pd.read_csv(csv).drop(columns=["three_partition_label"]).to_csv(csv, index=False)
    with pytest.raises(DataError, match="missing column 'three_partition_label'"):
        load_fitzpatrick(csv, check_images=False)


def test_unknown_label_value(train_copy):
    csv = train_copy / "fitzpatrick17k.csv"
    df = pd.read_csv(csv)
    df.loc[3, "three_partition_label"] = "cancerous"
    df.to_csv(csv, index=False)
    with pytest.raises(DataError, match=r"unknown three_partition_label value 'cancerous' on line 5"):
        load_fitzpatrick(csv, check_images=False)


def test_bad_skin_tone_values(train_copy, synth_dir, tmp_path):
    csv = train_copy / "fitzpatrick17k.csv"
    df = pd.read_csv(csv)
    df["fitzpatrick_scale"] = df["fitzpatrick_scale"].astype(object)
    df.loc[0, "fitzpatrick_scale"] = 7
    df.to_csv(csv, index=False)
    with pytest.raises(DataError, match="fitzpatrick_scale value"):
        load_fitzpatrick(csv, check_images=False)
    df.loc[0, "fitzpatrick_scale"] = "dark"
    df.to_csv(csv, index=False)
    with pytest.raises(DataError, match="must be an integer"):
        load_fitzpatrick(csv, check_images=False)
    ddi = pd.read_csv(synth_dir / "test" / "ddi_metadata.csv", index_col=0)
    ddi.loc[0, "skin_tone"] = 78
    out = tmp_path / "ddi.csv"
    ddi.to_csv(out)
    with pytest.raises(DataError, match="skin_tone value 78"):
        load_ddi(out, check_images=False)


def test_missing_images_listed_with_count(train_copy):
    images = sorted((train_copy / "images").iterdir())
    for p in images[:8]:
        p.unlink()
    with pytest.raises(DataError) as err:
        load_fitzpatrick(train_copy / "fitzpatrick17k.csv")
    msg = str(err.value)
    assert "8 of 480" in msg and "and 3 more" in msg
    assert sum(p.name in msg for p in images[:8]) == 5


def test_unreadable_image_is_named(train_copy):
    victim = sorted((train_copy / "images").iterdir())[5]
    victim.write_bytes(b"this is not a jpeg")
    with pytest.raises(DataError, match=f"cannot be read: {victim.name}"):
        load_fitzpatrick(train_copy / "fitzpatrick17k.csv")


def test_ddi_missing_image_folder(synth_dir, tmp_path):
    with pytest.raises(DataError, match="image folder not found"):
        load_ddi(synth_dir / "test" / "ddi_metadata.csv", tmp_path / "nothing")


def test_medfair_preprocess(synth_dir):
    df = load_fitzpatrick(synth_dir / "train" / "fitzpatrick17k.csv")
    m = medfair_preprocess(df)
    assert len(m) == (df.fitzpatrick_scale != -1).sum()
    assert set(m.skin_type) <= set(range(6))
    assert (m.binary_label == (m.three_partition_label == "malignant")).all()
    assert set(m.group) == {"group_0", "group_1", "group_2"}


def test_real_fitzpatrick_counts(shared_data):
    df = load_fitzpatrick(shared_data / "fitzpatrick17k.csv", check_images=False)
    assert len(df) == 16577
    assert df.fitzpatrick_scale.value_counts().to_dict() == {
        -1: 565, 1: 2947, 2: 4808, 3: 3308, 4: 2781, 5: 1533, 6: 635}
    assert df.three_partition_label.value_counts().to_dict() == {
        "non-neoplastic": 12080, "malignant": 2263, "benign": 2234}
    m = medfair_preprocess(df)
    share = m.groupby("group").binary_label.mean().round(3).to_dict()
    assert share == {"group_0": 0.154, "group_1": 0.124, "group_2": 0.096}


def test_real_ddi_counts(shared_data):
    ddi = load_ddi(shared_data / "ddi_metadata.csv", check_images=False)
    assert len(ddi) == 656
    g = ddi.groupby("skin_tone").malignant.agg(["size", "sum"])
    assert g["size"].to_dict() == {12: 208, 34: 241, 56: 207}
    assert g["sum"].to_dict() == {12: 49, 34: 74, 56: 48}


@pytest.mark.parametrize("value", ["inf", "-inf"])
def test_an_infinite_skin_tone_is_a_clear_error_not_a_traceback(synth_dir, tmp_path, value):
    # found by Hypothesis (test_fuzz_data_prepare): pandas reads "inf" as a float it cannot cast to int
    ddi = pd.read_csv(synth_dir / "test" / "ddi_metadata.csv", index_col=0)
    ddi["skin_tone"] = ddi["skin_tone"].astype(object)
    ddi.loc[0, "skin_tone"] = value
    out = tmp_path / "ddi.csv"
    ddi.to_csv(out)
    with pytest.raises(DataError, match="skin_tone must be an integer"):
        load_ddi(out, check_images=False)
