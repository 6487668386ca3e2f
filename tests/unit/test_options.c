/*
 * test_options.c - the CLI's option parser (src/cli/options.c): values go
 * to the variables the table names, typed and range-checked, and every
 * bad value is a usage error that names the flag; the help lists the
 * table's rows.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const struct ks_help help = {
	.usage = "ksearch t [options]",
	.description = "A test table.",
	.examples = "  ksearch t --n 3\n",
};

/* What a command would bind: every type of row. */
struct vars {
	int flag, n, choice, grouped;
	uint64_t big;
	double ratio, seconds;
	const char *name;
	struct ks_opt_list list;
	int odd; /* set by the callback */
};

static const char *const colours[] = { "auto", "always", "never", NULL };

static int odd_option(const struct ks_option *opt, const char *arg, struct ks_error *err)
{
	int v = atoi(arg);

	if (v % 2 == 0)
		return ks_fail(err, "--%s %s: expected an odd number", opt->long_name, arg);
	*(int *)opt->value = v;
	return 0;
}

enum { GROUP_EXTRA = 1 };

#define TABLE(v)                                                                                             \
	{                                                                                                    \
		KS_OPT_BOOL('f', "flag", &(v)->flag, "a flag"),                                              \
			KS_OPT_INT('n', "n", &(v)->n, "N", 1, 64, "1 to 64 things", "a small int"),          \
			KS_OPT_UINT64(0, "big", &(v)->big, "N", 1, "a number of things > 0", "a big count"), \
			KS_OPT_DOUBLE(0, "ratio", &(v)->ratio, "R", 0, 2, "a ratio from 0 to 2", "a ratio"), \
			KS_OPT_DURATION(0, "time", &(v)->seconds, "D", "a duration such as 8h", "how long"), \
			KS_OPT_STRING(0, "name", &(v)->name, "NAME", "a name"),                              \
			KS_OPT_CHOICE(0, "color", &(v)->choice, "WHEN", colours, "auto, always or never"),   \
			KS_OPT_LIST('p', "param", &(v)->list, "K=V", "repeatable"),                          \
			KS_OPT_CALLBACK(0, "odd", &(v)->odd, "N", odd_option, "an odd number"),              \
			KS_OPT_GROUP(GROUP_EXTRA),                                                           \
			KS_OPT_INT(0, "grouped", &(v)->grouped, "N", 0, 9, "0 to 9", "in the group"),        \
			KS_OPT_GROUP(0), KS_OPT_END,                                                         \
	}

/* Parse argv[0..argc); the return code, with what went to stderr in errbuf. */
static int parse_argv(struct ks_option *opts, char **argv, int argc, char *errbuf, size_t size,
		      const char ***pos, size_t *n_pos)
{
	FILE *capture = tmpfile();
	int rc, saved;
	size_t got;

	assert_non_null(capture);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	dup2(fileno(capture), STDERR_FILENO);
	rc = ks_opts_parse("t", opts, &help, argc, argv, pos, n_pos);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(capture);
	got = fread(errbuf, 1, size - 1, capture);
	errbuf[got] = '\0';
	fclose(capture);
	return rc;
}

/* The arguments after the command name (up to a NULL) into argv[1..]; returns argc. */
static int collect(char **argv, va_list ap)
{
	int argc = 1;

	while (argc < 31 && (argv[argc] = va_arg(ap, char *)))
		argc++;
	return argc;
}

static int parse(struct ks_option *opts, char *errbuf, size_t size, const char ***pos, size_t *n_pos, ...)
{
	char *argv[32] = { "t" };
	va_list ap;
	int argc;

	va_start(ap, n_pos);
	argc = collect(argv, ap);
	va_end(ap);
	return parse_argv(opts, argv, argc, errbuf, size, pos, n_pos);
}

/* The arguments (NULL-terminated) are a usage error (2) whose message contains want. */
static void refused(const char *want, ...)
{
	struct vars v = { 0 };
	struct ks_option opts[] = TABLE(&v);
	char *argv[32] = { "t" }, err[1024];
	const char **pos;
	size_t n_pos;
	va_list ap;
	int argc, rc;

	va_start(ap, want);
	argc = collect(argv, ap);
	va_end(ap);
	rc = parse_argv(opts, argv, argc, err, sizeof(err), &pos, &n_pos);
	if (rc != 2)
		fail_msg("%s %s: returned %d, expected a usage error", argv[1], argc > 2 ? argv[2] : "", rc);
	assert_null(pos);
	if (!strstr(err, want))
		fail_msg("%s: the message '%s' lacks '%s'", argv[1], err, want);
}

