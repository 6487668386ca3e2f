#!/usr/bin/env bash
# `ksearch archive salvage SRC DST` (issue 26): a clean archive is copied whole; then,
# many times over, one page of a copy of data.mdb is overwritten with random bytes (the
# damage a disk error or a torn copy leaves) and salvage must never crash or hang,
# must leave the damaged file as it was, must write a new archive that verifies, and
# must account for every record: saved (and equal to the original) or listed as lost.
# KS_SALVAGE_ROUNDS sets how many damaged copies (default 12; each about 3 s on 2 cores).
. "$(dirname "$0")/lib.sh"
EXAMPLE=docs/example/gqa-h200.json
A="$TMP/a"
run 0 "$KSEARCH" archive import "$EXAMPLE" --archive "$A"
run 0 "$KSEARCH" archive export --archive "$A"
cp "$TMP/out" "$TMP/original.json"

# help, usage
run 0 "$KSEARCH" archive salvage --help
out_has "usage: ksearch archive salvage SRC DST"
run 2 "$KSEARCH" archive salvage "$A"
err_has "expected two folders"
run 1 "$KSEARCH" archive salvage "$TMP/none" "$TMP/x"
err_has "no archive in $TMP/none"

# a clean archive: everything, ids kept; DST must be new
run 0 "$KSEARCH" archive salvage "$A" "$TMP/clean"
out_has "saved 256 of 256 records into $TMP/clean/gqa/nvidia-h200 (ids kept)"
run 0 "$KSEARCH" archive verify --archive "$TMP/clean"
run 1 "$KSEARCH" archive salvage "$A" "$TMP/clean"
err_has "holds an archive already: salvage writes a new one"

# damaged copies
rounds=${KS_SALVAGE_ROUNDS:-12}
header_lost=0
for i in $(seq 1 "$rounds"); do
	D="$TMP/d$i"
	mkdir -p "$D/gqa/nvidia-h200"
	cp "$A/gqa/nvidia-h200/data.mdb" "$D/gqa/nvidia-h200/"
	page=$(python3 - "$D/gqa/nvidia-h200/data.mdb" "$i" <<'PY'
import os, random, sys
path, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
pages = os.path.getsize(path) // 4096
page = rng.randrange(2, pages)  # pages 0 and 1 are LMDB's meta pages
with open(path, "r+b") as f:
    f.seek(page * 4096)
    f.write(bytes(rng.randrange(256) for _ in range(4096)))
print(page)
PY
)
	before=$(sha256sum "$D/gqa/nvidia-h200/data.mdb")
	timeout 300 "$KSEARCH" archive salvage "$D" "$TMP/s$i" >"$TMP/salvage.out" 2>"$TMP/salvage.err"
	rc=$?
	checks=$((checks + 1))
	[ "$(sha256sum "$D/gqa/nvidia-h200/data.mdb")" = "$before" ] || fail "round $i: salvage changed the damaged file"
	case $rc in
	0 | 3) ;;
	1)
		grep -q "header (its meta database) cannot be read\|not an LMDB file\|is damaged\|cannot open" "$TMP/salvage.err" ||
			fail "round $i (page $page): salvage failed without saying the header is unreadable"
		header_lost=$((header_lost + 1))
		echo "round $i: page $page: the header is lost: $(tail -1 "$TMP/salvage.err")"
		continue
		;;
	*) fail "round $i (page $page): salvage exited $rc" ;;
	esac
	run 0 "$KSEARCH" archive verify --archive "$TMP/s$i"
	"$KSEARCH" archive export --archive "$TMP/s$i" >"$TMP/saved.json" || fail "round $i: export of the salvaged archive"
	python3 - "$TMP/original.json" "$TMP/saved.json" "$TMP/salvage.out" "$i" "$page" <<'PY' || fail "round $i: the records are not all accounted for (above)"
import json, re, sys
orig = {c["id"]: c for c in json.load(open(sys.argv[1]))["candidates"]}
saved_doc = json.load(open(sys.argv[2]))
saved = {c["id"]: c for c in saved_doc["candidates"]}
out = open(sys.argv[3]).read()
lost = {int(m) for m in re.findall(r"^lost: #(\d+): ", out, re.M)}
m = re.search(r"saved (\d+) of (\d+) records", out)
assert m, out
problems = []
if int(m.group(1)) != len(saved): problems.append(f"says {m.group(1)} saved, the archive holds {len(saved)}")
if set(saved) & lost: problems.append(f"both saved and lost: {sorted(set(saved) & lost)}")
if set(saved) | lost != set(orig): problems.append(f"unaccounted: {sorted(set(orig) - set(saved) - lost)}")
for i, c in saved.items():
    o = orig[i]
    for k in ("verdict", "fitness", "source_hash", "params", "family", "workloads"):
        if c.get(k) != o.get(k): problems.append(f"#{i}: {k} differs")
    if saved_doc["sources"].get(c["source_hash"]) is None: problems.append(f"#{i}: no source")
print(f"round {sys.argv[4]}: page {sys.argv[5]}: saved {len(saved)}, lost {len(lost)}" + (f" {sorted(lost)[:8]}" if lost else ""))
for p in problems: print("PROBLEM:", p)
sys.exit(1 if problems else 0)
PY
	# the same damage, salvaged again, saves the same (a few rounds: it doubles their time)
	if [ "$i" -le 3 ]; then
		timeout 300 "$KSEARCH" archive salvage "$D" "$TMP/s$i-again" >"$TMP/again.out" 2>/dev/null
		cmp -s "$TMP/salvage.out" <(sed "s|$TMP/s$i-again|$TMP/s$i|" "$TMP/again.out") ||
			fail "round $i: a second salvage of the same damage saved something else"
	fi
done
[ "$header_lost" -le $((rounds / 4)) ] || fail "$header_lost of $rounds damaged pages lost the header: too many to be chance"
done_ok
