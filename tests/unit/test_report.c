/*
 * test_report.c - `ksearch report`'s engine: what ks_report_gather() reads
 * from an archive (elites, history with times, verdict spans, the sample,
 * the best's lineage and workloads with the per-workload bests, the
 * --compare anchors, the LLM's strategies and usage), that it stays
 * bounded on a large archive, and that the page has a chart with marks
 * for each of them, escapes what records hold, and fetches nothing.
 */
#include "testlib.h"

#include <math.h>
#include <time.h>

#include "ksearch/archive/archive.h"
#include "ksearch/base/util.h"
#include "ksearch/report/report.h"

/* launches: [1,2) [2,3) [3,9); smem_bytes: [0,1) [1,16384) [16384,49153) -> 9 cells */
static double launch_edges[] = { 1, 2, 3, 9 };
static double smem_edges[] = { 0, 1, 16384, 49153 };
static struct ks_grid_axis grid[] = {
	{ KS_DESC_LAUNCHES, launch_edges, 4 },
	{ KS_DESC_SMEM_BYTES, smem_edges, 4 },
};

/* Candidates added to the archive open_new() made last: their params and times follow it. */
static int added;

static struct ks_archive *open_new(const char *root)
{
	struct ks_archive_options opts = { .flags = KS_ARCHIVE_CREATE | KS_ARCHIVE_NOSYNC,
					   .grid = grid,
					   .n_grid = 2 };
	struct ks_archive *ar;
	struct ks_error err;

	added = 0;
	if (ks_archive_open(&ar, root, "testop", "Test GPU", &opts, &err) < 0)
		fail_msg("%s", err.msg);
	return ar;
}

/* A record as the search writes one: created a minute after the previous, two timed workloads when ok. */
static uint64_t add(struct ks_archive *ar, const char *verdict, double fitness, int launches, int smem,
		    uint64_t parent, const char *mutation, const char *family)
{
	time_t when = 1795000000 + 60 * (time_t)added;
	char created[32], source[64];
	json_t *record, *workloads = json_array();
	struct ks_archive_insert_result res;
	struct ks_error err;

	strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", gmtime(&when));
	added++;
	snprintf(source, sizeof(source), "/* candidate %d */", added);
	if (!strcmp(verdict, "ok")) {
		json_array_append_new(workloads,
				      json_pack("{s:s, s:f, s:f, s:f}", "id", "small", "median_us",
						100 / fitness, "ref_median_us", 100.0, "floor_us", 5.0));
		json_array_append_new(workloads,
				      json_pack("{s:s, s:f, s:f, s:f}", "id", "large", "median_us",
						1000 / fitness, "ref_median_us", 1000.0, "floor_us", 80.0));
	}
	record = json_pack("{s:s, s:s, s:s, s:{s:i}, s:[], s:f, s:f, s:{s:i, s:i}, s:o, s:s}", "verdict",
			   verdict, "family", family, "mutation", mutation, "params", "SPLITS", added,
			   "parents", "fitness", fitness, "sol_fraction", fitness / 40, "descriptors",
			   "launches", launches, "smem_bytes", smem, "workloads", workloads, "created",
			   created);
	if (parent)
		json_array_append_new(json_object_get(record, "parents"), json_integer((json_int_t)parent));
	if (!strcmp(mutation, "llm"))
		json_object_set_new(record, "llm",
				    json_pack("{s:i, s:i, s:f}", "prompt_tokens", 1000, "completion_tokens",
					      200, "cost_usd", 0.01));
	if (ks_archive_insert(ar, record, source, &res, &err) < 0)
		fail_msg("%s", err.msg);
	json_decref(record);
	return res.id;
}

/*
 * Eight candidates: a seed, a param child, a failure, an LLM child that
 * wins a new cell, a crossover outside the grid... The best is #6
 * (fitness 3.0), descended #1 -> #2 -> #4 -> #6.
 */
