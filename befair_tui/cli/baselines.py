"""`befair baselines ...`: train the MEDFAIR baselines, list runs and published rows, export.

    befair baselines train --variant medfair --data DIR [--workspace WS] --seeds 11,22,33
                           [--epochs 30 --device auto --size 224 --batch-size 64 --db DB]
    befair baselines list [--json] [--db DB]
    befair baselines export --variant medfair --out DIR [--epochs --size --seed]

`--data` is a Fitzpatrick17k-format folder (train/fitzpatrick17k.csv + train/images/, e.g. from
`befair data synth`); `--workspace` is the prepared workspace whose held-out validation and test
sets score the runs (the one the sessions use), and whose mapping names the training rows.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import BefairError, DataError
from engine.paths import add_db_arg, db_from_args, runs_dir

from baselines.variants import VARIANT_LABELS, VARIANTS

if TYPE_CHECKING:
    from engine.session.store import SessionStore

_CHOICES = [*VARIANTS, "all"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("baselines", help="expert baselines (MEDFAIR ResNet-18) and published reference rows",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="baselines_command", metavar="ACTION")
    p.set_defaults(func=lambda args: _help(p))

    t = sub.add_parser("train", help="train a baseline variant once per seed and record the runs")
    t.add_argument("--variant", required=True, choices=_CHOICES)
    t.add_argument("--data", type=Path, default=None,
                   help="'synth' (the default SynthDerm) or a Fitzpatrick17k-format data folder "
                        "(train/fitzpatrick17k.csv + train/images/); "
                        "default: the source recorded in --workspace")
    t.add_argument("--workspace", type=Path, default=None,
                   help="prepared workspace giving the held-out validation/test sets (default: the one for --data)")
    t.add_argument("--seeds", default="11,22,33", help="comma-separated seeds (default 11,22,33)")
    t.add_argument("--epochs", type=int, default=30, help="maximum epochs (default 30; early stopping, patience 5)")
    t.add_argument("--patience", type=int, default=5)
    t.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda, cuda:N")
    t.add_argument("--size", type=int, default=224, help="crop size; images stored at size*256/224 (default 224)")
    t.add_argument("--batch-size", type=int, default=64)
    t.add_argument("--weights", choices=["auto", "imagenet", "random"], default="auto",
                   help="ImageNet weights from the torch hub cache (never downloaded) or random init")
    t.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    t.add_argument("--no-cache", action="store_true", help="do not save/load decoded tensor stores")
    t.add_argument("--no-checkpoints", action="store_true", help="do not save the kept checkpoints")
    add_db_arg(t)
    t.set_defaults(func=cmd_train)

    ls = sub.add_parser("list", help="runs trained here (mean ± std) and the published reference rows")
    ls.add_argument("--json", action="store_true")
    add_db_arg(ls)
    ls.set_defaults(func=cmd_list)

    e = sub.add_parser("export", help="write a baseline as a pipeline-contract solution.py")
    e.add_argument("--variant", required=True, choices=list(VARIANTS))
    e.add_argument("--out", required=True, type=Path)
    e.add_argument("--epochs", type=int, default=None)
    e.add_argument("--size", type=int, default=None)
    e.add_argument("--batch-size", type=int, default=None)
    e.add_argument("--seed", type=int, default=None)
    e.set_defaults(func=cmd_export)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 0


def _store(args: argparse.Namespace) -> SessionStore:
    from engine.session.store import SessionStore

    return SessionStore(db_from_args(args))


def cmd_train(args: argparse.Namespace) -> int:
    from baselines.pipeline import TrainConfig, parse_seeds, train_variant
    from baselines.reference import ensure_reference_rows

    if args.epochs < 1 or args.size < 8 or args.batch_size < 2:
        raise BefairError("--epochs must be >= 1, --size >= 8 and --batch-size >= 2")
    if str(args.data) == "synth":  # the embedded demo data, as `befair run --data synth` uses it
        from engine.data.agent_workspace import synth_workspace

        args.data, args.workspace = None, synth_workspace().root
    if args.data is None and args.workspace is None:
        raise BefairError("give --data (a Fitzpatrick17k-format folder, or 'synth') or --workspace")
    if args.data is not None and not args.data.is_dir():
        raise DataError(f"--data: no such folder: {args.data}")
    seeds = parse_seeds(args.seeds)
    config = TrainConfig(epochs=args.epochs, patience=args.patience, size=args.size,
                         batch_size=args.batch_size, device=args.device, weights=args.weights,
                         threads=args.threads, cache=not args.no_cache)
    store = _store(args)
    ensure_reference_rows(store)
    ckpt = None if args.no_checkpoints else runs_dir(db_from_args(args)) / "baselines"
    variants = list(VARIANTS) if args.variant == "all" else [args.variant]
    from PIL import Image, UnidentifiedImageError

    from engine.progress import task_progress

    for v in variants:
        try:
            with task_progress("training (images)") as progress:
                train_variant(v, args.data, seeds, config, store=store, workspace=args.workspace,
                              checkpoint_dir=ckpt, log=lambda s: print(s, flush=True), progress=progress)
        except (Image.DecompressionBombError, UnidentifiedImageError) as exc:
            raise _image_failure(exc, [p for p in (args.data, args.workspace) if p is not None]) from None
    print(f"recorded in {store.path}")
    return 0


def _image_failure(exc: BaseException, roots: list[Path]) -> DataError:
    """A decoder failed somewhere in a batch (PIL's error names no file): find the image."""
    from engine.data.common import find_unreadable_image, image_error

    found = find_unreadable_image(roots)
    if found is not None:
        return image_error(*found)
    where = ", ".join(str(r) for r in roots) or "the training data"
    return DataError(f"an image under {where} cannot be decoded ({type(exc).__name__}: {str(exc)[:160]})")


def _fmt(mean: float | None, std: float | None, digits: int = 3) -> str:
    if mean is None:
        return "—"
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if std is not None else "")


