/*
 * test_strategy.c - the strategy population (seeding from prompts/, the
 * UCB bandit, statistics, rewrites under the population cap) and the LLM
 * mutator's prompts (llm_context.h): what a request says and how a
 * rewritten strategy is read back.
 */
#include "testlib.h"

#include <math.h>

#include "ksearch/archive/archive.h"
#include "ksearch/llm/llm_context.h"
#include "ksearch/llm/strategy.h"
#include "ksearch/base/util.h"

static char *prompts_dir(void)
{
	const char *root = getenv("KS_SOURCE_ROOT");

	return ks_path_join(root ? root : ".", "prompts");
}

struct fixture {
	char *dir;
	struct ks_archive *ar;
	struct ks_grid_axis axis;
	double edges[3];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct ks_archive_options opts = { .flags = KS_ARCHIVE_CREATE | KS_ARCHIVE_NOSYNC, .n_grid = 1 };
	struct ks_error err;

	f->dir = test_tmpdir();
	f->edges[0] = 0;
	f->edges[1] = 0.5;
	f->edges[2] = 1.01;
	f->axis = (struct ks_grid_axis){ .descriptor = KS_DESC_OCCUPANCY, .edges = f->edges, .n_edges = 3 };
	opts.grid = &f->axis;
	if (ks_archive_open(&f->ar, f->dir, "toy", "Toy GPU", &opts, &err) < 0)
		fail_msg("%s", err.msg);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	ks_archive_close(f->ar);
	test_rmtree(f->dir);
	free(f);
	return 0;
}

static void test_seeded_once_from_prompts_and_reloaded(void **state)
{
	struct fixture *f = *state;
	struct ks_strategies pop, again;
	struct ks_error err;
	char *dir = prompts_dir();

	if (ks_strategies_load(f->ar, dir, &pop, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(pop.n, 8);
	assert_int_equal(pop.items[0].id, 1);
	assert_string_equal(ks_strategy_name(&pop.items[0]), "async_copy"); /* file-name order */
	assert_string_equal(json_string_value(json_object_get(pop.items[0].obj, "origin")), "seed");
	assert_true(strlen(ks_strategy_text(&pop.items[0])) > 500);
	/* statistics survive a reload; the store is not seeded twice */
	ks_strategy_count(&pop.items[2], "uses", 3);
	assert_int_equal(ks_strategy_save(f->ar, &pop.items[2], &err), 0);
	if (ks_strategies_load(f->ar, "/nonexistent", &again, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(again.n, 8);
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(again.items[2].obj, "stats"), "uses")), 3);
	assert_int_equal(again.next_id, 9);
	ks_strategies_release(&pop);
	ks_strategies_release(&again);
	free(dir);
}

static void test_bandit_tries_each_then_follows_reward(void **state)
{
	struct fixture *f = *state;
	struct ks_strategies pop;
	struct ks_strategy *s;
	struct ks_error err;
	char *dir = prompts_dir();

	if (ks_strategies_load(f->ar, dir, &pop, &err) < 0)
		fail_msg("%s", err.msg);
	/* unused ones first, lowest id first */
	for (size_t i = 0; i < pop.n; i++) {
		s = ks_strategy_pick(&pop, 0.5);
		assert_int_equal(s->id, i + 1);
		ks_strategy_count(s, "uses", 1);
	}
	/* then the rewarded one wins, as long as the others have been tried enough */
	for (size_t i = 0; i < pop.n; i++)
		ks_strategy_count(&pop.items[i], "uses", 9);
	ks_strategy_child(&pop.items[4], 77, 1, 1, 2.5);
	ks_strategy_child(&pop.items[4], 78, 1, 1, 3.5);
	ks_strategy_child(&pop.items[4], 79, 0, 0, 0);
	assert_int_equal(ks_strategy_pick(&pop, 0.5)->id, 5);
	assert_true(fabs(ks_strategy_reward(&pop.items[4]) - (2 + 0.25 * 2) / 10.0) < 1e-9);
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(pop.items[4].obj, "stats"), "best_child")),
		78);
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(pop.items[4].obj, "stats"), "children")),
		3);
	/* a retired strategy is never picked */
	json_object_set_new(pop.items[4].obj, "active", json_false());
	assert_int_not_equal(ks_strategy_pick(&pop, 0.5)->id, 5);
	ks_strategy_answer_error(&pop.items[0], "no code block");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(pop.items[0].obj, "stats"), "last_error")),
		"no code block");
	ks_strategies_release(&pop);
	free(dir);
}

