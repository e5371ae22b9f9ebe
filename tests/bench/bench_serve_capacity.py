"""Sizing a study with people (`befair serve --study`): memory per idle participant tab and per
running session, the CPU a running session takes, and from them how many participants a machine
holds at once.

Real processes on a small generated study (the pilot's data: SynthDerm 300/120 images of 32 px,
the offline coder):
- a tab: `befair participate` started by textual-serve's own AppService, as `befair serve` starts
  one per browser tab (web driver, pipes), left idle on its first page;
- a session: a participant's cell started as the Start button starts it (a detached study worker),
  its process tree (the worker and its node subprocesses) sampled until it ends; its CPU is the
  worker's rusage at exit, its node subprocesses included.

Memory is PSS (each shared page split between the processes that map it: the sum over processes
is what they take together) and RSS (what each alone holds), from /proc/PID/smaps_rollup.
"""
from __future__ import annotations

import asyncio
import os
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TABS = 3
STEPS = 2
SAMPLE_S = 0.25
RESERVE_GB = 1.0     # the system and `befair serve` itself, left out of what participants may take
MACHINES = ((4, 2), (8, 4), (16, 8), (32, 16), (64, 32))   # (GB, cores) in the capacity table
SPEC = '''
name = "capacity"
levels = ["base"]
participants = ["p01", "p02", "p03", "p04"]
steps = {steps}
seed = 1
time_limit = 600

[people]
consent = "I agree."

[coder]
name = "offline"
failure_rate = 0.0

[data]
synth = {{ n_train = 300, n_test = 120, size = 32 }}
'''


# --------------------------------------------------------------------------- /proc


