"""The be-fair protocol lays out the input exactly as the study did: the real Fitzpatrick17k
metadata (../shared/data, skipped when absent) with generated images, checked against what the
study's AIDE agent was shown (aide.log's Data Overview); and a small SynthDerm set end to end."""
from __future__ import annotations

import csv
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from engine.data.be_fair_layout import (
    CSV_HEADER, BeFairWorkspace, aide_data_preview, natural_size, prepare_be_fair_workspace,
    study_layout,
)
from engine.coders.protocol import CoderBase
from engine.errors import DataError
from engine.evaluation.evaluator import heldout_splits

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
FITZ = DATA / "fitzpatrick17k.csv"
AIDE_LOG = DATA / "aide_journal_example" / "aide.log"

# What the study's agent saw of mydataset.csv (aide.log of AIDE run 5, "Data Overview"): the
# order in which each column's values first appear is a fingerprint of the shuffle.
STUDY_COLUMN_LINES = [
    "-> input/mydataset.csv has 16577 rows and 7 columns.",
    "Here is some information about the columns:",
    "Unnamed: 0 (int64) has range: 0.00 - 16576.00, 0 nan values",
    "alternative_skin_tone (int64) has 7 unique values: [2, 5, 1, 3, -1, 4, 6]",
    "expert_opinion (object) has 5 unique values: [nan, '1 Diagnostic', '5 Potentially', '3 Wrongly labelled', "
    "'2 Characteristic', '4 Other']",
    "image_name (object) has 16577 unique values. Some example values: ['image_1', 'image_11074', 'image_11044', "
    "'image_11045']",
    "label (object) has 3 unique values: ['non-neoplastic', 'malignant', 'benign']",
    "skin_tone (int64) has 7 unique values: [2, 4, 5, 3, 6, 1, -1]",
    "super_label (object) has 9 unique values: ['inflammatory', 'malignant melanoma', 'genodermatoses', "
    "'benign dermal', 'benign epidermal', 'malignant dermal', 'malignant epidermal', "
    "'malignant cutaneous lymphoma', 'benign melanocyte']",
]


