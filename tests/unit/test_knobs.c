/*
 * test_knobs.c - the knob mutator's transforms (mutator_knobs.h): each knob
 * is found where the source has it in code and nowhere else, each edit
 * writes what it says, hostile text never crashes the finder, and every
 * seed of every operator still builds through NVRTC with its knobs turned.
 * The mutator inside a search is tested in test_search.c.
 */
#include "testlib.h"

#include "ksearch/base/pcg.h"
#include "ksearch/compile/build.h"
#include "ksearch/search/mutator_knobs.h"
#include "ksearch/search/search.h"

static size_t find(const char *source, const struct ks_candidate *cand, struct ks_knob_site **sites)
{
	size_t n = 0;

	ks_knobs_find(source, cand, sites, &n);
	return n;
}

/* source with site set to value (which it must offer); caller frees */
static char *set(const char *source, const struct ks_knob_site *site, const char *value)
{
	struct ks_knob_edit edit;
	char *out;
	int k = 0;

	while (k < site->n_values && strcmp(site->values[k], value))
		k++;
	if (k == site->n_values)
		fail_msg("%s at line %d does not offer '%s'", site->label, site->line, value);
	ks_knob_edit_of(site, k, &edit);
	out = ks_knobs_apply(source, &edit, 1);
	assert_non_null(out);
	return out;
}

static void assert_values(const struct ks_knob_site *site, const char *expected)
{
	char got[256] = "";

	for (int k = 0; k < site->n_values; k++)
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", k ? " " : "", site->values[k]);
	assert_string_equal(got, expected);
}

static void test_minblocks_where_a_literal_or_nothing_is(void **state)
{
	static const char src[] =
		"// extern \"C\" __global__ void __launch_bounds__(64) z(const float *x) {}\n"
		"extern \"C\" __global__ void __launch_bounds__(WARPS * 32) a(const float *x) {}\n"
		"extern \"C\" __global__ void __launch_bounds__(128, 2) b(const float *x) {}\n"
		"extern \"C\" __global__ void __launch_bounds__(THREADS, MINB) c(const float *x) {}\n"
		"extern \"C\" __global__ void __maxnreg__(64) d(const float *x) {}\n"
		"extern \"C\" __global__ void __launch_bounds__(64) e(const float *x);\n"
		"extern \"C\" __global__ void __launch_bounds__(64) e(const float *x) {}\n"
		"const char *s = \"extern \\\"C\\\" __global__ void __launch_bounds__(32) f()\";\n"
		"#define K extern \"C\" __global__ void __launch_bounds__(32) g(float *x) {}\n"
		"extern \"C\" __global__ void CLUSTER_DIMS __launch_bounds__(256, 1, 2) h(float *x) {}\n"
		"__global__ void __launch_bounds__(32) i(float *x) {}\n";
	struct ks_knob_site *sites;
	size_t n = find(src, NULL, &sites);
	char *out;

	(void)state;
	assert_int_equal(n, 3);
	assert_int_equal(sites[0].kind, KS_KNOB_MINBLOCKS);
	assert_string_equal(sites[0].label, "a");
	assert_int_equal(sites[0].line, 2);
	assert_string_equal(sites[0].current, "");
	assert_values(&sites[0], "2 3 4"); /* absent is 1 already */
	out = set(src, &sites[0], "3");
	assert_contains(out, "__launch_bounds__(WARPS * 32, 3) a(");
	free(out);

	assert_string_equal(sites[1].label, "b");
	assert_string_equal(sites[1].current, "2");
	assert_values(&sites[1], "1 3 4");
	out = set(src, &sites[1], "1");
	assert_contains(out, "__launch_bounds__(128, 1) b(");
	free(out);

	/* the cluster bound stays */
	assert_string_equal(sites[2].label, "h");
	out = set(src, &sites[2], "4");
	assert_contains(out, "CLUSTER_DIMS __launch_bounds__(256, 4, 2) h(");
	free(out);
	free(sites);
}

