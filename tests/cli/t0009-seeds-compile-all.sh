#!/usr/bin/env bash
# Every seed and reference of every shipped operator compiles, with every
# combination of its params, for sm_80 and sm_90a (spills are listed).  About
# five minutes of NVRTC on 2 cores: in the suite 'slow', which .ci/run runs
# (tools/run-tests.sh --slow); t0005-seeds-compile is its quick sample.
. "$(dirname "$0")/lib.sh"

total=0
for opdir in operators/*/; do
	op=$(basename "$opdir")
	[ -f "$opdir/op.json" ] || continue
	for file in "$opdir"reference.cu "$opdir"seeds/*.cu; do
		for arch in sm_80 sm_90a; do
			run 0 "$KSEARCH" compile "$file" --op "$op" --arch "$arch" --all-params --json
			n=$(python3 - "$TMP/out" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
bad = [r for r in rows if r["verdict"] != "ok"]
for r in bad:
    print("not ok:", r["params"], r["verdict"], r.get("evidence", "")[:400], file=sys.stderr)
for r in rows:
    if r["verdict"] == "ok":
        for k in r["kernels"]:
            if k["spill_stores"] or k["spill_loads"]:
                print("spills:", r["file"], r["params"], k["kernel"], file=sys.stderr)
print(len(rows) if not bad else -1)
PY
)
			[ "$n" -gt 0 ] || fail "$file for $arch: some combinations are not ok"
			total=$((total + n))
		done
	done
done
echo "compiled $total combinations"
[ "$total" -gt 50 ] || fail "only $total combinations compiled"
done_ok