static void test_values_go_to_their_variables(void **state)
{
	struct vars v = { .n = 7, .ratio = 0.5 };
	struct ks_option opts[] = TABLE(&v);
	const char **pos;
	size_t n_pos;
	char err[512];

	(void)state;
	assert_int_equal(parse(opts, err, sizeof(err), &pos, &n_pos, "-f", "file.cu", "--big",
			       "18446744073709551615", "--time=1h30m", "--name", "x", "--color", "never",
			       "-p", "A=1", "--param", "B=2", "--odd", "3", "--", "--n", NULL),
			 0);
	assert_int_equal(v.flag, 1);
	assert_int_equal(v.n, 7); /* after "--" it is an argument, and the default stays */
	assert_true(v.big == UINT64_MAX);
	assert_true(v.ratio == 0.5);
	assert_true(v.seconds == 5400);
	assert_string_equal(v.name, "x");
	assert_int_equal(v.choice, 2);
	assert_int_equal(v.list.n, 2);
	assert_string_equal(v.list.items[0], "A=1");
	assert_string_equal(v.list.items[1], "B=2");
	assert_int_equal(v.odd, 3);
	assert_int_equal(n_pos, 2);
	assert_string_equal(pos[0], "file.cu");
	assert_string_equal(pos[1], "--n");
	assert_true(ks_opts_given(opts, &v.big));
	assert_false(ks_opts_given(opts, &v.n));
	assert_null(ks_opts_given_in_group(opts, GROUP_EXTRA));
	free(pos);
	ks_opts_release(opts);
	assert_null(v.list.items);
	assert_int_equal(v.list.n, 0);
}

static void test_numbers_at_their_bounds(void **state)
{
	struct vars v = { 0 };
	struct ks_option opts[] = TABLE(&v);
	const char **pos;
	size_t n_pos;
	char err[512];

	(void)state;
	assert_int_equal(parse(opts, err, sizeof(err), &pos, &n_pos, "-n", "64", "--ratio", "2", "--grouped",
			       "0", NULL),
			 0);
	assert_int_equal(v.n, 64);
	assert_true(v.ratio == 2);
	assert_ptr_equal(ks_opts_given_in_group(opts, GROUP_EXTRA), &opts[10]);
	free(pos);
	ks_opts_release(opts);
}

static void test_out_of_range_is_refused_naming_the_flag(void **state)
{
	(void)state;
	refused("--n 0: expected 1 to 64 things", "--n", "0", NULL);
	refused("--n 65: expected 1 to 64 things", "-n", "65", NULL);
	refused("--n 99999999999999999999: out of range (expected 1 to 64 things)", "--n",
		"99999999999999999999", NULL);
	refused("--n 3x: expected 1 to 64 things", "--n", "3x", NULL);
	refused("--n : expected", "--n", "", NULL);
	refused("--n  5: expected", "--n", " 5", NULL);
	refused("--big 0: expected a number of things > 0", "--big", "0", NULL);
	/* strtoull would read -1 as 18446744073709551615 */
	refused("--big -1: expected a number of things > 0", "--big", "-1", NULL);
	refused("--big +5: expected", "--big", "+5", NULL);
	refused("--big 99999999999999999999: out of range", "--big", "99999999999999999999", NULL);
	refused("--ratio 3: expected a ratio from 0 to 2", "--ratio", "3", NULL);
	refused("--ratio -0.5: expected a ratio from 0 to 2", "--ratio", "-0.5", NULL);
	refused("--ratio nan: expected", "--ratio", "nan", NULL);
	refused("--ratio inf: expected", "--ratio", "inf", NULL);
	refused("--ratio 1e999: out of range", "--ratio", "1e999", NULL);
	refused("--time 8x: expected a duration such as 8h", "--time", "8x", NULL);
	refused("--time 0: expected", "--time", "0", NULL);
	refused("--time -5m: expected", "--time", "-5m", NULL);
	refused("--time 1e999h: expected", "--time", "1e999h", NULL);
	refused("--color takes auto, always or never (got 'blue')", "--color", "blue", NULL);
	refused("--odd 4: expected an odd number", "--odd", "4", NULL);
}

static void test_usage_errors(void **state)
{
	(void)state;
	refused("option '--n' given twice", "--n", "3", "--n", "4", NULL);
	refused("option '--name' given twice", "--name", "a", "--name=b", NULL);
	refused("option '--name' needs a value (NAME)", "--name", NULL);
	refused("option '--flag' takes no value", "--flag=yes", NULL);
	refused("unknown option '--nam'; did you mean '--name'?", "--nam", "x", NULL);
	refused("unknown option '-z'", "-z", NULL);
	refused("(see `ksearch t --help`)", "--ratio", "9", NULL);
}

