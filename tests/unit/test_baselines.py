"""Expert baselines: the fast MEDFAIR loop, recording, reference rows, export (CPU, 32 px)."""
from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from baselines import core
from baselines.pipeline import TrainConfig, load_data, summarise_baselines, train_variant
from baselines.reference import PUBLISHED_PREFIX, ensure_reference_rows, load_reference_rows
from baselines.tensor_cache import content_key, load_store

SIZE = 32


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from engine.session.store import SessionStore

    return SessionStore(tmp_path_factory.mktemp("db") / "befair.db")


@pytest.fixture(scope="module")
def trained(synth_dir, workspace, store, tmp_path_factory):
    """medfair: 2 full epochs; -dedup and -filtered: 1 epoch on 64 images (smoke)."""
    torch.set_num_threads(1)
    ckpt = tmp_path_factory.mktemp("ckpt")
    logs: list[str] = []
    cfg = TrainConfig(epochs=2, size=SIZE, batch_size=32, threads=1)
    progress: list[tuple[str, int, int]] = []
    rows = train_variant("medfair", synth_dir, [11], cfg, store=store, workspace=workspace,
                         checkpoint_dir=ckpt, log=logs.append, progress=lambda *a: progress.append(a))
    rows[0]["_progress"] = progress
    small = TrainConfig(epochs=1, size=SIZE, batch_size=32, threads=1, limit=64)
    for v in ("medfair-dedup", "medfair-filtered"):
        rows += train_variant(v, synth_dir, [11], small, store=store, workspace=workspace, log=logs.append)
    return rows, logs


# --------------------------------------------------------------------------- decoding and augmentation


def _pil_reference(path: Path, resize: int) -> np.ndarray:
    im = Image.open(path).convert("RGB")
    w, h = im.size
    s = resize / min(w, h)
    nw, nh = max(resize, round(w * s)), max(resize, round(h * s))
    im = im.resize((nw, nh), Image.BILINEAR)
    left, top = (nw - resize) // 2, (nh - resize) // 2
    return np.asarray(im.crop((left, top, left + resize, top + resize)))


def test_tensor_store_equals_pil_decode_and_is_keyed_by_content(synth_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("BEFAIR_HOME", str(tmp_path / "home"))
    src = sorted((synth_dir / "train" / "images").iterdir())[:12]
    imgs = tmp_path / "data" / "images"
    imgs.mkdir(parents=True)
    paths = []
    for i, p in enumerate(src):
        paths.append(imgs / f"copy_{i}.jpg")
        shutil.copy(p, paths[-1])
    info: dict = {}
    t = load_store(paths, 37, info=info)
    assert not info["hit"] and Path(info["path"]).is_file()
    assert Path(info["path"]).parent == tmp_path / "home" / "tensors"  # in the cache, not the data folder
    assert not (tmp_path / "data" / ".befair").exists()
    assert t.dtype == torch.uint8 and tuple(t.shape) == (12, 3, 37, 37)
    for i, p in enumerate(paths):
        assert np.array_equal(t[i].permute(1, 2, 0).numpy(), _pil_reference(p, 37))
    again: dict = {}
    assert torch.equal(load_store(paths, 37, info=again), t) and again["hit"]
    # keyed by content: same bytes under other names share the key; edited bytes do not
    assert content_key(src, 37) == content_key(paths, 37)
    paths[0].write_bytes(src[1].read_bytes())
    assert content_key(paths, 37) != content_key(src, 37)


def test_batched_augmentation_matches_crop_flip_and_rotation():
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (4, 3, 10, 10), dtype=torch.uint8, generator=g).float()
    flip = torch.tensor([False, True, False, True])
    ox, oy = torch.tensor([0, 1, 2, 3]), torch.tensor([3, 2, 1, 0])
    theta = core.affine_theta(flip, torch.zeros(4), ox, oy, resize=10, size=7)
    y = F.grid_sample(x, F.affine_grid(theta, [4, 3, 7, 7], align_corners=False), align_corners=False)
    for i in range(4):
        src = x[i].flip(-1) if flip[i] else x[i]
        assert torch.allclose(y[i], src[:, oy[i]:oy[i] + 7, ox[i]:ox[i] + 7], atol=1e-3)
    theta = core.affine_theta(torch.tensor([False]), torch.tensor([90.0]), torch.tensor([0]), torch.tensor([0]), 10, 10)
    y = F.grid_sample(x[:1], F.affine_grid(theta, [1, 3, 10, 10], align_corners=False), align_corners=False)
    assert min((y[0] - torch.rot90(x[0], k, dims=(1, 2))).abs().max() for k in (1, 3)) < 1e-3
    out = core.augment_batch(x.to(torch.uint8), 7, g)
    assert out.shape == (4, 3, 7, 7) and torch.isfinite(out).all()