static void test_minblocks_from_the_plan_when_there_is_no_bound(void **state)
{
	static const char src[] =
		"/* ksearch {\"params\": {\"A\": [1, 2, 4], \"B\": [1, 2]},\n"
		"  \"launch\": [{\"kernel\": \"a\", \"grid\": [\"n\"], \"block\": [\"32*A\", \"B\"], "
		"\"args\": []},\n"
		"             {\"kernel\": \"a\", \"grid\": [\"2\"], \"block\": [\"32*A\", \"B\"], \"args\": "
		"[]},\n"
		"             {\"kernel\": \"b\", \"grid\": [\"n\"], \"block\": [\"n\"], \"args\": []},\n"
		"             {\"kernel\": \"c\", \"grid\": [\"n\"], \"block\": [\"64\"], \"args\": []},\n"
		"             {\"kernel\": \"c\", \"grid\": [\"n\"], \"block\": [\"128\"], \"args\": []},\n"
		"             {\"kernel\": \"d\", \"grid\": [\"n\"], \"block\": [\"min(A, 2) * 32\"], "
		"\"args\": []}]}\n"
		"*/\n"
		"extern \"C\" __global__ void a(const float *x) {}\n"
		"extern \"C\" __global__ void b(const float *x) {}\n"
		"extern \"C\" __global__ void c(const float *x) {}\n"
		"extern \"C\" __global__ void d(const float *x) {}\n";
	struct ks_candidate cand;
	struct ks_knob_site *sites;
	struct ks_error err;
	size_t n;
	char *out;

	(void)state;
	if (ks_candidate_parse("t.cu", src, &cand, &err) < 0)
		fail_msg("%s", err.msg);
	/* b's block names an axis, c has two blocks, d calls min(): a only */
	n = find(src, &cand, &sites);
	assert_int_equal(n, 1);
	assert_string_equal(sites[0].label, "a");
	assert_values(&sites[0], "1 2 3 4");
	out = set(src, &sites[0], "2");
	assert_contains(out,
			"extern \"C\" __global__ void __launch_bounds__((32*A) * (B), 2) a(const float *x)");
	free(out);
	free(sites);
	/* without the plan, nothing */
	assert_int_equal(find(src, NULL, &sites), 0);
	assert_null(sites);
	ks_candidate_release(&cand);
}

static void test_loads_never_become_weaker_and_stores_swap(void **state)
{
	static const char src[] = "extern \"C\" __global__ void k(const float *x, float *y) {\n"
				  "\tfloat a = __ldg(x) + __ldcs(x + 1) + __ldcg(x + 2) + __ldcv(x + 3);\n"
				  "\ta += p.__ldg(x) + q->__ldg(x) + ns::__ldg(x) + __ldg;\n"
				  "\t__stcs(y, a); __stwt(y + 1, a);\n"
				  "\t/* __ldg(x) */ const char *t = \"__ldg(x)\"; // __stcs(y, a)\n"
				  "}\n";
	struct ks_knob_site *sites;
	size_t n = find(src, NULL, &sites);
	struct ks_knob_edit edits[2];
	char *out;

	(void)state;
	assert_int_equal(n, 4);
	assert_int_equal(sites[0].kind, KS_KNOB_LOAD);
	assert_string_equal(sites[0].current, "__ldg");
	assert_values(&sites[0], "__ldca __ldcs __ldlu __ldcg");
	assert_string_equal(sites[1].current, "__ldcs");
	assert_values(&sites[1], "__ldca __ldlu __ldcg"); /* never back to the read-only path */
	assert_int_equal(sites[2].kind, KS_KNOB_STORE);
	assert_string_equal(sites[2].current, "__stcs");
	assert_values(&sites[2], "__stwb __stcg __stwt");
	assert_int_equal(sites[3].line, 4);
	assert_values(&sites[3], "__stwb __stcg __stcs");

	out = set(src, &sites[0], "__ldcs");
	assert_contains(out, "float a = __ldcs(x) + __ldcs(x + 1) + __ldcg(x + 2)");
	assert_contains(out, "p.__ldg(x) + q->__ldg(x) + ns::__ldg(x)");
	assert_contains(out, "/* __ldg(x) */ const char *t = \"__ldg(x)\"");
	free(out);

	/* two edits at once, in order */
	ks_knob_edit_of(&sites[0], 3, &edits[0]);
	ks_knob_edit_of(&sites[3], 0, &edits[1]);
	out = ks_knobs_apply(src, edits, 2);
	assert_contains(out, "float a = __ldcg(x) + __ldcs(x + 1)");
	assert_contains(out, "__stcs(y, a); __stwb(y + 1, a);");
	free(out);
	/* out of order, overlapping, or past the end: refused */
	assert_null(ks_knobs_apply(src, (struct ks_knob_edit[]){ edits[1], edits[0] }, 2));
	assert_null(ks_knobs_apply(src, (struct ks_knob_edit[]){ edits[0], edits[0] }, 2));
	edits[0].at = sizeof(src);
	assert_null(ks_knobs_apply(src, edits, 1));
	free(sites);
}

