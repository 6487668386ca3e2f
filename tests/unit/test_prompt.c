/*
 * test_prompt.c - prompt templates (prompt.h): {{name}} rendering, its
 * errors and escapes, loading and listing templates, and the shipped
 * prompts/ rendered with exactly the placeholders prompts/README.md lists.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/fs.h"
#include "ksearch/llm/prompt.h"
#include "ksearch/base/util.h"
#include "testlib.h"

static char *render_ok(const char *tpl, const struct ks_prompt_vars *vars)
{
	struct ks_error err = { { 0 } };
	char *out = NULL;

	if (ks_prompt_render(tpl, vars, &out, &err) != 0)
		fail_msg("render of \"%s\" failed: %s", tpl, err.msg);
	assert_non_null(out);
	return out;
}

static void render_fails(const char *tpl, const struct ks_prompt_vars *vars, const char *reason)
{
	struct ks_error err = { { 0 } };
	char *out = (char *)0x1;

	if (ks_prompt_render(tpl, vars, &out, &err) == 0)
		fail_msg("render of \"%s\" succeeded, expected \"%s\"; got: %s", tpl, reason, out);
	assert_null(out);
	assert_contains(err.msg, reason);
}

static void test_render_substitutes(void **state)
{
	struct ks_prompt_vars vars;
	char *out;

	(void)state;
	ks_prompt_vars_init(&vars);
	ks_prompt_vars_set(&vars, "gpu_name", "NVIDIA H200");
	ks_prompt_vars_setf(&vars, "sm_count", "%d", 132);
	ks_prompt_vars_set(&vars, "empty", "");
	out = render_ok("{{gpu_name}} has {{ sm_count }} SMs{{empty}}.\n{{sm_count}}{{sm_count}}", &vars);
	assert_string_equal(out, "NVIDIA H200 has 132 SMs.\n132132");
	free(out);
	out = render_ok("no placeholders at all", &vars);
	assert_string_equal(out, "no placeholders at all");
	free(out);
	out = render_ok("", &vars);
	assert_string_equal(out, "");
	free(out);
	ks_prompt_vars_release(&vars);
}

static void test_vars_set_replaces_and_get(void **state)
{
	struct ks_prompt_vars vars;
	char *out;

	(void)state;
	ks_prompt_vars_init(&vars);
	assert_null(ks_prompt_vars_get(&vars, "a"));
	ks_prompt_vars_set(&vars, "a", "first");
	ks_prompt_vars_set(&vars, "a", "second");
	assert_string_equal(ks_prompt_vars_get(&vars, "a"), "second");
	assert_int_equal(vars.n, 1);
	for (int i = 0; i < 100; i++) /* grows past its first allocation */
		ks_prompt_vars_setf(&vars, "v", "%d", i);
	ks_prompt_vars_setf(&vars, "b", "%s-%d", "x", 7);
	out = render_ok("{{a}} {{b}} {{v}}", &vars);
	assert_string_equal(out, "second x-7 99");
	free(out);
	ks_prompt_vars_release(&vars);
	assert_int_equal(vars.n, 0);
}

/* A value is inserted as it is: a kernel or strategy holding braces is not re-read. */
static void test_values_are_not_rendered_again(void **state)
{
	struct ks_prompt_vars vars;
	char *out;

	(void)state;
	ks_prompt_vars_init(&vars);
	ks_prompt_vars_set(&vars, "parent_source", "int a[2][2] = {{1, 2}, {3, 4}}; // {{unknown}} {{{{");
	out = render_ok("```cuda\n{{parent_source}}\n```", &vars);
	assert_string_equal(out, "```cuda\nint a[2][2] = {{1, 2}, {3, 4}}; // {{unknown}} {{{{\n```");
	free(out);
	ks_prompt_vars_release(&vars);
}

