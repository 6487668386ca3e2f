#!/usr/bin/env bash
# tools/mla-trace.py puts globaltimer stamps into a copy of mla_decode's mla_mma_ws seed, each after
# a line of the seed's own text, and tools/mla-trace.cu reads them back (BENCHMARKS.md, fourteenth
# session). When the seed's text moves, the script must say which line it lost rather than write a
# copy without stamps; on the seed as it is, the copy must build with nvcc's warnings as errors
# and hold every stamp. The tool runs on a GPU only; without nvcc the build is skipped (77 when
# nothing else ran).
. "$(dirname "$0")/lib.sh"

seed=operators/mla_decode/seeds/mla_mma_ws.cu
run 0 python3 tools/mla-trace.py "$seed" "$TMP/mla_tr.cu"
for stamp in 'TR(0)' 'TR(1)' 'TR(2)' 'TR(3)' 'TR(4)' 'TR(5)' 'TR(6)' 'TR(8)' 'TR(9)' 'TRM(0)' 'TRM(1)' 'TRM(2)' 'TRM(3)' 'TRM(4)' 'TRM(5)' 'TRM(6)'; do
	grep -qF "$stamp" "$TMP/mla_tr.cu" || fail "the traced copy lacks the stamp $stamp"
done
checks=$((checks + 1))

# a seed whose text has moved: the script names the line it no longer finds, and writes nothing
sed 's/s_idx and Q ready/s_idx and Q in/' "$seed" > "$TMP/moved.cu"
run 1 python3 tools/mla-trace.py "$TMP/moved.cu" "$TMP/moved_tr.cu"
err_has "the line '__syncthreads(); /* s_idx and Q ready */' occurs 0 times"
[ -e "$TMP/moved_tr.cu" ] && fail "a copy was written although a stamp's line was missing"
checks=$((checks + 1))

if ! [ -x "$nvcc" ]; then
	skip_part "no nvcc (looked in $cuda/bin and on PATH; set NVCC): mla-trace.cu is not compiled"
	done_ok
fi
start="-DCHUNK=32 -DCTAS=264 -DTILE=32 -DSTAGES=2 -DWARPS=4 -DMINB=2 -DPART=1 -DSPLIT=1 -DSEGP=64 -DPRODW=2"
# shellcheck disable=SC2086 # $start: one flag a word
run 0 "$nvcc" -O2 -std=c++17 -arch=sm_90a -cudart static -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
	-I "$KS_SOURCE_ROOT" "-DSEED=\"$TMP/mla_tr.cu\"" $start -o "$TMP/mla-trace" tools/mla-trace.cu
[ -x "$TMP/mla-trace" ] || fail "no mla-trace binary"
checks=$((checks + 1))
done_ok
