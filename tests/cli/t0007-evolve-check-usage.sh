#!/usr/bin/env bash
# evolve and check: usage errors everywhere; a clear refusal without a GPU.
. "$(dirname "$0")/lib.sh"

run 2 "$KSEARCH" evolve
err_has "--op NAME is required"
run 2 "$KSEARCH" evolve --op gqa --budget 0
err_has "--budget 0: expected a number of evaluations > 0"
run 2 "$KSEARCH" evolve --op gqa --time 8x
err_has "--time 8x: expected a duration such as 8h"
run 2 "$KSEARCH" evolve --op gqa --target -1
err_has "--target -1"
run 2 "$KSEARCH" evolve --op gqa --gpus 0,x
err_has "--gpus 0,x"
run 2 "$KSEARCH" evolve --op gqa --explore 0 --exploit 0 --recent 0
err_has "cannot all be 0"
run 2 "$KSEARCH" evolve --op gqa --buget 3
err_has "did you mean '--budget'?"
run 1 "$KSEARCH" evolve --op gqz
err_has "did you mean 'gqa'"
run 2 "$KSEARCH" check operators/gqa/seeds/split_kv.cu --op gqa --workload nope
err_has "--workload nope: not a benchmark workload of gqa"
run 2 "$KSEARCH" check operators/gqa/seeds/split_kv.cu --op gqa --workload b1_kv1
err_has "check workloads always all run"
run 2 "$KSEARCH" check operators/gqa/seeds/split_kv.cu --op gqa --param SPLITS=3
err_has "3 is not among SPLITS's values"

if ! nvidia-smi -L >/dev/null 2>&1; then
	run 3 "$KSEARCH" evolve --op gqa --archive "$TMP/ar"
	err_has "no NVIDIA driver"
	err_has "ksearch doctor"
	[ ! -e "$TMP/ar" ] || fail "evolve created an archive without a GPU"
	run 1 "$KSEARCH" check operators/gqa/seeds/split_kv.cu --op gqa
	err_has "needs an NVIDIA GPU"
fi
done_ok