static void test_ptx_eviction_hints_in_asm_templates_only(void **state)
{
	static const char src[] =
		"extern \"C\" __global__ void k(const unsigned *x, unsigned *y) {\n"
		"\tunsigned a, b, c, d;\n"
		"\tasm volatile(\"ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\\n\" : \"=r\"(a), \"=r\"(b), "
		"\"=r\"(c), \"=r\"(d) : \"l\"(x));\n"
		"\tasm(\"ld.global.ca.u32 %0, [%1];\" : \"=r\"(a) : \"l\"(x));\n"
		"\tasm volatile(\"{\\n\\tld.global.L1::evict_last.u32 %0, [%1];\\n}\" : \"=r\"(b) : "
		"\"l\"(x));\n"
		"\tasm(\"ld.global.nc\" \".u32 %0, [%1];\" : \"=r\"(c) : \"l\"(x));\n"
		"\tasm(\"myld.global.nc.u32 %0, [%1];\" : \"=r\"(c) : \"l\"(x));\n"
		"\tconst char *z = \"ld.global.nc.u32\";\n"
		"\ty[0] = a + b + c + d;\n"
		"}\n";
	struct ks_knob_site *sites;
	size_t n = find(src, NULL, &sites);
	char *out;

	(void)state;
	assert_int_equal(n, 2);
	assert_int_equal(sites[0].kind, KS_KNOB_PTX_LOAD);
	assert_string_equal(sites[0].label, "ld.global.nc");
	assert_string_equal(sites[0].current, "");
	assert_values(&sites[0], ".L1::no_allocate .L1::evict_first .L1::evict_last");
	assert_string_equal(sites[1].label, "ld.global");
	assert_string_equal(sites[1].current, ".L1::evict_last");
	assert_values(&sites[1], " .L1::no_allocate .L1::evict_first");

	out = set(src, &sites[0], ".L1::no_allocate");
	assert_contains(out, "asm volatile(\"ld.global.nc.L1::no_allocate.v4.u32 {%0");
	free(out);
	out = set(src, &sites[1], "");
	assert_contains(out, "\\tld.global.u32 %0, [%1];");
	free(out);
	free(sites);
}

static void test_unroll_where_marked(void **state)
{
	static const char src[] =
		"extern \"C\" __global__ void __launch_bounds__(UNROLL) k(float *y, int n) {\n"
		"\t/* ksearch:unroll */\n"
		"\tfor (int i = 0; i < n; i++) y[i] = 0;\n"
		"#pragma unroll /* ksearch:unroll */\n"
		"\tfor (int i = 0; i < 8; i++) y[i] = 1;\n"
		"\t#pragma unroll 4 /*ksearch:unroll*/\n"
		"\tfor (int i = 0; i < n; i++) y[i] = 2;\n"
		"#pragma unroll UNROLL /* ksearch:unroll */\n"
		"#pragma unroll 2\n"
		"#pragma unroll 2 /* ksearch:unroll please */\n"
		"\ty[0] = 1; /* ksearch:unroll */\n"
		"\t/* ksearch:unroll */ y[1] = 1;\n"
		"}\n";
	struct ks_knob_site *sites;
	size_t n = find(src, NULL, &sites);
	char *out;

	(void)state;
	assert_int_equal(n, 4);
	assert_int_equal(sites[0].kind, KS_KNOB_MINBLOCKS);
	assert_int_equal(sites[1].kind, KS_KNOB_UNROLL);
	assert_int_equal(sites[1].line, 2);
	assert_string_equal(sites[1].current, "default");
	assert_values(&sites[1], "full 1 2 4 8");
	assert_int_equal(sites[2].line, 4);
	assert_string_equal(sites[2].current, "full");
	assert_values(&sites[2], "default 1 2 4 8");
	assert_int_equal(sites[3].line, 6);
	assert_string_equal(sites[3].current, "4");
	assert_values(&sites[3], "default full 1 2 8");

	out = set(src, &sites[1], "4");
	assert_contains(out,
			"\t#pragma unroll 4 /* ksearch:unroll */\n\tfor (int i = 0; i < n; i++) y[i] = 0;");
	free(out);
	out = set(src, &sites[2], "default");
	assert_contains(out, "\n/* ksearch:unroll */\n\tfor (int i = 0; i < 8; i++) y[i] = 1;");
	free(out);
	out = set(src, &sites[3], "full");
	assert_contains(out, "\t#pragma unroll /*ksearch:unroll*/\n");
	free(out);
	out = set(src, &sites[3], "8");
	assert_contains(out, "\t#pragma unroll 8 /*ksearch:unroll*/\n");
	free(out);
	free(sites);
}

