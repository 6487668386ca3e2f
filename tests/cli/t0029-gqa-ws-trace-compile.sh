#!/usr/bin/env bash
# tools/gqa-ws-trace.py puts globaltimer stamps into a copy of gqa's gqa_ws seed, each at a line of
# the seed's own text, and tools/gqa-ws-trace.cu reads them back (BENCHMARKS.md, thirtieth
# session). When the seed's text moves, the script must say which line it lost rather than write a
# copy without stamps; on the seed as it is, the copy must build with nvcc's warnings as errors,
# hold every stamp, and both tile sizes and merge launches must build. The tool runs on a GPU only;
# without nvcc the build is skipped. tools/trace-sm.py, which reads its per-CTA dump, is run on a
# made-up one.
. "$(dirname "$0")/lib.sh"

seed=operators/gqa/seeds/gqa_ws.cu
run 0 python3 tools/gqa-ws-trace.py "$seed" "$TMP/gqa_ws_tr.cu"
for stamp in 'TR(0)' 'TR(1)' 'TR(2)' 'TR(3)' 'TR(4)' 'TR(5)' 'TR(8)' 'TR(16 + warp)' 'TRV(13, tr_pw)' \
	'TRV(24 + warp, tr_cw)' 'TRV(32 + warp, tr_sw)' 'tr_sw++'; do
	grep -qF "$stamp" "$TMP/gqa_ws_tr.cu" || fail "the traced copy lacks the stamp $stamp"
done
checks=$((checks + 1))

# a seed whose text has moved: the script names the line it no longer finds, and writes nothing
sed 's|/\* tile u.s pages landed \*/|/* tile u in */|' "$seed" > "$TMP/moved.cu"
run 1 python3 tools/gqa-ws-trace.py "$TMP/moved.cu" "$TMP/moved_tr.cu"
err_has "occurs 0 times where one was expected"
err_has "mbar_wait(full + 8 * s, (unsigned)((u / STAGES) & 1)); /* tile u's pages landed */"
[ -e "$TMP/moved_tr.cu" ] && fail "a copy was written although a stamp's line was missing"
checks=$((checks + 1))

# tools/trace-sm.py on a made-up DUMP log: CTAs move between 8 SMs from trace to trace, SM 5 always
# ends 2 us late and SM 2 1 us early; the halves must agree by SM and the map must show both
python3 - >"$TMP/dump.log" <<'PY' || fail "cannot write the made-up log"
import random
random.seed(3)
print("b64_kv28815 even (longest 1, shortest 1 tokens; 8 CTAs of 1 tokens): partial launch med 1.00 us")
for t in range(6):
    print(" trace %d (event time 1.00 us; SM clock 1800 MHz; us from the first CTA's start):" % t)
    sms = list(range(8))
    random.shuffle(sms)
    for c, sm in enumerate(sms):
        print("  cta %d sm %d done %.2f" % (c, sm, 10.0 + (2.0 if sm == 5 else -1.0 if sm == 2 else 0.0) + 0.01 * c))
PY
run 0 python3 tools/trace-sm.py "$TMP/dump.log"
out_has "even   by SM : halves agree r =  1.00 over 8"
grep -Eq "SM   0-  7: +[-+]0\.0 +[-+]0\.0 +-1\.0 +[-+]0\.0 +[-+]0\.0 +\+2\.0 +[-+]0\.0 +[-+]0\.0$" "$TMP/out" ||
	fail "the map does not show SM 2 1 us early and SM 5 2 us late: $(grep 'SM   0' "$TMP/out")"
checks=$((checks + 1))
grep -v " cta " "$TMP/dump.log" >"$TMP/nodump.log"
run 1 python3 tools/trace-sm.py "$TMP/nodump.log"
err_has "has no per-CTA lines: run gqa-ws-trace with DUMP=1"
run 1 python3 tools/trace-sm.py "$TMP/missing.log"
err_has "cannot read $TMP/missing.log"
checks=$((checks + 1))

if ! [ -x "$nvcc" ]; then
	skip_part "no nvcc (looked in $cuda/bin and on PATH; set NVCC): gqa-ws-trace.cu is not compiled"
	done_ok
fi
for point in "MERGE=1 TILE=16 STAGES=3 WPH=1 IDXPF=1 PREQ=0" "MERGE=0 TILE=32 STAGES=3 WPH=2 IDXPF=2 PREQ=1"; do
	flags="-DCTAS=264 -DCHUNK=64 -DHINT=1 -DPART=0"
	for kv in $point; do flags="$flags -D$kv"; done
	# shellcheck disable=SC2086 # $flags: one flag a word
	run 0 "$nvcc" -O2 -std=c++17 -arch=sm_90a -cudart static -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
		-I "$KS_SOURCE_ROOT" -I "$KS_SOURCE_ROOT/tools" "-DSEED=\"$TMP/gqa_ws_tr.cu\"" $flags -o "$TMP/gqa-ws-trace" \
		tools/gqa-ws-trace.cu
	[ -x "$TMP/gqa-ws-trace" ] || fail "no gqa-ws-trace binary for $point"
	rm -f "$TMP/gqa-ws-trace"
	checks=$((checks + 1))
done
done_ok
