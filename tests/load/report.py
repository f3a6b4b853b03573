#!/usr/bin/env python3
"""Per-call latencies of a pgbench run from its per-transaction logs.

  report.py LOG_PREFIX SCRIPT_NAME...

LOG_PREFIX is pgbench's --log-prefix (its files are LOG_PREFIX.<pid> and
LOG_PREFIX.<pid>.<thread>); the names are the scripts in the order they were
given to pgbench (-f), so script_no N is the N-th name. A log line is (PostgreSQL
15 to 18, without --rate and with --max-tries=1):

  client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]

where time is the latency in microseconds, or "failed" / "serialization" /
"deadlock" / "other" / "skipped" for a transaction that did not complete.

Prints one row per script: calls, failures, p50, p99, max (ms); then a line
"report: <calls> calls, <kinds> kinds, <failed> failed" that the caller parses.
Exits 2 when it finds no log at all.
"""

from __future__ import annotations

import glob
import math
import sys


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (q in 0..100)."""
    if not sorted_values:
        return float("nan")
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    prefix, names = sys.argv[1], sys.argv[2:]
    files = sorted(glob.glob(glob.escape(prefix) + ".*"))
    if not files:
        print(f"report: no pgbench log at {prefix}.*", file=sys.stderr)
        return 2
    latencies: dict[int, list[float]] = {i: [] for i in range(len(names))}
    failures: dict[int, dict[str, int]] = {i: {} for i in range(len(names))}
    malformed = 0
    for path in files:
        with open(path) as log:
            for line in log:
                fields = line.split()
                if len(fields) < 6:
                    malformed += 1
                    continue
                try:
                    script = int(fields[3])
                except ValueError:
                    malformed += 1
                    continue
                if script not in latencies:
                    malformed += 1
                    continue
                try:
                    latencies[script].append(int(fields[2]) / 1000.0)
                except ValueError:
                    kind = fields[2]
                    failures[script][kind] = failures[script].get(kind, 0) + 1

    width = max(len(n) for n in names)
    print(f"{'call':<{width}}  {'calls':>8}  {'failed':>6}  {'p50 ms':>8}  {'p99 ms':>8}  {'max ms':>8}")
    total = failed = kinds = 0
    for i, name in enumerate(names):
        values = sorted(latencies[i])
        n_failed = sum(failures[i].values())
        detail = (" (" + ", ".join(f"{k} {v}" for k, v in sorted(failures[i].items())) + ")") if n_failed else ""
        if values:
            print(f"{name:<{width}}  {len(values):>8}  {n_failed:>6}  {percentile(values, 50):>8.2f}  "
                  f"{percentile(values, 99):>8.2f}  {values[-1]:>8.2f}{detail}")
        else:
            print(f"{name:<{width}}  {0:>8}  {n_failed:>6}  {'-':>8}  {'-':>8}  {'-':>8}{detail}")
        total += len(values) + n_failed
        failed += n_failed
        kinds += 1 if values else 0
    everything = sorted(v for values in latencies.values() for v in values)
    if everything:
        print(f"{'(all)':<{width}}  {len(everything):>8}  {failed:>6}  {percentile(everything, 50):>8.2f}  "
              f"{percentile(everything, 99):>8.2f}  {everything[-1]:>8.2f}")
    if malformed:
        print(f"report: {malformed} log lines not understood", file=sys.stderr)
    print(f"report: {total} calls, {kinds} kinds, {failed} failed, {malformed} malformed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
