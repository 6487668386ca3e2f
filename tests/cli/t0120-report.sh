#!/usr/bin/env bash
# `ksearch report`: the page from the small fixture, with and without
# --compare; its errors; and pages made while a writer inserts (each one's
# verdict counts add up to its number of candidates; tests/unit/test_archive.c
# shows that a pinned snapshot does not see later inserts).
# tests/cli/t0121-report-browser.sh opens the page in a browser.
. "$(dirname "$0")/lib.sh"
WRITER=${KS_ARCHIVE_CRASH_WRITER:?KS_ARCHIVE_CRASH_WRITER must name the archive_crash_writer helper}
A="$TMP/archive"
run 0 "$KSEARCH" archive import tests/fixtures/archive-small.json --archive "$A"

# page_check FILE PYTHON: PYTHON's asserts hold with page = FILE's text
page_check() {
	checks=$((checks + 1))
	python3 -c "import re, sys; page = open(sys.argv[1]).read(); $2" "$1" 2>"$TMP/err" || fail "$1: $2"
}

run 0 "$KSEARCH" report --op gqa --archive "$A" -o "$TMP/r.html"
out_has "wrote $TMP/r.html ("
out_has "gqa on NVIDIA H200, 10 candidates, best 2.600 (#8)"
page_check "$TMP/r.html" '
assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
charts = re.findall(r"<svg class=\"chart\" data-chart=\"([^\"]+)\"", page)
for name in ["grid-launches-smem_bytes", "grid-launches-tensor_cores", "grid-smem_bytes-tensor_cores",
             "history-best-evals", "history-qd-evals", "history-coverage-evals", "history-best-time",
             "workloads", "lineage", "verdicts", "mutations", "strategies"]:
    assert name in charts, (name, charts)
assert "ksearch export-best --op gqa --id 8" in page
assert "<title>#8 split_kv SPLITS=16 WARPS=8 UNROLL=2 HSPLIT=1\nfitness 2.600" in page
assert "use-async-copy" in page
assert not re.search(r"<script|src=|href=|url\(|@import", page), "the page refers to something outside it"
'
ls "$TMP" | grep -q 'r.html.tmp' && fail "a temporary file was left beside the page"

# the default output, and stdout
mkdir "$TMP/cwd"
(cd "$TMP/cwd" && "$KSEARCH" report --archive "$A" >"$TMP/out" 2>"$TMP/err") || fail "report with the default -o"
[ -s "$TMP/cwd/report.html" ] || fail "report did not write report.html"
run 0 "$KSEARCH" report --archive "$A" -o -
out_has "<!DOCTYPE html>"
out_lacks "wrote - ("

# anchors from tools/compare-torch.py --json, matched to the workloads by id
cat >"$TMP/compare.json" <<'JSON'
{"gpu": "NVIDIA H200", "copy_gbps": 4160.0, "rows": [
 {"id": "b1_kv546", "B": 1, "N": 546, "floor_us": 0.27, "torch_paged_us": 347.0, "sdpa_cudnn_us": 13.1, "sdpa_flash_us": 14.18, "candidate_us": null},
 {"id": "b16_kv8636", "B": 16, "N": 8636, "floor_us": 4.29, "torch_paged_us": 3351.0, "sdpa_cudnn_us": 19.31, "sdpa_flash_us": 20.9, "candidate_us": null},
 {"id": "b64_kv46287", "B": 64, "N": 46287, "floor_us": 22.89, "torch_paged_us": 18667.0, "sdpa_cudnn_us": 37.42, "sdpa_flash_us": 47.87, "candidate_us": null}]}
JSON
run 0 "$KSEARCH" report --archive "$A" -o "$TMP/c.html" --compare "$TMP/compare.json"
page_check "$TMP/c.html" '
assert "PyTorch SDPA, cuDNN" in page and "PyTorch, paged" in page, "no anchors"
assert "for 2 of 2 workloads" in page
assert "b16_kv8636, PyTorch SDPA, cuDNN: 19.3 us" in page
'