static void test_rewrites_are_added_and_the_cap_retires_the_weakest(void **state)
{
	struct fixture *f = *state;
	struct ks_strategies pop;
	struct ks_strategy *added;
	struct ks_error err;
	json_t *stored;
	char *dir = prompts_dir();

	if (ks_strategies_load(f->ar, dir, &pop, &err) < 0)
		fail_msg("%s", err.msg);
	for (size_t i = 0; i < pop.n; i++)
		ks_strategy_count(&pop.items[i], "uses", 4);
	for (size_t i = 1; i < pop.n; i++)
		ks_strategy_child(&pop.items[i], 100 + i, 1, 1, 1.0); /* all but the first have rewards */
	if (ks_strategy_add(f->ar, &pop, "vector_loads.simplify", "Load 16 bytes a thread.", "simplify", 8,
			    42, 8, 3, &added, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(added->id, 9);
	assert_int_equal(pop.n, 9);
	/* 9 active > cap 8: the least rewarding tried one is retired, and that is saved */
	assert_true(json_is_false(json_object_get(pop.items[0].obj, "active")));
	assert_int_equal(ks_archive_prompt_get(f->ar, 1, &stored, &err), 0);
	assert_true(json_is_false(json_object_get(stored, "active")));
	json_decref(stored);
	assert_int_equal(ks_archive_prompt_get(f->ar, 9, &stored, &err), 0);
	assert_string_equal(json_string_value(json_object_get(stored, "origin")), "simplify");
	assert_int_equal(json_integer_value(json_object_get(stored, "parent")), 8);
	assert_int_equal(json_integer_value(json_object_get(stored, "created_at")), 42);
	json_decref(stored);
	ks_strategies_release(&pop);
	free(dir);
}

static void test_strategy_extract(void **state)
{
	struct ks_error err;
	char *text = NULL;

	(void)state;
	assert_int_equal(ks_llm_strategy_extract("I changed X.\n\n<strategy>\n# New\n\nDo Y.\n</strategy>\n",
						 &text, &err),
			 0);
	assert_string_equal(text, "# New\n\nDo Y.");
	free(text);
	/* the last pair wins: a model quoting the template first */
	assert_int_equal(ks_llm_strategy_extract("<strategy>\n(the new strategy)\n</strategy>\nso:\n"
						 "  <strategy>  \nreal\n</strategy>",
						 &text, &err),
			 0);
	assert_string_equal(text, "real");
	free(text);
	assert_int_equal(ks_llm_strategy_extract("no tags at all", &text, &err), -1);
	assert_contains(err.msg, "no new strategy in the answer");
	assert_int_equal(ks_llm_strategy_extract("<strategy>\n\n</strategy>\n", &text, &err), -1);
	assert_contains(err.msg, "empty");
	assert_int_equal(ks_llm_strategy_extract("<strategy>\nnever closed\n", &text, &err), -1);
	assert_int_equal(ks_llm_strategy_extract("inline <strategy>x</strategy>", &text, &err), -1);
	assert_null(text);
	/* `archive prompts` prints strategies: no escape sequence may ride in one */
	assert_int_equal(
		ks_llm_strategy_extract("<strategy>\n# New\n\tDo \033]52;c;cm0gLXJm\007 Y.\n</strategy>\n",
					&text, &err),
		-1);
	assert_contains(err.msg, "control character (U+001B) on its line 2");
	assert_null(text);
	assert_int_equal(ks_llm_strategy_extract(
				 "<strategy>\n# Nouvelle\n\tFaites \302\253 Y \302\273.\r\n</strategy>\n",
				 &text, &err),
			 0);
	free(text);
}

/* rec[0] the parent, rec[1..n-1] the elites, parsed as the archive hands them out. */
static void parse_records(const json_t *parent, const json_t *elites, struct ks_record *rec, size_t n)
{
	struct ks_error err;

	for (size_t i = 0; i < n; i++) {
		ks_record_init(&rec[i]);
		if (ks_record_parse(i ? json_array_get(elites, i - 1) : parent, &rec[i], &err) < 0)
			fail_msg("%s", err.msg);
	}
}

static void test_mutate_and_repair_prompts_carry_the_evidence(void **state)
{
	json_t *parent = json_loads(
		"{\"id\": 5, \"family\": \"split_kv\", \"verdict\": \"ok\", \"fitness\": 3.5, "
		"\"sol_fraction\": 0.42,"
		" \"params\": {\"SPLITS\": 8, \"WARPS\": 4}, \"evidence\": \"\","
		" \"descriptors\": {\"occupancy\": 0.25, \"launches\": 2},"
		" \"kernels\": [{\"kernel\": \"partial\", \"registers\": 168, \"static_smem\": 8320, "
		"\"dynamic_smem\": 0,"
		"   \"stack_bytes\": 0, \"spill_stores\": 0, \"threads\": 128, \"occupancy\": 0.19,"
		"   \"tensor_cores\": \"none\", \"async_copy\": \"none\", \"widest_load_bytes\": 16}],"
		" \"workloads\": [{\"id\": \"b16_kv8636\", \"median_us\": 20.5, \"p10_us\": 20.1, "
		"\"p90_us\": 21.0,"
		"   \"ref_median_us\": 400.0, \"floor_us\": 8.0, \"sol_fraction\": 0.39}]}",
		0, NULL);
	json_t *elites = json_loads(
		"[{\"id\": 9, \"family\": \"mma_tiles\", \"verdict\": \"ok\", \"fitness\": 4.25, "
		"\"sol_fraction\": 0.5, \"params\": {\"STAGES\": 2}, \"descriptors\": {\"occupancy\": 0.5}}]",
		0, NULL);
	struct ks_record rec[2];
	struct ks_llm_mutate_input in = { .target = "Improve the parent.",
					  .strategy = "STRATEGY-TEXT",
					  .parent = &rec[0],
					  .parent_source = "/* ksearch {} */\nPARENT-SOURCE\n",
					  .elites = &rec[1],
					  .n_elites = 1,
					  .recent_attempts = NULL };
	struct ks_error err;
	char *dir = prompts_dir(), *out = NULL;

	(void)state;
	assert_non_null(parent);
	parse_records(parent, elites, rec, 2);
	if (ks_llm_mutate_prompt(dir, &in, &out, &err) < 0)
		fail_msg("%s", err.msg);
	assert_contains(out, "Improve the parent.");
	assert_contains(out, "STRATEGY-TEXT");
	assert_contains(out, "PARENT-SOURCE");
	assert_contains(out, "Fitness 3.500");
	assert_contains(out, "42% of the speed of light");
	assert_contains(out, "SPLITS=8 WARPS=4");
	assert_contains(out, "kernel partial: 168 registers, 8320 B static");
	assert_contains(out, "b16_kv8636: 20.50 us");
	assert_contains(out, "occupancy=0.25 launches=2");
	assert_contains(out, "candidate 9, family mma_tiles, STAGES=2: fitness 4.250");
	assert_contains(out, "## Recent attempts from this parent\n\n(none)");
	assert_contains(out, "(not profiled yet)");
	free(out);
	if (ks_llm_repair_prompt(dir, 1, 2, "wrong", "output[3]: got NaN, expected 1.5", "SPLITS=8",
				 "CHILD-SOURCE", &out, &err) < 0)
		fail_msg("%s", err.msg);
	assert_contains(out, "repair attempt 1 of 2");
	assert_contains(out, "output[3]: got NaN");
	assert_contains(out, "CHILD-SOURCE");
	free(out);
	json_decref(parent);
	json_decref(elites);
	for (size_t i = 0; i < sizeof(rec) / sizeof(rec[0]); i++)
		ks_record_release(&rec[i]);
	free(dir);
}

/*
 * A profiled parent's counters reach the LLM in a few plain lines, its
 * measured descriptors without the stand-in note, and a profiled elite
 * carries its DRAM throughput and occupancy.
 */
static void test_mutate_prompt_carries_the_profile(void **state)
{
	json_t *parent = json_loads(
		"{\"id\": 5, \"family\": \"split_kv\", \"verdict\": \"ok\", \"fitness\": 3.5, "
		"\"sol_fraction\": 0.42,"
		" \"params\": {\"SPLITS\": 8}, \"evidence\": \"\","
		" \"descriptors\": {\"launches\": 2, \"dram_fraction\": 0.48, \"achieved_occupancy\": 0.23},"
		" \"profile\": {\"tool\": \"ncu 2025.3.1.0\", \"workload\": \"b64_kv46287\", \"launches\": 2,"
		"   \"dram_fraction\": 0.48, \"achieved_occupancy\": 0.23, \"l2_hit_rate\": 0.35,"
		"   \"sm_throughput\": 0.2, \"local_load_bytes\": 2048, \"local_store_bytes\": 1024,"
		"   \"stalls\": [{\"reason\": \"long_scoreboard\", \"share\": 0.61},"
		"              {\"reason\": \"barrier\", \"share\": 0.12}, {\"reason\": \"wait\", \"share\": "
		"0.08}]}}",
		0, NULL);
	json_t *elites = json_loads(
		"[{\"id\": 9, \"family\": \"mma_tiles\", \"verdict\": \"ok\", \"fitness\": 4.25, "
		"\"sol_fraction\": 0.5, \"params\": {}, \"descriptors\": {\"dram_fraction\": 0.5},"
		" \"profile\": {\"dram_fraction\": 0.71, \"achieved_occupancy\": 0.5}},"
		" {\"id\": 10, \"family\": \"plain\", \"verdict\": \"ok\", \"fitness\": 1.5, "
		"\"sol_fraction\": 0.2, \"params\": {}, \"descriptors\": {\"dram_fraction\": 0.2}}]",
		0, NULL);
	struct ks_record rec[3];
	struct ks_llm_mutate_input in = { .target = "Improve the parent.",
					  .strategy = "S",
					  .parent = &rec[0],
					  .parent_source = "SRC\n",
					  .elites = &rec[1],
					  .n_elites = 2 };
	struct ks_error err;
	char *dir = prompts_dir(), *out = NULL;

	(void)state;
	assert_non_null(parent);
	assert_non_null(elites);
	parse_records(parent, elites, rec, 3);
	if (ks_llm_mutate_prompt(dir, &in, &out, &err) < 0)
		fail_msg("%s", err.msg);
	assert_contains(out, "Nsight Compute on workload b64_kv46287, ncu 2025.3.1.0:\n"
			     "- DRAM throughput 48% of peak, SM throughput 20% of peak, L2 hit rate 35%\n"
			     "- achieved occupancy 0.23\n"
			     "- warp stalls: long scoreboard 61%, barrier 12%, wait 8%\n"
			     "- local memory (spills): 2.0 KB loaded, 1.0 KB stored\n");
	assert_contains(out, "launches=2 dram_fraction=0.48 achieved_occupancy=0.23\n");
	assert_contains(out, "candidate 9, family mma_tiles, (no params): fitness 4.250, 50% of the speed of "
			     "light; descriptors dram_fraction=0.5; profiled: DRAM 71% of peak, achieved "
			     "occupancy 0.50\n");
	assert_contains(out,
			"descriptors dram_fraction=0.2 (not profiled yet: the speed-of-light fraction)\n");
	free(out);
	json_decref(parent);
	json_decref(elites);
	for (size_t i = 0; i < sizeof(rec) / sizeof(rec[0]); i++)
		ks_record_release(&rec[i]);
	free(dir);
}

static void test_system_prompt_states_the_operator_and_the_gpu(void **state)
{
	struct ks_device_profile gpu = { .name = "NVIDIA H200",
					 .arch = "sm_90a",
					 .sm_count = 132,
					 .l2_bytes = 52428800,
					 .max_smem_per_block_optin = 232448,
					 .max_smem_per_sm = 233472,
					 .regs_per_sm = 65536,
					 .dram_gbps = 3920 };
	struct ks_op op = { 0 };
	struct ks_error err;
	char *dir = prompts_dir(), *out = NULL;

	(void)state;
	if (ks_op_find("gqa", &op, &err) < 0)
		fail_msg("%s", err.msg);
	if (ks_llm_system_prompt(dir, &op, &gpu, &out, &err) < 0)
		fail_msg("%s", err.msg);
	assert_contains(out, "# The operator: gqa_paged_decode_h32_kv4_d128_ps1");
	assert_contains(out, "\"kv_indptr\"");		 /* the definition, as JSON */
	assert_null(strstr(out, "\"check_workloads\"")); /* without ksearch's own block */
	assert_contains(out, "- benchmark b64_kv46287: num_qo_heads=32 ");
	assert_contains(out, " batch_size=64 num_kv_indices=46287 ");
	assert_contains(out, "- check ");
	assert_contains(out, "- output (bfloat16): atol");
	assert_contains(out, "GPU: NVIDIA H200, compiled for sm_90a");
	assert_contains(out, "132 SMs");
	assert_contains(out, "65536 32-bit registers per SM");
	assert_contains(out, "a block may use up to 232448");
	assert_contains(out, "measured on this GPU: 3920 GB/s");
	assert_null(strstr(out, "{{"));
	free(out);
	ks_op_release(&op);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_seeded_once_from_prompts_and_reloaded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bandit_tries_each_then_follows_reward, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rewrites_are_added_and_the_cap_retires_the_weakest,
						setup, teardown),
		cmocka_unit_test(test_strategy_extract),
		cmocka_unit_test(test_mutate_and_repair_prompts_carry_the_evidence),
		cmocka_unit_test(test_mutate_prompt_carries_the_profile),
		cmocka_unit_test(test_system_prompt_states_the_operator_and_the_gpu),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
