"""Shared fixtures: small generated SynthDerm data, a prepared workspace, ../shared/data."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("BEFAIR_SHARED_DATA", ROOT.parent / "shared" / "data"))

# Small enough for a 2-core CI machine, big enough for every group to hold both classes.
SMALL = dict(seed=7, n_train=480, n_test=164, size=32)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA


@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory) -> Path:
    """A small SynthDerm data set: train/ in Fitzpatrick17k format, test/ in DDI format."""
    from engine.data.synth import generate

    out = tmp_path_factory.mktemp("synthderm")
    generate(out, **SMALL)
    return out


@pytest.fixture(scope="session")
def workspace(synth_dir, tmp_path_factory):
    """A prepared workspace (agent_input/, heldout/validation, heldout/test) from synth_dir."""
    from engine.data.agent_workspace import prepare_workspace

    out = tmp_path_factory.mktemp("workspace")
    return prepare_workspace(
        synth_dir / "train" / "fitzpatrick17k.csv",
        synth_dir / "train" / "images",
        out,
        ddi_csv=synth_dir / "test" / "ddi_metadata.csv",
        ddi_images=synth_dir / "test" / "images",
        seed=7,
    )
