"""SynthDerm: formats, proportions, determinism, planted imperfections, the skin-tone gap."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from engine.data.formats import FITZ_COLUMNS
from engine.data.synth import FULL, ddi_counts, generate, largest_remainder
from engine.task import fitzpatrick_to_group


def test_headers_are_the_real_ones(synth_dir):
    train_head = (synth_dir / "train" / "fitzpatrick17k.csv").read_text().splitlines()[0]
    assert train_head == "md5hash,fitzpatrick_scale,fitzpatrick_centaur,label,nine_partition_label," \
                         "three_partition_label,qc,url,url_alphanum"
    assert train_head.split(",") == list(FITZ_COLUMNS)
    test_lines = (synth_dir / "test" / "ddi_metadata.csv").read_text().splitlines()
    assert test_lines[0] == ",DDI_ID,DDI_file,skin_tone,malignant,disease"
    assert test_lines[1].startswith("0,1,000001.png,")
    assert test_lines[1].split(",")[4] in {"True", "False"}


def test_images_named_and_sized(synth_dir):
    tr = pd.read_csv(synth_dir / "train" / "fitzpatrick17k.csv")
    te = pd.read_csv(synth_dir / "test" / "ddi_metadata.csv")
    files = {p.name for p in (synth_dir / "train" / "images").iterdir()}
    assert files == {f"{h}.jpg" for h in tr.md5hash}
    assert all(len(h) == 32 for h in tr.md5hash)
    assert {p.name for p in (synth_dir / "test" / "images").iterdir()} == set(te.DDI_file)
    with Image.open(synth_dir / "train" / "images" / f"{tr.md5hash[0]}.jpg") as im:
        assert im.format == "JPEG" and im.size == (32, 32)
    with Image.open(synth_dir / "test" / "images" / te.DDI_file[0]) as im:
        assert im.format == "PNG" and im.size == (32, 32)


def test_training_proportions(synth_dir):
    tr = pd.read_csv(synth_dir / "train" / "fitzpatrick17k.csv")
    n = len(tr)
    assert n == 480
    real_scale = {-1: 565, 1: 2947, 2: 4808, 3: 3308, 4: 2781, 5: 1533, 6: 635}
    counts = tr.fitzpatrick_scale.value_counts()
    for s, c in real_scale.items():
        assert abs(counts.get(s, 0) - c / 16577 * n) <= 1.5
    parts = tr.three_partition_label.value_counts()
    for p, c in {"non-neoplastic": 12080, "malignant": 2263, "benign": 2234}.items():
        assert abs(parts[p] - c / 16577 * n) <= 2
    share = tr.assign(g=tr.fitzpatrick_scale.map(fitzpatrick_to_group)).dropna(subset=["g"]) \
        .groupby("g").three_partition_label.apply(lambda s: (s == "malignant").mean())
    assert share["group_0"] > share["group_1"] > share["group_2"]
    assert abs(share["group_0"] - 0.154) < 0.03 and abs(share["group_2"] - 0.096) < 0.04
    assert tr.label.nunique() > 15 and "melanoma" in set(tr.label) | {"melanoma"}
    assert set(tr.qc.dropna()) <= {"1 Diagnostic", "2 Characteristic", "3 Wrongly labelled", "4 Other",
                                   "5 Potentially"}
    assert tr.qc.isna().mean() > 0.8


def test_full_size_counts_are_exact():
    counts = largest_remainder([388, 74, 103, 2050, 444, 453], 100)
    assert counts.sum() == 100
    assert ddi_counts(FULL["n_test"]) == {12: (208, 49), 34: (241, 74), 56: (207, 48)}
    small = ddi_counts(30)
    assert sum(n for n, _ in small.values()) == 30
    assert all(3 <= k <= n - 3 for n, k in small.values())


def test_test_set_groups(synth_dir):
    te = pd.read_csv(synth_dir / "test" / "ddi_metadata.csv")
    g = te.groupby("skin_tone").malignant.agg(["size", "sum"])
    assert list(g.index) == [12, 34, 56]
    assert g["size"].sum() == 164
    for tone, (n, k) in ddi_counts(164).items():
        assert (g.loc[tone, "size"], g.loc[tone, "sum"]) == (n, k)
    assert te.DDI_ID.tolist() == list(range(1, 165))


def _digest(folder):
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(p.name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def test_seeded_and_deterministic(tmp_path):
    a = generate(tmp_path / "a", seed=3, n_train=60, n_test=24, size=24)
    b = generate(tmp_path / "b", seed=3, n_train=60, n_test=24, size=24)
    c = generate(tmp_path / "c", seed=4, n_train=60, n_test=24, size=24)
    assert a.train_csv.read_bytes() == b.train_csv.read_bytes()
    assert a.test_csv.read_bytes() == b.test_csv.read_bytes()
    assert _digest(a.root) == _digest(b.root)
    assert a.train_csv.read_bytes() != c.train_csv.read_bytes()


def test_planted_duplicates_and_label_noise(synth_dir):
    truth = pd.read_csv(synth_dir / "train" / "synthderm_truth.csv", keep_default_na=False)
    tr = pd.read_csv(synth_dir / "train" / "fitzpatrick17k.csv")
    assert len(truth) == len(tr)
    exact = truth[truth.duplicate_kind == "exact"]
    near = truth[truth.duplicate_kind == "near"]
    assert len(exact) >= 5 and len(near) >= 5
    img = synth_dir / "train" / "images"
    for h, src in zip(exact.md5hash, exact.duplicate_of, strict=True):
        assert (img / f"{h}.jpg").read_bytes() == (img / f"{src}.jpg").read_bytes()
    for h, src in zip(near.md5hash, near.duplicate_of, strict=True):
        assert (img / f"{h}.jpg").read_bytes() != (img / f"{src}.jpg").read_bytes()
    flipped = truth[truth.label_flipped.astype(str) == "True"]
    assert 0 < len(flipped) < 0.1 * len(truth)
    keep = pd.read_csv(synth_dir / "train" / "fitzpatrick17k_c_keep.csv")
    assert len(keep) == len(truth) - len(exact) - len(near) - \
        len(flipped[flipped.duplicate_kind == ""])


def test_invalid_sizes_rejected(tmp_path):
    with pytest.raises(ValueError):
        generate(tmp_path, n_train=5)
    with pytest.raises(ValueError):
        generate(tmp_path, size=4)


@pytest.mark.parametrize("seed", [0, 3])
def test_plain_classifier_shows_a_gap_that_the_fair_variant_shrinks(tmp_path, seed):
    """The point of SynthDerm: a naive pipeline is unfair on it, a fairness-aware one less so."""
    from tests.synth_gapcheck import gap_check

    p = generate(tmp_path, seed=seed, n_train=2000, n_test=656, size=32)
    r = gap_check(p.train_csv, p.train_images, p.test_csv, p.test_images)
    plain, fair = r["plain"], r["fair"]
    assert plain["auc"] > 0.7                                   # it does learn something
    assert plain["gap"] > 0.08                                  # ... unevenly across skin tones
    assert plain["group_auc"]["group_2"] == plain["worst"]      # dark skin is the worst group
    assert fair["gap"] < plain["gap"] - 0.02                    # the fair variant shrinks the gap
    assert fair["worst"] > plain["worst"]                       # by lifting the worst group
    assert r["tone_accuracy"] > 0.9


def _build_synth_workspace(root_and_layout: tuple[str, str]) -> tuple[str, int]:
    """Get the workspace, then read its test labels for 2 s as a session would: how often they were gone."""
    import time

    from engine.data.be_fair_layout import be_fair_synth_workspace
    from engine.data.agent_workspace import synth_workspace

    root, layout = root_and_layout
    build = synth_workspace if layout == "befair" else be_fair_synth_workspace
    ws = build(seed=5, n_train=40, n_test=20, size=16, root=root)
    labels, missing, until = Path(ws.root) / "heldout" / "test" / "labels.csv", 0, time.monotonic() + 2
    while time.monotonic() < until:
        try:
            labels.read_bytes()
        except OSError:
            missing += 1
    return str(ws.root), missing


@pytest.mark.parametrize("layout", ["befair", "be-fair"])
def test_sessions_starting_together_share_one_synth_workspace(tmp_path, layout):
    """Six sessions started at once on the same SynthDerm settings (a study, a bench) all get the
    workspace whole: none reads it while another process rebuilds it."""
    import multiprocessing

    from engine.data.agent_workspace import Workspace

    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.map(_build_synth_workspace, [(str(tmp_path), layout)] * 4)
    roots = [root for root, _ in results]
    assert len(set(roots)) == 1 and [missing for _, missing in results] == [0] * 4
    assert (Path(roots[0]) / "heldout" / "test" / "labels.csv").is_file()
    if layout == "befair":
        assert Workspace.open(roots[0]).manifest["source"] == "synthderm"
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]  # no temporary folder left behind
