#!/usr/bin/env bash
# tools/gqa-ws-trace.py puts globaltimer stamps into a copy of gqa's gqa_ws seed, each at a line of
# the seed's own text, and tools/gqa-ws-trace.cu reads them back (BENCHMARKS.md, thirtieth
# session). When the seed's text moves, the script must say which line it lost rather than write a
# copy without stamps; on the seed as it is, the copy must build with nvcc's warnings as errors,
# hold every stamp, and both tile sizes and merge launches must build. The tool runs on a GPU only;
# without nvcc the build is skipped.
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
