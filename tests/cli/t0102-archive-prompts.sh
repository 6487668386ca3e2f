#!/usr/bin/env bash
# `ksearch archive prompts`: import a fixture with four strategy prompts
# (tests/fixtures/archive-prompts.json: two seeds, one retired, and a
# rewrite of a rewrite), then the table, its sorts, one strategy with its
# ancestors, JSON, and the errors.
. "$(dirname "$0")/lib.sh"
FIXTURE=tests/fixtures/archive-prompts.json
A="$TMP/archive"
ka() { "$KSEARCH" archive "$@"; }
# the ids of the table's rows, in order
row_ids() { awk '/^ +[0-9]+ / { printf "%s ", $1 }' "$TMP/out"; }

run 0 ka import "$FIXTURE" --archive "$A"
out_has "imported 10 candidates into $A/gqa/nvidia-h200 (ids kept), and 4 strategy prompts"
run 0 ka verify --archive "$A"

# help, and the subcommand in the archive's list
run 0 ka prompts --help
out_has "--show ID"
out_has "examples:"
run 0 ka --help
out_has "prompts"
run 2 ka promts
err_has "did you mean 'prompts'?"

# the table: active only, the best reward first: #3 (2 + 0.25 x 2) / 2, #1 (1 + 0.25 x 3) / 4, #4 unused
run 0 ka prompts --archive "$A"
head -1 "$TMP/out" | grep -qE '^ +id +name +origin +parent +state +uses' || fail "no header line"
[ "$(row_ids)" = "3 1 4 " ] || fail "rows by reward are '$(row_ids)', expected '3 1 4 '"
grep -qE '^ +3 +vector_loads_wide +improve +1 +active +2 +2 +0 +3 +2 +2 +2\.600 #8 +1\.250$' "$TMP/out" ||
	fail "row of #3"
grep -qE '^ +4 +vector_loads_wide_gqa +specialise +3 +active .* - +0\.000$' "$TMP/out" || fail "row of #4"
out_has "0.438"
out_lacks "tile_kv"
out_has "1 retired (--all to list them)"

# sorts and --all
run 0 ka prompts --archive "$A" --sort uses
[ "$(row_ids)" = "1 3 4 " ] || fail "rows by uses are '$(row_ids)'"
run 0 ka prompts --archive "$A" --sort id --all
[ "$(row_ids)" = "1 2 3 4 " ] || fail "rows by id with --all are '$(row_ids)'"
grep -qE '^ +2 +tile_kv +seed +- +retired +3 +2 +1 ' "$TMP/out" || fail "the retired row"
out_lacks "--all to list them"
run 2 ka prompts --archive "$A" --sort fitness
err_has "--sort takes reward, id or uses (got 'fitness')"

# one strategy: statistics, its ancestors back to the seed, its text
run 0 ka prompts --archive "$A" --show 4
out_has "strategy #4  vector_loads_wide_gqa  (active)"
out_has "origin      specialise of #3 vector_loads_wide, made when the archive held 9 candidates"
out_has "reward      0  (unused"
python3 - "$TMP/out" <<'PY' || fail "--show 4: the lineage"
import re, sys
text = open(sys.argv[1]).read()
chain = text.split("lineage, newest first:\n")[1].split("\n\n")[0].splitlines()
got = [tuple(l.split()) for l in chain]
assert got == [("#4", "vector_loads_wide_gqa", "specialise"), ("#3", "vector_loads_wide", "improve"),
               ("#1", "vector_loads", "seed")], got
assert text.endswith("text:\n# Wide loads for GQA\n\nAs wide vector loads, with one CTA per KV head "
                     "covering every query head that shares it.\n"), text
PY
run 0 ka prompts --archive "$A" --show '#3'
out_has "reward      1.250  ((2 improved + 0.25 x 2 ok) / 2 uses)"
out_has "best child  #8  (fitness 2.600)"
run 0 ka prompts --archive "$A" --show 2
out_has "strategy #2  tile_kv  (retired)"
out_has "last error  no \`\`\`cuda block in the reply"
run 1 ka prompts --archive "$A" --show 9
err_has "no strategy #9 in $A/gqa/nvidia-h200 (its strategy ids go from 1 to 4"
run 2 ka prompts --archive "$A" --show nine
err_has "'nine' is not a strategy id"
run 2 ka prompts --archive "$A" 3
err_has "unexpected argument '3' (to show one strategy: --show ID)"

# JSON: the stored objects, filtered and sorted as the table is
run 0 ka prompts --archive "$A" --json
python3 - "$TMP/out" "$FIXTURE" <<'PY' || fail "--json"
import json, sys
got = json.load(open(sys.argv[1]))
want = {p["id"]: p for p in json.load(open(sys.argv[2]))["prompts"]}
assert [p["id"] for p in got] == [3, 1, 4], [p["id"] for p in got]
assert all(p == want[p["id"]] for p in got)
PY
run 0 ka prompts --archive "$A" --json --all --sort id
python3 -c 'import json,sys; assert [p["id"] for p in json.load(open(sys.argv[1]))] == [1, 2, 3, 4]' "$TMP/out" ||
	fail "--json --all"
run 0 ka prompts --archive "$A" --json --show 3
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["id"]==3 and p["stats"]["best_child"]==8' \
	"$TMP/out" || fail "--json --show 3"

# the prompts go through export and import unchanged
run 0 ka export --archive "$A" -o "$TMP/all.json"
run 0 ka import "$TMP/all.json" --archive "$TMP/copy"
run 0 ka prompts --archive "$TMP/copy" --json --all --sort id
python3 - "$TMP/out" "$FIXTURE" <<'PY' || fail "prompts after export and import"
import json, sys
assert json.load(open(sys.argv[1])) == json.load(open(sys.argv[2]))["prompts"]
PY

# a bad prompt fails the import and leaves the archive as it was
python3 - "$FIXTURE" "$TMP/bad.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["prompts"].append({"id": 5, "name": "broken", "text": None, "stats": {}})
json.dump(doc, open(sys.argv[2], "w"))
PY
run 1 ka import "$TMP/bad.json" --archive "$TMP/fresh"
err_has "prompts[4] (id 5): text: expected a string, got null"
err_has "(the archive is unchanged)"
[ ! -e "$TMP/fresh/gqa/nvidia-h200/data.mdb" ] || fail "a failed import left a new archive behind"

# an archive without strategies says where they come from
run 0 ka import tests/fixtures/export-rmsnorm.json --archive "$TMP/plain"
run 0 ka prompts --archive "$TMP/plain"
err_has "no strategy prompts in $TMP/plain/rmsnorm/nvidia-h200 yet: strategies appear once \`ksearch evolve\` runs with an LLM endpoint (--llm-url)"
[ ! -s "$TMP/out" ] || fail "an empty prompts store printed a table"
run 0 ka prompts --archive "$TMP/plain" --json
[ "$(cat "$TMP/out")" = "[]" ] || fail "--json of no prompts is not []"
run 1 ka prompts --archive "$TMP/plain" --show 1
err_has "it holds no strategy prompts yet"
done_ok
