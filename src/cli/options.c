/*
 * options.c - one option parser for every subcommand: options bound to
 * variables, values checked against their type and range, "did you mean".
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ksearch/evaluate/cuda.h"
#include "ksearch/base/util.h"

/*
 * --json on every outcome: whether the command line asked for JSON, the
 * errors printed so far, and whether the command printed its document.
 */
static struct {
	int wanted, printed;
	const char *cmd;
	struct ks_strbuf errors;
} json_out;

static void note_error(const char *cmd, const char *fmt, va_list ap)
{
	if (!json_out.wanted)
		return;
	if (!json_out.errors.buf)
		ks_strbuf_init(&json_out.errors);
	if (json_out.errors.len)
		ks_strbuf_adds(&json_out.errors, "\n");
	else
		json_out.cmd = cmd;
	{
		char *text = ks_vasprintf(fmt, ap);

		ks_strbuf_adds(&json_out.errors, text);
		free(text);
	}
}

void ks_cli_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ksearch %s: error: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	va_start(ap, fmt);
	note_error(cmd, fmt, ap);
	va_end(ap);
}

int ks_cli_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ksearch %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(see `ksearch %s --help`)\n", cmd);
	va_start(ap, fmt);
	note_error(cmd, fmt, ap);
	va_end(ap);
	return KS_EXIT_USAGE;
}

void ks_cli_json_print(const json_t *doc, size_t flags)
{
	json_dumpf(doc, stdout, flags);
	putchar('\n');
	json_out.printed = 1;
}

void ks_cli_json_printing(void)
{
	json_out.printed = 1;
}

int ks_cli_json_wanted(void)
{
	return json_out.wanted;
}

int ks_cli_finish(const char *cmd, int code)
{
	if (json_out.wanted && !json_out.printed && code != KS_EXIT_OK) {
		json_t *doc = json_pack("{s:s, s:i, s:s}", "command", json_out.cmd ? json_out.cmd : cmd,
					"exit_code", code, "error",
					json_out.errors.len ? json_out.errors.buf : "failed (see stderr)");

		ks_cli_json_print(doc, JSON_INDENT(2));
		json_decref(doc);
	}
	fflush(stdout);
	ks_strbuf_release(&json_out.errors);
	memset(&json_out, 0, sizeof(json_out));
	return code;
}

static int takes_value(const struct ks_option *o)
{
	return o->type != KS_OPTION_BOOL;
}

void ks_print_help(const char *cmd, const struct ks_option *opts, const struct ks_help *help)
{
	printf("usage: %s\n\n%s\n", help->usage, help->description);
	printf("\noptions:\n");
	for (const struct ks_option *o = opts; o && o->type != KS_OPTION_END; o++) {
		char left[64];

		if (o->type == KS_OPTION_GROUP)
			continue;
		if (!takes_value(o))
			snprintf(left, sizeof(left), "--%s", o->long_name);
		else
			snprintf(left, sizeof(left), "--%s %s", o->long_name, o->argh ? o->argh : "VALUE");
		if (o->short_name) {
			char with_short[80];

			snprintf(with_short, sizeof(with_short), "-%c, %s", o->short_name, left);
			printf("  %-26s %s\n", with_short, o->help);
		} else {
			printf("  %-26s %s\n", left, o->help);
		}
	}
	printf("  %-26s %s\n", "-h, --help", "show this help");
	if (help->examples)
		printf("\nexamples:\n%s", help->examples);
	printf("\nexit codes:\n  0  ok\n  1  the command failed\n  2  usage error\n");
	if (help->exit_codes)
		printf("%s", help->exit_codes);
	(void)cmd;
}

/* A table that breaks the rules is a programming error: say which row, and stop. */
static void check_table(const char *cmd, const struct ks_option *opts)
{
	for (const struct ks_option *o = opts; o->type != KS_OPTION_END; o++) {
		const char *why = NULL;

		if (o->type == KS_OPTION_GROUP)
			continue;
		if (!o->long_name || !*o->long_name || !o->help)
			why = "has no long name or no help";
		else if (o->type != KS_OPTION_CALLBACK && !o->value)
			why = "has no variable";
		else if ((o->type == KS_OPTION_INT || o->type == KS_OPTION_UINT64 ||
			  o->type == KS_OPTION_DOUBLE || o->type == KS_OPTION_DURATION) &&
			 !o->expect)
			why = "says not what it expects";
		else if (o->type == KS_OPTION_CHOICE && (!o->choices || !o->choices[0]))
			why = "has no choices";
		else if (o->type == KS_OPTION_CALLBACK && !o->callback)
			why = "has no callback";
		else if (!strcmp(o->long_name, "help") || o->short_name == 'h')
			why = "takes the name of --help";
		for (const struct ks_option *p = opts; !why && p < o; p++)
			if (p->type != KS_OPTION_GROUP && (!strcmp(p->long_name, o->long_name) ||
							   (o->short_name && p->short_name == o->short_name)))
				why = "repeats the name of an earlier row";
		if (why) {
			fprintf(stderr, "ksearch %s: BUG: option --%s %s\n", cmd,
				o->long_name ? o->long_name : "?", why);
			abort();
		}
	}
}

