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

# a tarball too big to come back from a device call is left in parts, and --from joins them
head -c 100 /dev/zero >"$TMP/parts.tgz.part-aa"
run 0 bash tools/search-legs.sh --dry-run --dir "$TMP/a" --from "$TMP/parts.tgz" g:gqa:1
out_has "cat $TMP/parts.tgz.part-* | tar xzf - -C $TMP/a"
out_has "--time 8m50s"

# a whole leg with a stand-in for ksearch: the parts unpacked, each RUN resumed, and an
# archives.tgz over 15 MiB left in parts of 12 MiB that the next leg's --from joins again
cat >"$TMP/fake-ksearch" <<'SH'
#!/usr/bin/env bash
echo "$CUDA_VISIBLE_DEVICES $*" >>"$FAKE_CALLS"
SH
chmod +x "$TMP/fake-ksearch"
mkdir -p "$TMP/prev/g1" && head -c $((16 * 1024 * 1024)) /dev/urandom >"$TMP/prev/g1/data.mdb"
tar czf - -C "$TMP/prev" g1 | split -b 12m - "$TMP/prev-leg.tgz.part-"
export FAKE_CALLS="$TMP/calls" OUT="$TMP/leg2-out"
KSEARCH="$TMP/fake-ksearch" run 0 bash tools/search-legs.sh --leg 2 --time 1s --dir "$TMP/legs" \
	--from "$TMP/prev-leg.tgz" g1:gqa:1:3
cmp -s "$TMP/prev/g1/data.mdb" "$TMP/legs/g1/data.mdb" || fail "--from did not join and unpack the parts"
out_has "resuming $TMP/legs/g1"
grep -q "^3 evolve --op gqa --seed 1 --time 1s --archive $TMP/legs/g1" "$TMP/calls" ||
	fail "the RUN was not started on GPU 3: $(cat "$TMP/calls")"
[ ! -e "$OUT/archives.tgz" ] && [ -f "$OUT/archives.tgz.part-aa" ] && [ -f "$OUT/archives.tgz.part-ab" ] ||
	fail "archives.tgz over 15 MiB should be left in parts: $(ls "$OUT")"
[ -f "$OUT/logs-leg2.tgz" ] || fail "no logs-leg2.tgz in $OUT"
rm -rf "$TMP/legs"
KSEARCH="$TMP/fake-ksearch" run 0 bash tools/search-legs.sh --leg 3 --time 1s --dir "$TMP/legs" \
	--from "$OUT/archives.tgz" g1:gqa:1:3
cmp -s "$TMP/prev/g1/data.mdb" "$TMP/legs/g1/data.mdb" || fail "the leg's own parts did not join again"
export OUT="$TMP/out-dir"

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
