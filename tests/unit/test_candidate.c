/*
 * test_candidate.c - the ksearch block, binding to an op, launch plans,
 * params, and the static checks of ks_build() (NVRTC, no GPU needed).
 */
#include "testlib.h"

#include "ksearch/base/sha256.h"
#include "ksearch/compile/build.h"
#include "ksearch/op/candidate.h"
#include "ksearch/op/op.h"

static const char op_json[] =
	"{\"name\": \"scale_h256\",\n"
	" \"axes\": {\"rows\": {\"type\": \"var\"}, \"hidden\": {\"type\": \"const\", \"value\": 256}},\n"
	" \"inputs\": {\"x\": {\"shape\": [\"rows\", \"hidden\"], \"dtype\": \"float32\"},\n"
	"            \"alpha\": {\"shape\": null, \"dtype\": \"float32\"}},\n"
	" \"outputs\": {\"y\": {\"shape\": [\"rows\", \"hidden\"], \"dtype\": \"float32\"}},\n"
	" \"ksearch\": {\"generators\": {\"x\": {\"kind\": \"normal\"}, \"alpha\": {\"kind\": \"const\", "
	"\"value\": 2}},\n"
	"   \"workloads\": [{\"id\": \"r1000\", \"axes\": {\"rows\": 1000}}],\n"
	"   \"check_workloads\": [{\"id\": \"r3\", \"axes\": {\"rows\": 3}}],\n"
	"   \"tolerances\": {\"y\": {\"atol\": 0, \"rtol\": 0}},\n"
	"   \"min_bytes\": \"rows*hidden*8\", \"flops\": \"rows*hidden\",\n"
	"   \"grid\": [{\"descriptor\": \"occupancy\", \"edges\": [0, 0.5, 1.01]}]}}\n";

/* A correct candidate; the tests break it in one place at a time. */
static const char good[] =
	"// scales rows\n"
	"/* ksearch\n"
	"{ \"params\": {\"THREADS\": [128, 256], \"UNROLL\": [1, 2, 4]},\n"
	"  \"scratch\": {\"partial\": [\"float32\", \"rows\"]},\n"
	"  \"launch\": [\n"
	"    {\"kernel\": \"scale\", \"grid\": [\"cdiv(rows*hidden, THREADS*UNROLL)\"], \"block\": "
	"[\"THREADS\"],\n"
	"     \"smem\": \"THREADS*4\", \"args\": [\"x\", \"alpha\", \"y\", \"rows\", \"partial\"]} ] }\n"
	"*/\n"
	"extern \"C\" __global__ void scale(const float *x, float alpha, float *y, int rows, float "
	"*partial)\n"
	"{\n"
	"\textern __shared__ float buf[];\n"
	"\tint base = (blockIdx.x * THREADS + threadIdx.x) * UNROLL;\n"
	"\tfor (int u = 0; u < UNROLL; u++) {\n"
	"\t\tint i = base + u;\n"
	"\t\tif (i < rows * 256) { buf[threadIdx.x] = x[i]; y[i] = alpha * buf[threadIdx.x]; }\n"
	"\t}\n"
	"\tif (base == 0) partial[0] = 0.f;\n"
	"}\n";

struct fixture {
	char *dir;
	struct ks_op op;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct ks_error err;

	f->dir = test_tmpdir();
	test_write(f->dir, "op.json", op_json);
	test_write(f->dir, "reference.cu", good);
	if (ks_op_load(f->dir, &f->op, &err) < 0)
		fail_msg("%s", err.msg);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	ks_op_release(&f->op);
	test_rmtree(f->dir);
	free(f);
	return 0;
}