static void fill(struct ks_archive *ar)
{
	struct ks_error err;
	json_t *prompt;
	const char usage[] = "{\"requests\": 12, \"failed\": 2, \"prompt_tokens\": 50000, "
			     "\"completion_tokens\": 7000, \"cost_usd\": 0.42}";

	assert_int_equal(add(ar, "ok", 1.0, 1, 0, 0, "seed", "split_kv"), 1);
	assert_int_equal(add(ar, "ok", 1.5, 1, 0, 1, "param", "split_kv"), 2);
	assert_int_equal(add(ar, "wrong", 0, 1, 0, 2, "param", "split_kv"), 3);
	assert_int_equal(add(ar, "ok", 2.0, 2, 16384, 2, "llm", "llm-1"), 4);
	assert_int_equal(add(ar, "compile_error", 0, 2, 0, 4, "llm", "llm-1"), 5);
	assert_int_equal(add(ar, "ok", 3.0, 2, 16384, 4, "tune", "llm-1"), 6);
	assert_int_equal(add(ar, "ok", 0.5, 9, 0, 1, "crossover", "<b>odd</b>"), 7); /* outside the grid */
	assert_int_equal(add(ar, "ok", 0.8, 3, 1, 6, "param", "llm-1"), 8);
	prompt = json_pack("{s:i, s:s, s:s, s:s, s:n, s:i, s:b, s:{s:i, s:i, s:i, s:i, s:f}}", "id", 1,
			   "name", "vector_loads", "text", "Use 16-byte loads.", "origin", "seed", "parent",
			   "created_at", 0, "active", 1, "stats", "uses", 4, "children", 2, "ok", 2,
			   "improvements", 1, "best_fitness", 3.0);
	assert_int_equal(ks_archive_prompt_put(ar, 1, prompt, &err), 0);
	json_decref(prompt);
	prompt = json_pack("{s:i, s:s, s:s, s:s, s:i, s:i, s:b, s:{s:i, s:i, s:i, s:i, s:f}}", "id", 2,
			   "name", "unused", "text", "...", "origin", "improve", "parent", 1, "created_at", 4,
			   "active", 0, "stats", "uses", 0, "children", 0, "ok", 0, "improvements", 0,
			   "best_fitness", 0.0);
	assert_int_equal(ks_archive_prompt_put(ar, 2, prompt, &err), 0);
	json_decref(prompt);
	assert_int_equal(ks_archive_state_put(ar, "llm/usage", usage, strlen(usage), &err), 0);
}

static struct ks_report *gather(struct ks_archive *ar, const json_t *compare)
{
	struct ks_report_options opts = { .compare = compare, .compare_file = "compare.json" };
	struct ks_report *r;
	struct ks_error err;

	if (ks_report_gather(ar, &opts, &r, &err) < 0)
		fail_msg("%s", err.msg);
	return r;
}

static void test_gather_reads_what_the_page_shows(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root);
	struct ks_report *r;
	uint64_t spans_total = 0;

	(void)state;
	fill(ar);
	r = gather(ar, NULL);
	assert_string_equal(r->op, "testop");
	assert_string_equal(r->gpu, "Test GPU");
	assert_int_equal(r->n_axes, 2);
	assert_int_equal(r->metrics.candidates, 8);
	assert_int_equal(r->metrics.best_id, 6);

	/* elites: [1,2)x[0,1) holds #2 (1.5); [2,3)x[16384,..) holds #6; [3,9)x[1,..) holds #8 */
	assert_int_equal(r->n_elites, 3);
	assert_int_equal(r->elites[0].c.id, 2);
	assert_int_equal(r->elites[0].coords[0], 0);
	assert_int_equal(r->elites[0].coords[1], 0);
	assert_true(r->elites[0].c.detailed);
	assert_string_equal(r->elites[0].c.params, "SPLITS=2");
	assert_true(r->elites[1].c.fitness == 3.0);
	assert_true(r->elites[1].c.has_descriptor & (1u << KS_DESC_SMEM_BYTES));

	/* history: a point per change, each with the time of the candidate that made it */
	assert_true(r->n_history >= 4);
	assert_int_equal(r->history[0].evals, 1);
	assert_true(r->history[r->n_history - 1].best_fitness == 3.0);
	for (size_t i = 0; i < r->n_history; i++) {
		assert_true(r->history[i].time > 0);
		if (i)
			assert_true(r->history[i].time > r->history[i - 1].time);
	}

	/* verdicts: every candidate in one span, once */
	for (size_t i = 0; i < r->n_spans; i++)
		for (int v = 0; v < KS_VERDICT_COUNT; v++)
			spans_total += r->spans[i].count[v];
	assert_int_equal(spans_total, 8);

	/* a small archive is sampled whole, in id order; mutations counted over it */
	assert_int_equal(r->n_sample, 8);
	assert_int_equal(r->sample[7].id, 8);
	assert_string_equal(r->mutations[0].name, "param"); /* the most frequent first */
	assert_int_equal(r->mutations[0].count, 3);
	assert_int_equal(r->mutations[0].ok, 2);
	assert_int_equal(r->llm_sample.children, 2);
	assert_int_equal(r->llm_sample.ok, 1);
	assert_int_equal(r->llm_sample.prompt_tokens, 2000);

	/* the best: its lineage oldest first, its workloads, the per-workload bests */
	assert_int_equal(r->n_top, 6);
	assert_int_equal(r->top[0].id, 6);
	assert_int_equal(r->n_lineage, 4);
	assert_int_equal(r->lineage[0].id, 1);
	assert_int_equal(r->lineage[1].id, 2);
	assert_int_equal(r->lineage[2].id, 4);
	assert_int_equal(r->lineage[3].id, 6);
	assert_int_equal(r->n_workloads, 2);
	assert_string_equal(r->workloads[1].id, "large");
	assert_true(fabs(r->workloads[1].best_us - 1000 / 3.0) < 1e-6);
	assert_true(r->workloads[1].ref_us == 1000 && r->workloads[1].floor_us == 80);
	assert_int_equal(r->workloads[1].dispatch_id, 6);
	assert_true(r->dispatch_fitness > 2.99 && r->dispatch_fitness < 3.01);
	assert_int_equal(r->workloads[0].n_anchors, 0);

	/* the LLM: strategies by reward, the usage kept by the search */
	assert_int_equal(r->n_strategies, 2);
	assert_string_equal(r->strategies[0].name, "vector_loads");
	assert_true(fabs(r->strategies[0].reward - (1 + 0.25 * 2) / 4) < 1e-12);
	assert_false(r->strategies[1].active);
	assert_true(r->has_llm_usage);
	assert_int_equal(r->llm_requests, 12);
	assert_true(r->cost_usd == 0.42);
	ks_report_free(r);
	ks_archive_close(ar);
	test_rmtree(root);
}

