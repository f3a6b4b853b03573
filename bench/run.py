#!/usr/bin/env python3
"""agent_memory benchmark harness.

Each case in bench/cases/*.toml pairs an operation of the extension with a
baseline doing the same work (plain SQL on the same tables, later also peer
libraries), measured in the same run on the same cluster:

  [pgbench*] client throughput: the same pgbench custom script shape for both,
             -M prepared, alternating A/B over several rounds; median tps.
  [bulk*]    in-database cost: one statement each, timed inside the server
             (clock_timestamp around EXECUTE), alternating; median ms.

It prints per case both figures and their ratio (extension / baseline speed:
above 1 the extension is faster) and rewrites the results table in
BENCHMARKS.md. It reports; it never fails because a machine is slow.

Environment: BENCH_CASES (comma-separated case names, default all),
BENCH_SECONDS (pgbench seconds per run, default 10), BENCH_ROUNDS (default 3),
BENCH_CLIENTS (overrides each case's clients). Connection: the libpq PG*
variables of a running cluster (scripts/bench.sh starts one); PG_BINDIR for
pgbench and psql.
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "bench" / "cases"
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"
START, END = "<!-- bench:results:start -->", "<!-- bench:results:end -->"
BINDIR = Path(os.environ.get("PG_BINDIR", "/usr/lib/postgresql/15/bin"))
DB = "agent_memory_bench"


def psql(sql: str, db: str = DB) -> str:
    out = subprocess.run(
        [BINDIR / "psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql],
        check=True, capture_output=True, text=True,
    )
    return out.stdout.strip()


def run_statements(spec) -> None:
    """Run one statement, or a list of them each in its own transaction
    (VACUUM, ALTER SYSTEM and CHECKPOINT cannot share one)."""
    for statement in [spec] if isinstance(spec, str) else spec:
        psql(statement)


def prepare_database() -> None:
    psql(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)", db="postgres")
    psql(f"CREATE DATABASE {DB}", db="postgres")
    psql("CREATE EXTENSION agent_memory")
    # Server-side timer for [bulk]: excludes connection and client costs.
    psql("""
        CREATE FUNCTION public.bench_ms(statement text) RETURNS float8 LANGUAGE plpgsql AS $$
        DECLARE t0 timestamptz := clock_timestamp();
        BEGIN
            EXECUTE statement;
            RETURN extract(epoch FROM clock_timestamp() - t0) * 1000;
        END $$""")


def pgbench_tps(script: str, clients: int, seconds: int, defines: dict[str, str], options: str = "") -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script)
        path = f.name
    try:
        args = [BINDIR / "pgbench", "-n", "-M", "prepared", "-c", str(clients),
                "-j", str(min(clients, os.cpu_count() or 1)), "-T", str(seconds), "-f", path]
        for key, value in defines.items():
            args += ["-D", f"{key}={value}"]
        env = dict(os.environ, PGOPTIONS=options) if options else None
        done = subprocess.run(args + [DB], capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"pgbench failed on\n{script}\n{done.stderr[-2000:]}")
        out = done.stdout
    finally:
        os.unlink(path)
    match = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out)
    if not match:
        raise RuntimeError(f"no tps in pgbench output:\n{out}")
    return float(match.group(1))


def pgbench_p50_ms(script: str, seconds: int, defines: dict[str, str], options: str = "") -> float:
    """The median latency of `script`'s transactions, one client, in ms."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "latency.sql"
        path.write_text(script)
        args = [BINDIR / "pgbench", "-n", "-M", "prepared", "-c", "1", "-T", str(seconds),
                "-l", "--log-prefix", str(Path(tmp) / "tx"), "-f", str(path)]
        for key, value in defines.items():
            args += ["-D", f"{key}={value}"]
        env = dict(os.environ, PGOPTIONS=options) if options else None
        done = subprocess.run(args + [DB], capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"pgbench failed on\n{script}\n{done.stderr[-2000:]}")
        # client_id transaction_no time_us script_no time_epoch time_us ...
        latencies = [int(fields[2]) / 1000 for log in Path(tmp).glob("tx.*")
                     for fields in (line.split() for line in log.read_text().splitlines())
                     if len(fields) >= 6 and fields[2].isdigit()]
    if not latencies:
        raise RuntimeError(f"no transaction logged for\n{script}")
    return statistics.median(latencies)