# errors, each named
echo '{"rows": [' >"$TMP/cut.json"
run 1 "$KSEARCH" report --archive "$A" --compare "$TMP/cut.json"
err_has "--compare $TMP/cut.json:"
echo '{"rows": [{"id": "b1_kv546", "sdpa_cudnn_us": "fast"}]}' >"$TMP/bad.json"
run 1 "$KSEARCH" report --archive "$A" --compare "$TMP/bad.json" -o "$TMP/bad.html"
err_has "rows[0] (b1_kv546): sdpa_cudnn_us: expected a time in microseconds, got a string"
[ ! -e "$TMP/bad.html" ] || fail "a failed report wrote a page"
run 1 "$KSEARCH" report --archive "$A" --compare "$TMP/missing.json"
err_has "missing.json"
run 1 "$KSEARCH" report --archive "$TMP/nothing"
err_has "no archive in $TMP/nothing"
run 1 "$KSEARCH" report --archive "$A" --op softmax
err_has "no archive for operator 'softmax'"
run 1 "$KSEARCH" report --archive "$A" -o "$TMP/no/such/folder/r.html"
err_has "-o $TMP/no/such/folder/r.html: cannot write $TMP/no/such/folder/r.html.tmp."
err_has "No such file or directory"
run 1 "$KSEARCH" report --archive "$A" -o "$TMP"
err_has "is a folder"
run 2 "$KSEARCH" report gqa
err_has "takes no arguments"
run 2 "$KSEARCH" report --archiv "$A"
err_has "did you mean '--archive'?"
run 0 "$KSEARCH" help report
out_has "usage: ksearch report --op NAME"
out_has "tools/compare-torch.py"
run 0 "$KSEARCH" --help
out_has "  report "

# marks_inside PAGE: every mark of every chart lies inside it: circles, rects and step lines
# inside the svg's viewBox, and a chart with axes draws its dots and lines inside its frame
# (issue 26: the example's dots went to x = 8,724 in a 370 px chart, drawn over the next ones)
marks_inside() {
	checks=$((checks + 1))
	python3 - "$1" >"$TMP/marks" 2>&1 <<'PY' || fail "$1: marks outside their chart: $(head -c 1500 "$TMP/marks")"
import re, sys
page = open(sys.argv[1]).read()
assert "overflow:visible" not in page, "the charts may draw outside themselves (overflow:visible)"
bad, n = [], 0
for m in re.finditer(r'<svg class="chart" data-chart="([^"]+)" width="([\d.]+)" height="([\d.]+)" viewBox="0 0 ([\d.]+) ([\d.]+)"(.*?)</svg>', page, re.S):
    name, w, h, body = m.group(1), float(m.group(4)), float(m.group(5)), m.group(6)
    assert (float(m.group(2)), float(m.group(3))) == (w, h), name
    box = (0, w, 0, h)
    frame = [tuple(map(float, f)) for f in re.findall(r'<line class="frame" x1="([-\d.]+)" x2="([-\d.]+)" y1="([-\d.]+)" y2="([-\d.]+)"', body)]
    if frame:
        xs = [v for f in frame for v in f[:2]]
        ys = [v for f in frame for v in f[2:]]
        box = (min(xs), max(xs), min(ys), max(ys))
    for cx, cy in re.findall(r'<circle[^>]*cx="([-\d.]+)" cy="([-\d.]+)"', body):
        n += 1
        x, y = float(cx), float(cy)
        if not (box[0] - 0.05 <= x <= box[1] + 0.05 and box[2] - 0.05 <= y <= box[3] + 0.05):
            bad.append("%s: circle at %s,%s outside %s" % (name, cx, cy, box))
    for x, y, rw, rh in re.findall(r'<rect[^>]*? x="([-\d.]+)" y="([-\d.]+)" width="([-\d.]+)" height="([-\d.]+)"', body):
        n += 1
        x, y, rw, rh = map(float, (x, y, rw, rh))
        if not (0 <= x and x + rw <= w + 0.05 and 0 <= y and y + rh <= h + 0.05):
            bad.append("%s: rect %s,%s %sx%s outside 0 0 %s %s" % (name, x, y, rw, rh, w, h))
    for d in re.findall(r'<path class="mark line" d="([^"]*)"', body):
        for op, a, b in re.findall(r"([MHV])([-\d.]+)(?: ([-\d.]+))?", d):
            n += 1
            xs, ys = ([float(a)], [float(b)]) if op == "M" else ([float(a)], []) if op == "H" else ([], [float(a)])
            if any(not box[0] - 0.05 <= v <= box[1] + 0.05 for v in xs) or any(not box[2] - 0.05 <= v <= box[3] + 0.05 for v in ys):
                bad.append("%s: line to %s%s outside %s" % (name, op, a, box))
assert n > 50, "only %d marks found" % n
assert not bad, "%d of %d marks:\n%s" % (len(bad), n, "\n".join(bad[:20]))
PY
}
# headline PAGE: the headline's count of candidates
headline() { sed -n 's|.*<b>\([0-9,]*\)</b><span>candidates evaluated.*|\1|p' "$1" | tr -d ,; }

