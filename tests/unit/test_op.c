/*
 * test_op.c - loading op.json: the shipped operators, and every kind of
 * broken definition getting an error that names the problem.
 */
#include "testlib.h"

#include "ksearch/op/op.h"

/* A small valid operator: y = x + b over rows. */
static const char base_op[] =
	"{\n"
	"  \"name\": \"rowadd_h64\", \"op_type\": \"rowadd\",\n"
	"  \"axes\": {\"rows\": {\"type\": \"var\"}, \"hidden\": {\"type\": \"const\", \"value\": 64},\n"
	"           \"len_ptr\": {\"type\": \"var\"}, \"n_idx\": {\"type\": \"var\"}},\n"
	"  \"inputs\": {\"x\": {\"shape\": [\"rows\", \"hidden\"], \"dtype\": \"bfloat16\"},\n"
	"             \"ptr\": {\"shape\": [\"len_ptr\"], \"dtype\": \"int32\"},\n"
	"             \"idx\": {\"shape\": [\"n_idx\"], \"dtype\": \"int32\"},\n"
	"             \"scale\": {\"shape\": null, \"dtype\": \"float32\"}},\n"
	"  \"outputs\": {\"y\": {\"shape\": [\"rows\", \"hidden\"], \"dtype\": \"bfloat16\"}},\n"
	"  \"ksearch\": {\n"
	"    \"summary\": \"test op\",\n"
	"    \"derived_axes\": {\"len_ptr\": \"rows + 1\"},\n"
	"    \"generators\": {\"x\": {\"kind\": \"normal\"}, \"ptr\": {\"kind\": \"indptr\", \"total\": "
	"\"n_idx\"},\n"
	"                   \"idx\": {\"kind\": \"page_permutation\", \"pool\": \"2*n_idx\"},\n"
	"                   \"scale\": {\"kind\": \"const\", \"value\": 0.5}},\n"
	"    \"workloads\": [{\"id\": \"r4\", \"axes\": {\"rows\": 4, \"n_idx\": 10}},\n"
	"                  {\"id\": \"r8\", \"axes\": {\"rows\": 8, \"n_idx\": 100}}],\n"
	"    \"check_workloads\": [{\"id\": \"r1\", \"axes\": {\"rows\": 1, \"n_idx\": 3}},\n"
	"                        {\"id\": \"r3\", \"axes\": {\"rows\": 3, \"n_idx\": 6},\n"
	"                         \"generators\": {\"ptr\": {\"kind\": \"indptr\", \"total\": \"n_idx\", "
	"\"lengths\": [1, 2, 3]}}}],\n"
	"    \"tolerances\": {\"y\": {\"atol\": 0.01, \"rtol\": 0.01}},\n"
	"    \"min_bytes\": \"rows*hidden*4\", \"flops\": \"rows*hidden\",\n"
	"    \"grid\": [{\"descriptor\": \"occupancy\", \"edges\": [0, 0.5, 1.01]},\n"
	"             {\"descriptor\": \"smem_bytes\", \"edges\": [0, 1024, 65536]}]\n"
	"  }\n"
	"}\n";

static char *write_op(const char *json)
{
	char *dir = test_tmpdir();

	test_write(dir, "op.json", json);
	test_write(dir, "reference.cu", "/* ksearch {\"launch\": []} */\n");
	return dir;
}

