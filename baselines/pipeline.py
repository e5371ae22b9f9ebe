"""Train the MEDFAIR baselines fast and record every run in the session database.

    runs = train_variant("medfair", data_dir, seeds=[11, 22, 33], config=TrainConfig(),
                         store=SessionStore(db))

Inputs. The baselines train on the *original* Fitzpatrick17k-format data, not on the agent's
obfuscated copy, and are measured on exactly the held-out sets a session's nodes are measured on:

* ``data_dir``: a SynthDerm or Fitzpatrick17k data folder, ``train/fitzpatrick17k.csv`` +
  ``train/images/<md5hash>.jpg`` (or the same two at the top level). A Fitzpatrick17k-C
  keep-list (``fitzpatrick17k_c_keep.csv``) next to the CSV is used by the dedup cleaning.
* ``workspace``: the prepared workspace (engine.data.agent_workspace) whose ``mapping.csv`` names the
  training rows the agent was given (image_name -> md5hash) and whose held-out validation and
  test sets score every run. Only the mapping's ``split == "agent"`` rows train; the held-out
  validation rows never do. Without a workspace, the one a session uses for ``data_dir`` is
  reused or prepared: the sibling ``<data_dir>-workspace`` (synth_workspace's convention).
  Without ``data_dir``, the workspace's manifest names the source data.

Per run (one seed): MEDFAIR preprocessing (drop unknown skin type, malignant vs the rest), the
variant's cleaning, ResNet-18 + single logit, Adam (lr 1e-4, weight decay 1e-4), BCE with
logits, up to `epochs` epochs with early stopping (patience 5, as MEDFAIR); after every epoch
the per-group validation AUCs; the kept checkpoint is the minimax-Pareto choice over the
epochs (the best worst-group validation AUC; ties: higher mean group AUC, then the earlier
epoch), which is then scored on validation and test.
"""
from __future__ import annotations

import copy
import math
import os
import random
import resource
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from baselines import core
from baselines.tensor_cache import load_store
from baselines.variants import VARIANT_LABELS, VARIANTS  # noqa: F401 (re-exported)
from engine.errors import BefairError, DataError
from engine.evaluation.metrics import compute_metrics
from engine.measures.summary import EvaluationSummary
from engine.session.selection import minimax_pareto
from engine.progress import ProgressFn

if TYPE_CHECKING:
    from typing_extensions import TypeIs  # typing.TypeIs is Python 3.13+

    from engine.data.agent_workspace import Workspace
    from engine.evaluation.metrics import MetricSet
    from engine.session.store import SessionStore

KEEP_LIST_NAMES = ("fitzpatrick17k_c_keep.csv", "fitzpatrick17k-c.csv", "keep_list.csv")

Log = Callable[[str], None]


@dataclass
class TrainConfig:
    epochs: int = 30
    patience: int = 5            # MEDFAIR's early_stopping default
    size: int = 224              # crop size; images are stored at core.resize_for(size)
    batch_size: int = 64
    eval_batch_size: int = 256
    lr: float = 1e-4
    weight_decay: float = 1e-4
    device: str = "auto"
    weights: str = "auto"        # auto | imagenet | random
    threads: int | None = None   # torch CPU threads (None: leave as is)
    cache: bool = True           # save/load the decoded tensor stores
    limit: int | None = None     # train on a seeded random subset of this many images (smoke runs)

    @property
    def resize(self) -> int:
        return core.resize_for(self.size)


@dataclass
class Split:
    names: list[str]
    paths: list[str]
    labels: np.ndarray
    groups: np.ndarray

    def __len__(self) -> int:
        return len(self.paths)


@dataclass
class BaselineData:
    variant: str
    dataset: str
    train: Split
    val: Split
    test: Split | None  # None when the workspace has no DDI-format test set
    cleaning: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- data


def _data_files(data_dir: Path) -> tuple[Path, Path]:
    for base in (data_dir / "train", data_dir):
        csv = base / "fitzpatrick17k.csv"
        if csv.is_file() and (base / "images").is_dir():
            return csv, base / "images"
    raise DataError(
        f"{data_dir}: expected a Fitzpatrick17k-format data folder (train/fitzpatrick17k.csv and "
        "train/images/, or the same at the top level), e.g. the output of `befair data synth`"
    )


def _keep_list(csv: Path) -> Path | None:
    for name in KEEP_LIST_NAMES:
        if (csv.parent / name).is_file():
            return csv.parent / name
    return None