static struct ks_option *find_long(struct ks_option *opts, const char *name, size_t len)
{
	for (struct ks_option *o = opts; o->type != KS_OPTION_END; o++)
		if (o->type != KS_OPTION_GROUP && strlen(o->long_name) == len &&
		    !strncmp(o->long_name, name, len))
			return o;
	return NULL;
}

static struct ks_option *find_short(struct ks_option *opts, char c)
{
	for (struct ks_option *o = opts; o->type != KS_OPTION_END; o++)
		if (o->type != KS_OPTION_GROUP && o->short_name == c)
			return o;
	return NULL;
}

static void unknown_option(const char *cmd, struct ks_option *opts, const char *arg)
{
	char name[128];
	const char *eq = strchr(arg, '=');
	size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
	const char *best = NULL;
	size_t best_dist = (size_t)-1;

	snprintf(name, sizeof(name), "%.*s", (int)len, arg);
	for (struct ks_option *o = opts; o->type != KS_OPTION_END; o++) {
		size_t d;

		if (o->type == KS_OPTION_GROUP)
			continue;
		d = ks_edit_distance(name + (name[1] == '-' ? 2 : 1), o->long_name);
		if (d < best_dist) {
			best_dist = d;
			best = o->long_name;
		}
	}
	if (best && ks_is_close(name + (name[1] == '-' ? 2 : 1), best))
		ks_cli_usage(cmd, "unknown option '%s'; did you mean '--%s'?", name, best);
	else
		ks_cli_usage(cmd, "unknown option '%s'", name);
}

double ks_parse_duration(const char *text)
{
	double total = 0;
	const char *p = text;

	if (!*p)
		return -1;
	while (*p) {
		char *end;
		double v;

		if (!isdigit((unsigned char)*p) && *p != '.')
			return -1;
		v = strtod(p, &end);
		if (end == p || v < 0)
			return -1;
		switch (*end) {
		case 'h':
			total += v * 3600;
			end++;
			break;
		case 'm':
			total += v * 60;
			end++;
			break;
		case 's':
			total += v;
			end++;
			break;
		case '\0':
			total += v;
			break;
		default:
			return -1;
		}
		p = end;
	}
	return isfinite(total) ? total : -1;
}

/* "A, B or C" */
static void list_choices(struct ks_strbuf *sb, const char *const *choices)
{
	for (size_t i = 0; choices[i]; i++)
		ks_strbuf_addf(sb, "%s%s", i == 0 ? "" : choices[i + 1] ? ", " : " or ", choices[i]);
}

/* A number's text: digits (after a '-' where allowed), nothing around them. */
static int plain_number(const char *text, int sign_ok)
{
	if (sign_ok && *text == '-')
		text++;
	return isdigit((unsigned char)*text) || (*text == '.' && isdigit((unsigned char)text[1]));
}

/*
 * Store value in the option's variable.  Returns 0, or -1 with the usage
 * error printed: a value that is not the option's type or is outside its
 * range names the flag, the value and what was expected.
 */
static int store(const char *cmd, struct ks_option *o, const char *value)
{
	struct ks_error err;
	char *end = NULL;
	int range = 0;

	errno = 0;
	switch (o->type) {
	case KS_OPTION_STRING:
		*(const char **)o->value = value;
		return 0;
	case KS_OPTION_LIST: {
		struct ks_opt_list *list = o->value;

		KS_ALLOC_GROW(list->items, list->n + 1, list->alloc);
		list->items[list->n++] = value;
		return 0;
	}
	case KS_OPTION_INT: {
		long long v = plain_number(value, 1) ? strtoll(value, &end, 10) : 0;

		if (!end || *end)
			break;
		if (errno == ERANGE) {
			range = 1;
			break;
		}
		if ((double)v < o->min || (double)v > o->max)
			break;
		*(int *)o->value = (int)v;
		return 0;
	}
	case KS_OPTION_UINT64: {
		unsigned long long v = plain_number(value, 0) ? strtoull(value, &end, 10) : 0;

		if (!end || *end)
			break;
		if (errno == ERANGE) {
			range = 1;
			break;
		}
		if ((double)v < o->min || (double)v > o->max)
			break;
		*(uint64_t *)o->value = (uint64_t)v;
		return 0;
	}
	case KS_OPTION_DOUBLE: {
		double v = plain_number(value, 1) ? strtod(value, &end) : 0;

		if (!end || *end)
			break;
		if (errno == ERANGE) {
			range = 1;
			break;
		}
		if (!isfinite(v) || v < o->min || v > o->max)
			break;
		*(double *)o->value = v;
		return 0;
	}
	case KS_OPTION_DURATION: {
		double v = ks_parse_duration(value);

		if (v <= 0)
			break;
		*(double *)o->value = v;
		return 0;
	}
	case KS_OPTION_CHOICE: {
		struct ks_strbuf sb;

		for (int i = 0; o->choices[i]; i++)
			if (!strcmp(o->choices[i], value)) {
				*(int *)o->value = i;
				return 0;
			}
		ks_strbuf_init(&sb);
		list_choices(&sb, o->choices);
		ks_cli_usage(cmd, "--%s takes %s (got '%s')", o->long_name, sb.buf, value);
		ks_strbuf_release(&sb);
		return -1;
	}
	case KS_OPTION_CALLBACK:
		if (o->callback(o, value, &err) == 0)
			return 0;
		ks_cli_usage(cmd, "%s", err.msg);
		return -1;
	default:
		break;
	}
	if (range)
		ks_cli_usage(cmd, "--%s %s: out of range (expected %s)", o->long_name, value, o->expect);
	else
		ks_cli_usage(cmd, "--%s %s: expected %s", o->long_name, value, o->expect);
	return -1;
}

