#!/usr/bin/env bash
# The winner inside FlashInfer-Bench: a short rmsnorm search on this GPU, its best exported with
# `export-best --format flashinfer-bench` (and a dispatch of gqa's fixture), loaded by the
# flashinfer-bench package, built by its torch builder, run on its own workloads against the
# Definition's Python reference (PASSED), and timed: each latency must agree with the one the
# search measured (tests/gpu/fib_run.py says how closely).
#
# Needs a GPU, python3 with a CUDA torch, nvcc, and the wheels of tools/fetch-wheels.sh in
# build-wheels/ (or $KS_WHEELS); skips (77) otherwise.  Env: KSEARCH, KS_SOURCE_ROOT.
. "$(dirname "$0")/../cli/lib.sh"
. "$(dirname "$0")/wheels.sh"

# a real search, so that the archive's times are this GPU's
run 0 "$KSEARCH" evolve --op rmsnorm --archive "$TMP/ar" --budget 40 --seed 7
tail -n 5 "$TMP/out"
run 0 "$KSEARCH" export-best --op rmsnorm --archive "$TMP/ar" --format flashinfer-bench -o "$TMP/fib" \
	--ignore-sanitizer
cat "$TMP/out"
run 0 python3 tests/gpu/fib_run.py "$TMP/fib"
cat "$TMP/out"
out_has "all passed and agree"
out_has "routed to the Solution, matches the reference"

# gqa, a dispatch: blobs for the page tables, the Python reference of paged attention; the
# fixture's times are not this GPU's, so only correctness counts here
run 0 "$KSEARCH" archive import tests/fixtures/export-gqa.json --archive "$TMP/gq"
run 0 "$KSEARCH" export-best --op gqa --archive "$TMP/gq" --dispatch --format flashinfer-bench -o "$TMP/fibg"
run 0 python3 tests/gpu/fib_run.py "$TMP/fibg" --correctness-only
cat "$TMP/out"
out_has "all passed"
done_ok
