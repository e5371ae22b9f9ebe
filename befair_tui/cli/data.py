"""`befair data synth` and `befair data prepare`."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from engine.errors import UsageError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    data = subparsers.add_parser("data", help="generate SynthDerm or prepare an agent workspace")
    sub = data.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    s = sub.add_parser("synth", help="generate SynthDerm (train: Fitzpatrick17k format, test: DDI format)")
    s.add_argument("--out", type=Path, required=True, help="output folder")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--n-train", type=int, default=2000)
    s.add_argument("--n-test", type=int, default=656)
    s.add_argument("--size", type=int, default=96, help="image side in pixels")
    s.add_argument("--full", action="store_true", help="the real sizes: 16,577 training, 656 test images")
    s.set_defaults(func=synth_command)

    p = sub.add_parser("prepare", help="build an agent workspace from Fitzpatrick17k-format data")
    p.add_argument("--fitzpatrick", type=Path, required=True, help="Fitzpatrick17k-format CSV")
    p.add_argument("--images", type=Path, required=True, help="folder of <md5hash>.jpg images")
    p.add_argument("--out", type=Path, required=True, help="workspace folder to create")
    p.add_argument("--ddi", type=Path, default=None, help="DDI-format metadata CSV (the test set)")
    p.add_argument("--ddi-images", type=Path, default=None, help="folder of the DDI images")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--val-fraction", type=float, default=0.2)
    p.set_defaults(func=prepare_command)


def synth_command(args: argparse.Namespace) -> int:
    from engine.data.synth import FULL, generate

    n_train, n_test = (FULL["n_train"], FULL["n_test"]) if args.full else (args.n_train, args.n_test)
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} is a file, not a folder")
    started = time.perf_counter()
    try:
        from engine.progress import task_progress

        with task_progress("generating SynthDerm") as progress:
            paths = generate(args.out, seed=args.seed, n_train=n_train, n_test=n_test, size=args.size,
                             progress=progress)
    except ValueError as exc:  # a bad --n-train / --n-test / --size
        raise UsageError(str(exc)) from None
    secs = time.perf_counter() - started
    print(f"SynthDerm seed {args.seed}: {n_train} training images ({paths.train_csv}), "
          f"{n_test} test images ({paths.test_csv}), {args.size} px, {secs:.1f} s "
          f"({(n_train + n_test) / max(secs, 1e-9):.0f} images/s)")
    return 0


def prepare_command(args: argparse.Namespace) -> int:
    from engine.data.agent_workspace import prepare_workspace

    if not 0 < args.val_fraction < 1:
        raise UsageError(f"--val-fraction must be between 0 and 1 (got {args.val_fraction:g})")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} is a file, not a folder")
    started = time.perf_counter()
    ws = prepare_workspace(args.fitzpatrick, args.images, args.out, ddi_csv=args.ddi,
                           ddi_images=args.ddi_images, seed=args.seed, val_fraction=args.val_fraction)
    c = ws.manifest["counts"]
    print(f"workspace {ws.root}: agent_input {c['agent']} rows, validation {c['validation']} "
          f"({', '.join(f'{g} {n}' for g, n in c['validation_by_group'].items())}), test {c['test']}; "
          f"{time.perf_counter() - started:.1f} s")
    return 0