def pgbench_progress(script: str, clients: int, seconds: int) -> tuple[float, list[tuple[float, float]]]:
    """Run pgbench with per-second progress; returns its start time (epoch)
    and (seconds since start, tps) for every second."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script)
        path = f.name
    try:
        args = [BINDIR / "pgbench", "-n", "-M", "prepared", "-c", str(clients),
                "-j", str(min(clients, os.cpu_count() or 1)), "-T", str(seconds), "-P", "1", "-f", path, DB]
        started = float(psql("SELECT extract(epoch FROM clock_timestamp())"))
        out = subprocess.run(args, check=True, capture_output=True, text=True)
    finally:
        os.unlink(path)
    progress = [(float(m.group(1)), float(m.group(2)))
                for m in re.finditer(r"progress: ([0-9.]+) s, ([0-9.]+) tps", out.stderr)]
    return started, progress


def pgbench_logged(script: str, clients: int, seconds: int, meanwhile, after: float) -> list[float]:
    """Run pgbench logging every transaction, call `meanwhile()` `after`
    seconds in; returns when each transaction ended (epoch seconds), sorted."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "load.sql"
        path.write_text(script)
        args = [BINDIR / "pgbench", "-n", "-M", "prepared", "-c", str(clients),
                "-j", str(min(clients, os.cpu_count() or 1)), "-T", str(seconds),
                "-l", "--log-prefix", str(Path(tmp) / "tx"), "-f", str(path), DB]
        load = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(after)
        meanwhile()
        _, err = load.communicate()
        if load.returncode != 0:
            raise RuntimeError(f"pgbench failed on\n{script}\n{err[-2000:]}")
        ends = []
        for log in Path(tmp).glob("tx.*"):
            for line in log.read_text().splitlines():
                # client_id transaction_no time script_no time_epoch time_us ...
                fields = line.split()
                if len(fields) >= 6 and fields[2].isdigit():
                    ends.append(int(fields[4]) + int(fields[5]) / 1e6)
    return sorted(ends)


def set_cleanup_interval(value: str) -> None:
    psql(f"ALTER SYSTEM SET agent_memory.cleanup_interval = '{value}'")
    psql("SELECT pg_reload_conf()")


def run_under_load(name: str, spec: dict, seconds: int, rounds: int) -> dict:
    """Foreground throughput alone, and while the background worker removes
    the rows `load` expires: the worker is parked while they are written,
    woken 3 s into the load, and the foreground transactions that ended
    while it was busy (its cleanup_runs row gives the window) are counted
    from pgbench's log of every transaction, so a cleanup of under a second
    is measured as exactly as a long one."""
    clients = int(os.environ.get("BENCH_CLIENTS", spec.get("clients", 4)))
    duration = max(seconds, int(spec.get("seconds", 20)))
    alone, loaded, rates = [], [], []
    # The worker connects to the bench database once it exists (it retries
    # every few seconds after the database is created).
    for _ in range(60):
        if psql("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'agent_memory cleanup' "
                f"AND datname = '{DB}'") == "1":
            break
        time.sleep(0.5)
    else:
        raise RuntimeError(f"{name}: the cleanup worker never connected to {DB}")
    for _ in range(rounds):
        _, progress = pgbench_progress(spec["script"], clients, duration)
        alone.append(statistics.mean(tps for _, tps in progress[1:]))
        # Parked: a reload wakes the worker, it finds nothing, and then
        # sleeps for an hour while the expired rows are written.
        set_cleanup_interval("1h")
        time.sleep(2)
        run_statements(spec["load"])
        expired = int(psql(spec["count_expired"]))
        mark = psql("SELECT coalesce(max(run_id), 0) FROM agent_memory.cleanup_runs")
        ends = pgbench_logged(spec["script"], clients, duration,
                              meanwhile=lambda: set_cleanup_interval("1s"), after=3)
        window = psql(
            "SELECT extract(epoch FROM min(started_at)), extract(epoch FROM max(finished_at)), sum(entries_deleted) "
            f"FROM agent_memory.cleanup_runs WHERE triggered_by = 'worker' AND run_id > {mark}").split("|")
        if not window[0] or int(window[2] or 0) < expired:
            raise RuntimeError(f"{name}: the worker did not remove the {expired} rows during the run; lengthen it")
        begin, end = float(window[0]), float(window[1])
        if not ends or end > ends[-1] or end - begin < 0.05:
            raise RuntimeError(f"{name}: the cleanup ({end - begin:.3f} s) did not run inside the load")
        done = bisect.bisect_right(ends, end) - bisect.bisect_left(ends, begin)
        loaded.append(done / (end - begin))
        rates.append(expired / (end - begin))
    a, b = statistics.median(loaded), statistics.median(alone)
    print(f"   worker removed rows at {statistics.median(rates):,.0f} rows/s while the load ran", flush=True)
    rows = [dict(case=name, kind=f"pgbench {clients} clients, during cleanup", unit="tps",
                 ext=a, base=b, ratio=a / b, baseline="same load, no cleanup")]
    if "cron_job" in spec:
        if os.environ.get("BENCH_PG_CRON"):
            rows += run_cron_peer(name, spec, clients, rounds, a, statistics.median(rates))
        else:
            print("   pg_cron is not preloaded here: its row is left out", flush=True)
    return rows


