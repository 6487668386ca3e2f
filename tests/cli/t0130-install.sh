#!/usr/bin/env bash
# `meson install` puts the binary, operators/, prompts/ and the docs under
# the prefix, and the installed binary, run from another folder, finds its
# operators and prompts there.  Installs into a staging folder (DESTDIR),
# as a package build does: the binary looks beside itself, so the staged
# tree works where it lies.
. "$(dirname "$0")/lib.sh"
BUILD=${KS_BUILD_ROOT:?KS_BUILD_ROOT must name the build folder}
command -v meson >/dev/null || { echo "SKIP: meson is not on PATH"; exit 77; }

run 0 meson install -C "$BUILD" --no-rebuild --destdir "$TMP/stage"
bin=$(find "$TMP/stage" -path '*/bin/ksearch' -type f)
[ -n "$bin" ] && [ -x "$bin" ] || fail "no bin/ksearch under the staging folder: $(find "$TMP/stage" | head)"
share=$(dirname "$(dirname "$bin")")/share
for f in ksearch/operators/gqa/op.json ksearch/operators/gqa/reference.cu ksearch/operators/gqa/seeds/split_kv.cu \
	ksearch/operators/rmsnorm/op.json ksearch/operators/README.md ksearch/prompts/system.md \
	ksearch/prompts/prices.json ksearch/prompts/README.md doc/ksearch/README.md doc/ksearch/design.md \
	doc/ksearch/archive-format.md; do
	checks=$((checks + 1))
	[ -s "$share/$f" ] || fail "meson install did not install share/$f"
done
[ -n "$(ls "$share/ksearch/prompts/strategies")" ] || fail "no strategy prompts installed"
# the README's no-GPU path works from an install: the example archive imports and reports (issue 26)
run 0 "$bin" archive import "$share/doc/ksearch/example/gqa-h200.json" --archive "$TMP/example"
out_has "imported 256 candidates"
run 0 "$bin" report --archive "$TMP/example" -o "$TMP/example.html" --compare "$share/doc/ksearch/example/torch-h200.json"
[ -s "$TMP/example.html" ] || fail "no report from the installed example"
[ ! -e "$share/ksearch/operators/gqa/op.json.orig" ] || fail "stray files installed"

# from a folder with no operators/ or prompts/ of its own, and no environment pointing at them
mkdir "$TMP/elsewhere"
cd "$TMP/elsewhere" || fail "cd"
unset KSEARCH_OPERATORS KSEARCH_PROMPTS
run 0 "$bin" ops
out_has "gqa  (gqa_paged_decode_h32_kv4_d128_ps1)"
folder=$(sed -n 's/^  folder: //p' "$TMP/out" | head -n 1)
[ "$(readlink -f "$folder")" = "$(readlink -f "$share/ksearch/operators/gqa")" ] ||
	fail "the installed ksearch read gqa from $folder, not from the installed share/ksearch/operators"
run 0 "$bin" compile "$share/ksearch/operators/gqa/seeds/split_kv.cu" --op gqa
out_has "verdict:     ok"
# the prompts: reading prices.json from the prompts folder comes before anything needs a GPU or a network
run 2 env -u KSEARCH_LLM_URL -u KSEARCH_LLM_MODEL "$bin" evolve --op gqa --archive "$TMP/a" \
	--llm-url http://127.0.0.1:9/v1 --llm-model unpriced-model --llm-budget-usd 5
err_has "--llm-budget-usd needs the price of model 'unpriced-model'"
# and without the installed data, the same binary says what it looked for
mv "$share/ksearch" "$TMP/moved"
run 1 "$bin" ops
err_has "no operators found"
run 1 env -u KSEARCH_LLM_URL -u KSEARCH_LLM_MODEL "$bin" evolve --op gqa --archive "$TMP/a" \
	--llm-url http://127.0.0.1:9/v1 --llm-model m
err_has "no prompts folder"
done_ok
