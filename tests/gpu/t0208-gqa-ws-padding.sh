#!/usr/bin/env bash
# gqa_ws's padding must not meet on one page (seventeenth session). A CTA's last tile is
# padded to TILE tokens with copies of a real page, masked to p = 0. They were all page 0:
# at b16_kv8636 (66 tokens a CTA) 132 CTAs sent about 4,000 1 KiB copies of that one page
# to one L2 slice, and the kernel took 38-40 us there against 32-34 at b16_kv23079, which
# moves 2.7 times the bytes. With the tile's own first page the order is the bytes' order
# again (18-19 us against 25-26). The even split's medians are compared: fixed 0.70 of each
# other on H200s, 1.14 with page 0; the bound is 0.9.
#
# Needs a GPU (exit 77 = skipped otherwise).  Env: KSEARCH, KS_SOURCE_ROOT, optional KS_GPU_LOG_DIR.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "SKIP: no NVIDIA GPU to run kernels on"
	exit 77
fi
. "$(dirname "$0")/../cli/lib.sh"

params=()
for kv in CTAS=132 CHUNK=64 TILE=32 STAGES=3 WPH=2 MERGE=0 HINT=1 PART=0 PREQ=1 IDXPF=1; do
	params+=(-p "$kv")
done
run 0 "$KSEARCH" check operators/gqa/seeds/gqa_ws.cu --op gqa "${params[@]}" -w b16_kv8636 -w b16_kv23079 --json
[ -n "${KS_GPU_LOG_DIR:-}" ] && cp "$TMP/out" "$KS_GPU_LOG_DIR/t0208.json"
python3 - "$TMP/out" <<'PY' || fail "gqa_ws's padding slows the small workload down (above)"
import json, sys
r = json.load(open(sys.argv[1]))
r = r[0] if isinstance(r, list) else r
if r.get("verdict") != "ok":
    sys.exit(f"verdict {r.get('verdict')}: {r.get('evidence')}")
even = {}
for w in r["workloads"]:
    for s in w.get("splits", []):
        if s["kind"] == "even":
            even[w["id"]] = s["median_us"]
small, large = even["b16_kv8636"], even["b16_kv23079"]
print(f"even splits: b16_kv8636 {small:.2f} us, b16_kv23079 {large:.2f} us, ratio {small / large:.2f} (bound 0.9)")
sys.exit(0 if small < 0.9 * large else 1)
PY
checks=$((checks + 1))
done_ok