static void test_compare_anchors_match_workloads_by_id(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root);
	json_error_t jerr;
	json_t *compare =
		json_loads("{\"gpu\": \"NVIDIA H200\", \"copy_gbps\": 3900, \"rows\": ["
			   "{\"id\": \"small\", \"floor_us\": 4.9, \"torch_paged_us\": 500, "
			   "\"sdpa_cudnn_us\": 30.5, \"sdpa_flash_us\": null, \"candidate_us\": 34},"
			   "{\"id\": \"other\", \"sdpa_cudnn_us\": 1}]}",
			   0, &jerr);
	struct ks_report_options opts = { .compare_file = "c.json" };
	struct ks_report *r;
	struct ks_error err;

	(void)state;
	assert_non_null(compare);
	fill(ar);
	r = gather(ar, compare);
	assert_int_equal(r->compare_matched, 1);
	assert_string_equal(r->compare_gpu, "NVIDIA H200");
	assert_int_equal(r->workloads[0].n_anchors, 3); /* a null timing is no anchor */
	assert_string_equal(r->workloads[0].anchors[0].name, "PyTorch, paged (the op's reference)");
	assert_true(r->workloads[0].anchors[1].us == 30.5);
	assert_string_equal(r->workloads[0].anchors[2].name, "candidate, in the compare run");
	assert_int_equal(r->workloads[1].n_anchors, 0);
	ks_report_free(r);
	json_decref(compare);

	/* a document that is not compare-torch.py's fails, naming the field */
	compare = json_loads("{\"rows\": [{\"id\": \"small\", \"sdpa_cudnn_us\": \"fast\"}]}", 0, &jerr);
	opts.compare = compare;
	assert_int_equal(ks_report_gather(ar, &opts, &r, &err), -1);
	assert_null(r);
	assert_contains(err.msg, "c.json: rows[0] (small): sdpa_cudnn_us: expected a time in microseconds");
	json_decref(compare);
	compare = json_loads("{\"rows\": [3]}", 0, &jerr);
	opts.compare = compare;
	assert_int_equal(ks_report_gather(ar, &opts, &r, &err), -1);
	assert_contains(err.msg, "rows[0]: expected an object with a string \"id\"");
	json_decref(compare);
	compare = json_loads("[1, 2]", 0, &jerr);
	opts.compare = compare;
	assert_int_equal(ks_report_gather(ar, &opts, &r, &err), -1);
	assert_contains(err.msg, "expected tools/compare-torch.py's JSON");
	json_decref(compare);
	ks_archive_close(ar);
	test_rmtree(root);
}

static char *page_of(const struct ks_report *r)
{
	char *text = NULL;
	size_t size = 0;
	FILE *out = open_memstream(&text, &size);
	struct ks_error err;

	assert_non_null(out);
	if (ks_report_write_html(r, out, &err) < 0)
		fail_msg("%s", err.msg);
	fclose(out);
	return text;
}

/* The svg with data-chart="name" exists and holds at least one mark. */
static void assert_chart_has_marks(const char *page, const char *name)
{
	char open[128];
	const char *start, *end;

	snprintf(open, sizeof(open), "<svg class=\"chart\" data-chart=\"%s\"", name);
	start = strstr(page, open);
	if (!start)
		fail_msg("the page has no chart '%s'", name);
	end = strstr(start, "</svg>");
	assert_non_null(end);
	for (const char *p = strstr(start, "class=\"mark"); p; p = strstr(p + 1, "class=\"mark"))
		if (p < end)
			return;
	fail_msg("chart '%s' has no marks", name);
}