def test_model_uses_cached_weights_only():
    model, weights = core.build_model("random")
    assert model.fc.out_features == 1 and weights.startswith("random init")
    _, auto = core.build_model("auto")
    if core.imagenet_checkpoint() is None:
        assert "never downloaded" in auto
        with pytest.raises(FileNotFoundError):
            core.build_model("imagenet")


# --------------------------------------------------------------------------- training and recording


def test_variants_clean_the_training_rows(synth_dir, workspace):
    import pandas as pd

    plain = load_data("medfair", synth_dir, workspace, log=lambda s: None)
    dedup = load_data("medfair-dedup", synth_dir, workspace, log=lambda s: None)
    filt = load_data("medfair-filtered", synth_dir, workspace, log=lambda s: None)
    assert len(filt.train) < len(dedup.train) < len(plain.train)
    from_manifest = load_data("medfair", None, workspace, log=lambda s: None)  # source named by the workspace
    assert from_manifest.train.names == plain.train.names
    fitz = pd.read_csv(synth_dir / "train" / "fitzpatrick17k.csv").set_index("md5hash")
    assert (fitz.loc[plain.train.names, "fitzpatrick_scale"] != -1).all()  # unknown skin type dropped
    assert (fitz.loc[filt.train.names, "three_partition_label"] != "non-neoplastic").all()
    # the held-out validation rows never reach training
    mapping = pd.read_csv(Path(workspace.root) / "mapping.csv")
    held_out = set(mapping.loc[mapping["split"] == "validation", "md5hash"])
    assert held_out and not held_out & set(plain.train.names)
    assert len(plain.val) == len(held_out)
    malignant = fitz.loc[plain.train.names, "three_partition_label"] == "malignant"
    assert plain.train.labels.tolist() == malignant.astype(int).tolist()


def test_a_run_completes_and_keeps_the_best_worst_group_checkpoint(trained, store):
    rows, logs = trained
    run = rows[0]
    assert run["variant"] == "medfair" and run["epochs"] == 2
    db_row = next(r for r in store.baselines() if r["id"] == run["id"])
    epochs = json.loads(db_row["epoch_metrics"])
    assert [e["epoch"] for e in epochs] == [1, 2]
    best = max(epochs, key=lambda e: (e["val_worst"], np.mean(list(e["val_group_auc"].values()))))
    assert db_row["selected_epoch"] == best["epoch"]
    assert db_row["val_worst"] == pytest.approx(best["val_worst"])  # the kept checkpoint's own metrics
    assert db_row["val_auc"] == pytest.approx(best["val_auc"])
    assert Path(db_row["checkpoint"]).is_file()
    ckpt = torch.load(db_row["checkpoint"], weights_only=False)
    assert ckpt["epoch"] == best["epoch"]
    assert "random init" in db_row["weights"] or "imagenet" in db_row["weights"]
    assert any("notice" in line for line in logs) or "imagenet" in db_row["weights"]


def test_training_reports_images_trained_batch_by_batch(trained):
    progress = trained[0][0]["_progress"]
    total = progress[-1][2]
    assert {stage for stage, _, _ in progress} == {"medfair seed 11"}
    done = [d for _, d, _ in progress]
    assert done == sorted(done) and done[-1] == total and len(done) > 2  # more than one report per epoch
    assert total % 2 == 0 and total // 2 in done  # two epochs of one training set; the first one's end reported


