"""The offline coder fits its pipelines to the device and the step limit: light models on a CPU
(no ResNet-18 where one would not finish), everything on a GPU, and a choice brought within the
limit by its image size and epochs; without fitting it samples the whole grammar as before."""
from __future__ import annotations

import random

from engine.coders import offline as g
from engine.coders.offline import OfflineCoder, detect_device


def _drafts(compute, n=300, profile="base"):
    return [g.sample_draft(random.Random(i), profile, compute) for i in range(n)]


def test_cpu_drafts_fit_the_step_limit_and_leave_out_resnet():
    for limit, models in ((600.0, {"logreg", "gbm", "cnn"}), (60.0, {"logreg", "gbm"})):
        cpu = g.Compute("cpu", limit)
        drafts = _drafts(cpu)
        assert {c["model"] for c in drafts} == models  # still a search, not one model
        assert "resnet18" not in cpu.models()
        assert all(cpu.fits(c) for c in drafts)


def test_gpu_and_long_limits_keep_resnet_and_unfitted_sampling_is_unchanged():
    assert "resnet18" in {c["model"] for c in _drafts(g.Compute("cuda", 600.0))}
    assert "resnet18" in g.Compute("cpu", 3600.0).models()
    assert "resnet18" in g.Compute("cuda", 300.0).models()
    assert _drafts(None, n=50) == [g.sample_draft(random.Random(i), "base") for i in range(50)]


def test_a_tight_limit_leaves_the_cheapest_model_and_fit_to_shrinks_a_choice():
    assert g.Compute("cpu", 20.0).models() == ["logreg"]
    c = g.default_components("cnn")
    c["image_size"], c["hp"]["epochs"] = 64, 6
    cpu = g.Compute("cpu", 600.0)
    assert not cpu.fits(c)
    fitted = g.fit_to(c, cpu)
    assert cpu.fits(fitted) and fitted["image_size"] <= 48 and fitted["hp"]["epochs"] <= 6


def test_mutations_stay_within_the_limit():
    cpu = g.Compute("cpu", 600.0)
    c = g.sample_draft(random.Random(0), "fairness-methods", cpu)
    for i in range(200):
        c, _ = g.mutate_one(random.Random(i), c, "fairness-methods", cpu)
        assert c["model"] != "resnet18" and cpu.fits(c), c


def test_offline_coder_records_what_it_fitted_to(monkeypatch):
    coder = OfflineCoder(device="cpu", step_timeout=90)
    assert coder.info()["fits"] == {"device": "cpu", "step_timeout": 90.0}
    assert OfflineCoder(fit_compute=False).info()["fits"] is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert detect_device() == "cpu"


def test_a_session_fits_its_coder_to_its_own_device_and_step_limit():
    from engine.agent.coder_registry import make_coder
    from engine.agent.session_config import SessionConfig

    coder = make_coder(SessionConfig(step_timeout=45, extra={"device": "cpu"}))
    assert coder.info()["fits"] == {"device": "cpu", "step_timeout": 45.0}
    assert make_coder(SessionConfig(step_timeout=900, extra={"device": "cuda"})).info()["fits"]["device"] == "cuda"