static void test_page_draws_every_chart_and_fetches_nothing(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root);
	json_error_t jerr;
	json_t *compare = json_loads("{\"rows\": [{\"id\": \"small\", \"sdpa_cudnn_us\": 30.5}]}", 0, &jerr);
	static const char *const charts[] = {
		"grid-launches-smem_bytes",
		"history-best-evals",
		"history-qd-evals",
		"history-coverage-evals",
		"history-best-time",
		"history-coverage-time",
		"workloads",
		"lineage",
		"verdicts",
		"mutations",
		"strategies",
	};
	struct ks_report *r;
	char *page;

	(void)state;
	fill(ar);
	r = gather(ar, compare);
	page = page_of(r);
	for (size_t i = 0; i < sizeof(charts) / sizeof(charts[0]); i++)
		assert_chart_has_marks(page, charts[i]);
	/* hover details of the winning cell */
	assert_contains(
		page,
		"<title>#6 llm-1 SPLITS=6\nfitness 3.000, 7.5% of the speed of light\nmutation tune of #4");
	assert_contains(page, "PyTorch SDPA, cuDNN");
	assert_contains(page, "ksearch export-best --op testop --id 6");
	assert_contains(page, "vector_loads");
	/* a record's text is escaped, and nothing outside the page is referenced */
	assert_contains(page, "&lt;b&gt;odd&lt;/b&gt;");
	assert_null(strstr(page, "<b>odd</b>"));
	assert_null(strstr(page, "<script"));
	assert_null(strstr(page, "src="));
	assert_null(strstr(page, "href="));
	assert_null(strstr(page, "url("));
	assert_null(strstr(page, "@import"));
	free(page);
	ks_report_free(r);
	json_decref(compare);
	ks_archive_close(ar);
	test_rmtree(root);
}

/* An archive with nothing ok: notes, never an empty chart. */
static void test_nothing_to_draw_gives_notes_not_empty_charts(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root);
	struct ks_report *r;
	char *page;

	(void)state;
	r = gather(ar, NULL);
	page = page_of(r);
	assert_null(strstr(page, "<svg"));
	assert_contains(page, "no cell is filled yet");
	ks_report_free(r);
	free(page);
	add(ar, "wrong", 0, 1, 0, 0, "seed", "split_kv");
	add(ar, "crash", 0, 1, 0, 0, "seed", "split_kv");
	r = gather(ar, NULL);
	page = page_of(r);
	assert_chart_has_marks(page, "verdicts");
	assert_chart_has_marks(page, "mutations");
	assert_null(strstr(page, "data-chart=\"grid-"));
	assert_null(strstr(page, "data-chart=\"workloads\""));
	assert_contains(page, "no candidate has verified ok yet");
	for (const char *p = strstr(page, "<svg"); p; p = strstr(p + 1, "<svg")) {
		const char *end = strstr(p, "</svg>"), *mark = strstr(p, "class=\"mark");

		assert_true(mark && mark < end);
	}
	ks_report_free(r);
	free(page);
	ks_archive_close(ar);
	test_rmtree(root);
}

/* More candidates than the sample, the history and the spans: what is read stays bounded. */
static void test_large_archive_is_sampled_not_read_whole(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root);
	struct ks_report *r;
	uint64_t total = 0;
	size_t n = KS_REPORT_SAMPLE + 500;

	(void)state;
	for (size_t i = 0; i < n; i++)
		add(ar, i % 3 ? "ok" : "wrong", 1 + (double)i / n, 1 + (int)(i % 3), 0, i ? i : 0, "param",
		    "f");
	r = gather(ar, NULL);
	assert_int_equal(r->n_sample, KS_REPORT_SAMPLE);
	assert_int_equal(r->sample[0].id, 1);
	assert_int_equal(r->sample[r->n_sample - 1].id, n);
	assert_true(r->n_history <= KS_REPORT_HISTORY);
	assert_int_equal(r->n_spans, KS_REPORT_SPANS);
	for (size_t i = 0; i < r->n_spans; i++)
		for (int v = 0; v < KS_VERDICT_COUNT; v++)
			total += r->spans[i].count[v];
	assert_int_equal(total, n);
	assert_int_equal(r->n_top, KS_REPORT_TOP);
	assert_int_equal(r->n_lineage, KS_REPORT_LINEAGE);
	assert_int_equal(r->lineage[KS_REPORT_LINEAGE - 1].id, r->metrics.best_id);
	ks_report_free(r);
	ks_archive_close(ar);
	test_rmtree(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gather_reads_what_the_page_shows),
		cmocka_unit_test(test_compare_anchors_match_workloads_by_id),
		cmocka_unit_test(test_page_draws_every_chart_and_fetches_nothing),
		cmocka_unit_test(test_nothing_to_draw_gives_notes_not_empty_charts),
		cmocka_unit_test(test_large_archive_is_sampled_not_read_whole),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