def run_cron_peer(name: str, spec: dict, clients: int, rounds: int, worker_tps: float,
                  worker_rate: float) -> list[dict]:
    """The peer for TTL: pg_cron running the plain DELETE every minute, on
    the same expired rows under the same load. pg_cron schedules by the
    minute here, so each round runs the load for 75 s and finds the job's
    run in cron.job_run_details."""
    psql("CREATE EXTENSION IF NOT EXISTS pg_cron")
    # Park the worker, so that only the cron job removes the rows.
    set_cleanup_interval("1h")
    time.sleep(3)
    loaded, rates = [], []
    for _ in range(min(rounds, 3)):
        run_statements(spec["load"])
        expired = int(psql(spec["count_expired"]))
        job = psql(f"SELECT cron.schedule('agent_memory_bench_ttl', '* * * * *', $job${spec['cron_job']}$job$)")
        ends = pgbench_logged(spec["script"], clients, 75, meanwhile=lambda: None, after=0)
        psql("SELECT cron.unschedule('agent_memory_bench_ttl')")
        found = psql("SELECT extract(epoch FROM start_time), extract(epoch FROM end_time), status "
                     f"FROM cron.job_run_details WHERE jobid = {job} AND end_time IS NOT NULL "
                     "ORDER BY start_time LIMIT 1")
        if not found:
            raise RuntimeError(f"{name}: the pg_cron job did not run during the load")
        begin, end, status = found.split("|")
        left = int(psql(spec["count_expired"]))
        if status != "succeeded" or left >= expired:
            raise RuntimeError(f"{name}: the pg_cron job {status}, {left} of {expired} expired rows left")
        begin, end = float(begin), float(end)
        if not ends or not ends[0] < begin < end < ends[-1]:
            raise RuntimeError(f"{name}: the pg_cron job ran outside the load")
        # Counted as for the worker: the transactions that ended during it.
        done = bisect.bisect_right(ends, end) - bisect.bisect_left(ends, begin)
        loaded.append(done / max(end - begin, 1e-3))
        rates.append((expired - left) / max(end - begin, 1e-3))
    set_cleanup_interval("1s")
    cron_tps, cron_rate = statistics.median(loaded), statistics.median(rates)
    print(f"   pg_cron's DELETE removed rows at {cron_rate:,.0f} rows/s while the load ran", flush=True)
    return [
        dict(case=name, kind=f"pgbench {clients} clients during cleanup: worker vs pg_cron DELETE", unit="tps",
             ext=worker_tps, base=cron_tps, ratio=worker_tps / cron_tps, baseline="pg_cron-scheduled DELETE"),
        dict(case=name, kind="rows removed per second under that load: worker vs pg_cron DELETE", unit="rows/s",
             ext=worker_rate, base=cron_rate, ratio=worker_rate / cron_rate, baseline="pg_cron-scheduled DELETE"),
    ]