def cmd_list(args: argparse.Namespace) -> int:
    from baselines.pipeline import summarise_baselines
    from baselines.reference import ensure_reference_rows

    store = _store(args)
    ensure_reference_rows(store)
    runs = store.baselines()
    summary = summarise_baselines(runs)
    refs = store.reference_rows()
    if args.json:
        slim = [{k: r[k] for k in ("id", "variant", "seed", "dataset", "device", "epochs", "selected_epoch",
                                   "weights", "val_auc", "val_gap", "test_auc", "test_gap", "test_worst",
                                   "wall_s", "images_per_s", "peak_rss_mb", "peak_gpu_mb")} for r in runs]
        json.dump({"trained_here": {"runs": slim, "summary": summary},
                   "published": refs}, sys.stdout, indent=2)
        print()
        return 0
    print("Trained here (test set of the workspace; mean ± std over seeds)")
    if not summary:
        print("  no runs yet: befair baselines train --variant medfair --data DIR")
    for s in summary:
        print(f"  {s['name']:<18} n={s['n']:<2} AUC {_fmt(s['auc_mean'], s['auc_std'])}   "
              f"gap {_fmt(s['gap_mean'], s['gap_std'])}   [{s['dataset']}]")
    if runs:
        print("  runs:")
        for r in runs:
            print(f"    #{r['id']:<4} {VARIANT_LABELS.get(r['variant'], r['variant']):<18} seed {r['seed']:<5} "
                  f"epoch {r['selected_epoch']}/{r['epochs']}  test AUC {_fmt(r['test_auc'], None)} "
                  f"gap {_fmt(r['test_gap'], None)}  {r['device']}  {r['wall_s'] or 0:.0f} s"
                  f"{'  (random init)' if str(r['weights'] or '').startswith('random') else ''}")
    print("Published (Richter, Stoyanovich, Schelter 2026, DDI; not results of this product)")
    for r in refs:
        print(f"  {r['name']:<26} AUC {_fmt(r['auc_mean'], r['auc_std'])}   gap {_fmt(r['gap_mean'], r['gap_std'])}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from baselines.export import export_solution

    cfg = {"epochs": args.epochs, "size": args.size, "batch_size": args.batch_size, "seed": args.seed}
    path = export_solution(args.variant, args.out, **{k: v for k, v in cfg.items() if v is not None})
    print(path)
    return 0