static void test_unknown_placeholder_is_named(void **state)
{
	struct ks_prompt_vars vars;

	(void)state;
	ks_prompt_vars_init(&vars);
	render_fails("line one\nline two {{parent_source}}", &vars,
		     "line 2: unknown placeholder {{parent_source}} (values given: none)");
	ks_prompt_vars_set(&vars, "parent_source", "x");
	ks_prompt_vars_set(&vars, "strategy", "y");
	render_fails("{{parent_sorce}}", &vars,
		     "line 1: unknown placeholder {{parent_sorce}} (did you mean "
		     "{{parent_source}}?)");
	render_fails("{{strategy}}\n\n{{elites}}", &vars,
		     "line 3: unknown placeholder {{elites}} (values given: parent_source, strategy)");
	ks_prompt_vars_release(&vars);
}

static void test_escapes(void **state)
{
	struct ks_prompt_vars vars;
	char *out;

	(void)state;
	ks_prompt_vars_init(&vars);
	ks_prompt_vars_set(&vars, "name", "value");
	/* {{{{ is a literal {{; what follows is plain text */
	out = render_ok("write {{{{name}} for a placeholder", &vars);
	assert_string_equal(out, "write {{name}} for a placeholder");
	free(out);
	/* an escape next to a real placeholder */
	out = render_ok("{{{{{{name}}", &vars);
	assert_string_equal(out, "{{value");
	free(out);
	/* single braces and }} need no escape */
	out = render_ok("if (x) { y(); }} int a[1] = {0}; {name}", &vars);
	assert_string_equal(out, "if (x) { y(); }} int a[1] = {0}; {name}");
	free(out);
	ks_prompt_vars_release(&vars);
}

static void test_malformed_placeholders(void **state)
{
	struct ks_prompt_vars vars;

	(void)state;
	ks_prompt_vars_init(&vars);
	ks_prompt_vars_set(&vars, "name", "value");
	render_fails("a\nb {{ 1 + 2 }}", &vars, "line 2: malformed placeholder `{{ 1 + 2 }}`");
	render_fails("{{}}", &vars, "line 1: malformed placeholder");
	render_fails("text {{name", &vars, "malformed placeholder `{{name`");
	render_fails("{{name}", &vars, "malformed placeholder");
	render_fails("{{na me}}", &vars, "malformed placeholder");
	render_fails("{{name}} {{", &vars, "write {{{{ for a literal {{");
	ks_prompt_vars_release(&vars);
}

static void test_load_reads_template(void **state)
{
	struct ks_error err = { { 0 } };
	char *dir = test_tmpdir(), *sub, *text = NULL;

	(void)state;
	test_write(dir, "mutate.md", "Improve {{parent_source}}\n");
	sub = ks_path_join(dir, "strategies");
	assert_int_equal(mkdir(sub, 0755), 0);
	test_write(sub, "vector_loads.md", "Use 16-byte loads.\n");
	if (ks_prompt_load(dir, "mutate", &text, &err) != 0)
		fail_msg("%s", err.msg);
	assert_string_equal(text, "Improve {{parent_source}}\n");
	free(text);
	if (ks_prompt_load(dir, "strategies/vector_loads", &text, &err) != 0)
		fail_msg("%s", err.msg);
	assert_string_equal(text, "Use 16-byte loads.\n");
	free(text);
	free(sub);
	test_rmtree(dir);
}

static void test_load_missing_file(void **state)
{
	struct ks_error err = { { 0 } };
	char *dir = test_tmpdir(), *text = (char *)0x1;

	(void)state;
	assert_int_equal(ks_prompt_load(dir, "repair", &text, &err), -1);
	assert_null(text);
	assert_contains(err.msg, "prompt template 'repair'");
	assert_contains(err.msg, "repair.md");
	assert_contains(err.msg, "No such file or directory");
	assert_int_equal(ks_prompt_load("/nonexistent-ksearch-prompts", "system", &text, &err), -1);
	assert_contains(err.msg, "/nonexistent-ksearch-prompts/system.md");
	test_rmtree(dir);
}