def _images_for(md5s: list[str], folder: Path) -> None:
    """A small JPEG per md5hash, each distinct (its md5 in the JPEG comment)."""
    folder.mkdir(parents=True)
    for i, md5 in enumerate(md5s):
        Image.new("RGB", (4, 4), (i % 256, (i // 256) % 256, 90)).save(folder / f"{md5}.jpg", comment=md5.encode())


def _study_overview_from_log() -> list[str] | None:
    """The column lines of the first Data Overview in the study's aide.log, when present."""
    if not AIDE_LOG.is_file():
        return None
    text = AIDE_LOG.read_text(encoding="utf-8")
    start = text.index("-> input/mydataset.csv has")
    return text[start:text.index("\n, user=", start)].splitlines()


@pytest.mark.skipif(not FITZ.is_file(), reason="../shared/data/fitzpatrick17k.csv is not present")
def test_real_metadata_laid_out_as_the_study_did(tmp_path):
    original = pd.read_csv(FITZ, dtype={"md5hash": str})
    _images_for(original["md5hash"].tolist(), tmp_path / "images")
    ws = prepare_be_fair_workspace(FITZ, tmp_path / "images", tmp_path / "ws")

    # the file: the unnamed index column, the study's column order, 16,577 rows
    with ws.agent_csv.open(newline="") as fh:
        rows = list(csv.reader(fh))
    assert tuple(rows[0]) == CSV_HEADER == ("", "super_label", "skin_tone", "alternative_skin_tone",
                                            "expert_opinion", "label", "image_name")
    assert len(rows) == 16_578
    assert [r[0] for r in rows[1:]] == [str(i) for i in range(16_577)]
    assert [r[-1] for r in rows[1:]] == [f"image_{i}" for i in range(1, 16_578)]

    # row order: what the study's agent was shown, line for line (but for image_name's examples,
    # which the study's pandas 2 picked in hash order)
    preview = aide_data_preview(ws.agent_input)
    lines = preview.split("```")[-1].strip().splitlines()
    expected = _study_overview_from_log() or STUDY_COLUMN_LINES
    assert expected == STUDY_COLUMN_LINES
    assert [x for x in lines if not x.startswith("image_name")] == \
        [x for x in STUDY_COLUMN_LINES if not x.startswith("image_name")]
    assert next(x for x in lines if x.startswith("image_name")).startswith(
        "image_name (object) has 16577 unique values. Some example values: ")
    tree = preview.split("```")[1]
    assert re.fullmatch(r"\ninput/\n    mydataset.csv \(16578 lines\)\n    MyImages/\n"
                        r"(        image_(1|10|100|1000)\.jpg \(\d+ Bytes\)\n){4}"
                        r"        \.\.\. and 16573 other files\nworking/\n", tree), tree

    # names: image_<k>.jpg is the image of the row's md5hash, and the mapping stays outside the input
    mapping = pd.read_csv(ws.mapping)
    assert mapping["image_name"].tolist()[:3] == ["image_1", "image_2", "image_3"]
    for k in (1, 2, 5000, 16_577):
        md5 = mapping.loc[k - 1, "md5hash"]
        with Image.open(ws.agent_images / f"image_{k}.jpg") as im:
            assert im.info["comment"] == md5.encode()
    assert len(os.listdir(ws.agent_images)) == 16_577
    assert not (ws.agent_input / "mapping.csv").exists() and "md5hash" not in rows[0]
    # the frame the notebook made, step by step, equals the file
    agents, _ = study_layout(original)
    assert agents.columns.tolist() == list(CSV_HEADER[1:])
    assert agents["super_label"].tolist() == [r[1] for r in rows[1:]]


def test_synthderm_be_fair_workspace(tmp_path):
    from engine.data.synth import SynthPaths, generate

    generate(tmp_path / "synth", seed=3, n_train=60, n_test=30, size=16)
    paths = SynthPaths.at(tmp_path / "synth")
    ws = prepare_be_fair_workspace(paths.train_csv, paths.train_images, tmp_path / "ws", ddi_csv=paths.test_csv,
                                   ddi_images=paths.test_images)
    reopened = BeFairWorkspace.open(ws.root)
    assert reopened.manifest["protocol"] == "be-fair" and reopened.manifest["counts"]["validation"] == 0
    assert sorted(p.name for p in ws.agent_input.iterdir()) == ["MyImages", "mydataset.csv"]
    df = pd.read_csv(ws.agent_csv)
    assert df.columns.tolist() == ["Unnamed: 0", *CSV_HEADER[1:]] and len(df) == 60   # nothing withheld
    source = pd.read_csv(paths.train_csv, dtype={"md5hash": str})
    order = source.sample(frac=1, random_state=4242).reset_index(drop=True)
    assert df["skin_tone"].tolist() == order["fitzpatrick_scale"].tolist()
    assert df["label"].tolist() == order["three_partition_label"].tolist()
    assert heldout_splits(ws) == {"test": (ws.test_images, ws.test_labels)}
    assert len(list(ws.test_images.iterdir())) == 30 and ws.validation_images is None
    preview = aide_data_preview(ws.agent_input)
    assert preview.startswith("```\ninput/\n    mydataset.csv (61 lines)\n    MyImages/\n")
    assert "-> input/mydataset.csv has 60 rows and 7 columns." in preview
    with pytest.raises(DataError, match="not empty"):
        prepare_be_fair_workspace(paths.train_csv, paths.train_images, tmp_path / "ws")


def test_missing_images_and_sizes(tmp_path):
    csv_path = tmp_path / "f.csv"
    csv_path.write_text("md5hash,fitzpatrick_scale,fitzpatrick_centaur,label,nine_partition_label,"
                        "three_partition_label,qc,url,url_alphanum\n"
                        "abc,2,2,x,inflammatory,non-neoplastic,,u,u\n")
    (tmp_path / "img").mkdir()
    with pytest.raises(DataError, match="1 image"):
        prepare_be_fair_workspace(csv_path, tmp_path / "img", tmp_path / "ws")
    assert not (tmp_path / "ws").exists()
    assert [natural_size(n) for n in (1, 999, 1000, 285_700, 2_500_000)] == [
        "1 Byte", "999 Bytes", "1.0 kB", "285.7 kB", "2.5 MB"]


@pytest.mark.skipif(not AIDE_LOG.is_file(), reason="../shared/data/aide_journal_example/aide.log is not present")
def test_prompts_are_the_ones_the_study_sent():
    """Given what the study's AIDE had (the task, its data overview, its memory, the previous
    code), the be-fair prompts are byte for byte the ones aide.log recorded, but for the order of
    the package list (AIDE shuffles it for every prompt)."""
    import json

    from engine.coders.llm import prompts as P
    from engine.coders.protocol import NodeView
    from engine.imports.aide import read_aide_log
    from engine.task import LEVELS, METRIC_LINE

    log = read_aide_log(AIDE_LOG)
    draft = log.calls[0]
    preview = draft.system.split("# Data Overview\n\n", 1)[1].rstrip("\n")

    def context(step: int, memory: str = "") -> P.BeFairContext:
        return P.BeFairContext(instruction=LEVELS["base"], metric_line=METRIC_LINE, data_preview=preview, step=step,
                               seed=0, journal_summary=memory)

    def same_packages(text: str) -> str:
        head, rest = text.split("such as: ", 1)
        listed, tail = rest.split(". Feel free", 1)
        return head + "such as: " + ", ".join(sorted(listed.split(", "))) + ". Feel free" + tail

    messages = P.to_messages(P.draft_prompt(context(1), 3600))
    assert [m["role"] for m in messages] == ["system"]
    assert same_packages(messages[0]["content"]) == same_packages(draft.system)
    assert "fairlearn" not in messages[0]["content"] and "`timm`" in messages[0]["content"]

    improve = next(c for c in log.calls if c.role == "improve")
    reviewed = sum(1 for c in log.calls[:log.calls.index(improve)] if c.role == "review")
    journal = sorted(json.loads((AIDE_LOG.parent / "journal.json").read_text())["nodes"], key=lambda n: n["step"])
    memory = P.aide_memory([(n["plan"], n["analysis"], n["metric"]["value"])
                            for n in journal[:reviewed] if not n["is_buggy"]])
    previous = improve.system.split("## Code\n\n```python\n", 1)[1].rsplit("\n```", 1)[0]
    parent = NodeView(node_id=1, stage="draft", plan="", code=previous, status="ok")
    assert P.to_messages(P.improve_prompt(context(7, memory), parent, 3600))[0]["content"] == improve.system

    debug = next(c for c in log.calls if c.role == "debug")
    code = debug.system.split("implementation\n\n```python\n", 1)[1].split("\n```\n\n# Execution output", 1)[0]
    output = debug.system.split("# Execution output\n\n```\n", 1)[1].split("\n```\n\n# Instructions", 1)[0]
    buggy = NodeView(node_id=2, stage="draft", plan="", code=code, status="buggy", output=output)
    assert P.to_messages(P.debug_prompt(context(1), buggy, 3600))[0]["content"] == debug.system

    review = log.calls[1]
    code = review.system.split("# Implementation\n\n```python\n", 1)[1].split("\n```\n\n# Execution output", 1)[0]
    output = review.system.split("# Execution output\n\n```\n", 1)[1].rsplit("\n```", 1)[0]
    node = NodeView(node_id=1, stage="draft", plan="", code=code, status="ok", output=output)
    assert P.to_messages(P.review_prompt(context(1), node))[0]["content"] == review.system


def test_sessions_record_their_protocol():
    from engine.agent.session_config import SessionConfig

    assert SessionConfig().protocol == "befair" and SessionConfig.from_dict({"level": "base"}).protocol == "befair"
    config = SessionConfig(protocol="be-fair", best="claimed")
    assert config.blind_test is True and config.to_dict()["protocol"] == "be-fair"
    assert (config.step_timeout, config.feedback) == (3600.0, "none")   # AIDE's exec.timeout; its own output only
    assert SessionConfig().step_timeout == 600.0 and SessionConfig(step_timeout=60).step_timeout == 60
    with pytest.raises(ValueError, match="withholds no validation set"):
        SessionConfig(protocol="be-fair")
    with pytest.raises(ValueError, match="protocol must be one of"):
        SessionConfig(protocol="aide")


BE_FAIR_PIPELINE = '''
import os
import zlib

import pandas as pd


def predict(folder):
    return {n: (zlib.crc32(n.encode()) % 1000) / 1000.0 for n in sorted(os.listdir(folder))}


if __name__ == "__main__":
    df = pd.read_csv("./input/mydataset.csv")
    assert df.columns[0] == "Unnamed: 0" and list(df.columns[1:]) == [
        "super_label", "skin_tone", "alternative_skin_tone", "expert_opinion", "label", "image_name"]
    assert all(os.path.exists(f"./input/MyImages/{n}.jpg") for n in df["image_name"])
    assert sorted(os.listdir("./input")) == ["MyImages", "mydataset.csv"]
    print(f"rows {len(df)}")
    print("Validation AUROC: 0.66")
'''


class ProtocolCoder(CoderBase):
    """Pipelines written for the study's layout; records the contexts it was given."""
    name, label, simulated = "protocol-test", "be-fair layout pipelines (test)", True

    def __init__(self):
        self.contexts = []

    def _reply(self, ctx, stage):
        from engine.coders.protocol import CoderReply

        self.contexts.append((stage, ctx))
        return CoderReply(plan=f"{stage} {ctx.step}", code=BE_FAIR_PIPELINE)

    def draft(self, ctx):
        return self._reply(ctx, "draft")

    def improve(self, ctx, parent):
        return self._reply(ctx, "improve")

    def debug(self, ctx, parent):
        return self._reply(ctx, "debug")

    def review(self, ctx, node):
        from engine.coders.protocol import Review

        ok = node.status == "ok" and "Validation AUROC" in (node.output or "")
        return Review(is_bug=not ok, summary=f"ran: {ok}", claimed_metric=0.66 if ok else None)


def test_a_session_under_the_be_fair_protocol(tmp_path, synth_dir):
    """The agent's ./input is the study's layout, nothing is held out for validation, each node
    is measured on the test set only (blinded), the coder gets AIDE's context and preview."""
    from engine.agent.runner import run
    from engine.agent.session_config import SessionConfig
    from engine.agent.session_setup import start_session
    from engine.coders.llm.prompts import BeFairContext
    from engine.session.store import SessionStore

    ws = prepare_be_fair_workspace(synth_dir / "train" / "fitzpatrick17k.csv", synth_dir / "train" / "images",
                                   tmp_path / "ws", ddi_csv=synth_dir / "test" / "ddi_metadata.csv",
                                   ddi_images=synth_dir / "test" / "images")
    store = SessionStore(tmp_path / "db" / "befair.db")
    coder = ProtocolCoder()
    config = SessionConfig(protocol="be-fair", best="claimed", steps=2, num_drafts=1, data=str(ws.root),
                           step_timeout=60, level="fairness-hint")
    writer = start_session(store, config, workspace=ws, coder=coder)
    state = run(store, writer.session_id, coder=coder, workspace=ws)
    store.close()

    assert state.status == "finished" and state.config["protocol"] == "be-fair"
    assert set(state.data["label_sha256"]) == {"test"}
    assert [n.status for n in state.nodes.values()] == ["ok", "ok"]
    assert "rows 480" in state.nodes[1].stored_output
    # as AIDE's interpreter ends every run's output (its term_out)
    assert re.search(r"Validation AUROC: 0\.66\nExecution time: (a moment|a second|\d+ seconds) seconds "
                     r"\(time limit is a minute\)\.$", state.nodes[1].stored_output), state.nodes[1].stored_output
    for node in state.nodes.values():
        assert node.validation is None and "validation" not in node.eval_verdicts
        assert node.eval_verdicts["test"] == "ok" and node.test_blinded and node.test.n == 164
    assert [stage for stage, _ in coder.contexts] == ["draft", "improve"]
    assert all(isinstance(ctx, BeFairContext) for _, ctx in coder.contexts)
    assert coder.contexts[0][1].data_preview.startswith("```\ninput/\n    mydataset.csv (481 lines)\n")
    memory = coder.contexts[1][1].journal_summary
    assert memory == "Design: draft 1\nResults: ran: True\nValidation Metric: 0.66\n"
    assert state.final_choice["by_claimed"] == 1 and state.final_choice["by_validation"] is None


def test_the_offline_coder_is_refused_under_be_fair(tmp_path, synth_dir):
    from engine.agent.session_setup import start_session
    from engine.agent.session_config import SessionConfig
    from engine.errors import BefairError
    from engine.session.store import SessionStore

    store = SessionStore(tmp_path / "db.db")
    with pytest.raises(BefairError, match="offline coder"):
        start_session(store, SessionConfig(protocol="be-fair", best="claimed", data=str(tmp_path)))
    assert store.sessions() == []
    store.close()
