#!/usr/bin/env bash
# `ksearch report` in a real browser: headless Chromium opens the page of
# the small fixture (with --compare anchors) and of a synthetic archive of
# a few thousand candidates, takes a screenshot of each, and the test fails
# on any console message (an error, an uncaught exception, a resource that
# did not load) or on a chart that drew no visible mark.  The check runs as
# a script added to a copy of the page: the page itself has none.
#
# Chromium is Debian's `chromium` package; when it is missing this test
# installs it (as root, or with sudo), and when it cannot it says so and
# skips (77).  Screenshots are left in $KS_BUILD_ROOT/report-screenshots/.
. "$(dirname "$0")/lib.sh"

find_chromium() {
	for c in chromium chromium-browser google-chrome; do
		command -v "$c" >/dev/null 2>&1 && { command -v "$c"; return 0; }
	done
	return 1
}
if ! chrome=$(find_chromium); then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo="sudo -n"
	echo "chromium is not installed: installing Debian's chromium package (apt-get)"
	if command -v apt-get >/dev/null 2>&1 &&
		timeout 900 $sudo apt-get update -q >"$TMP/apt.log" 2>&1 &&
		DEBIAN_FRONTEND=noninteractive timeout 900 $sudo apt-get install -y -q --no-install-recommends chromium \
			>>"$TMP/apt.log" 2>&1; then
		chrome=$(find_chromium)
	fi
	if [ -z "$chrome" ]; then
		tail -5 "$TMP/apt.log" 2>/dev/null
		echo "SKIP: no Chromium, and installing Debian's chromium package failed (not root, no sudo, or no" \
			"network): the report was not opened in a browser"
		exit 77
	fi
fi
"$chrome" --version 2>/dev/null | head -1

shots=${KS_BUILD_ROOT:-$TMP}/report-screenshots
mkdir -p "$shots"

# The check, added to a copy of the page: console errors and uncaught exceptions are reported
# with a marker (Chromium's log does not say a message's level), then every chart must hold a
# mark that takes room on the screen.
head_script='<script>
(function () {
	var say = console.log.bind(console);
	console.error = function () { say("KSEARCH-CHECK console.error: " + Array.prototype.join.call(arguments, " ")); };
	console.warn = function () { say("KSEARCH-CHECK console.warn: " + Array.prototype.join.call(arguments, " ")); };
	window.addEventListener("error", function (e) {
		say("KSEARCH-CHECK error: " + (e.message || (e.target && (e.target.src || e.target.href)) || "a resource failed"));
	}, true);
})();
</script>'
tail_script='<script>
(function () {
	var charts = document.querySelectorAll("svg.chart"), bad = [], outside = [];
	charts.forEach(function (chart) {
		var drawn = Array.prototype.some.call(chart.querySelectorAll(".mark"), function (m) {
			var box = m.getBoundingClientRect();
			return box.width > 0 || box.height > 0;
		});
		if (!drawn)
			bad.push(chart.getAttribute("data-chart"));
		/* nothing drawn outside its chart: the page clips it there (issue 26: dots over the next charts) */
		var box = chart.getBoundingClientRect();
		chart.querySelectorAll("text, circle, rect, path, line").forEach(function (e) {
			var b = e.getBoundingClientRect();
			if (b.width + b.height > 0 && (b.left < box.left - 1 || b.right > box.right + 1 ||
			    b.top < box.top - 1 || b.bottom > box.bottom + 1))
				outside.push(chart.getAttribute("data-chart") + ": " + e.tagName + " " +
					(e.textContent || "").slice(0, 40) + " at " + Math.round(b.left - box.left) + "," +
					Math.round(b.top - box.top) + " to " + Math.round(b.right - box.left) + "," +
					Math.round(b.bottom - box.top) + " of " + Math.round(box.width) + "x" + Math.round(box.height));
		});
	});
	if (outside.length)
		console.log("KSEARCH-CHECK error: " + outside.length + " things drawn outside their chart: " +
			outside.slice(0, 10).join("; "));
	if (!charts.length)
		console.log("KSEARCH-CHECK error: the page has no chart");
	else if (bad.length)
		console.log("KSEARCH-CHECK error: charts without a visible mark: " + bad.join(", "));
	else if (!outside.length)
		console.log("KSEARCH-CHECK ok " + charts.length + " charts");
})();
</script>'