static void test_repeats_that_are_allowed(void **state)
{
	struct vars v = { 0 };
	struct ks_option opts[] = TABLE(&v);
	const char **pos;
	size_t n_pos;
	char err[512];

	(void)state;
	/* a flag twice says the same thing twice; a list grows */
	assert_int_equal(parse(opts, err, sizeof(err), &pos, &n_pos, "--flag", "-f", "-p", "a", "-p", "b",
			       "-p", "c", "-p", "d", "-p", "e", NULL),
			 0);
	assert_int_equal(v.flag, 1);
	assert_int_equal(v.list.n, 5);
	assert_string_equal(v.list.items[4], "e");
	free(pos);
	ks_opts_release(opts);
}

/* "-1" is an argument the command judges ("not a candidate id"), not an unknown option '-1'. */
static void test_negative_numbers_are_arguments(void **state)
{
	struct vars v = { 0 };
	struct ks_option opts[] = TABLE(&v);
	const char **pos;
	size_t n_pos;
	char err[512];

	(void)state;
	assert_int_equal(parse(opts, err, sizeof(err), &pos, &n_pos, "-1", "-f", "-0.5", "--n", "3", NULL),
			 0);
	assert_int_equal(n_pos, 2);
	assert_string_equal(pos[0], "-1");
	assert_string_equal(pos[1], "-0.5");
	assert_int_equal(v.flag, 1);
	assert_int_equal(v.n, 3);
	free(pos);
	ks_opts_release(opts);
	/* an option's value stays the option's, and a dash before letters is still an option */
	refused("--n -1: expected 1 to 64 things", "--n", "-1", NULL);
	refused("unknown option '-x1'", "-x1", NULL);
}

static void test_help_lists_every_row(void **state)
{
	struct vars v = { 0 };
	struct ks_option opts[] = TABLE(&v);
	const char **pos;
	size_t n_pos;
	char out[4096], err[256];
	FILE *capture = tmpfile();
	int saved, rc;
	size_t got;

	(void)state;
	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	dup2(fileno(capture), STDOUT_FILENO);
	rc = parse(opts, err, sizeof(err), &pos, &n_pos, "--n", "3", "--help", NULL);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	rewind(capture);
	got = fread(out, 1, sizeof(out) - 1, capture);
	out[got] = '\0';
	fclose(capture);
	assert_int_equal(rc, 1);
	assert_null(pos);
	for (const struct ks_option *o = opts; o->type != KS_OPTION_END; o++) {
		char line[128];

		if (o->type == KS_OPTION_GROUP)
			continue;
		if (o->type == KS_OPTION_BOOL)
			snprintf(line, sizeof(line), "--%s ", o->long_name);
		else
			snprintf(line, sizeof(line), "--%s %s ", o->long_name, o->argh);
		if (!strstr(out, line) || !strstr(out, o->help))
			fail_msg("the help lacks '%s' or its text '%s':\n%s", line, o->help, out);
	}
	assert_non_null(strstr(out, "-f, --flag"));
	assert_non_null(strstr(out, "-h, --help"));
	assert_non_null(strstr(out, "usage: ksearch t [options]"));
	assert_non_null(strstr(out, "exit codes:"));
}

static void test_duration_forms(void **state)
{
	(void)state;
	assert_true(ks_parse_duration("8h") == 8 * 3600);
	assert_true(ks_parse_duration("20m") == 1200);
	assert_true(ks_parse_duration("90s") == 90);
	assert_true(ks_parse_duration("1h30m") == 5400);
	assert_true(ks_parse_duration("3600") == 3600);
	assert_true(ks_parse_duration("0.5h") == 1800);
	assert_true(ks_parse_duration("") < 0);
	assert_true(ks_parse_duration("h") < 0);
	assert_true(ks_parse_duration("5d") < 0);
	assert_true(ks_parse_duration("+5") < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values_go_to_their_variables),
		cmocka_unit_test(test_numbers_at_their_bounds),
		cmocka_unit_test(test_out_of_range_is_refused_naming_the_flag),
		cmocka_unit_test(test_usage_errors),
		cmocka_unit_test(test_repeats_that_are_allowed),
		cmocka_unit_test(test_negative_numbers_are_arguments),
		cmocka_unit_test(test_help_lists_every_row),
		cmocka_unit_test(test_duration_forms),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
