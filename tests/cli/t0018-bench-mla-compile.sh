#!/usr/bin/env bash
# tools/bench-mla.cu (an exported mla_decode kernel timed on FlashInfer's anchor inputs; run by
# tools/bench-floor.sh --op mla_decode) builds, without a GPU, against what export-best writes
# from the fixture: a --dispatch export and a single kernel, both with nvcc's warnings as errors.
# Its host-only `workloads` mode prints the anchor's stream: the twelve (B, N, seed) splits with
# the hashes `fi_mla workloads` prints (../shared/anchors/fi_mla), so seed s is the anchor's seed s.
# Without nvcc the exports are still made and checked, and the test reports 77.
. "$(dirname "$0")/lib.sh"

run 0 "$KSEARCH" archive import tests/fixtures/export-mla_decode.json --archive "$TMP/a"
run 0 "$KSEARCH" export-best --op mla_decode --archive "$TMP/a" --dispatch -o "$TMP/disp"
out_has "dispatch over 4 workloads"
run 0 "$KSEARCH" export-best --op mla_decode --archive "$TMP/a" --id 6 -o "$TMP/one"
out_has "exported candidate #6"

cat >"$TMP/anchor.txt" <<'EOF'
{"kind":"workload","B":1,"N":4096,"seed":1,"max_len":4096,"workload_fnv":"5f29924f41e25cc5"}
{"kind":"workload","B":1,"N":4096,"seed":2,"max_len":4096,"workload_fnv":"f9c6b326374c165c"}
{"kind":"workload","B":1,"N":4096,"seed":3,"max_len":4096,"workload_fnv":"ad9ac8ba24ea78e1"}
{"kind":"workload","B":16,"N":32000,"seed":1,"max_len":8108,"workload_fnv":"54cd7358e7b2e08d"}
{"kind":"workload","B":16,"N":32000,"seed":2,"max_len":9295,"workload_fnv":"a9657debeb2684f5"}
{"kind":"workload","B":16,"N":32000,"seed":3,"max_len":7265,"workload_fnv":"f86c33e5a70675e8"}
{"kind":"workload","B":64,"N":64000,"seed":1,"max_len":5632,"workload_fnv":"ff85b4c173b2e9fe"}
{"kind":"workload","B":64,"N":64000,"seed":2,"max_len":4217,"workload_fnv":"5d80f85bdc8abeb4"}
{"kind":"workload","B":64,"N":64000,"seed":3,"max_len":5238,"workload_fnv":"fd0fb71803ffbaf7"}
{"kind":"workload","B":128,"N":256000,"seed":1,"max_len":11383,"workload_fnv":"3c3b7ce2111fe31b"}
{"kind":"workload","B":128,"N":256000,"seed":2,"max_len":9808,"workload_fnv":"0afb5e37665f8ce4"}
{"kind":"workload","B":128,"N":256000,"seed":3,"max_len":8452,"workload_fnv":"6151bd523c1b7113"}
EOF

# build DIR: bench-mla.cu against the export in DIR, as tools/bench-floor.sh's comment says, then
# check what runs without a GPU: the workloads and the usage error
build() {
	run 0 "$nvcc" -O2 -std=c++17 -arch=sm_90a -cudart static -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
		-I "$1" -o "$1/mla-bench" tools/bench-mla.cu "$1"/ksearch_mla_decode*.cu
	[ -x "$1/mla-bench" ] || return 0
	run 0 "$1/mla-bench" workloads
	checks=$((checks + 1))
	cmp -s "$TMP/out" "$TMP/anchor.txt" || fail "$1: the workloads are not the anchor's (diff: $(diff "$TMP/anchor.txt" "$TMP/out" | head -n 4))"
	run 2 "$1/mla-bench" 0
	err_has "usage: mla-bench"
}

if [ -x "$nvcc" ]; then
	build "$TMP/disp"
	build "$TMP/one"
else
	skip_part "no nvcc (looked in $cuda/bin and on PATH; set NVCC): bench-mla.cu is not compiled"
fi
done_ok