marks_inside "$TMP/r.html"
marks_inside "$TMP/c.html"
# The README's example, a sample of a search (256 of its records, ids to 7,400): every mark
# inside its chart, each chart against evaluations counting candidate ids, and the headline
# counting the search's candidates as far as the ids show, with what the archive keeps.
run 0 "$KSEARCH" archive import docs/example/gqa-h200.json --archive "$TMP/example"
run 0 "$KSEARCH" report --archive "$TMP/example" -o "$TMP/example.html"
marks_inside "$TMP/example.html"
last=$(python3 -c 'import json, sys; print(max(c["id"] for c in json.load(open(sys.argv[1]))["candidates"]))' docs/example/gqa-h200.json)
# and the terminal line too: the records kept, of the candidates the search evaluated
out_has "gqa on NVIDIA H200, 256 candidates kept of $last evaluated, best "
[ "$(headline "$TMP/example.html")" = "$last" ] ||
	fail "the example's headline counts $(headline "$TMP/example.html") candidates, its ids reach $last"
grep -qF "this archive keeps 256 of them" "$TMP/example.html" || fail "the example's headline does not say it keeps 256"
page_check "$TMP/example.html" '
for chart in ["history-best-evals", "history-qd-evals", "history-coverage-evals", "verdicts"]:
    body = page.split("data-chart=\"%s\"" % chart)[1].split("</svg>")[0]
    assert ">evaluations (candidate ids)</text>" in body, chart
    ticks = [float(t.replace(",", "")) for t in re.findall(r"<text x=\"[\d.]+\" y=\"[\d.]+\" text-anchor=\"middle\">([\d,]+)</text>", body)]
    assert ticks and 6000 <= max(ticks) <= 7400, (chart, ticks)
'
# A search of thousands of candidates (tools/bench-archive.c writes one): the headline counts
# every record, as the verdicts do, and every mark lies inside its chart.
if [ -n "${KS_BENCH_ARCHIVE:-}" ]; then
	run 0 "$KS_BENCH_ARCHIVE" "$TMP/bench" 4000 --nosync
	run 0 "$KSEARCH" archive stats --archive "$TMP/bench" --json
	records=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["candidates"])' "$TMP/out")
	[ "$records" -ge 4000 ] || fail "the bench archive has $records records, expected 4000"
	run 0 "$KSEARCH" report --archive "$TMP/bench" -o "$TMP/bench.html"
	marks_inside "$TMP/bench.html"
	[ "$(headline "$TMP/bench.html")" = "$records" ] ||
		fail "the headline counts $(headline "$TMP/bench.html") candidates of $records records"
	grep -qF "this archive keeps" "$TMP/bench.html" && fail "a whole search's page speaks of a sample"
fi

# while a writer inserts: every page is made, and from one snapshot
"$WRITER" "$TMP/live" --count 1000000 --nosync >"$TMP/ids" 2>"$TMP/writer.err" &
writer=$!
trap 'kill $writer 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 100); do [ -s "$TMP/ids" ] && break; sleep 0.1; done
for i in 1 2 3 4 5; do
	run 0 "$KSEARCH" report --archive "$TMP/live" -o "$TMP/live-$i.html"
	page_check "$TMP/live-$i.html" '
cards = re.search(r"<b>([0-9,]+)</b><span>candidates evaluated", page).group(1)
spans = {}
for first, last, n in re.findall(r"<title>ids (\d+) to (\d+): \w+ \d+ of (\d+) ", page):
    spans[first] = int(n)
assert sum(spans.values()) == int(cards.replace(",", "")), (sum(spans.values()), cards)
'
done
kill $writer
wait $writer 2>/dev/null
[ "$(wc -l <"$TMP/ids")" -gt 10 ] || fail "the writer inserted too little to test against ($(wc -l <"$TMP/ids") results)"
done_ok