/* Each edit's knob is found again in its child: the child is a parent the mutator can change again. */
static void test_an_edited_source_has_the_same_knobs(void **state)
{
	static const char src[] =
		"extern \"C\" __global__ void __launch_bounds__(64) k(const float *x, float *y, int n) {\n"
		"\t/* ksearch:unroll */\n"
		"\tfor (int i = 0; i < n; i++) y[i] = __ldg(x + i);\n"
		"}\n";
	struct ks_knob_site *sites, *again;
	size_t n = find(src, NULL, &sites);

	(void)state;
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < sites[i].n_values; k++) {
			struct ks_knob_edit edit;
			char *out;

			ks_knob_edit_of(&sites[i], k, &edit);
			out = ks_knobs_apply(src, &edit, 1);
			assert_non_null(out);
			assert_string_not_equal(out, src);
			if (!strcmp(sites[i].values[k], "__ldcg")) {
				/* the strongest load has nowhere to go */
				assert_int_equal(find(out, NULL, &again), 2);
			} else {
				assert_int_equal(find(out, NULL, &again), 3);
				assert_int_equal(again[i].kind, sites[i].kind);
				assert_string_equal(again[i].current, sites[i].values[k]);
			}
			free(again);
			free(out);
		}
	free(sites);
}

/* Truncations, byte flips and floods: the finder stays in bounds and bounded. */
static void test_hostile_sources_never_crash_the_finder(void **state)
{
	static const char base[] =
		"/* ksearch {\"params\": {}} */\n"
		"#define A(x) __ldg(x) \\\n  + __ldcs(x)\n"
		"extern \"C\" __global__ void __launch_bounds__(64, 2) k(const float *x, float *y) {\n"
		"\tconst char *r = R\"d(__ldg(x) \")\" )d\";\n"
		"\tconst char c = '\"', e = '\\'';\n"
		"\tasm volatile(\"ld.global.nc.f32 %0, [%1];\" : \"=f\"(y[0]) : \"l\"(x));\n"
		"#pragma unroll 2 /* ksearch:unroll */\n"
		"\tfor (int i = 0; i < 4; i++) y[i] = __ldg(x + i) + 1.5e+3f + 0x1p-2;\n"
		"\t__stcg(y, 1.0f);\n"
		"}\n";
	struct ks_knob_site *sites;
	struct ks_pcg32 rng;
	size_t n, len = strlen(base);
	char *text = malloc(len + 1), *flood;

	(void)state;
	n = find(base, NULL, &sites);
	assert_int_equal(n, 5); /* minblocks, ptx_load, unroll, a load (not those of the macro), the store */
	free(sites);
	for (size_t cut = 0; cut <= len; cut++) {
		memcpy(text, base, cut);
		text[cut] = 0;
		find(text, NULL, &sites);
		free(sites);
	}
	ks_pcg32_seed(&rng, 24, 7);
	for (int round = 0; round < 4000; round++) {
		static const char bytes[] = "\"'/*\\\n#()<>,;{}R_ :.";

		memcpy(text, base, len + 1);
		for (int k = 0; k < 4; k++) {
			size_t at = ks_pcg32_bounded(&rng, (uint32_t)len);

			text[at] = bytes[ks_pcg32_bounded(&rng, sizeof(bytes) - 1)];
		}
		n = find(text, NULL, &sites);
		for (size_t i = 0; i < n; i++) {
			struct ks_knob_edit edit;
			char *out;

			assert_true(sites[i].at + sites[i].len <= len);
			ks_knob_edit_of(&sites[i], 0, &edit);
			out = ks_knobs_apply(text, &edit, 1);
			assert_non_null(out);
			free(out);
		}
		free(sites);
	}
	free(text);
	/* a flood of calls: the first KS_KNOB_MAX_SITES only */
	flood = malloc(6 * 100000 + 1);
	for (size_t i = 0; i < 100000; i++)
		memcpy(flood + 6 * i, "__ldg(", 6);
	flood[6 * 100000] = 0;
	assert_int_equal(find(flood, NULL, &sites), KS_KNOB_MAX_SITES);
	free(sites);
	/* unterminated: a comment, a string, a raw string, an asm */
	assert_int_equal(find("/* __ldg(x)", NULL, &sites), 0);
	assert_int_equal(find("\"__ldg(x)", NULL, &sites), 0);
	assert_int_equal(find("R\"x(__ldg(x)", NULL, &sites), 0);
	assert_int_equal(find("asm(\"ld.global.nc.f32 ", NULL, &sites), 0);
	assert_int_equal(find("extern \"C\" __global__ void __launch_bounds__(", NULL, &sites), 0);
	assert_int_equal(find("", NULL, &sites), 0);
	free(flood);
}

