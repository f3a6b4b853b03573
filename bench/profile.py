#!/usr/bin/env python3
"""Instructions per call, counted by callgrind: where each call's work goes.

Throughput on a 2-core machine moves by a tenth between runs; instruction
counts do not. For every call of bench/profile.toml this runs the extension
call and its plain-SQL baseline as prepared statements in a single-user
backend under `valgrind --tool=callgrind`, twice (N1 and N2 executions), so
that (count at N2 - count at N1) / (N2 - N1) is the cost of one more call,
start-up and first-call planning excluded. The extension's count is split
into:

- statements: inside SPI_execute_plan (the SQL the function runs);
- own work: the rest of the function (arguments, checks, results);
- calling it: the SELECT that calls the function, with the function's SET
  clauses (fmgr_security_definer) around it;
- per statement: what every EXECUTE costs either side (parsing the
  EXECUTE line, commit, printing the result in single-user mode).

Writes the table between the bench:profile markers of BENCHMARKS.md.
PROFILE_KEEP=dir keeps each callgrind output there, named by the
statement and the number of calls.
Connection: the libpq PG* variables of the cluster scripts/profile.sh
started (it is stopped here: single-user mode needs the data directory to
itself); PG_BINDIR, PG_DATA, PG_OS_USER, CLUSTER_SCRIPT from the script.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402

CALLS = bench.ROOT / "bench" / "profile.toml"
START, END = "<!-- bench:profile:start -->", "<!-- bench:profile:end -->"
N1, N2 = int(os.environ.get("PROFILE_N1", 200)), int(os.environ.get("PROFILE_N2", 1200))
DATA = os.environ["PG_DATA"]
RUNAS = os.environ.get("PG_OS_USER", "postgres")
CLUSTER = os.environ["CLUSTER_SCRIPT"]
KEEP = os.environ.get("PROFILE_KEEP", "")


def callgrind(statement: str, types: list[str], args: list[str], calls: int, before: str) -> dict[str, int]:
    """Inclusive instruction counts of a run of `calls` executions, after
    the statement `before` (a setting both sides run with): the whole
    program and the functions the split needs."""
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o777)
        script = Path(tmp) / "in.sql"
        lines = [f"{before};"] if before else []
        lines.append(f"PREPARE q({', '.join(types)}) AS {' '.join(statement.split())};")
        for i in range(calls):
            values = ", ".join("'" + str(eval(a, {"i": i})).replace("'", "''") + "'" for a in args)
            lines.append(f"EXECUTE q({values});")
        script.write_text("\n".join(lines) + "\n")
        out = Path(tmp) / "callgrind.out"
        with open(script) as stdin:
            done = subprocess.run(
                ["runuser", "-u", RUNAS, "--", "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                 bench.BINDIR / "postgres", "--single", "-D", DATA, "-c", "jit=off", bench.DB],
                stdin=stdin, capture_output=True, text=True)
        if "ERROR" in done.stdout or not out.exists():
            raise RuntimeError(f"profiling failed:\n{statement}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
                                   capture_output=True, text=True, check=True).stdout
        if KEEP:
            # For callgrind_annotate by hand: the difference of the two runs
            # of a statement, function by function, is its cost of one call.
            Path(KEEP).mkdir(parents=True, exist_ok=True)
            name = f"{hashlib.sha1(statement.encode()).hexdigest()[:10]}-{calls}.out"
            shutil.copyfile(out, Path(KEEP) / name)
            print(f"   kept {Path(KEEP) / name}: {' '.join(statement.split())[:60]}", flush=True)
    counts: dict[str, int] = {}
    for line in annotated.splitlines():
        m = re.match(r"\s*([0-9,]+) \([ 0-9.]+%\)\s+(.*)$", line)
        if not m:
            continue
        n, what = int(m.group(1).replace(",", "")), m.group(2)
        if "PROGRAM TOTALS" in what:
            counts["total"] = n
        for key, pattern in (("spi", r":SPI_execute_plan \["), ("fmgr", r":fmgr_security_definer \["),
                             ("wrapper", r":[a-z_]+_wrapper \["), ("execute", r":ExecuteQuery \[")):
            if re.search(pattern, what) and key not in counts:
                counts[key] = n
    return counts


def per_call(statement: str, types: list[str], args: list[str], before: str = "") -> dict[str, float]:
    small, big = callgrind(statement, types, args, N1, before), callgrind(statement, types, args, N2, before)
    return {k: (big.get(k, 0) - small.get(k, 0)) / (N2 - N1) for k in big}


def earlier_section() -> list[str]:
    """The lines the profile section of BENCHMARKS.md holds now."""
    text = bench.BENCHMARKS_MD.read_text() if bench.BENCHMARKS_MD.exists() else ""
    if START not in text:
        return []
    return text.split(START, 1)[1].split(END, 1)[0].strip().splitlines()


def main() -> int:
    calls = tomllib.loads(CALLS.read_text())["call"]
    wanted = [c for c in os.environ.get("PROFILE_CALLS", "").split(",") if c]
    if wanted:
        calls = [c for c in calls if c["name"] in wanted]
        unknown = set(wanted) - {c["name"] for c in calls}
        if unknown:
            sys.exit(f"bench/profile.toml has no call named {', '.join(sorted(unknown))} "
                     "(PROFILE_CALLS is a comma-separated list of names)")
    bench.prepare_database()
    server = bench.psql("SHOW server_version", db="postgres")
    rows = []
    left_out: list[str] = []
    for case in dict.fromkeys(c["case"] for c in calls):
        subprocess.run([CLUSTER, "start", "profile"], check=True, capture_output=True)
        spec = tomllib.loads((bench.CASES / f"{case}.toml").read_text())
        # A case that needs another extension (pgvector) is left out where
        # the server has none, as bench/run.py leaves it out.
        missing = [e for e in spec.get("extensions", []) if bench.psql(
            f"SELECT count(*) FROM pg_available_extensions WHERE name = '{e}'") == "0"]
        for extension in spec.get("extensions", []):
            if not missing:
                bench.psql(f"CREATE EXTENSION IF NOT EXISTS {extension}")
        if not missing:
            bench.run_statements(spec.get("setup", []))
        subprocess.run([CLUSTER, "stop", "profile"], check=True, capture_output=True)
        if missing:
            print(f"   {case}: left out, this server has no {', '.join(missing)}", flush=True)
            left_out += [c["name"] for c in calls if c["case"] == case]
            continue
        for call in [c for c in calls if c["case"] == case]:
            before = call.get("before", "")
            ext = per_call(call["extension"], call["types"], call["args"], before)
            base = per_call(call["baseline"], call["types"], call["args"], before)
            statements = ext.get("spi", 0)
            own = ext.get("wrapper", 0) - statements
            calling = ext.get("execute", 0) - ext.get("wrapper", 0)
            fixed = ext["total"] - ext.get("execute", 0)
            if call.get("floor"):
                # A plain statement: it has no function to split its count by.
                statements = own = calling = fixed = None
            rows.append((call["name"], ext["total"], statements, own, calling, fixed, base["total"]))
            split = "" if statements is None else (
                f" (statements {statements / 1000:.1f}k, own work {own / 1000:.1f}k, "
                f"calling it {calling / 1000:.1f}k, per statement {fixed / 1000:.1f}k)")
            print(f"   {call['name']:<26} {ext['total'] / 1000:8.1f}k instructions per call{split}; "
                  f"baseline {base['total'] / 1000:.1f}k; ratio {base['total'] / ext['total']:.2f}", flush=True)
    write_table(rows, bool(wanted), server, left_out)
    print(f"wrote the profile table into {bench.BENCHMARKS_MD.relative_to(bench.ROOT)}")
    return 0


def write_table(rows: list[tuple], partial: bool, server: str, left_out: list[str]) -> None:
    """Write the counted rows into BENCHMARKS.md's profile section; a call
    left out (this server lacks what its case needs) keeps its earlier row."""
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    def thousands(count: float | None) -> str:
        return "" if count is None else f"{count / 1000:,.1f}k"

    fresh = {}
    for name, total, *split, base in rows:
        cells = " | ".join(thousands(c) for c in [total, *split, base])
        fresh[name] = f"| {name} | {cells} | {base / total:.2f} |"
    # A run of some calls (PROFILE_CALLS) replaces only their rows and says
    # when it counted them; the others keep the count and date they had.
    earlier = earlier_section()
    kept = {line.split("|")[1].strip(): line for line in earlier if line.startswith("| ") and "---" not in line}
    counted = [line for line in earlier if line.startswith(("Counted ", "Re-counted "))]
    if partial and counted:
        # An earlier re-count keeps only the names not counted again now.
        header = [counted[0]]
        for line in counted[1:]:
            stamp, names = line.rstrip(".").split(": ", 1)
            left = [name for name in names.split(", ") if name not in fresh]
            if left:
                header.append(f"{stamp}: {', '.join(left)}.")
        header.append(f"Re-counted {when} on PostgreSQL {server}: {', '.join(fresh)}.")
    else:
        header = [f"Counted {when} by `make profile` on PostgreSQL {server}: "
                  f"the cost of one more call, (count at {N2} calls - count at {N1}) / {N2 - N1}, "
                  "in thousands of instructions."]
        # A call left out keeps the line that says when it was counted.
        for line in counted[1:]:
            stamp, names = line.rstrip(".").split(": ", 1)
            left = [name for name in names.split(", ") if name in left_out]
            if left:
                header.append(f"{stamp}: {', '.join(left)}.")
    lines = [*header,
             "Ratio = baseline / extension (above 1: the extension does less). A floor row counts a plain "
             "statement with one condition of the extension's against the same statement without it.",
             "", "| call | extension | its statements | its own work | calling it | per statement | baseline | ratio |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    every = [c["name"] for c in tomllib.loads(CALLS.read_text())["call"]]
    lines += [fresh.get(name) or kept[name] for name in every
              if name in fresh or ((partial or name in left_out) and name in kept)]
    bench.write_section(START, END, "Instructions per call", lines)


if __name__ == "__main__":
    sys.exit(main())
