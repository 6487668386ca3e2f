#!/usr/bin/env bash
# tools/search-legs.sh (no GPU): side-by-side searches in legs. --dry-run names each RUN's
# command (its GPU, op, seed, archive under --dir and log under $OUT, the leg in the names, the
# --from tarball unpacked first); every RUN is checked before anything starts, with the reason.
. "$(dirname "$0")/lib.sh"
export OUT="$TMP/out-dir" KSEARCH=build/ksearch

run 0 bash tools/search-legs.sh --dry-run --time 5m50s --leg 2 --dir "$TMP/a" --from "$TMP/prev.tgz" \
	mla15:mla_decode:1 gqalong:gqa:2:3 gqa15:gqa:1
out_has "tar xzf $TMP/prev.tgz -C $TMP/a"
out_has "CUDA_VISIBLE_DEVICES=0 build/ksearch evolve --op mla_decode --seed 1 --time 5m50s --archive $TMP/a/mla15 --log $TMP/out-dir/mla15-events-leg2.jsonl"
out_has "CUDA_VISIBLE_DEVICES=3 build/ksearch evolve --op gqa --seed 2 --time 5m50s --archive $TMP/a/gqalong"
out_has "CUDA_VISIBLE_DEVICES=2 build/ksearch evolve --op gqa --seed 1 --time 5m50s --archive $TMP/a/gqa15"
[ "$(wc -l <"$TMP/out")" = 4 ] || fail "expected 4 lines (the tar and 3 runs), got: $(cat "$TMP/out")"
[ ! -e "$TMP/a" ] || fail "--dry-run created $TMP/a"

run 2 bash tools/search-legs.sh --dry-run
err_has "no RUN (LABEL:OP:SEED[:GPU]"
run 2 bash tools/search-legs.sh --dry-run mla15:mla_decode
err_has "'mla15:mla_decode': expected LABEL:OP:SEED[:GPU]"
run 2 bash tools/search-legs.sh --dry-run a:gqa:1:0:9
err_has "'a:gqa:1:0:9': expected"
run 2 bash tools/search-legs.sh --dry-run "a b:gqa:1"
err_has "LABEL letters, digits"
run 2 bash tools/search-legs.sh --dry-run a:gqa:1 a:mla_decode:2
err_has "label 'a' given twice"
run 2 bash tools/search-legs.sh --leg x a:gqa:1
err_has "--leg x: expected a number"
run 2 bash tools/search-legs.sh --bogus a:gqa:1
err_has "unknown option --bogus"
run 0 bash tools/search-legs.sh --help
out_has "RUN is LABEL:OP:SEED[:GPU]"
done_ok