def run_peer(spec: dict, rounds: int) -> list[dict]:
    """A peer library measured by its own script (in the bench virtualenv),
    which prints one JSON row per line."""
    python = os.environ.get("BENCH_PYTHON", "/opt/agent_memory/bench-venv/bin/python")
    env = dict(os.environ, BENCH_DB=DB, BENCH_ROUNDS=str(rounds))
    out = subprocess.run([python, ROOT / spec["script"]], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit(f"{spec['script']} failed (exit {out.returncode})")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def bulk_ms(statement: str) -> float:
    return float(psql("SELECT public.bench_ms($q$" + statement + "$q$)"))


def alternate(rounds: int, run_ext, run_base) -> tuple[float, float]:
    """Run A/B, then B/A, ... so both see the same drift; medians."""
    ext, base = [], []
    for r in range(rounds):
        order = [(ext, run_ext), (base, run_base)]
        if r % 2:
            order.reverse()
        for results, run in order:
            results.append(run())
    return statistics.median(ext), statistics.median(base)


def run_case(path: Path, seconds: int, rounds: int) -> list[dict]:
    case = tomllib.loads(path.read_text())
    name = path.stem
    print(f"\n== {name}: {case['title']}", flush=True)
    # A case that needs another extension (pgvector) is skipped where the
    # server has none.
    for extension in case.get("extensions", []):
        if psql(f"SELECT count(*) FROM pg_available_extensions WHERE name = '{extension}'") == "0":
            print(f"   skipped: this server has no {extension}", flush=True)
            return []
        psql(f"CREATE EXTENSION IF NOT EXISTS {extension}")
    if "setup" in case:
        run_statements(case["setup"])
    rows = []
    for section in [k for k in case if k.startswith("pgbench")]:
        spec = case[section]
        clients = int(os.environ.get("BENCH_CLIENTS", spec.get("clients", 4)))
        defines = {k: str(v) for k, v in spec.get("defines", {}).items()}
        # Server options for both sides' connections (PGOPTIONS), e.g. a plan cache mode.
        options = spec.get("options", "")
        # Statements run before every pgbench run of either side (e.g. a
        # VACUUM, so that neither side reads through what the other left).
        reset = spec.get("reset", [])

        def measured(script: str):
            def run():
                run_statements(reset)
                return pgbench_tps(script, clients, seconds, defines, options)
            return run

        ext, base = alternate(rounds, measured(spec["extension"]), measured(spec["baseline"]))
        label = spec.get("label", "")
        rows.append(dict(case=name, kind=f"{label + ', ' if label else ''}pgbench {clients} clients", unit="tps",
                         ext=ext, base=base, ratio=ext / base,
                         baseline=spec.get("baseline_name", "plain SQL")))
        if spec.get("latency"):
            def p50(script: str):
                def run():
                    run_statements(reset)
                    return pgbench_p50_ms(script, seconds, defines, options)
                return run

            ext, base = alternate(rounds, p50(spec["extension"]), p50(spec["baseline"]))
            rows.append(dict(case=name, kind=f"{label + ', ' if label else ''}p50 latency, 1 client", unit="ms",
                             ext=ext, base=base, ratio=base / ext,
                             baseline=spec.get("baseline_name", "plain SQL")))
    for section in [k for k in case if k.startswith("bulk")]:
        spec = case[section]
        def timed(statement: str):
            def run():
                if "reset" in spec:
                    run_statements(spec["reset"])
                return bulk_ms(statement)
            return run

        ext, base = alternate(rounds, timed(spec["extension"]), timed(spec["baseline"]))
        rows.append(dict(case=name, kind=spec.get("label", "bulk, one statement"), unit="ms",
                         ext=ext, base=base, ratio=base / ext,
                         baseline=spec.get("baseline_name", "plain SQL")))
    for row in rows:
        print(f"   {row['kind']:<28} extension {row['ext']:>12,.1f} {row['unit']}   "
              f"{row['baseline']} {row['base']:>12,.1f} {row['unit']}   ratio {row['ratio']:.2f}", flush=True)
    if "peer" in case:
        rows += run_peer(case["peer"], rounds)
    if "under_load" in case:
        rows += run_under_load(name, case["under_load"], seconds, rounds)
    if "teardown" in case:
        run_statements(case["teardown"])
    return rows


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    server = psql("SHOW server_version", db="postgres")
    return f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}, PostgreSQL {server}"