static void test_valid_op_loads_and_resolves_axes(void **state)
{
	char *dir = write_op(base_op);
	struct ks_op op;
	struct ks_error err;
	int64_t v;

	(void)state;
	if (ks_op_load(dir, &op, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(op.name, "rowadd_h64");
	assert_int_equal(op.n_axes, 4);
	assert_int_equal(op.n_inputs, 4);
	assert_true(op.inputs[3].is_scalar);
	assert_int_equal(op.n_workloads, 2);
	assert_int_equal(op.n_check_workloads, 2);
	assert_true(ks_env_get(&op.workloads[1].axes, "len_ptr", &v));
	assert_int_equal(v, 9); /* derived: rows + 1 */
	assert_true(ks_env_get(&op.workloads[1].axes, "hidden", &v));
	assert_int_equal(v, 64);
	assert_int_equal(op.check_workloads[1].generators[1].n_lengths, 3);
	assert_int_equal(op.check_workloads[1].generators[1].start, 0);
	assert_null(op.workloads[0].generators[1].lengths);
	assert_int_equal(op.n_grid, 2);
	assert_int_equal(op.grid[1].descriptor, KS_DESC_SMEM_BYTES);
	assert_ptr_equal(ks_op_workload(&op, "r3"), &op.check_workloads[1]);
	/* without fresh_per_call, the normal input is new for every timed call; structure and consts never */
	assert_true(op.inputs[0].fresh_per_call);
	assert_false(op.inputs[1].fresh_per_call);
	assert_false(op.inputs[2].fresh_per_call);
	assert_false(op.inputs[3].fresh_per_call);
	ks_op_release(&op);
	test_rmtree(dir);
}

static void test_fresh_per_call_names_the_inputs(void **state)
{
	char *json =
		test_replace(base_op, "\"workloads\": [", "\"fresh_per_call\": [\"x\"], \"workloads\": [");
	char *dir = write_op(json);
	struct ks_op op;
	struct ks_error err;

	(void)state;
	if (ks_op_load(dir, &op, &err) < 0)
		fail_msg("%s", err.msg);
	assert_true(op.inputs[0].fresh_per_call);
	assert_false(op.inputs[1].fresh_per_call);
	ks_op_release(&op);
	test_rmtree(dir);
	free(json);
}

/* Each broken variant of base_op and a piece of the error it must give. */
struct broken {
	const char *from, *to, *expect;
};

static const struct broken broken_ops[] = {
	{ "\"rowadd\",\n", "\"rowadd\",,\n", "op.json:2:" },
	{ "\"dtype\": \"bfloat16\"}", "\"dtype\": \"bf16\"}", "inputs.x.dtype: unknown dtype 'bf16'" },
	{ "[\"rows\", \"hidden\"], \"dtype\": \"bfloat16\"},\n             \"ptr\"",
	  "[\"rows\", \"hiden\"], \"dtype\": \"bfloat16\"},\n             \"ptr\"",
	  "inputs.x.shape[1]: unknown axis 'hiden'" },
	{ "{\"rows\": 4, \"n_idx\": 10}", "{\"rows\": 4}", "var axis 'n_idx' has no value" },
	{ "{\"rows\": 4, \"n_idx\": 10}", "{\"n_idx\": 10}", "in \"rows + 1\": unknown name 'rows'" },
	{ "\"rows + 1\"", "\"rowz + 1\"", "unknown axis 'rowz'" },
	{ "\"lengths\": [1, 2, 3]", "\"lengths\": [1, 2, 4]", "lengths sum to 7" },
	/* an indptr's start: the lengths sum to total - start, and start is at most the total */
	{ "\"lengths\": [1, 2, 3]", "\"start\": 1, \"lengths\": [1, 2, 3]",
	  "lengths sum to 6, but total \"n_idx\" less start is 5" },
	{ "\"lengths\": [1, 2, 3]", "\"start\": 7, \"lengths\": [1, 2, 3]", "start 7 is past the total" },
	{ "\"lengths\": [1, 2, 3]", "\"start\": -1, \"lengths\": [1, 2, 3]",
	  "start: expected an integer in [0, 2^31), got -1" },
	{ "\"axes\": {\"rows\": 1, \"n_idx\": 3}}",
	  "\"axes\": {\"rows\": 1, \"n_idx\": 3},\n"
	  "\"generators\": {\"ptr\": {\"kind\": \"indptr\", \"total\": \"n_idx\", \"start\": 3, \"min\": "
	  "1}}}",
	  "1 requests of at least 1 cannot sum to 0" },
	{ "\"id\": \"r8\"", "\"id\": \"r4\"", "\"r4\" is used twice" },
	{ "\"tolerances\": {\"y\": {\"atol\": 0.01, \"rtol\": 0.01}}", "\"tolerances\": {}",
	  "output y has no tolerance" },
	{ "[0, 0.5, 1.01]", "[0, 0.5, 0.4]", "not ascending" },
	{ "\"descriptor\": \"occupancy\"", "\"descriptor\": \"ocupancy\"", "unknown descriptor 'ocupancy'" },
	{ "\"kind\": \"normal\"", "\"kind\": \"gaussian\"", "unknown generator 'gaussian'" },
	{ "\"min_bytes\": \"rows*hidden*4\"", "\"min_bytes\": \"rows*hidden/0\"", "division by zero" },
	{ "\"pool\": \"2*n_idx\"", "\"pool\": \"n_idx - 1\"", "smaller than the" },
	{ "\"type\": \"const\", \"value\": 64", "\"type\": \"const\"", "needs an integer value" },
	{ "\"scale\": {\"kind\": \"const\", \"value\": 0.5}",
	  "\"scale\": {\"kind\": \"page_permutation\", \"pool\": \"4\"}", "needs a 1-D int32 input" },
	{ "\"workloads\": [", "\"fresh_per_call\": [\"ptr\"], \"workloads\": [",
	  "fresh_per_call[0]: ptr is made by the generator indptr" },
	{ "\"workloads\": [", "\"fresh_per_call\": [\"z\"], \"workloads\": [",
	  "z is not an input of the op" },
	{ "\"workloads\": [", "\"fresh_per_call\": [], \"workloads\": [", "name at least one input" },
	{ "\"workloads\": [", "\"fresh_per_call\": \"x\", \"workloads\": [",
	  "expected a list of input names" },
};

static void test_broken_ops_get_clear_errors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(broken_ops) / sizeof(broken_ops[0]); i++) {
		char *json = test_replace(base_op, broken_ops[i].from, broken_ops[i].to);
		char *dir = write_op(json);
		struct ks_op op;
		struct ks_error err;

		if (ks_op_load(dir, &op, &err) == 0)
			fail_msg("case %zu loaded but should fail with \"%s\"", i, broken_ops[i].expect);
		assert_contains(err.msg, broken_ops[i].expect);
		assert_contains(err.msg, "op.json");
		free(json);
		test_rmtree(dir);
	}
}

