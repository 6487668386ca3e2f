#!/usr/bin/env bash
# The static half of the hostile suite, without a GPU: every case in
# tests/gpu/hostile/ whose expected verdict is static (compile_error,
# contract_error, refused) gets that verdict from `ksearch compile`, with
# every "// evidence:" text in its evidence; every other case passes the
# static checks (so the rules refuse nothing they should not: read-only
# tables, printf, zeroed scratch).
. "$(dirname "$0")/lib.sh"

mapfile -t files < <(printf '%s\n' tests/gpu/hostile/*.cu | LC_ALL=C sort)
[ "${#files[@]}" -ge 30 ] || fail "expected at least 30 hostile cases, found ${#files[@]}"
static=0
for f in "${files[@]}"; do
	expect=$(sed -n 's|^// expect: *\([a-z_]*\).*|\1|p' "$f" | head -n 1)
	[ -n "$expect" ] || fail "$f: no '// expect:' line"
	"$KSEARCH" compile "$f" --op rmsnorm --json >"$TMP/out" 2>"$TMP/err"
	rc=$?
	checks=$((checks + 1))
	case $expect in
	compile_error | contract_error | refused)
		static=$((static + 1))
		[ $rc = 3 ] || fail "$f: compile exited $rc, expected 3 ($expect)"
		python3 - "$TMP/out" "$f" "$expect" <<'PY' || fail "$f: wrong static verdict or evidence"
import json, re, sys
out, path, expect = sys.argv[1:]
r = json.load(open(out))
got = r.get("verdict")
text = r.get("evidence") or r.get("error") or ""
if got != expect:
    sys.exit(f"verdict {got}, expected {expect}: {text[:300]}")
for needle in re.findall(r"^// evidence: *(.+?) *$", open(path).read(), re.M):
    if needle.lower() not in text.lower():
        sys.exit(f"evidence lacks '{needle}': {text[:400]}")
PY
		;;
	*)
		[ $rc = 0 ] || fail "$f: expected to pass the static checks (it is judged on the GPU: $expect), compile exited $rc: $(head -c 400 "$TMP/err" "$TMP/out")"
		;;
	esac
done
[ $static -ge 12 ] || fail "expected at least 12 static cases, found $static"

# `ksearch check` gives the same static verdicts, and needs no GPU for them (issue 14): it
# compiles before it starts a GPU worker.  With a GPU, tests/gpu/t0200-hostile.sh runs them all.
if ! nvidia-smi -L >/dev/null 2>&1; then
	mapfile -t static_files < <(grep -lE '^// expect: *(compile_error|contract_error|refused)' "${files[@]}")
	run 3 "$KSEARCH" check "${static_files[@]}" --op rmsnorm --json
	python3 - "$TMP/out" "${static_files[@]}" <<'PY' || fail "check's static verdicts differ from the expected ones"
import json, re, sys
results, paths = json.load(open(sys.argv[1])), sys.argv[2:]
assert [r["file"] for r in results] == paths, [r["file"] for r in results]
for r, path in zip(results, paths):
    expect = re.search(r"^// expect: *([a-z_]+)", open(path).read(), re.M).group(1)
    assert r["verdict"] == expect, (path, r["verdict"], expect)
PY
fi
# the include cases with a key in the environment: refused, and the key is nowhere in what
# ksearch says (includes.h refuses the read; secret.h keeps the key out of the environment)
for f in tests/gpu/hostile/include_*.cu; do
	KSEARCH_API_KEY=sk-cli-test-6f2e9 run 3 "$KSEARCH" compile "$f" --op rmsnorm --json
	out_has '"verdict": "refused"'
	! grep -q "sk-cli-test-6f2e9" "$TMP/out" "$TMP/err" || fail "$f: the API key reached the output"
done

# the gqa group (tests/gpu/hostile/gqa/) is judged on the GPU: it passes the static checks
for f in tests/gpu/hostile/gqa/*.cu; do
	run 0 "$KSEARCH" compile "$f" --op gqa --json
	out_has '"verdict": "ok"'
done

echo "$static static verdicts, $((${#files[@]} - static)) cases that pass the static checks"
done_ok