static void test_load_refuses_unsafe_names(void **state)
{
	static const char *const names[] = { "",  "/etc/passwd", "../secret", "a/../b",	       "a//b",
					     ".", "x/",		 "a b",	      "strategies/..", "name\n" };
	struct ks_error err = { { 0 } };
	char *text = (char *)0x1;

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (ks_prompt_load("prompts", names[i], &text, &err) != -1)
			fail_msg("name \"%s\" was accepted", names[i]);
		assert_null(text);
		assert_contains(err.msg, "is not a relative name");
	}
}

static void test_load_refuses_nul_bytes(void **state)
{
	struct ks_error err = { { 0 } };
	char *dir = test_tmpdir(), *path = ks_path_join(dir, "bad.md"), *text = (char *)0x1;
	FILE *f = fopen(path, "wb");

	(void)state;
	assert_non_null(f);
	fwrite("ab\0cd", 1, 5, f);
	fclose(f);
	assert_int_equal(ks_prompt_load(dir, "bad", &text, &err), -1);
	assert_null(text);
	assert_contains(err.msg, "NUL byte");
	free(path);
	test_rmtree(dir);
}

static void test_list_strategies(void **state)
{
	struct ks_error err = { { 0 } };
	char *dir = test_tmpdir(), *sub = ks_path_join(dir, "strategies");
	char **names = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(ks_prompt_list(dir, "strategies", &names, &n, &err), -1);
	assert_contains(err.msg, "strategies");
	assert_int_equal(mkdir(sub, 0755), 0);
	test_write(sub, "README.md", "not a template");
	test_write(sub, "notes.txt", "not markdown");
	assert_int_equal(ks_prompt_list(dir, "strategies", &names, &n, &err), -1);
	assert_contains(err.msg, "holds no templates");
	test_write(sub, "tensor_cores.md", "b");
	test_write(sub, "split_k.md", "a");
	test_write(sub, ".hidden.md", "c");
	if (ks_prompt_list(dir, "strategies", &names, &n, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(n, 2);
	assert_string_equal(names[0], "strategies/split_k");
	assert_string_equal(names[1], "strategies/tensor_cores");
	ks_prompt_list_free(names, n);
	free(sub);
	test_rmtree(dir);
}

static void test_render_output_limit(void **state)
{
	struct ks_prompt_vars vars;
	size_t size = (size_t)5 << 20;
	char *big = malloc(size + 1);

	(void)state;
	assert_non_null(big);
	memset(big, 'x', size);
	big[size] = '\0';
	ks_prompt_vars_init(&vars);
	ks_prompt_vars_set(&vars, "big", big);
	render_fails("{{big}}{{big}}{{big}}{{big}}", &vars, "larger than");
	ks_prompt_vars_release(&vars);
	free(big);
}

/* ---- the shipped prompts/ ---- */

static const char *const system_vars[] = {
	"op_name",	"op_definition",
	"op_workloads", "op_tolerances",
	"gpu_name",	"arch",
	"sm_count",	"max_threads_per_block",
	"regs_per_sm",	"max_regs_per_thread",
	"smem_per_sm",	"max_smem_per_block",
	"l2_bytes",	"dram_gbs",
	NULL,
};
static const char *const mutate_vars[] = {
	"target",
	"strategy",
	"parent_fitness",
	"parent_sol",
	"parent_params",
	"parent_verdict",
	"parent_evidence",
	"parent_timings",
	"parent_descriptors",
	"parent_profile",
	"parent_source",
	"elites",
	"recent_attempts",
	NULL,
};
static const char *const repair_vars[] = {
	"attempt", "max_attempts", "child_verdict", "child_evidence", "child_params", "child_source", NULL,
};
static const char *const rewrite_vars[] = {
	"operation",   "strategy_name",	   "strategy_text", "strategy_stats", "best_fitness", "best_sol",
	"best_params", "best_descriptors", "best_timings",  "best_source",    NULL,
};

static char *prompts_dir(void)
{
	const char *root = getenv("KS_SOURCE_ROOT");

	return ks_path_join(root ? root : ".", "prompts");
}

/*
 * Render a shipped template with exactly the names prompts/README.md lists
 * (so none is missing), each value a marker that must come out (so none is
 * unused), and check the README names each one.
 */
static void check_template(const char *name, const char *const *names)
{
	struct ks_error err = { { 0 } };
	struct ks_prompt_vars vars;
	char *dir = prompts_dir(), *text = NULL, *out = NULL, *readme = NULL, *readme_path;

	if (ks_prompt_load(dir, name, &text, &err) != 0)
		fail_msg("%s", err.msg);
	readme_path = ks_path_join(dir, "README.md");
	if (ks_read_file(readme_path, &readme, NULL, &err) != 0)
		fail_msg("%s", err.msg);
	ks_prompt_vars_init(&vars);
	for (size_t i = 0; names[i]; i++) {
		char *marker = ks_asprintf("<<%s-value>>", names[i]);
		char *row = ks_asprintf("| `%s` |", names[i]);

		ks_prompt_vars_set(&vars, names[i], marker);
		if (!strstr(readme, row))
			fail_msg("prompts/README.md does not list placeholder %s of %s.md", names[i], name);
		free(marker);
		free(row);
	}
	if (ks_prompt_render(text, &vars, &out, &err) != 0)
		fail_msg("prompts/%s.md: %s", name, err.msg);
	for (size_t i = 0; names[i]; i++) {
		char *marker = ks_asprintf("<<%s-value>>", names[i]);

		if (!strstr(out, marker))
			fail_msg("prompts/%s.md never uses {{%s}}", name, names[i]);
		free(marker);
	}
	free(out);
	ks_prompt_vars_release(&vars);
	free(readme);
	free(readme_path);
	free(text);
	free(dir);
}

static void test_shipped_templates_render(void **state)
{
	(void)state;
	check_template("system", system_vars);
	check_template("mutate", mutate_vars);
	check_template("repair", repair_vars);
	check_template("rewrite", rewrite_vars);
}

/* Strategies are values, not templates: a {{ in one would be a mistake. */
static void test_shipped_strategies(void **state)
{
	struct ks_error err = { { 0 } };
	char *dir = prompts_dir();
	char **names = NULL;
	size_t n = 0;

	(void)state;
	if (ks_prompt_list(dir, "strategies", &names, &n, &err) != 0)
		fail_msg("%s", err.msg);
	assert_true(n >= 5 && n <= 8);
	for (size_t i = 0; i < n; i++) {
		char *text = NULL;

		if (ks_prompt_load(dir, names[i], &text, &err) != 0)
			fail_msg("%s", err.msg);
		if (strstr(text, "{{"))
			fail_msg("%s.md holds {{: strategies are inserted verbatim", names[i]);
		assert_true(strlen(text) > 500);
		assert_int_equal(text[0], '#');
		free(text);
	}
	ks_prompt_list_free(names, n);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_render_substitutes),
		cmocka_unit_test(test_vars_set_replaces_and_get),
		cmocka_unit_test(test_values_are_not_rendered_again),
		cmocka_unit_test(test_unknown_placeholder_is_named),
		cmocka_unit_test(test_escapes),
		cmocka_unit_test(test_malformed_placeholders),
		cmocka_unit_test(test_load_reads_template),
		cmocka_unit_test(test_load_missing_file),
		cmocka_unit_test(test_load_refuses_unsafe_names),
		cmocka_unit_test(test_load_refuses_nul_bytes),
		cmocka_unit_test(test_list_strategies),
		cmocka_unit_test(test_render_output_limit),
		cmocka_unit_test(test_shipped_templates_render),
		cmocka_unit_test(test_shipped_strategies),
	};

	return cmocka_run_group_tests_name("prompt", tests, NULL, NULL);
}