def _mapping(ws: Workspace) -> pd.DataFrame:
    """The md5hashes of the rows the agent was given (mapping.csv, split == "agent")."""
    path = Path(getattr(ws, "mapping", None) or Path(ws.root) / "mapping.csv")
    if not path.is_file():
        raise DataError(f"workspace {ws.root}: no mapping.csv (image_name -> md5hash)")
    df = pd.read_csv(path, dtype=str)
    if "md5hash" not in df.columns:
        raise DataError(f"{path}: no md5hash column")
    if "split" in df.columns:
        df = df[df["split"] == "agent"]
    return df


def _workspace_split(labels_csv: Path, images_dir: Path) -> Split:
    df = pd.read_csv(labels_csv)
    missing = {"file", "label", "group"} - set(df.columns)
    if missing:
        raise DataError(f"{labels_csv}: missing column(s) {', '.join(sorted(missing))}")
    names = df["file"].astype(str).tolist()
    paths = [str(Path(images_dir) / n) for n in names]
    absent = [n for n, p in zip(names, paths, strict=True) if not os.path.isfile(p)]
    if absent:
        raise DataError(f"{images_dir}: {len(absent)} image(s) listed in {labels_csv.name} are missing, "
                        f"e.g. {absent[0]}")
    lab = df["label"]
    if lab.dtype == object:
        lab = lab.astype(str).str.lower().map({"true": 1, "false": 0, "1": 1, "0": 0})
    return Split(names, paths, lab.astype(int).to_numpy(), df["group"].astype(str).to_numpy())


def default_workspace(data_dir: Path, log: Log = print) -> Workspace:
    """The workspace a session uses for `data_dir`: the sibling ``<data_dir>-workspace`` (the
    convention of engine.data.agent_workspace.synth_workspace), prepared there on first use (seed 0,
    with the DDI-format test set when data_dir has one); under the befair cache when the data's
    folder is read-only."""
    import hashlib

    from engine.data.agent_workspace import Workspace, prepare_workspace
    from engine.paths import cache_dir

    data_dir = Path(data_dir).resolve()
    csv, images = _data_files(data_dir)
    ddi_csv = data_dir / "test" / "ddi_metadata.csv"
    ddi = (ddi_csv, data_dir / "test" / "images") if ddi_csv.is_file() else (None, None)
    key = hashlib.sha1(str(data_dir).encode()).hexdigest()[:12]
    sibling = data_dir.parent / f"{data_dir.name}-workspace"   # SynthDerm's, made by the sessions: reuse it
    targets = [cache_dir() / "workspaces" / f"{data_dir.name}-{key}"]  # create only here, never beside user data
    for target in [sibling, *targets]:
        try:
            ws = Workspace.open(target)
            if Path(ws.manifest.get("fitzpatrick_csv", "")).resolve() == csv.resolve():
                return ws
        except DataError:
            pass
    source = "synthderm" if (csv.parent / "synthderm_truth.csv").is_file() else "fitzpatrick17k"
    for target in targets:
        try:
            log(f"preparing the workspace for {data_dir} at {target}")
            return prepare_workspace(csv, images, target, ddi_csv=ddi[0], ddi_images=ddi[1], seed=0,
                                     overwrite=True, source=source)
        except PermissionError:
            continue
    raise BefairError(f"cannot prepare a workspace for {data_dir}; give --workspace")


def open_workspace(data_dir: Path, workspace: str | os.PathLike[str] | None, log: Log = print) -> Workspace:
    """The workspace object for `data_dir`: the one given, or the default one."""
    from engine.data.agent_workspace import Workspace

    if workspace is not None:
        return Workspace.open(Path(workspace))
    return default_workspace(data_dir, log)


def _fitz_frame(csv: Path, images: Path) -> pd.DataFrame:
    from engine.data.fitzpatrick import load_fitzpatrick

    # images are checked below, only for the rows that train
    return load_fitzpatrick(csv, images, check_images=False)


def _clean(df: pd.DataFrame, steps: Sequence[str], images_dir: Path,
           keep_list: Path | None) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    reports: list[dict[str, Any]] = []
    for step in steps:
        from engine.data.cleaning import clean

        df, report = clean(df, step, images_dir=images_dir, keep_list=keep_list)
        reports.append(report if isinstance(report, dict)
                       else dict(getattr(report, "__dict__", {"report": str(report)})))
    return df, reports


