#!/usr/bin/env bash
# The winner as a PyTorch op: `export-best --format torch` of rmsnorm's and gqa's fixture bests,
# one built by `pip install --no-build-isolation` (setup.py), the other by load() on first import,
# each checked by tests/gpu/torch_export_check.py against op.json's Python reference on the check
# and benchmark workloads and on random shapes, under torch.compile(fullgraph=True) and replayed
# from a CUDA graph.
#
# Needs a GPU, python3 with a CUDA torch, nvcc, and the wheels of tools/fetch-wheels.sh (ninja,
# setuptools) in build-wheels/ (or $KS_WHEELS); skips (77) otherwise.  Env: KSEARCH, KS_SOURCE_ROOT.
. "$(dirname "$0")/../cli/lib.sh"
. "$(dirname "$0")/wheels.sh"

run 0 "$KSEARCH" archive import tests/fixtures/export-rmsnorm.json --archive "$TMP/ar"
run 0 "$KSEARCH" archive import tests/fixtures/export-gqa.json --archive "$TMP/ar"

# rmsnorm: pip install, as the README says
run 0 "$KSEARCH" export-best --op rmsnorm --archive "$TMP/ar" --format torch -o "$TMP/rms" --name ks_rms
run 0 python3 -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --no-index \
	--target "$TMP/pkgs" "$TMP/rms"
run 0 env PYTHONPATH="$TMP/pkgs:$PYTHONPATH" python3 tests/gpu/torch_export_check.py ks_rms operators/rmsnorm
cat "$TMP/out"
out_has "all ok"

# gqa: not installed, built on first import by torch.utils.cpp_extension.load()
run 0 "$KSEARCH" export-best --op gqa --archive "$TMP/ar" --format torch -o "$TMP/gqa" --name ks_gqa
run 0 env PYTHONPATH="$TMP/gqa:$PYTHONPATH" python3 tests/gpu/torch_export_check.py ks_gqa operators/gqa
cat "$TMP/out"
out_has "all ok"
done_ok
