#!/usr/bin/env python3
"""Renders the Java table of docs/compat.md from two `compat-java --json` result files: one run
on the embedded backend and one on a real Iggy server (`--backend iggy`).

    python3 java/compat_table.py EMBEDDED.json IGGY.json > table.md
"""
import json
import sys

MARK = {"passed": "pass", "failed": "**FAIL**", "skipped": "skip", "timed out": "**TIMEOUT**"}


def load(path):
    with open(path) as f:
        return {(r["version"], r["case"]): r for r in json.load(f)["results"]}


def main():
    embedded, iggy = load(sys.argv[1]), load(sys.argv[2])
    cases = []
    for version, case in list(embedded) + list(iggy):
        if case not in cases:
            cases.append(case)
    print("| Case | Rules | 4.3.0 embedded | 3.9.1 embedded | 4.3.0 real Iggy | 3.9.1 real Iggy | What the client saw (4.3.0, embedded; else the first run that has it) |")
    print("|---|---|---|---|---|---|---|")
    for case in cases:
        runs = [embedded.get(("4.3.0", case)), embedded.get(("3.9.1", case)), iggy.get(("4.3.0", case)), iggy.get(("3.9.1", case))]
        first = next(r for r in runs if r)
        shown = next((r for r in runs if r and r["status"] != "skipped"), first)
        cells = [MARK.get(r["status"], r["status"]) if r else "not run" for r in runs]
        detail = shown["detail"].replace("|", "\\|")
        skips = [r for r in runs if r and r["status"] == "skipped"]
        if skips and shown is not skips[0]:
            detail += "; skipped on " + ", ".join(sorted({r["version"] for r in skips})) + ": " + skips[0]["detail"]
        print(f"| `{case}` | {', '.join(first['rules'])} | {' | '.join(cells)} | {detail} |")


if __name__ == "__main__":
    main()