def _preprocess(df: pd.DataFrame) -> pd.DataFrame:
    """MEDFAIR: drop unknown skin type; binary_label = malignant; group from the skin type."""
    from engine.data.fitzpatrick import medfair_preprocess

    return medfair_preprocess(df)


def _is_workspace(obj: object) -> TypeIs[Workspace]:
    """A workspace object (engine.data.agent_workspace.Workspace or one shaped like it), not a path to one."""
    return hasattr(obj, "validation_labels")


def load_data(variant: str, data_dir: str | os.PathLike[str] | None,
              workspace: Workspace | str | os.PathLike[str] | None = None, *, log: Log = print) -> BaselineData:
    """The training rows of `variant` and the workspace's held-out validation and test sets."""
    if variant not in VARIANTS:
        raise BefairError(f"unknown baseline variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    if data_dir is None:  # the workspace's manifest names its source data
        if workspace is None:
            raise BefairError("give the data folder (--data) or a prepared workspace (--workspace)")
        if _is_workspace(workspace):
            ws = workspace
        else:
            from engine.data.agent_workspace import Workspace

            ws = Workspace.open(Path(workspace))  # what open_workspace does with a workspace given
        csv = Path(ws.manifest.get("fitzpatrick_csv") or "")
        images = Path(ws.manifest.get("fitzpatrick_images") or csv.parent / "images")
        if not csv.is_file() or not images.is_dir():
            raise DataError(f"workspace {ws.root}: its source data ({csv}) is not available; give --data")
        data_dir = csv.parent.parent if csv.parent.name == "train" else csv.parent
    else:
        data_dir = Path(data_dir)
        csv, images = _data_files(data_dir)
        ws = workspace if workspace is not None and _is_workspace(workspace) else \
            open_workspace(data_dir, workspace, log)

    df = _fitz_frame(csv, images)
    n_all = len(df)
    mapping = _mapping(ws)
    given = set(mapping["md5hash"].astype(str))
    df = df[df["md5hash"].astype(str).isin(given)].copy()
    if df.empty:
        raise DataError(f"none of {csv}'s rows are in the workspace's mapping: is the workspace from this data?")
    n_given = len(df)
    df, reports = _clean(df, VARIANTS[variant], images, _keep_list(csv))
    df = _preprocess(df)
    paths = [str(images / f"{h}.jpg") for h in df["md5hash"].astype(str)]
    absent = [p for p in paths if not os.path.isfile(p)]
    if absent:
        raise DataError(f"{images}: {len(absent)} training image(s) missing, e.g. {Path(absent[0]).name}")
    train = Split(df["md5hash"].astype(str).tolist(), paths, df["binary_label"].to_numpy(int),
                  df["group"].astype(str).to_numpy())
    val = _workspace_split(Path(ws.validation_labels), Path(ws.validation_images))
    test = _workspace_split(Path(ws.test_labels), Path(ws.test_images)) \
        if ws.test_labels and ws.test_images else None
    cleaning = {"rows_in_csv": n_all, "rows_given_to_agent": n_given, "steps": list(VARIANTS[variant]),
                "reports": reports, "train_rows": len(train), "train_positives": int(train.labels.sum())}
    return BaselineData(variant, str(data_dir.resolve()), train, val, test, cleaning)


# --------------------------------------------------------------------------- training


def _seed_everything(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def peak_rss_mb() -> float:
    """This process's peak resident set size so far (MiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _metrics(split: Split, scores: np.ndarray, *, intervals: bool = False) -> MetricSet:
    return compute_metrics(split.labels, scores, split.groups, intervals=intervals)


def _to_device_store(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Keep the uint8 store on the GPU when it fits comfortably, else in pinned host memory."""
    if device.type != "cuda":
        return t
    free, _ = torch.cuda.mem_get_info(device)
    if t.numel() < 0.4 * free:
        return t.to(device)
    return t.pin_memory()


def select_epoch(epoch_metrics: list[dict[str, Any]]) -> int | None:
    """The minimax-Pareto choice over epochs' per-group validation AUCs (epoch number)."""
    return minimax_pareto({m["epoch"]: m["val_group_auc"] for m in epoch_metrics})


def _epoch_progress(progress: ProgressFn | None, stage: str, before: int,
                    total: int) -> Callable[[int], None] | None:
    """A batch callback reporting images trained so far, across epochs, to `progress`."""
    if progress is None:
        return None
    return lambda done: progress(stage, before + done, total)


def _load_stores(data: BaselineData, config: TrainConfig, stores: dict[str, torch.Tensor], log: Log) -> None:
    """Decode (or read from the tensor cache) each split once; kept in `stores` across seeds."""
    for name, split in (("train", data.train), ("val", data.val), ("test", data.test)):
        if name not in stores and split is not None:
            t0 = time.perf_counter()
            info: dict[str, Any] = {}
            stores[name] = load_store(split.paths, config.resize, cache=config.cache, info=info)
            log(f"  {name}: {len(split)} images at {config.resize}px "
                f"({'cached' if info.get('hit') else 'decoded'} in {time.perf_counter() - t0:.1f} s)")


def _training_set(data: BaselineData, stores: dict[str, torch.Tensor], seed: int, config: TrainConfig,
                  device: torch.device) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    train_x, train_labels = stores["train"], np.array(data.train.labels, dtype=np.float32)
    n_train = len(train_labels)
    if config.limit and config.limit < n_train:
        keep = np.sort(np.random.default_rng(seed).choice(n_train, config.limit, replace=False))
        train_x, train_labels = train_x[torch.from_numpy(keep)], train_labels[keep]
    train_x = _to_device_store(train_x, device)
    train_y = torch.from_numpy(train_labels)
    train_y = train_y.to(device) if train_x.device.type == "cuda" else train_y
    return train_x, train_y, train_labels


@dataclass
class _Fit:
    """What the epoch loop keeps: every epoch's metrics and the best worst-group checkpoint."""
    epochs: list[dict[str, Any]] = field(default_factory=list)
    best_state: dict[str, torch.Tensor] | None = None
    best_rank: tuple[float, float] | None = None
    best_epoch: int | None = None
    best_val_scores: np.ndarray | None = None
    train_seconds: float = 0.0
    train_images: int = 0


def _fit(model: torch.nn.Module, data: BaselineData, stores: dict[str, torch.Tensor], train_x: torch.Tensor,
         train_y: torch.Tensor, seed: int, gen: torch.Generator,
         config: TrainConfig, device: torch.device, log: Log, progress: ProgressFn | None) -> _Fit:
    """Train up to config.epochs, keeping the epoch with the best worst-group validation AUC;
    stop after `patience` epochs without a gain."""
    fit, since_best, n_train = _Fit(), 0, int(train_y.shape[0])
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    for epoch in range(1, config.epochs + 1):
        t0 = time.perf_counter()
        loss = core.train_epoch(model, optimizer, train_x, train_y, size=config.size,
                                batch_size=config.batch_size, device=device, generator=gen,
                                on_batch=_epoch_progress(progress, f"{data.variant} seed {seed}",
                                                         (epoch - 1) * n_train, config.epochs * n_train))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t_train = time.perf_counter() - t0
        fit.train_seconds += t_train
        fit.train_images += n_train
        scores = core.predict_scores(model, stores["val"], size=config.size,
                                     batch_size=config.eval_batch_size, device=device)
        ms = _metrics(data.val, scores)
        row = {
            "epoch": epoch, "train_loss": loss, "val_auc": ms.auc, "val_worst": ms.worst_auc,
            "val_gap": ms.auc_gap, "val_group_auc": ms.group_auc,
            "train_s": round(t_train, 3), "epoch_s": round(time.perf_counter() - t0, 3),
            "images_per_s": n_train / t_train if t_train > 0 else None,
        }
        fit.epochs.append(row)
        rank = core.worst_group_rank(ms.group_auc)
        improved = fit.best_rank is None or rank > fit.best_rank
        if improved:
            fit.best_rank, fit.best_epoch, fit.best_val_scores = rank, epoch, scores
            fit.best_state = copy.deepcopy({k: v.detach().cpu() for k, v in model.state_dict().items()})
            since_best = 0
        else:
            since_best += 1
        log(f"  seed {seed} epoch {epoch}: loss {loss:.4f}  val AUC {_f(ms.auc)}  worst {_f(ms.worst_auc)}"
            f"  gap {_f(ms.auc_gap)}  {row['images_per_s'] or 0:.0f} img/s{'  *' if improved else ''}")
        if since_best >= config.patience:
            log(f"  early stop after epoch {epoch} (no worst-group gain in {config.patience})")
            break
    if progress is not None:
        progress(f"{data.variant} seed {seed}", config.epochs * n_train, config.epochs * n_train)
    return fit


def _save_checkpoint(checkpoint_dir: str | os.PathLike[str] | None, data: BaselineData, seed: int, fit: _Fit,
                     config: TrainConfig, weights: str) -> str | None:
    if checkpoint_dir is None:
        return None
    cdir = Path(checkpoint_dir)
    cdir.mkdir(parents=True, exist_ok=True)
    checkpoint = str(cdir / f"{data.variant}_seed{seed}_{int(time.time())}.pt")
    torch.save({"model": fit.best_state, "variant": data.variant, "seed": seed, "epoch": fit.best_epoch,
                "size": config.size, "resize": config.resize, "weights": weights}, checkpoint)
    return checkpoint


def _run_notes(data: BaselineData, n_train: int, n_malignant: int, config: TrainConfig, weights: str,
               device: torch.device) -> str:
    notes = [f"train {n_train} ({n_malignant} malignant), "
             f"val {len(data.val)}, test {len(data.test) if data.test else 0}; "
             f"size {config.size} (stored {config.resize})",
             f"batch {config.batch_size}, lr {config.lr:g}, wd {config.weight_decay:g}, patience {config.patience}"]
    if n_train < len(data.train):
        notes.append(f"LIMITED to {n_train} of {len(data.train)} training images")
    if weights.startswith("random"):
        notes.append("NOTICE: ResNet-18 from random init (no ImageNet weights cached offline)")
    if device.type == "cuda":
        notes.append("channels_last + bf16 autocast")
    return "; ".join(notes)


def train_run(data: BaselineData, seed: int, config: TrainConfig, *,
              checkpoint_dir: str | os.PathLike[str] | None = None, log: Log = print,
              stores: dict[str, torch.Tensor] | None = None, progress: ProgressFn | None = None) -> dict[str, Any]:
    """Train one seed; returns the row for the baselines table (not yet recorded). `progress`
    (engine.progress) hears images trained so far out of epochs × training images."""
    started = time.perf_counter()
    if config.threads:
        torch.set_num_threads(config.threads)
    device = core.pick_device(config.device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        torch.backends.cudnn.benchmark = True
    stores = stores if stores is not None else {}
    _load_stores(data, config, stores, log)
    train_x, train_y, train_labels = _training_set(data, stores, seed, config, device)
    gen = _seed_everything(seed)
    model, weights = core.build_model(config.weights)
    if weights.startswith("random"):
        log(f"  notice: {weights}")
    model = core.prepare_model(model, device)
    fit = _fit(model, data, stores, train_x, train_y, seed, gen, config, device, log, progress)
    if select_epoch(fit.epochs) not in (None, fit.best_epoch):  # cannot happen: the max rank is on the front
        raise RuntimeError(f"checkpoint bookkeeping disagrees with minimax Pareto ({fit.best_epoch})")
    assert fit.best_state is not None and fit.best_val_scores is not None  # both set by the first epoch
    model.load_state_dict(fit.best_state)
    val_ms = _metrics(data.val, fit.best_val_scores, intervals=True)  # the kept epoch's figures, with intervals
    test_ms = None
    if data.test is not None:
        test_ms = _metrics(data.test, core.predict_scores(model, stores["test"], size=config.size,
                                                           batch_size=config.eval_batch_size, device=device),
                           intervals=True)
    peak_gpu = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    n_train = len(train_labels)
    return {
        "variant": data.variant, "seed": int(seed), "dataset": data.dataset, "device": str(device),
        "epochs": len(fit.epochs), "selected_epoch": fit.best_epoch, "weights": weights,
        "val_auc": val_ms.auc, "val_gap": val_ms.auc_gap, "val_worst": val_ms.worst_auc,
        "test_auc": test_ms.auc if test_ms else None, "test_gap": test_ms.auc_gap if test_ms else None,
        "test_worst": test_ms.worst_auc if test_ms else None,
        "val_metrics": {**val_ms.summary(), "medfair": val_ms.medfair()},
        "test_metrics": {**test_ms.summary(), "medfair": test_ms.medfair()} if test_ms else None,
        "epoch_metrics": fit.epochs,
        "checkpoint": _save_checkpoint(checkpoint_dir, data, seed, fit, config, weights),
        "wall_s": round(time.perf_counter() - started, 3),
        "images_per_s": fit.train_images / fit.train_seconds if fit.train_seconds > 0 else None,
        "peak_rss_mb": round(peak_rss_mb(), 1), "peak_gpu_mb": round(peak_gpu, 1) if peak_gpu else None,
        "notes": _run_notes(data, n_train, int(train_labels.sum()), config, weights, device),
        "config": asdict(config), "cleaning": data.cleaning,
    }


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


ROW_COLUMNS = (
    "variant", "seed", "dataset", "device", "epochs", "selected_epoch", "weights", "val_auc", "val_gap",
    "val_worst", "test_auc", "test_gap", "test_worst", "val_metrics", "test_metrics", "epoch_metrics",
    "checkpoint", "wall_s", "images_per_s", "peak_rss_mb", "peak_gpu_mb", "notes",
)


def record(store: SessionStore, row: dict[str, Any]) -> int:
    """Insert a run into the baselines table (config and cleaning report go into notes/epochs)."""
    out = {k: row.get(k) for k in ROW_COLUMNS}
    extra = {"config": row.get("config"), "cleaning": row.get("cleaning")}
    out["val_metrics"] = {**(row.get("val_metrics") or {}), **extra}
    return store.add_baseline(out)


def parse_seeds(text: str | Sequence[int]) -> list[int]:
    if not isinstance(text, str):
        return [int(s) for s in text]
    try:
        seeds = [int(s) for s in text.replace(" ", "").split(",") if s]
    except ValueError:
        raise BefairError(f"--seeds: expected comma-separated integers, got {text!r}") from None
    if not seeds:
        raise BefairError("--seeds: give at least one seed")
    return seeds


def train_variant(variant: str, data_dir: str | os.PathLike[str] | None, seeds: Sequence[int],
                  config: TrainConfig | None = None, *, store: SessionStore | None = None,
                  workspace: Workspace | str | os.PathLike[str] | None = None,
                  checkpoint_dir: str | os.PathLike[str] | None = None, log: Log = print,
                  progress: ProgressFn | None = None) -> list[dict[str, Any]]:
    """Train `variant` once per seed; each run is recorded in `store` (if given) as it finishes.
    Returns the rows (with "id" when recorded)."""
    config = config or TrainConfig()
    data = load_data(variant, data_dir, workspace, log=log)
    log(f"{VARIANT_LABELS[variant]}: {len(data.train)} training images "
        f"({int(data.train.labels.sum())} malignant), validation {len(data.val)}, "
        f"test {len(data.test) if data.test else 'none'}")
    stores: dict[str, torch.Tensor] = {}
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        row = train_run(data, seed, config, checkpoint_dir=checkpoint_dir, log=log, stores=stores, progress=progress)
        if store is not None:
            row["id"] = record(store, row)
        log(f"  seed {seed}: epoch {row['selected_epoch']} kept; test AUC {_f(row['test_auc'])} "
            f"gap {_f(row['test_gap'])}  ({row['wall_s']:.0f} s)")
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- summaries


def _loads(v: object) -> Any:
    import json

    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return None
    return v


def _mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not vals:
        return None, None
    mean = float(np.mean(vals))
    std = float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0
    return mean, std


def summarise_baselines(store_or_rows: SessionStore | Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs trained here, by (variant, dataset): n, test AUC and gap mean ± std (sample std),
    worst-group AUC mean, validation AUC mean, and `selected`: the run chosen by minimax Pareto
    over the runs' per-group validation AUCs (the checkpoint to ship)."""
    rows = store_or_rows.baselines() if hasattr(store_or_rows, "baselines") else list(store_or_rows)
    out = []
    keys: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        keys.setdefault((r["variant"], r.get("dataset") or ""), []).append(r)
    order = list(VARIANTS)
    for (variant, dataset), runs in sorted(keys.items(), key=lambda kv: (
            order.index(kv[0][0]) if kv[0][0] in order else 99, kv[0][0], kv[0][1])):
        auc_m, auc_s = _mean_std([r.get("test_auc") for r in runs])
        gap_m, gap_s = _mean_std([r.get("test_gap") for r in runs])
        worst_m, _ = _mean_std([r.get("test_worst") for r in runs])
        val_m, _ = _mean_std([r.get("val_auc") for r in runs])
        cands = {}
        for r in runs:
            vm = EvaluationSummary.from_payload(_loads(r.get("val_metrics")) or {})
            cands[r.get("id")] = dict(vm.group_auc) if vm is not None else {}
        out.append({
            "variant": variant, "name": VARIANT_LABELS.get(variant, variant), "dataset": dataset,
            "n": len(runs), "seeds": [r["seed"] for r in runs],
            "auc_mean": auc_m, "auc_std": auc_s, "gap_mean": gap_m, "gap_std": gap_s,
            "worst_mean": worst_m, "val_auc_mean": val_m,
            "selected": minimax_pareto(cands), "source": "trained here",
        })
    return out