static void test_missing_reference_is_an_error(void **state)
{
	char *dir = test_tmpdir();
	struct ks_op op;
	struct ks_error err;

	(void)state;
	test_write(dir, "op.json", base_op);
	assert_int_equal(ks_op_load(dir, &op, &err), -1);
	assert_contains(err.msg, "reference.cu");
	test_rmtree(dir);
}

static void test_unknown_operator_suggests(void **state)
{
	struct ks_op op;
	struct ks_error err;

	(void)state;
	assert_int_equal(ks_op_find("gqaa", &op, &err), -1);
	assert_contains(err.msg, "unknown operator 'gqaa'");
	assert_contains(err.msg, "did you mean 'gqa'");
}

static void test_shipped_gqa_matches_flashinfer_bench(void **state)
{
	struct ks_op op;
	struct ks_error err;
	static const int64_t batch[] = { 1, 16, 16, 64, 64 };
	static const int64_t tokens[] = { 546, 8636, 23079, 28815, 46287 };

	(void)state;
	if (ks_op_find("gqa", &op, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(op.name, "gqa_paged_decode_h32_kv4_d128_ps1");
	assert_int_equal(op.n_inputs, 6);
	assert_int_equal(op.n_outputs, 2);
	assert_string_equal(op.inputs[0].name, "q");
	assert_string_equal(op.outputs[1].name, "lse");
	assert_int_equal(op.outputs[1].dtype, KS_DTYPE_FLOAT32);
	assert_int_equal(op.n_workloads, 5);
	for (size_t i = 0; i < 5; i++) {
		int64_t b, n, pages, len;

		assert_true(ks_env_get(&op.workloads[i].axes, "batch_size", &b));
		assert_true(ks_env_get(&op.workloads[i].axes, "num_kv_indices", &n));
		assert_true(ks_env_get(&op.workloads[i].axes, "num_pages", &pages));
		assert_true(ks_env_get(&op.workloads[i].axes, "len_indptr", &len));
		assert_int_equal(b, batch[i]);
		assert_int_equal(n, tokens[i]);
		assert_int_equal(len, b + 1);
		assert_true(pages > n); /* pages scattered over a larger pool */
	}
	/* the check workloads include one request with one token */
	{
		int found = 0;

		for (size_t i = 0; i < op.n_check_workloads; i++) {
			int64_t b, n;

			ks_env_get(&op.check_workloads[i].axes, "batch_size", &b);
			ks_env_get(&op.check_workloads[i].axes, "num_kv_indices", &n);
			found |= b == 1 && n == 1;
		}
		assert_true(found);
	}
	assert_true(op.n_seeds >= 3);
	ks_op_release(&op);
}

static void test_every_shipped_operator_loads(void **state)
{
	char **dirs;
	size_t count;
	struct ks_error err;

	(void)state;
	assert_int_equal(ks_op_dirs(&dirs, &count, &err), 0);
	assert_true(count >= 3);
	for (size_t i = 0; i < count; i++) {
		struct ks_op op;

		if (ks_op_load(dirs[i], &op, &err) < 0)
			fail_msg("%s", err.msg);
		assert_true(op.n_seeds >= 2);
		ks_op_release(&op);
	}
	ks_op_dirs_free(dirs, count);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_op_loads_and_resolves_axes),
		cmocka_unit_test(test_fresh_per_call_names_the_inputs),
		cmocka_unit_test(test_broken_ops_get_clear_errors),
		cmocka_unit_test(test_missing_reference_is_an_error),
		cmocka_unit_test(test_unknown_operator_suggests),
		cmocka_unit_test(test_shipped_gqa_matches_flashinfer_bench),
		cmocka_unit_test(test_every_shipped_operator_loads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