# shoot NAME PAGE MIN_CHARTS: open a copy of PAGE with the checks, screenshot it, judge the console
shoot() {
	local name=$1 page=$2 min=$3 probe="$TMP/$1-probe.html"
	python3 - "$page" "$probe" "$head_script" "$tail_script" <<'PY'
import sys
page, probe, head, tail = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
text = open(page).read()
assert "</head>" in text and "</body>" in text
open(probe, "w").write(text.replace("</head>", head + "</head>", 1).replace("</body>", tail + "</body>", 1))
PY
	timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
		--user-data-dir="$TMP/profile" --enable-logging=stderr --v=0 --window-size=1300,4200 \
		--screenshot="$shots/$name.png" "file://$probe" >"$TMP/out" 2>"$TMP/err"
	checks=$((checks + 1))
	[ -s "$shots/$name.png" ] || fail "$name: Chromium wrote no screenshot"
	grep -F "CONSOLE" "$TMP/err" >"$TMP/console"
	if grep -v -F '"KSEARCH-CHECK ok ' "$TMP/console" | grep -q .; then
		cp "$TMP/console" "$TMP/err"
		fail "$name: the page logged to the console (errors, or charts without marks)"
	fi
	n=$(sed -n 's/.*"KSEARCH-CHECK ok \([0-9]*\) charts".*/\1/p' "$TMP/console")
	[ -n "$n" ] || fail "$name: the check did not run (no KSEARCH-CHECK line in Chromium's log)"
	[ "$n" -ge "$min" ] || fail "$name: $n charts drawn, expected at least $min"
	# a blank or clipped page compresses to a few KB
	[ "$(stat -c %s "$shots/$name.png")" -gt 60000 ] || fail "$name: the screenshot is nearly empty"
	echo "$name: $n charts drawn, screenshot $shots/$name.png"
}

run 0 "$KSEARCH" archive import tests/fixtures/archive-small.json --archive "$TMP/small"
cat >"$TMP/compare.json" <<'JSON'
{"gpu": "NVIDIA H200", "copy_gbps": 4160.0, "rows": [
 {"id": "b1_kv546", "floor_us": 0.27, "torch_paged_us": 347.0, "sdpa_cudnn_us": 13.1, "sdpa_flash_us": 14.18},
 {"id": "b16_kv8636", "floor_us": 4.29, "torch_paged_us": 3351.0, "sdpa_cudnn_us": 19.31, "sdpa_flash_us": 20.9}]}
JSON
run 0 "$KSEARCH" report --archive "$TMP/small" --compare "$TMP/compare.json" -o "$TMP/small.html"
shoot small "$TMP/small.html" 12

if [ -n "${KS_BENCH_ARCHIVE:-}" ]; then
	run 0 "$KS_BENCH_ARCHIVE" "$TMP/bench" 3000 --nosync
	run 0 "$KSEARCH" report --archive "$TMP/bench" -o "$TMP/bench.html"
	shoot bench "$TMP/bench.html" 10
fi

# the README's picture (docs/report.png is this page): a sample of a real search, with anchors
run 0 "$KSEARCH" archive import docs/example/gqa-h200.json --archive "$TMP/example"
run 0 "$KSEARCH" report --archive "$TMP/example" --compare docs/example/torch-h200.json -o "$TMP/example.html"
shoot example "$TMP/example.html" 12

# the check itself fails on what it must catch: a console error, and a chart without marks
# caught NAME WHAT: shooting $TMP/NAME.html must fail (its failures are counted apart)
caught() {
	(failures_file="$TMP/$1.failures" && shoot "$1" "$TMP/$1.html" 1) >/dev/null 2>&1
	checks=$((checks + 1))
	[ -s "$TMP/$1.failures" ] || fail "$2 went unnoticed"
}
sed 's|</body>|<script>console.error("planted")</script></body>|' "$TMP/small.html" >"$TMP/planted.html"
caught planted "a console error in the page"
sed 's|class="mark[^"]*"|class="unmarked"|g' "$TMP/small.html" >"$TMP/unmarked.html"
caught unmarked "charts without marks"
sed 's|<circle class="point" cx="[0-9.]*"|<circle class="point" cx="9999"|' "$TMP/small.html" >"$TMP/outside.html"
caught outside "marks outside their chart"
rm -f "$shots/planted.png" "$shots/unmarked.png" "$shots/outside.png"
done_ok