int ks_opts_parse(const char *cmd, struct ks_option *opts, const struct ks_help *help, int argc, char **argv,
		  const char ***positional, size_t *n_positional)
{
	int only_positional = 0, group = 0;

	check_table(cmd, opts);
	/* known before parsing, so that a usage error is JSON too */
	if (find_long(opts, "json", 4) && find_long(opts, "json", 4)->type == KS_OPTION_BOOL)
		for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
			if (!strcmp(argv[i], "--json"))
				json_out.wanted = 1;
	for (struct ks_option *o = opts; o->type != KS_OPTION_END; o++) {
		if (o->type == KS_OPTION_GROUP)
			group = o->group;
		else
			o->group = group;
		o->seen = 0;
	}
	*positional = ks_calloc((size_t)argc + 1, sizeof(**positional));
	*n_positional = 0;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		struct ks_option *o;
		const char *value = NULL;

		/* "-1" is a (bad) value, not an option: the command says what it expected */
		if (only_positional || arg[0] != '-' || !arg[1] || plain_number(arg, 1)) {
			(*positional)[(*n_positional)++] = arg;
			continue;
		}
		if (!strcmp(arg, "--")) {
			only_positional = 1;
			continue;
		}
		if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
			ks_print_help(cmd, opts, help);
			goto help_shown;
		}
		if (arg[1] == '-') {
			const char *eq = strchr(arg, '=');
			size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);

			o = find_long(opts, arg + 2, len);
			if (eq)
				value = eq + 1;
		} else {
			o = arg[2] ? NULL : find_short(opts, arg[1]);
		}
		if (!o) {
			unknown_option(cmd, opts, arg);
			goto usage;
		}
		if (!takes_value(o)) {
			if (value) {
				ks_cli_usage(cmd, "option '--%s' takes no value", o->long_name);
				goto usage;
			}
			o->seen++;
			*(int *)o->value = 1;
			continue;
		}
		if (!value) {
			if (i + 1 >= argc) {
				ks_cli_usage(cmd, "option '--%s' needs a value (%s)", o->long_name,
					     o->argh ? o->argh : "VALUE");
				goto usage;
			}
			value = argv[++i];
		}
		if (o->type != KS_OPTION_LIST && o->seen) {
			ks_cli_usage(cmd, "option '--%s' given twice", o->long_name);
			goto usage;
		}
		o->seen++;
		if (store(cmd, o, value) < 0)
			goto usage;
	}
	return 0;
help_shown:
	free(*positional);
	*positional = NULL;
	ks_opts_release(opts);
	return 1;
usage:
	free(*positional);
	*positional = NULL;
	ks_opts_release(opts);
	return 2;
}

void ks_opts_release(struct ks_option *opts)
{
	for (struct ks_option *o = opts; o && o->type != KS_OPTION_END; o++) {
		struct ks_opt_list *list = o->value;

		if (o->type != KS_OPTION_LIST)
			continue;
		free(list->items);
		list->items = NULL;
		list->n = list->alloc = 0;
	}
}

const struct ks_option *ks_opts_given_in_group(const struct ks_option *opts, int group)
{
	for (const struct ks_option *o = opts; o->type != KS_OPTION_END; o++)
		if (o->type != KS_OPTION_GROUP && o->group == group && o->seen)
			return o;
	return NULL;
}

int ks_opts_given(const struct ks_option *opts, const void *value)
{
	for (const struct ks_option *o = opts; o->type != KS_OPTION_END; o++)
		if (o->type != KS_OPTION_GROUP && o->value == value)
			return o->seen > 0;
	return 0;
}

const char *ks_cli_pick_arch(const char *given, char *buf, size_t size, const char **why)
{
	const struct ks_cuda *cuda;
	struct ks_gpu_info info;
	struct ks_error err;

	if (given) {
		*why = "from --arch";
		snprintf(buf, size, "%s", given);
		return buf;
	}
	if (ks_cuda_load(&cuda, &err) == 0 && ks_cuda_device_info(0, &info, &err) == 0) {
		ks_gpu_arch(&info, buf, size);
		*why = "GPU 0's architecture";
		return buf;
	}
	*why = "the default: no GPU found";
	snprintf(buf, size, "sm_90a");
	return buf;
}