def shown(value: float, unit: str) -> str:
    """A measure with its unit: small ones (quality scores, latencies)
    with three decimals."""
    number = f"{value:,.3f}" if value < 10 else f"{value:,.1f}"
    return f"{number} {unit}".strip()


def table_row(r: dict, when: str) -> str:
    return (f"| {r['case']} | {r['kind']} | {shown(r['ext'], r['unit'])} | {shown(r['base'], r['unit'])} "
            f"| {r['baseline']} | {r['ratio']:.2f} | {when} |")


def earlier_rows(text: str, cases_run: set[str]) -> list[str]:
    """Rows of the committed table for cases this run did not measure: a run
    of some cases (BENCH_CASES) replaces only their rows."""
    if START not in text:
        return []
    table = text.split(START, 1)[1].split(END, 1)[0]
    kept = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        # Data rows only, and only of the current shape (7 cells, with a date).
        if len(cells) == 7 and line.startswith("| ") and cells[0] not in ("case", "---") \
                and not cells[0].startswith("-") and cells[0] not in cases_run:
            kept.append(line)
    return kept


def write_section(start: str, end: str, heading: str, body: list[str]) -> None:
    """Replace what stands between the markers `start` and `end` of
    BENCHMARKS.md with `body`; a file without them gets a section under
    `heading` at its end."""
    text = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else "# Benchmarks\n"
    if start not in text:
        text += f"\n## {heading}\n\n{start}\n{end}\n"
    head, rest = text.split(start, 1)
    BENCHMARKS_MD.write_text(head + "\n".join([start, *body, end]) + rest.split(end, 1)[1])


def write_markdown(rows: list[dict], seconds: int, rounds: int) -> None:
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else ""
    cases_run = {r["case"] for r in rows}
    fresh = [(r["case"], table_row(r, when)) for r in rows]
    kept = [(line.split("|")[1].strip(), line) for line in earlier_rows(text, cases_run)]
    lines = [
        f"Latest run {when} on {machine()}; {rounds} alternating rounds, pgbench runs of {seconds} s, medians.",
        "Ratio = extension speed / baseline speed (above 1: the extension is faster). Each row says when it was",
        "measured: a run of some cases (`BENCH_CASES`) replaces only their rows.",
        "",
        "| case | measure | extension | baseline | baseline is | ratio | measured |",
        "|---|---|---:|---:|---|---:|---|",
    ]
    # Cases in name order, each case's rows in the order they were measured.
    lines += [line for _, line in sorted(fresh + kept, key=lambda pair: pair[0])]
    write_section(START, END, "Results", lines)
    print(f"\nwrote {BENCHMARKS_MD.relative_to(ROOT)}")


def main() -> int:
    seconds = int(os.environ.get("BENCH_SECONDS", 10))
    rounds = int(os.environ.get("BENCH_ROUNDS", 3))
    # "growth", "growth_per_key" and "citus" name bench/growth.py,
    # bench/growth_per_key.py and bench/citus.py, which scripts/bench.sh
    # runs after the cases.
    wanted = [c for c in os.environ.get("BENCH_CASES", "").split(",")
              if c and c not in ("growth", "growth_per_key", "citus")]
    if os.environ.get("BENCH_CASES") and not wanted:
        return 0
    paths = sorted(CASES.glob("*.toml"))
    if wanted:
        paths = [p for p in paths if p.stem in wanted]
        missing = set(wanted) - {p.stem for p in paths}
        if missing:
            print(f"unknown cases: {', '.join(sorted(missing))}", file=sys.stderr)
            return 2
    prepare_database()
    rows = []
    for path in paths:
        rows += run_case(path, seconds, rounds)
    print("\nsummary (ratio = extension / baseline speed)")
    for r in rows:
        print(f"  {r['case']:<24} {r['kind']:<28} {r['ratio']:.2f}")
    write_markdown(rows, seconds, rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
