#!/usr/bin/env python3
"""A scope's memory files as a directory, and back.

    scripts/memory_files.py export SCOPE DIR   write DIR/memories/... from the scope
    scripts/memory_files.py import SCOPE DIR   take DIR/memories/... into the scope

The mapping is the one Claude's memory tool sees: the file at path /a/b.md
of a scope is /memories/a/b.md, so DIR/memories/a/b.md, with the file's
content as its bytes (UTF-8); a directory Claude's dialect keeps with no
file under it is an empty directory. Anthropic's SDK memory tool over
DIR (BetaLocalFilesystemMemoryTool(base_path=DIR)) reads what
claude_memory would answer. Kept versions stay in the database: a
directory holds only the current files.

Connection: psql with the libpq PG* variables. Python's standard library
only. The lines are those of agent_memory.export(scope => ...) and
agent_memory.import(...): export only, then import, touch no other kind.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Iterator

ROOT = "memories"


def write_directory(lines: Iterable[dict], base: Path) -> int:
    """Write the file and directory lines of an export under base/memories;
    returns how many files were written."""
    root = base / ROOT
    root.mkdir(parents=True, exist_ok=True)
    written = 0
    for line in lines:
        target = root / line.get("path", "").lstrip("/")
        if line.get("kind") == "file":
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(line["content"].encode("utf-8"))
            written += 1
        elif line.get("kind") == "directory":
            target.mkdir(parents=True, exist_ok=True)
    return written


def read_directory(base: Path, scope: str) -> Iterator[dict]:
    """The lines that import takes to make base/memories the scope's files:
    a file line per file (version 1, dated by its modification time) and a
    directory line per empty directory."""
    root = base / ROOT
    for directory, subdirs, files in os.walk(root):
        here = Path(directory)
        path = "/" + here.relative_to(root).as_posix() if here != root else ""
        if here != root and not subdirs and not files:
            yield {"kind": "directory", "scope": scope, "path": path}
        for name in sorted(files):
            when = utc_timestamp((here / name).stat().st_mtime)
            yield {
                "kind": "file",
                "scope": scope,
                "path": f"{path}/{name}",
                "content": (here / name).read_bytes().decode("utf-8"),
                "version": 1,
                "created_at": when,
                "updated_at": when,
                "versions": [],
            }


def utc_timestamp(seconds: float) -> str:
    """An epoch time as a timestamptz literal, UTC."""
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat()


def psql(sql: str, variables: dict[str, str], stdin: str = "") -> str:
    command = ["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1"]
    for name, value in variables.items():
        command += ["-v", f"{name}={value}"]
    return subprocess.run(
        command, input=sql + stdin, stdout=subprocess.PIPE, text=True, check=True
    ).stdout


EXPORT = """SELECT line FROM agent_memory.export(scope => :'scope') AS line
WHERE line ->> 'kind' IN ('file', 'directory');
"""

# The lines go through COPY with quote and delimiter bytes that JSON text
# never holds, so each arrives as it was written.
IMPORT = """CREATE TEMP TABLE lines (n serial, line text);
COPY lines (line) FROM STDIN (FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02');
"""
IMPORT_END = """\\.
SELECT agent_memory.import(line) FROM lines ORDER BY n;
"""


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[1] not in ("export", "import"):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    _, command, scope, directory = argv
    base = Path(directory)
    if command == "export":
        out = psql(EXPORT, {"scope": scope})
        count = write_directory((json.loads(l) for l in out.splitlines() if l), base)
        print(f"{count} files of scope {scope} written under {base / ROOT}")
        return 0
    lines = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in read_directory(base, scope))
    out = psql(IMPORT, {}, lines + IMPORT_END)
    results = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    refused = [r for r in results if not r.get("ok")]
    for r in refused:
        print(f"refused: {r['error']['code']} {r['error']['message']}", file=sys.stderr)
    print(f"{len(results) - len(refused)} of {len(results)} lines taken into scope {scope}")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
