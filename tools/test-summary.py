#!/usr/bin/env python3
"""test-summary.py - count the results of meson test runs and print one line,
"N passed, N failed, N skipped".  Arguments: the runs' testlog.json files
(a missing one counts nothing), and --failed WHY for a step that failed
before it could run its tests (counted as one failure).  Exits 1 when a test
failed or when no test passed."""
import json
import sys

counts = {"passed": 0, "failed": 0, "skipped": 0}
notes = []
args = sys.argv[1:]
while args:
    arg = args.pop(0)
    if arg == "--failed":
        counts["failed"] += 1
        notes.append(args.pop(0))
        continue
    try:
        lines = open(arg).read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        result = json.loads(line)["result"]
        if result in ("OK", "EXPECTEDFAIL"):
            counts["passed"] += 1
        elif result == "SKIP":
            counts["skipped"] += 1
        else:
            counts["failed"] += 1
for note in notes:
    print(f"failed: {note}")
print(f'{counts["passed"]} passed, {counts["failed"]} failed, {counts["skipped"]} skipped')
sys.exit(1 if counts["failed"] or not counts["passed"] else 0)