static void test_block_parses(void **state)
{
	struct fixture *f = *state;
	struct ks_candidate c;
	struct ks_error err;

	if (ks_candidate_parse("good.cu", good, &c, &err) < 0 || ks_candidate_bind(&c, &f->op, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(c.block_line, 2);
	assert_int_equal(c.n_params, 2);
	assert_string_equal(c.params[1].name, "UNROLL");
	assert_int_equal(c.params[1].n_values, 3);
	assert_int_equal(c.n_scratch, 1);
	assert_int_equal(c.scratch[0].dtype, KS_DTYPE_FLOAT32);
	assert_int_equal(c.n_launches, 1);
	assert_int_equal(c.launches[0].n_args, 5);
	assert_int_equal(c.launches[0].args[0].kind, KS_ARG_INPUT);
	assert_int_equal(c.launches[0].args[1].kind, KS_ARG_SCALAR);
	assert_int_equal(c.launches[0].args[2].kind, KS_ARG_OUTPUT);
	assert_int_equal(c.launches[0].args[3].kind, KS_ARG_AXIS);
	assert_int_equal(c.launches[0].args[4].kind, KS_ARG_SCRATCH);
	ks_candidate_release(&c);
}

static void test_plan_resolves_numbers(void **state)
{
	struct fixture *f = *state;
	struct ks_candidate c;
	struct ks_plan plan;
	struct ks_error err;
	int64_t params[2] = { 256, 4 };

	assert_int_equal(ks_candidate_parse("good.cu", good, &c, &err), 0);
	assert_int_equal(ks_candidate_bind(&c, &f->op, &err), 0);
	if (ks_plan_resolve(&c, &f->op, &f->op.workloads[0], params, &plan, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(plan.launches[0].grid[0], 250); /* cdiv(1000*256, 1024) */
	assert_int_equal(plan.launches[0].grid[1], 1);
	assert_int_equal(plan.launches[0].block[0], 256);
	assert_int_equal(plan.launches[0].smem, 1024);
	assert_int_equal(plan.scratch_bytes[0], 4000);
	ks_plan_release(&plan);
	ks_candidate_release(&c);
}

static void test_params_enumerate_and_assign(void **state)
{
	struct fixture *f = *state;
	struct ks_candidate c;
	struct ks_error err;
	int64_t v[2];
	const char *ok[] = { "UNROLL=4" };
	const char *bad_value[] = { "UNROLL=3" };
	const char *bad_name[] = { "UNROL=4" };
	const char *bad_form[] = { "UNROLL" };
	char buf[64];

	assert_int_equal(ks_candidate_parse("good.cu", good, &c, &err), 0);
	assert_int_equal(ks_candidate_bind(&c, &f->op, &err), 0);
	assert_int_equal(ks_params_count(&c), 6);
	ks_params_nth(&c, 0, v);
	assert_int_equal(v[0], 128);
	assert_int_equal(v[1], 1);
	ks_params_nth(&c, 5, v);
	assert_int_equal(v[0], 256);
	assert_int_equal(v[1], 4);
	ks_params_first(&c, v);
	assert_int_equal(ks_params_assign(&c, ok, 1, v, &err), 0);
	assert_int_equal(v[1], 4);
	ks_params_format(&c, v, buf, sizeof(buf));
	assert_string_equal(buf, "THREADS=128 UNROLL=4");
	assert_int_equal(ks_params_assign(&c, bad_value, 1, v, &err), -1);
	assert_contains(err.msg, "3 is not among UNROLL's values [1, 2, 4]");
	assert_int_equal(ks_params_assign(&c, bad_name, 1, v, &err), -1);
	assert_contains(err.msg, "no param 'UNROL'");
	assert_int_equal(ks_params_assign(&c, bad_form, 1, v, &err), -1);
	assert_contains(err.msg, "expected NAME=VALUE");
	ks_candidate_release(&c);
}

/* Constraints rule combinations out before anything is compiled; the first allowed one is the default. */
static void test_constraints_rule_combinations_out(void **state)
{
	struct fixture *f = *state;
	char *src = test_replace(
		good, "\"params\": {\"THREADS\": [128, 256], \"UNROLL\": [1, 2, 4]},",
		"\"params\": {\"THREADS\": [128, 256], \"UNROLL\": [1, 2, 4]},\n"
		"  \"constraints\": [\"THREADS * UNROLL >= 256\", \"UNROLL != 4 || THREADS == 128\"],");
	struct ks_candidate c;
	struct ks_build b;
	struct ks_error err;
	int64_t v[2];
	char why[256];

	assert_int_equal(ks_candidate_parse("good.cu", src, &c, &err), 0);
	assert_int_equal(ks_candidate_bind(&c, &f->op, &err), 0);
	assert_int_equal(c.n_constraints, 2);
	assert_int_equal(ks_params_count(&c), 6);
	/* allowed: 128x2, 128x4, 256x1, 256x2 (not 128x1: 128 < 256; not 256x4: the second) */
	assert_int_equal(ks_params_count_allowed(&c), 4);
	ks_params_first(&c, v);
	assert_int_equal(v[0], 128);
	assert_int_equal(v[1], 2);
	v[0] = 256;
	v[1] = 4;
	assert_int_equal(ks_params_allowed(&c, v, why, sizeof(why)), 0);
	assert_contains(
		why,
		"constraints[1] \"UNROLL != 4 || THREADS == 128\" does not hold for THREADS=256 UNROLL=4");
	/* ks_build refuses a ruled-out combination before compiling it */
	assert_int_equal(ks_build(&c, &f->op, v, "sm_80", 0, &b, &err), 0);
	assert_int_equal(b.verdict, KS_VERDICT_CONTRACT_ERROR);
	assert_contains(err.msg, "constraints rule these params out");
	ks_build_release(&b);
	ks_candidate_release(&c);
	free(src);
}

struct broken {
	const char *from, *to, *expect;
	int at_bind; /* fails at bind rather than parse */
};

static const struct broken broken[] = {
	{ "\"UNROLL\": [1, 2, 4]},", "\"UNROLL\": [1, 2, 4]},,", "bad.cu:3:", 0 },
	{ "/* ksearch", "/* ksurch", "no `/* ksearch", 0 },
	/* escape sequences for a terminal, anywhere in the text: ESC (a title), BEL, DEL, C1 CSI */
	{ "// scales rows", "// scales \033]0;pwned\007rows", "line 1: a control character (U+001B)", 0 },
	{ "\tint base", "\t// \007\n\tint base", "line 12: a control character (U+0007)", 0 },
	{ "\tif (base == 0)", "\t/* \177 */ if (base == 0)", "(U+007F)", 0 },
	{ "\tif (base == 0)", "\t/* \302\233 */ if (base == 0)", "(U+009B)", 0 },
	{ "[1, 2, 4]", "[]", "params.UNROLL: expected a non-empty list", 0 },
	{ "[1, 2, 4]", "[1, 2, 2]", "listed twice", 0 },
	{ "\"float32\", \"rows\"", "\"float33\", \"rows\"", "unknown dtype 'float33'", 0 },
	{ "\"block\": [\"THREADS\"]", "\"blok\": [\"THREADS\"]", "unknown field 'blok'", 0 },
	{ "\"alpha\", \"y\"", "\"alpha\", \"why\"", "unknown argument 'why'", 1 },
	{ "THREADS*UNROLL)", "THREADS*UNROL)", "unknown name 'UNROL'", 1 },
	{ "\"smem\": \"THREADS*4\"", "\"smem\": \"THREADS*\"", "THREADS*", 1 },
	{ "\"THREADS\": [128", "\"rows\": [128", "has the name of an axis", 1 },
	{ "\"scratch\":", "\"constraints\": [\"THREADS > rows\"], \"scratch\":", "'rows' is not a param", 0 },
	{ "\"scratch\":", "\"constraints\": [\"THREADS >\"], \"scratch\":", "constraints[0]", 0 },
	{ "\"scratch\":", "\"constraints\": \"THREADS > 1\", \"scratch\":", "constraints: expected a list",
	  0 },
	{ "\"scratch\":", "\"constraints\": [3], \"scratch\":", "constraints[0]: expected a condition string",
	  0 },
	{ "\"smem\": \"THREADS*4\"", "\"pdl\": true, \"smem\": \"THREADS*4\"", "the first launch has none",
	  0 },
	{ "\"smem\": \"THREADS*4\"", "\"pdl\": 1, \"smem\": \"THREADS*4\"", "pdl: expected true or false",
	  0 },
};

/* Printable text: tabs, CR LF, form feeds, vertical tabs and UTF-8 are not control characters. */
static void test_printable_sources_parse(void **state)
{
	char *src = test_replace(good, "// scales rows\n", "// scales rows by \316\261, \302\265s\f\v\r\n");
	struct ks_candidate c;
	struct ks_error err;

	(void)state;
	if (ks_candidate_parse("ok.cu", src, &c, &err) < 0)
		fail_msg("%s", err.msg);
	ks_candidate_release(&c);
	free(src);
}

static void test_broken_blocks_get_clear_errors(void **state)
{
	struct fixture *f = *state;

	for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++) {
		char *src = test_replace(good, broken[i].from, broken[i].to);
		struct ks_candidate c;
		struct ks_error err;
		int rc = ks_candidate_parse("bad.cu", src, &c, &err);

		if (rc == 0) {
			if (!broken[i].at_bind)
				fail_msg("case %zu parsed but should fail with \"%s\"", i, broken[i].expect);
			rc = ks_candidate_bind(&c, &f->op, &err);
			ks_candidate_release(&c);
			if (rc == 0)
				fail_msg("case %zu bound but should fail with \"%s\"", i, broken[i].expect);
		}
		assert_contains(err.msg, broken[i].expect);
		assert_contains(err.msg, "bad.cu");
		free(src);
	}
}

static void test_plan_errors_name_launch_and_workload(void **state)
{
	struct fixture *f = *state;
	static const struct broken cases[] = {
		{ "\"block\": [\"THREADS\"]", "\"block\": [\"THREADS*8\"]", "block.x: \"THREADS*8\" = 2048",
		  0 },
		{ "\"block\": [\"THREADS\"]", "\"block\": [\"THREADS\", 8]", "2048 threads per block", 0 },
		{ "cdiv(rows*hidden, THREADS*UNROLL)", "rows*hidden/(UNROLL-UNROLL)", "division by zero", 0 },
		{ "cdiv(rows*hidden, THREADS*UNROLL)", "rows - rows", "outside CUDA's range", 0 },
		{ "\"THREADS*4\"", "\"0 - THREADS\"", "cannot be negative", 0 },
		{ "\"cdiv(rows*hidden, THREADS*UNROLL)\"]", "\"rows\", 70000]", "grid.y: \"70000\"", 0 },
	};
	int64_t params[2] = { 256, 1 };

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *src = test_replace(good, cases[i].from, cases[i].to);
		struct ks_candidate c;
		struct ks_plan plan;
		struct ks_error err;

		assert_int_equal(ks_candidate_parse("bad.cu", src, &c, &err), 0);
		if (ks_candidate_bind(&c, &f->op, &err) < 0)
			fail_msg("case %zu: %s", i, err.msg);
		assert_int_equal(ks_plan_resolve(&c, &f->op, &f->op.workloads[0], params, &plan, &err), -1);
		assert_contains(err.msg, cases[i].expect);
		assert_contains(err.msg, "workload r1000");
		assert_contains(err.msg, "launch[0] (scale)");
		ks_candidate_release(&c);
		free(src);
	}
}

/*
 * The binary's fingerprint: equal for what runs alike (a param nothing
 * uses, a comment), different for what does not (a param in the code, one
 * only in the launch plan, the architecture).
 */
static void test_binary_fingerprint_is_what_the_gpu_runs(void **state)
{
	struct fixture *f = *state;
	char *with_params =
		test_replace(good, "\"params\": {\"THREADS\": [128, 256], \"UNROLL\": [1, 2, 4]},",
			     "\"params\": {\"THREADS\": [128, 256], \"UNROLL\": [1, 2, 4], "
			     "\"DEAD\": [1, 2], \"G\": [1, 2]},");
	char *src = test_replace(with_params, "[\"cdiv(rows*hidden, THREADS*UNROLL)\"]",
				 "[\"cdiv(rows*hidden, THREADS*UNROLL) * G\"]");
	char *commented =
		test_replace(src, "// scales rows\n", "// scales rows, with a longer comment\n\n\n");
	struct {
		const char *text;
		int64_t params[4]; /* THREADS UNROLL DEAD G */
		const char *arch;
	} builds[] = {
		{ src, { 128, 1, 1, 1 }, "sm_90a" },	   /* 0 */
		{ src, { 128, 1, 2, 1 }, "sm_90a" },	   /* 1: DEAD changes nothing: = 0 */
		{ commented, { 128, 1, 1, 1 }, "sm_90a" }, /* 2: nor does a comment: = 0 */
		{ src, { 128, 2, 1, 1 }, "sm_90a" },	   /* 3: UNROLL is in the code */
		{ src, { 128, 1, 1, 2 }, "sm_90a" },	   /* 4: G only in the grid: same cubin, other plan */
		{ src, { 128, 1, 1, 1 }, "sm_80" },	   /* 5: another architecture */
	};
	unsigned char keys[6][32];
	unsigned char cubin_hash[6][32];
	struct ks_error err;

	for (size_t i = 0; i < 6; i++) {
		struct ks_candidate c;
		struct ks_build b;

		assert_int_equal(ks_candidate_parse("cand.cu", builds[i].text, &c, &err), 0);
		assert_int_equal(ks_candidate_bind(&c, &f->op, &err), 0);
		if (ks_build(&c, &f->op, builds[i].params, builds[i].arch, 0, &b, &err) < 0 ||
		    b.verdict != KS_VERDICT_OK)
			fail_msg("build %zu: %s", i, err.msg);
		memcpy(keys[i], b.binary, 32);
		ks_sha256(b.compiled.cubin, b.compiled.cubin_size, cubin_hash[i]);
		ks_build_release(&b);
		ks_candidate_release(&c);
	}
	assert_memory_equal(keys[0], keys[1], 32);
	assert_memory_equal(keys[0], keys[2], 32);
	assert_memory_not_equal(keys[0], keys[3], 32);
	assert_memory_equal(cubin_hash[0], cubin_hash[4], 32); /* the cubin alone would merge them */
	assert_memory_not_equal(keys[0], keys[4], 32);
	assert_memory_not_equal(keys[0], keys[5], 32);
	free(commented);
	free(src);
	free(with_params);
}

static void build_source(struct fixture *f, const char *src, struct ks_build *b, struct ks_error *err)
{
	struct ks_candidate c;
	int64_t params[2] = { 128, 1 };

	assert_int_equal(ks_candidate_parse("cand.cu", src, &c, err), 0);
	assert_int_equal(ks_candidate_bind(&c, &f->op, err), 0);
	if (ks_build(&c, &f->op, params, "sm_90a", 0, b, err) < 0)
		fail_msg("%s", err->msg);
	ks_candidate_release(&c);
}

static void test_build_reports_resources_and_descriptors(void **state)
{
	struct fixture *f = *state;
	struct ks_build b;
	struct ks_error err;

	build_source(f, good, &b, &err);
	if (b.verdict != KS_VERDICT_OK)
		fail_msg("%s", err.msg);
	assert_int_equal(b.n_launches, 1);
	assert_true(b.launches[0].res.registers > 0);
	assert_int_equal(b.launches[0].threads, 128);
	assert_int_equal(b.launches[0].dynamic_smem, 512);
	assert_int_equal(b.launches[0].smem, 512 + b.launches[0].res.static_smem);
	assert_true(b.descriptors[KS_DESC_OCCUPANCY] > 0.0);
	assert_true(b.descriptors[KS_DESC_OCCUPANCY] <= 1.0);
	assert_int_equal((int)b.descriptors[KS_DESC_LAUNCHES], 1);
	assert_int_equal((int)b.descriptors[KS_DESC_LOAD_WIDTH], 4);
	ks_build_release(&b);
}

static void test_build_refuses_and_reports(void **state)
{
	struct fixture *f = *state;
	static const struct {
		const char *from, *to;
		enum ks_verdict verdict;
		const char *expect;
	} cases[] = {
		{ "\"kernel\": \"scale\"", "\"kernel\": \"scales\"", KS_VERDICT_CONTRACT_ERROR,
		  "names kernel 'scales', but the source defines no such" },
		{ "\tif (base == 0) partial[0] = 0.f;\n", "\tif (base == 0) partial[0] = 0.f;\n\tcalls++;\n",
		  KS_VERDICT_REFUSED, "mutable global 'calls'" },
		{ "\t\tint i = base + u;\n", "\t\tint i = base + u + undefined_thing;\n",
		  KS_VERDICT_COMPILE_ERROR, "cand.cu(14)" },
		{ "\"smem\": \"THREADS*4\"", "\"smem\": \"THREADS*4096\"", KS_VERDICT_REFUSED,
		  "cannot run on sm_90a" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *src = test_replace(good, cases[i].from, cases[i].to);
		struct ks_build b;

		if (strstr(src, "calls++")) {
			/* the counter needs its declaration too */
			char *with_decl = test_replace(src, "extern \"C\" __global__",
						       "__device__ int calls;\nextern \"C\" __global__");

			free(src);
			src = with_decl;
		}
		struct ks_error err;

		build_source(f, src, &b, &err);
		if (b.verdict != cases[i].verdict)
			fail_msg("case %zu: verdict %s, expected %s: %s", i, ks_verdict_name(b.verdict),
				 ks_verdict_name(cases[i].verdict), err.msg);
		assert_contains(err.msg, cases[i].expect);
		ks_build_release(&b);
		free(src);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_block_parses),
		cmocka_unit_test(test_plan_resolves_numbers),
		cmocka_unit_test(test_params_enumerate_and_assign),
		cmocka_unit_test(test_constraints_rule_combinations_out),
		cmocka_unit_test(test_printable_sources_parse),
		cmocka_unit_test(test_broken_blocks_get_clear_errors),
		cmocka_unit_test(test_plan_errors_name_launch_and_workload),
		cmocka_unit_test(test_build_reports_resources_and_descriptors),
		cmocka_unit_test(test_build_refuses_and_reports),
		cmocka_unit_test(test_binary_fingerprint_is_what_the_gpu_runs),

	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
