"""The cost of a call through a Citus coordinator.

append_message, kv_set and a memory-tool read, each as one autocommit
call (delegated to the key's worker), timed through the coordinator of a
throwaway Citus cluster (scripts/citus.sh: a coordinator and two workers on
loopback) and on a single server (the bench cluster), alternating, one
client, pgbench's median latency. Three servers share this machine's cores,
so the ratio measures the overhead of the extra hop, not what Citus gains
by spreading keys over machines. Writes its section of BENCHMARKS.md.

Needs PostgreSQL 15 with Citus 13.2 installed; says so and exits when it is
missing. scripts/bench.sh runs it when BENCH_CASES is empty or names citus.
"""

from __future__ import annotations

import datetime as dt
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (machine, BENCHMARKS.md sections)

ROOT = bench.ROOT
BINDIR = bench.BINDIR
DB = "agent_memory_citus_bench"
START, END = "<!-- bench:citus:start -->", "<!-- bench:citus:end -->"
SECONDS = int(os.environ.get("BENCH_SECONDS", "10"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))

SETUP = [
    "SELECT agent_memory.create_session('bench', session_id => 'cb-session')",
    "SELECT agent_memory.memory_tool('cb-scope', "
    "'{\"command\": \"append\", \"path\": \"/notes\", \"content\": \"the seat is by the window\"}')",
]
CALLS = [
    ("append_message",
     "SELECT agent_memory.append_message('cb-session', 'user', 'one more message', keep => 50);"),
    ("kv_set",
     "\\set k random(1, 100)\n"
     "SELECT agent_memory.kv_set('cb-session', 'key' || :k, '\"a value of a few words\"');"),
    ("memory_tool read",
     "SELECT agent_memory.memory_tool('cb-scope', '{\"command\": \"read\", \"path\": \"/notes\"}');"),
]


def psql(env: dict, sql: str, db: str | None = None) -> None:
    subprocess.run([BINDIR / "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1",
                    "-d", db or env["PGDATABASE"], "-c", sql],
                   check=True, capture_output=True, text=True, env=env)


def p50_ms(env: dict, script: str) -> float:
    """pgbench's median latency of `script`, one client, in ms."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "call.sql"
        path.write_text(script)
        done = subprocess.run(
            [BINDIR / "pgbench", "-n", "-M", "prepared", "-c", "1", "-T", str(SECONDS),
             "-l", "--log-prefix", str(Path(tmp) / "tx"), "-f", str(path), env["PGDATABASE"]],
            capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"pgbench failed on\n{script}\n{done.stderr[-2000:]}")
        latencies = [int(fields[2]) / 1000 for log in Path(tmp).glob("tx.*")
                     for fields in (line.split() for line in log.read_text().splitlines())
                     if len(fields) >= 6 and fields[2].isdigit()]
    return statistics.median(latencies)


def citus_env() -> dict:
    """A fresh Citus cluster (database memory, Citus in it, the workers
    added), set up by sql/citus.sql; the libpq variables of its
    coordinator."""
    scripts = ROOT / "scripts"
    conf = "lc_messages = 'C'\nsynchronous_commit = off\njit = off"
    subprocess.run([scripts / "citus.sh", "start", "--fresh"], check=True,
                   env=dict(os.environ, PG="15", CITUS_CONF=conf), stdout=subprocess.DEVNULL)
    lines = subprocess.run([scripts / "citus.sh", "env"], check=True, capture_output=True, text=True,
                           env=dict(os.environ, PG="15")).stdout
    env = dict(os.environ)
    for line in lines.splitlines():
        for word in shlex.split(line.removeprefix("export ")):
            key, _, value = word.partition("=")
            env[key] = value
    psql(env, "CREATE EXTENSION agent_memory", db=env["PGDATABASE"])
    subprocess.run([BINDIR / "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1",
                    "-f", str(ROOT / "sql" / "citus.sql")],
                   check=True, capture_output=True, text=True, env=env)
    return env


def main() -> int:
    if not (Path(subprocess.run([BINDIR / "pg_config", "--pkglibdir"], capture_output=True,
                                text=True).stdout.strip()) / "citus.so").exists():
        print("citus: Citus is not installed for this PostgreSQL (../shared/citus/install.sh): case left out")
        return 0
    single = dict(os.environ, PGDATABASE=DB)
    psql(single, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)", db="postgres")
    psql(single, f"CREATE DATABASE {DB}", db="postgres")
    psql(single, "CREATE EXTENSION agent_memory")
    coordinator = citus_env()
    try:
        for env in (single, coordinator):
            for statement in SETUP:
                psql(env, statement)
        rows = []
        for name, script in CALLS:
            on_single, on_citus = [], []
            for _ in range(ROUNDS):
                on_single.append(p50_ms(single, script))
                on_citus.append(p50_ms(coordinator, script))
            one, through = statistics.median(on_single), statistics.median(on_citus)
            rows.append((name, one, through))
            print(f"citus: {name}: {one * 1000:.0f} µs on one server, "
                  f"{through * 1000:.0f} µs through the coordinator ({through / one:.1f}×)")
    finally:
        subprocess.run([ROOT / "scripts" / "citus.sh", "stop"], env=dict(os.environ, PG="15"),
                       stdout=subprocess.DEVNULL)
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = [
        f"Latest run {when} on {bench.machine()}; {ROUNDS} alternating rounds, pgbench runs of "
        f"{SECONDS} s, one client, median latency. A coordinator and two workers share these cores:",
        "the figures measure the hop through the coordinator, not what separate machines gain.",
        "",
        "| call | one server | through the coordinator (delegated) | ratio | added per call |",
        "|---|---:|---:|---:|---:|",
    ]
    body += [f"| {name} | {one * 1000:.0f} µs | {through * 1000:.0f} µs | {through / one:.1f}× | "
             f"{(through - one) * 1000:.0f} µs |" for name, one, through in rows]
    bench.write_section(START, END, "Citus", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
