/*
 * test_candidate.c - the ksearch block, binding to an op, launch plans,
 * params, and the static checks of ks_build() (NVRTC, no GPU needed).
 */
#include "testlib.h"

#include <time.h>

#include "ksearch/base/sha256.h"
#include "ksearch/base/util.h"
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

/*
 * "start" says where the params begin: what the default params are (a
 * seed's first evaluation, `check` without --param), while the lists keep
 * their order for the moves; params it leaves out begin at their first.
 */
static void test_start_is_the_default(void **state)
{
	struct fixture *f = *state;
	char *src = test_replace(
		good, "\"scratch\":",
		"\"start\": {\"UNROLL\": 4}, \"constraints\": [\"THREADS * UNROLL >= 256\"], \"scratch\":");
	const char *assign[] = { "THREADS=256" };
	struct ks_candidate c;
	struct ks_error err;
	int64_t v[2];

	assert_int_equal(ks_candidate_parse("good.cu", src, &c, &err), 0);
	assert_int_equal(ks_candidate_bind(&c, &f->op, &err), 0);
	ks_params_first(&c, v);
	assert_int_equal(v[0], 128);		    /* THREADS: its first */
	assert_int_equal(v[1], 4);		    /* UNROLL: the start, not 2 (the first allowed) */
	assert_int_equal(c.params[1].values[0], 1); /* the list keeps its order */
	/* --param on top of the start */
	assert_int_equal(ks_params_assign(&c, assign, 1, v, &err), 0);
	assert_int_equal(v[0], 256);
	assert_int_equal(v[1], 4);
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
	/* "start": params only, listed values, allowed by the constraints */
	{ "\"scratch\":", "\"start\": {\"TILE\": 32}, \"scratch\":",
	  "start.TILE: not a param (params: THREADS, UNROLL)", 0 },
	{ "\"scratch\":", "\"start\": {\"UNROLL\": 3}, \"scratch\":",
	  "start.UNROLL: 3 is not one of its values (1, 2, 4)", 0 },
	{ "\"scratch\":", "\"start\": {\"UNROLL\": \"2\"}, \"scratch\":", "start.UNROLL: expected an integer",
	  0 },
	{ "\"scratch\":", "\"start\": [256, 2], \"scratch\":", "start: expected an object", 0 },
	{ "\"scratch\":",
	  "\"constraints\": [\"THREADS * UNROLL <= 512\"], \"start\": {\"THREADS\": 256, \"UNROLL\": 4}, "
	  "\"scratch\":",
	  "start: constraints[0] \"THREADS * UNROLL <= 512\" does not hold for THREADS=256 UNROLL=4", 0 },
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

/* A candidate whose ksearch block is built in sb from good's launch; its parse must fail within a second. */
static void expect_parse_fails_fast(const char *src, const char *expect)
{
	struct ks_candidate c;
	struct ks_error err;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (ks_candidate_parse("hostile.cu", src, &c, &err) == 0) {
		ks_candidate_release(&c);
		fail_msg("parsed, but should fail with \"%s\"", expect);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_contains(err.msg, expect);
	assert_contains(err.msg, "hostile.cu");
	if ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9 > 1.0)
		fail_msg("refusing took more than a second (%s)", expect);
}

static const char launch_one[] = "{\"kernel\": \"scale\", \"grid\": [1], \"block\": [32], \"args\": [\"x\"]}";

/* Every limit, checked as the block is parsed (each would have hung or run for minutes before). */
static void test_limits_are_checked_as_the_block_is_parsed(void **state)
{
	struct ks_strbuf sb;

	(void)state;
	/* the product of the value lists, however the params are written */
	ks_strbuf_init(&sb);
	ks_strbuf_adds(&sb, "/* ksearch {\"params\": {");
	for (int i = 0; i < 20; i++)
		ks_strbuf_addf(&sb, "%s\"P%d\": [0,1,2,3,4,5,6,7,8,9]", i ? ", " : "", i);
	ks_strbuf_addf(&sb, "}, \"constraints\": [\"P0 > 100\"], \"launch\": [%s]} */\n", launch_one);
	expect_parse_fails_fast(sb.buf, "KS_CANDIDATE_MAX_COMBINATIONS");
	ks_strbuf_release(&sb);
	ks_strbuf_init(&sb);
	ks_strbuf_addf(&sb, "/* ksearch {\"params\": {\"A\": [%s", "1");
	for (int i = 2; i <= 64; i++)
		ks_strbuf_addf(&sb, ", %d", i);
	ks_strbuf_adds(&sb, "], \"B\": [1");
	for (int i = 2; i <= 64; i++)
		ks_strbuf_addf(&sb, ", %d", i);
	ks_strbuf_adds(&sb, "], \"C\": [1");
	for (int i = 2; i <= 64; i++)
		ks_strbuf_addf(&sb, ", %d", i);
	ks_strbuf_addf(&sb, "], \"D\": [1, 2, 3, 4, 5]}, \"launch\": [%s]} */\n", launch_one);
	expect_parse_fails_fast(sb.buf, "up to params.D");
	ks_strbuf_release(&sb);
	/* within the combinations, their count times the constraints' length */
	ks_strbuf_init(&sb);
	ks_strbuf_adds(&sb, "/* ksearch {\"params\": {");
	for (int i = 0; i < 20; i++)
		ks_strbuf_addf(&sb, "%s\"P%d\": [0, 1]", i ? ", " : "", i);
	ks_strbuf_adds(&sb, "}, \"constraints\": [\"P0+P1+P2+P3+P4+P5+P6+P7+P8+P9 < 1000 || ");
	ks_strbuf_addf(
		&sb,
		"P10+P11+P12+P13+P14+P15+P16+P17+P18+P19 > 5000 || P0 > 7777777\"], \"launch\": [%s]} */\n",
		launch_one);
	expect_parse_fails_fast(sb.buf, "KS_CANDIDATE_MAX_CONSTRAINT_WORK");
	ks_strbuf_release(&sb);
	/* params, values, constraints, launches, arguments, scratch, expressions */
	ks_strbuf_init(&sb);
	ks_strbuf_adds(&sb, "/* ksearch {\"params\": {");
	for (int i = 0; i < 70000; i++)
		ks_strbuf_addf(&sb, "%s\"P%d\": [1]", i ? ", " : "", i);
	ks_strbuf_addf(&sb, "}, \"launch\": [%s]} */\n", launch_one);
	expect_parse_fails_fast(sb.buf,
				"70000 params; a candidate may have at most 32 (KS_CANDIDATE_MAX_PARAMS)");
	ks_strbuf_release(&sb);
	ks_strbuf_init(&sb);
	ks_strbuf_adds(&sb, "/* ksearch {\"params\": {\"V\": [0");
	for (int i = 1; i < 100000; i++)
		ks_strbuf_addf(&sb, ",%d", i);
	ks_strbuf_addf(&sb, "]}, \"launch\": [%s]} */\n", launch_one);
	expect_parse_fails_fast(sb.buf, "params.V: 100000 values; a param may have at most 64");
	ks_strbuf_release(&sb);
	ks_strbuf_init(&sb);
	ks_strbuf_adds(&sb, "/* ksearch {\"params\": {\"A\": [1]}, \"constraints\": [\"A > 0\"");
	for (int i = 0; i < 40; i++)
		ks_strbuf_adds(&sb, ", \"A > 0\"");
	ks_strbuf_addf(&sb, "], \"launch\": [%s]} */\n", launch_one);
	expect_parse_fails_fast(sb.buf, "KS_CANDIDATE_MAX_CONSTRAINTS");
	ks_strbuf_release(&sb);
	ks_strbuf_init(&sb);
	ks_strbuf_addf(&sb, "/* ksearch {\"launch\": [%s", launch_one);
	for (int i = 0; i < 5000; i++)
		ks_strbuf_addf(&sb, ", %s", launch_one);
	ks_strbuf_adds(&sb, "]} */\n");
	expect_parse_fails_fast(sb.buf,
				"5001 launches; a candidate may make at most 16 (KS_CANDIDATE_MAX_LAUNCHES)");
	ks_strbuf_release(&sb);
	ks_strbuf_init(&sb);
	ks_strbuf_adds(&sb, "/* ksearch {\"launch\": [{\"kernel\": \"k\", \"grid\": [1], \"block\": [1], "
			    "\"args\": [\"x\"");
	for (int i = 0; i < 64; i++)
		ks_strbuf_adds(&sb, ", \"x\"");
	ks_strbuf_adds(&sb, "]}]} */\n");
	expect_parse_fails_fast(sb.buf, "65 arguments; at most 64 (KS_CANDIDATE_MAX_ARGS)");
	ks_strbuf_release(&sb);
	ks_strbuf_init(&sb);
	ks_strbuf_adds(&sb, "/* ksearch {\"scratch\": {");
	for (int i = 0; i < 17; i++)
		ks_strbuf_addf(&sb, "%s\"s%d\": [\"float32\", 4]", i ? ", " : "", i);
	ks_strbuf_addf(&sb, "}, \"launch\": [%s]} */\n", launch_one);
	expect_parse_fails_fast(sb.buf, "17 buffers; at most 16 (KS_CANDIDATE_MAX_SCRATCH)");
	ks_strbuf_release(&sb);
	ks_strbuf_init(&sb);
	ks_strbuf_adds(&sb, "/* ksearch {\"launch\": [{\"kernel\": \"k\", \"grid\": [\"1");
	for (int i = 0; i < 2000; i++)
		ks_strbuf_adds(&sb, "+1");
	ks_strbuf_adds(&sb, "\"], \"block\": [1], \"args\": []}]} */\n");
	expect_parse_fails_fast(sb.buf, "KS_CANDIDATE_MAX_EXPR_BYTES");
	ks_strbuf_release(&sb);
	/* the source itself, given as text (an LLM's answer has no file) */
	ks_strbuf_init(&sb);
	ks_strbuf_addf(&sb, "/* ksearch {\"launch\": [%s]} */\n", launch_one);
	while (sb.len <= KS_CANDIDATE_MAX_BYTES)
		ks_strbuf_adds(&sb, "// padding padding padding padding padding padding padding\n");
	expect_parse_fails_fast(sb.buf, "larger than the limit of 1 MiB (KS_CANDIDATE_MAX_BYTES");
	ks_strbuf_release(&sb);
}

/* At the limits, a full enumeration (no combination allowed) stays near a second. */
#ifdef __SANITIZE_ADDRESS__
#define ENUMERATION_SECONDS 60.0 /* ASan and UBSan make it some ten times slower */
#else
#define ENUMERATION_SECONDS 5.0
#endif
static void test_enumeration_at_the_limits_is_bounded(void **state)
{
	struct ks_strbuf sb;
	struct ks_candidate c;
	struct ks_error err;
	struct timespec t0, t1;
	int64_t values[20];
	double seconds;

	(void)state;
	ks_strbuf_init(&sb);
	ks_strbuf_adds(&sb, "/* ksearch {\"params\": {");
	for (int i = 0; i < 20; i++)
		ks_strbuf_addf(&sb, "%s\"P%d\": [0, 1]", i ? ", " : "", i);
	ks_strbuf_addf(&sb, "}, \"constraints\": [\"P0 + P19 > 2 + P7\"], \"launch\": [%s]} */\n",
		       launch_one);
	if (ks_candidate_parse("limit.cu", sb.buf, &c, &err) < 0)
		fail_msg("%s", err.msg);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(ks_params_count_allowed(&c), 0);
	ks_params_first(&c, values);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	ks_candidate_release(&c);
	ks_strbuf_release(&sb);
	if (seconds > ENUMERATION_SECONDS)
		fail_msg("two enumerations of 2^20 combinations took %.1f s", seconds);
	assert_int_equal(values[0], 0); /* none allowed: the plain first values */
}

/* Bytes that are not UTF-8 and NUL bytes: the line and the byte offset, in three places each. */
static void test_text_must_be_utf8_without_nul(void **state)
{
	static const struct {
		const char *from, *to, *expect;
	} cases[] = {
		{ "// scales rows\n", "// scales r\351ws\n",
		  "hostile.cu:1: byte offset 11: byte 0xE9 is not UTF-8" },
		{ "\"THREADS*4\"", "\"THREADS*4\", \"x\\u00e9\": \"\342\202\"", "hostile.cu:7: byte offset" },
		{ "\textern __shared__", "\tconst char *s = \"\355\240\200\"; extern __shared__",
		  "byte 0xED is not UTF-8" },
	};
	char path[] = "/tmp/ksearch-nul-XXXXXX";
	char *source = NULL;
	struct ks_error err;
	FILE *f;
	int fd;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *src = test_replace(good, cases[i].from, cases[i].to);

		expect_parse_fails_fast(src, cases[i].expect);
		free(src);
	}
	/* NUL bytes are found where the file is read: at the start, in a comment, in the block */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	for (int where = 0; where < 3; where++) {
		size_t at = where == 0 ? 0 : where == 1 ? 5 : (size_t)(strstr(good, "THREADS") - good);
		char want[64];

		f = fopen(path, "wb");
		fwrite(good, 1, at, f);
		fputc('\0', f);
		fwrite(good + at, 1, strlen(good) - at, f);
		fclose(f);
		assert_int_equal(ks_candidate_read(path, &source, &err), 1);
		assert_null(source);
		snprintf(want, sizeof(want), ":%d: byte offset %zu: a NUL byte", ks_line_of(good, at), at);
		assert_contains(err.msg, want);
	}
	unlink(path);
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
		cmocka_unit_test(test_limits_are_checked_as_the_block_is_parsed),
		cmocka_unit_test(test_enumeration_at_the_limits_is_bounded),
		cmocka_unit_test(test_text_must_be_utf8_without_nul),
		cmocka_unit_test(test_plan_resolves_numbers),
		cmocka_unit_test(test_params_enumerate_and_assign),
		cmocka_unit_test(test_constraints_rule_combinations_out),
		cmocka_unit_test(test_start_is_the_default),
		cmocka_unit_test(test_printable_sources_parse),
		cmocka_unit_test(test_broken_blocks_get_clear_errors),
		cmocka_unit_test(test_plan_errors_name_launch_and_workload),
		cmocka_unit_test(test_build_reports_resources_and_descriptors),
		cmocka_unit_test(test_build_refuses_and_reports),
		cmocka_unit_test(test_binary_fingerprint_is_what_the_gpu_runs),

	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