def test_results_land_in_the_database(trained, store):
    rows, _ = trained
    got = {r["variant"]: r for r in store.baselines()}
    assert set(got) == {"medfair", "medfair-dedup", "medfair-filtered"}
    for r in got.values():
        assert r["seed"] == 11 and r["device"] == "cpu" and r["dataset"]
        for k in ("val_auc", "val_gap", "val_worst", "test_auc", "test_gap", "test_worst", "wall_s",
                  "images_per_s", "peak_rss_mb"):
            assert r[k] is not None and np.isfinite(r[k]), k
        test = json.loads(r["test_metrics"])
        assert set(test["group_auc"]) == {"group_0", "group_1", "group_2"}
        assert test["auc_gap"] == pytest.approx(r["test_gap"])
        assert test["medfair"]["Overall AUC"] == pytest.approx(r["test_auc"])
        assert r["peak_gpu_mb"] is None
    assert "LIMITED" in got["medfair-dedup"]["notes"]
    summary = summarise_baselines(store)
    assert [s["variant"] for s in summary] == ["medfair", "medfair-dedup", "medfair-filtered"]
    s = summary[0]
    assert s["n"] == 1 and s["auc_mean"] == pytest.approx(got["medfair"]["test_auc"]) and s["auc_std"] == 0.0
    assert s["source"] == "trained here" and s["selected"] == got["medfair"]["id"]


def test_summary_mean_std_and_minimax_selection():
    def row(i, seed, auc, gap, g):
        return {"id": i, "variant": "medfair", "dataset": "d", "seed": seed, "test_auc": auc, "test_gap": gap,
                "test_worst": auc - gap, "val_auc": auc,
                "val_metrics": json.dumps({"group_auc": {"group_0": g[0], "group_1": g[1], "group_2": g[2]}})}

    rows = [row(1, 11, 0.6, 0.1, (0.7, 0.6, 0.5)), row(2, 22, 0.7, 0.2, (0.8, 0.7, 0.55)),
            row(3, 33, 0.8, 0.3, (0.9, 0.9, 0.52)), {**row(4, 11, 0.5, 0.1, (0.5, 0.5, 0.5)), "dataset": "other"}]
    out = summarise_baselines(rows)
    assert [(s["dataset"], s["n"]) for s in out] == [("d", 3), ("other", 1)]
    assert out[0]["auc_mean"] == pytest.approx(0.7) and out[0]["auc_std"] == pytest.approx(0.1)
    assert out[0]["gap_mean"] == pytest.approx(0.2) and out[0]["gap_std"] == pytest.approx(0.1)
    assert out[0]["selected"] == 2  # the best worst group (0.55), not the best mean


# --------------------------------------------------------------------------- reference rows


def test_reference_rows_are_published_and_kept_apart(tmp_path):
    from engine.session.store import SessionStore

    rows = load_reference_rows()
    by_id = {r["id"]: r for r in rows}
    assert len(rows) == 12 and all(r["source"].startswith(PUBLISHED_PREFIX) for r in rows)
    assert "Richter, Stoyanovich, Schelter 2026" in by_id["medfair"]["source"]
    assert (by_id["medfair"]["auc_mean"], by_id["medfair"]["auc_std"]) == (0.641, 0.015)
    assert (by_id["medfair-filtered"]["gap_mean"], by_id["medfair-filtered"]["gap_std"]) == (0.133, 0.013)
    assert (by_id["mlzero-fairness-metric"]["auc_mean"], by_id["mlzero-fairness-metric"]["gap_std"]) == (0.606, 0.081)
    assert json.loads(by_id["dermatologists"]["group_auc"]) == {"group_0": 0.75, "group_2": 0.62}
    assert (by_id["dermatologists"]["auc_mean"], by_id["dermatologists"]["gap_mean"]) == (0.72, 0.13)
    assert {r["level"] for r in rows if r["agent"] == "AIDE"} == {
        "base", "fairness-hint", "fairness-metric", "fairness-methods"}
    st = SessionStore(tmp_path / "b.db")
    ensure_reference_rows(st)
    ensure_reference_rows(st)  # idempotent
    assert len(st.reference_rows()) == 12 and st.baselines() == []
    assert summarise_baselines(st) == []