def children_map() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def tree(pid: int) -> list[int]:
    """`pid` and every process below it."""
    kids, out, todo = children_map(), [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(kids.get(current, []))
    return out


def cpu_ticks(pids: list[int]) -> dict[int, int]:
    """utime + stime of each process (clock ticks) from /proc/PID/stat."""
    out = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[pid] = int(fields[11]) + int(fields[12])
    return out


def runnable_threads(pids: list[int]) -> int:
    """Threads of these processes that are running or waiting for a core (state R): what they ask
    of the CPU whether or not a busy machine gives it to them."""
    count = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                state = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            count += state == "R"
    return count


def memory_mb(pids: list[int]) -> tuple[float, float]:
    """(RSS, PSS) in MB summed over the processes (those gone meanwhile count 0)."""
    rss = pss = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("Rss:"):
                rss += int(line.split()[1])
            elif line.startswith("Pss:"):
                pss += int(line.split()[1])
    return rss / 1024, pss / 1024


# --------------------------------------------------------------------------- the study


def make_study(tmp: Path) -> tuple[Any, Any]:
    from engine.session.store import SessionStore
    from engine.study import grid
    from engine.study.pool import prepare_data
    from engine.study.spec import load_spec

    path = tmp / "capacity.toml"
    path.write_text(SPEC.format(steps=STEPS))
    spec = load_spec(path)
    store = SessionStore(tmp / "befair.db")
    grid.ensure_study(store, spec)
    prepare_data(spec)   # the SynthDerm cache built once, not inside the measured session
    return spec, store


async def idle_tabs(db: Path, study: str, participants: list[str]) -> list[tuple[float, float, int]]:
    """(RSS, PSS, processes) of each tab, once every tab drew its first page and went quiet."""
    from textual_serve.app_service import AppService
    from textual_serve.download_manager import DownloadManager

    from engine.session.store import SessionStore
    from engine.study import grid, links

    store = SessionStore(db)
    codes = links.ensure_codes(store, grid.stored_spec(store, study))   # each participant's link code
    store.close()
    drawn = {p: 0 for p in participants}
    last = {p: time.monotonic() for p in participants}
    services = []

    async def nothing(*_: Any) -> None:
        return None

    for p in participants:
        async def write_bytes(data: bytes, p: str = p) -> None:
            drawn[p] += len(data)
            last[p] = time.monotonic()

        command = shlex.join([sys.executable, "-m", "befair_tui.cli", "participate", "--study", study, "--db",
                              str(db), "--participant", p, f"--code={codes[p]}"])   # as befair serve's tab runs
        service = AppService(command, write_bytes=write_bytes, write_str=nothing,
                             close=nothing, download_manager=DownloadManager())
        await service.start(100, 30)
        services.append(service)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (all(drawn.values()) and time.monotonic() - max(last.values()) > 2):
        await asyncio.sleep(0.2)
    if not all(drawn.values()):
        raise RuntimeError(f"a participant tab drew nothing in 120 s (bytes drawn: {drawn})")
    await asyncio.sleep(1.0)
    out = []
    for service in services:
        assert service._process is not None
        pids = tree(service._process.pid)
        rss, pss = memory_mb(pids)
        out.append((rss, pss, len(pids)))
    for service in services:
        process = service._process
        try:
            await asyncio.wait_for(service.stop(), 20)
        except TimeoutError:
            if process is not None:
                process.kill()
        if process is not None:
            await process.wait()
    return out


@dataclass
class SessionRun:
    rss: list[float]
    pss: list[float]
    processes: int          # most processes at once (the worker and its node subprocesses)
    worker_pss: float       # the worker alone, its peak PSS
    runnable: list[int]     # threads running or waiting for a core, at each sample
    cpu_s: float
    wall_s: float
    exit_code: int


def running_session(store: Any, spec: Any, participant: str) -> SessionRun:
    """One participant's cell, started as the Start button starts it, sampled until its worker ends.
    CPU: each process's utime + stime at its last sample, summed (a process's last SAMPLE_S is lost)."""
    from engine.study import people

    people.consent(store, spec, participant)
    position = people.where(store, spec, participant)
    started = time.monotonic()
    proc = people.start_cell(store, spec, participant, position)
    if proc is None:
        raise RuntimeError("the session did not start (a cap on sessions at once?)")
    rss: list[float] = []
    pss: list[float] = []
    ticks: dict[int, int] = {}
    runnable: list[int] = []
    most, worker_pss = 1, 0.0
    while proc.poll() is None:
        pids = tree(proc.pid)
        ticks.update(cpu_ticks(pids))
        runnable.append(runnable_threads(pids))
        r, p = memory_mb(pids)
        if r:
            rss.append(r)
            pss.append(p)
            most = max(most, len(pids))
            worker_pss = max(worker_pss, memory_mb([proc.pid])[1])
        time.sleep(SAMPLE_S)
    cpu_s = sum(ticks.values()) / os.sysconf("SC_CLK_TCK")
    return SessionRun(rss, pss, most, worker_pss, runnable, cpu_s, time.monotonic() - started, int(proc.returncode))


# --------------------------------------------------------------------------- the rule


def participants_at_once(gb: float, cores: int, tab_mb: float, session_mb: float, cpu: float) -> dict[str, int]:
    """How many participants a machine of `gb` GB and `cores` cores holds, each with a tab and a
    session running: the fewer of what memory allows (RESERVE_GB left to the system) and what the
    cores allow (a session slowed by another gets fewer steps in its time limit: a confound)."""
    by_memory = max(0, int((gb - RESERVE_GB) * 1024 // (tab_mb + session_mb)))
    by_cores = max(1, int(cores // cpu)) if cpu > 0 else by_memory
    return {"memory": by_memory, "cores": by_cores, "at_once": min(by_memory, by_cores)}


def capacity_table(tab_mb: float, session_mb: float, cpu: float) -> list[str]:
    lines = [f"  {'machine':<18}{'by memory':>10}{'by cores':>10}{'participants at once':>22}"]
    for gb, cores in MACHINES:
        n = participants_at_once(gb, cores, tab_mb, session_mb, cpu)
        lines.append(f"  {f'{gb} GB, {cores} cores':<18}{n['memory']:>10}{n['cores']:>10}{n['at_once']:>22}")
    return lines


# --------------------------------------------------------------------------- run


def run() -> list[dict]:
    saved = {k: os.environ.get(k) for k in ("BEFAIR_HOME", "PYTHONPATH")}
    with tempfile.TemporaryDirectory(prefix="bench-capacity-") as tmp_name:
        tmp = Path(tmp_name)
        os.environ["BEFAIR_HOME"] = str(tmp / "home")
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), saved["PYTHONPATH"]) if p)
        try:
            spec, store = make_study(tmp)
            tabs = asyncio.run(idle_tabs(store.path, spec.name, list(spec.participants[:TABS])))
            session = running_session(store, spec, spec.participants[-1])
            store.close()
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    return rows(tabs, session)


def rows(tabs: list[tuple[float, float, int]], session: SessionRun) -> list[dict]:
    tab_rss = statistics.median(t[0] for t in tabs)
    tab_pss = statistics.median(t[1] for t in tabs)
    peak_pss, peak_rss = max(session.pss), max(session.rss)
    used = session.cpu_s / session.wall_s
    demand = statistics.fmean(session.runnable)
    p90 = statistics.quantiles(session.runnable, n=10)[-1] if len(session.runnable) > 1 else demand
    load = os.getloadavg()[0]
    n = len(session.pss)
    one = f"one session, {STEPS} steps, offline coder, {n} samples every {SAMPLE_S} s over {session.wall_s:.0f} s"
    per_tab = f"median of {len(tabs)} tabs (range {min(t[1] for t in tabs):.0f}-{max(t[1] for t in tabs):.0f} MB)"
    out = [
        {"name": "idle participant tab, PSS", "value": tab_pss, "unit": "MB",
         "note": f"{per_tab}; `befair participate` under textual-serve's AppService, {tabs[0][2]} process(es)"},
        {"name": "idle participant tab, RSS", "value": tab_rss, "unit": "MB", "note": f"median of {len(tabs)} tabs"},
        {"name": "running session, PSS median", "value": statistics.median(session.pss), "unit": "MB",
         "note": f"the study worker and its node subprocesses; {one}"},
        {"name": "running session, PSS peak", "value": peak_pss, "unit": "MB",
         "note": f"up to {session.processes} processes; the study worker alone peaks at {session.worker_pss:.0f} MB"},
        {"name": "running session, RSS peak", "value": peak_rss, "unit": "MB",
         "note": f"median {statistics.median(session.rss):.0f} MB (RSS counts shared pages in every process)"},
        {"name": "running session, CPU demand", "value": demand, "unit": "cores",
         "note": f"mean threads running or waiting for a core (90th percentile {p90:.0f}); {one}"},
        {"name": "running session, CPU used", "value": used, "unit": "cores",
         "note": f"{session.cpu_s:.1f} CPU s (user + system, every process) over {session.wall_s:.1f} s; "
                 f"1-min load {load:.1f} on {os.cpu_count()} cores (a busy machine gives less than the demand)"},
    ]
    if session.exit_code != 0:
        out[-1]["note"] += f"; the worker exited {session.exit_code}"
    for gb, cores in MACHINES:
        n_at = participants_at_once(gb, cores, tab_pss, peak_pss, demand)
        out.append({"name": f"participants at once, {gb} GB / {cores} cores", "value": n_at["at_once"],
                    "unit": "participants",
                    "note": f"by memory {n_at['memory']} ((GB - {RESERVE_GB:g}) / (tab PSS + session peak PSS)), "
                            f"by cores {n_at['cores']} (cores / session CPU demand)"})
    print(f"\n  capacity: one tab + one running session per participant ({tab_pss:.0f} + {peak_pss:.0f} MB PSS, "
          f"{demand:.2f} cores of demand)")
    print("\n".join(capacity_table(tab_pss, peak_pss, demand)))
    return out


if __name__ == "__main__":
    from tests.bench.run_all import print_row

    for row in run():
        print_row(row)