/*
 * Every seed of every operator, with each knob turned (all at once, two
 * ways), still builds through NVRTC and passes the contract's checks at
 * its first params; the knobs the seeds have are counted, so that a seed
 * that loses them is noticed.
 */
static void test_every_seed_builds_with_its_knobs_turned(void **state)
{
	static const char *const ops[] = { "gqa", "softmax", "rmsnorm", "mla_decode" };
	size_t per_kind[KS_KNOB_KINDS] = { 0 };

	(void)state;
	for (size_t o = 0; o < sizeof(ops) / sizeof(*ops); o++) {
		struct ks_op op;
		struct ks_family *fams;
		size_t n_fams;
		struct ks_error err;

		if (ks_op_find(ops[o], &op, &err) < 0 || ks_families_load(&op, &fams, &n_fams, &err) < 0)
			fail_msg("%s", err.msg);
		for (size_t f = 0; f < n_fams; f++) {
			struct ks_knob_site *sites;
			size_t n = find(fams[f].cand.source, &fams[f].cand, &sites);

			for (size_t i = 0; i < n; i++)
				per_kind[sites[i].kind]++;
			for (int way = 0; way < 2 && n; way++) {
				struct ks_knob_edit *edits = calloc(n, sizeof(*edits));
				struct ks_candidate cand;
				struct ks_build build;
				int64_t params[KS_CANDIDATE_MAX_PARAMS];
				char *source;

				for (size_t i = 0; i < n; i++)
					ks_knob_edit_of(&sites[i],
							(int)((i + (size_t)way) % (size_t)sites[i].n_values),
							&edits[i]);
				source = ks_knobs_apply(fams[f].cand.source, edits, n);
				assert_non_null(source);
				if (ks_candidate_parse(fams[f].name, source, &cand, &err) < 0 ||
				    ks_candidate_bind(&cand, &op, &err) < 0)
					fail_msg("%s/%s: %s", ops[o], fams[f].name, err.msg);
				ks_params_first(&cand, params);
				if (ks_build(&cand, &op, params, "sm_90a", 0, &build, &err) < 0)
					fail_msg("%s/%s: %s", ops[o], fams[f].name, err.msg);
				if (build.verdict != KS_VERDICT_OK)
					fail_msg("%s/%s with its knobs turned (way %d): %s: %s\n%s", ops[o],
						 fams[f].name, way, ks_verdict_name(build.verdict), err.msg,
						 source);
				ks_build_release(&build);
				ks_candidate_release(&cand);
				free(source);
				free(edits);
			}
			free(sites);
		}
		ks_families_free(fams, n_fams);
		ks_op_release(&op);
	}
	/* what the seeds offer: launch bounds, loads and stores, and the marked loops */
	assert_true(per_kind[KS_KNOB_MINBLOCKS] >= 10);
	assert_true(per_kind[KS_KNOB_LOAD] >= 50);
	assert_true(per_kind[KS_KNOB_STORE] >= 2);
	assert_true(per_kind[KS_KNOB_UNROLL] >= 9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_minblocks_where_a_literal_or_nothing_is),
		cmocka_unit_test(test_minblocks_from_the_plan_when_there_is_no_bound),
		cmocka_unit_test(test_loads_never_become_weaker_and_stores_swap),
		cmocka_unit_test(test_ptx_eviction_hints_in_asm_templates_only),
		cmocka_unit_test(test_unroll_where_marked),
		cmocka_unit_test(test_an_edited_source_has_the_same_knobs),
		cmocka_unit_test(test_hostile_sources_never_crash_the_finder),
		cmocka_unit_test(test_every_seed_builds_with_its_knobs_turned),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