def test_cli_list_labels_trained_and_published(trained, store, capsys):
    from befair_tui.cli import baselines as cli

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["baselines", "list", "--db", str(store.path)])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "Trained here" in text and "Published" in text and "MEDFAIR-dedup" in text
    args = parser.parse_args(["baselines", "list", "--json", "--db", str(store.path)])
    assert args.func(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["trained_here"]["runs"]) == 3 and len(data["published"]) == 12
    assert all(r["source"].startswith("published:") for r in data["published"])
    assert all(s["source"] == "trained here" for s in data["trained_here"]["summary"])


def test_cli_rejects_bad_input(tmp_path):
    from befair_tui.cli import baselines as cli
    from engine.errors import BefairError

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["baselines", "train", "--variant", "medfair", "--data", str(tmp_path / "nope"),
                              "--db", str(tmp_path / "x.db")])
    with pytest.raises(BefairError):
        args.func(args)
    args = parser.parse_args(["baselines", "train", "--variant", "medfair", "--data", str(tmp_path),
                              "--seeds", "a,b", "--db", str(tmp_path / "x.db")])
    with pytest.raises(BefairError):
        args.func(args)


# --------------------------------------------------------------------------- export


ALLOWED = {"torch", "torchvision", "numpy", "pandas", "PIL", "sklearn", "__future__", "math", "os", "sys",
           "copy", "pathlib", "typing", "collections"}  # third-party: the study's packages; the rest stdlib


def test_exported_solution_trains_and_passes_the_harness(workspace, tmp_path, monkeypatch):
    from befair_tui.cli import baselines as cli
    from engine.evaluation.harness import evaluate

    node = tmp_path / "node"
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["baselines", "export", "--variant", "medfair-filtered", "--out", str(node),
                              "--epochs", "1", "--size", str(SIZE), "--batch-size", "32"])
    assert args.func(args) == 0
    solution = node / "solution.py"
    tree = ast.parse(solution.read_text())
    mods = {(n.module if isinstance(n, ast.ImportFrom) else a.name).split(".")[0]
            for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
            for a in (n.names if isinstance(n, ast.Import) else [n])}
    assert mods <= ALLOWED, mods - ALLOWED
    (node / "input").symlink_to(Path(workspace.agent_input).resolve())
    (node / "working").mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "BEFAIR_DEVICE": "cpu",
           "PYTHONPATH": ""}
    proc = subprocess.run([sys.executable, "solution.py"], cwd=node, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Validation AUROC:" in proc.stdout
    assert (node / "working" / "model.pt").is_file()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the harness passes the environment on
    out = evaluate(node, "solution.py", workspace.validation_images, workspace.validation_labels,
                   timeout=240, device="cpu")
    assert out.ok, (out.verdict, out.reason, out.log_tail)
    assert out.summary["auc"] is not None and set(out.summary["group_auc"]) >= {"group_0", "group_2"}


def test_default_workspace_is_made_in_the_cache_not_beside_the_data(synth_dir, tmp_path, monkeypatch):
    from baselines.pipeline import default_workspace

    monkeypatch.setenv("BEFAIR_HOME", str(tmp_path / "home"))
    ws = default_workspace(synth_dir, log=lambda s: None)
    assert (tmp_path / "home" / "workspaces") in Path(ws.root).parents
    assert not (synth_dir.resolve().parent / f"{synth_dir.name}-workspace").exists()
    assert Path(ws.manifest["fitzpatrick_csv"]) == (synth_dir / "train" / "fitzpatrick17k.csv").resolve()
    assert ws.test_labels is not None
    assert Path(default_workspace(synth_dir, log=lambda s: None).root) == Path(ws.root)  # reused
