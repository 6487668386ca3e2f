/*
 * options.c - one option parser for every subcommand, with "did you mean".
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ksearch/evaluate/cuda.h"
#include "ksearch/base/util.h"

void ks_cli_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ksearch %s: error: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int ks_cli_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ksearch %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(see `ksearch %s --help`)\n", cmd);
	return KS_EXIT_USAGE;
}

void ks_print_help(const char *cmd, const struct ks_opt *opts, const struct ks_help *help)
{
	printf("usage: %s\n\n%s\n", help->usage, help->description);
	printf("\noptions:\n");
	for (const struct ks_opt *o = opts; o && o->name; o++) {
		char left[64];

		if (o->kind == KS_OPT_FLAG)
			snprintf(left, sizeof(left), "--%s", o->name);
		else
			snprintf(left, sizeof(left), "--%s %s", o->name,
				 o->value_name ? o->value_name : "VALUE");
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

static struct ks_opt *find_long(struct ks_opt *opts, const char *name, size_t len)
{
	for (struct ks_opt *o = opts; o->name; o++)
		if (strlen(o->name) == len && !strncmp(o->name, name, len))
			return o;
	return NULL;
}

static struct ks_opt *find_short(struct ks_opt *opts, char c)
{
	for (struct ks_opt *o = opts; o->name; o++)
		if (o->short_name == c)
			return o;
	return NULL;
}

static int unknown_option(const char *cmd, struct ks_opt *opts, const char *arg)
{
	char name[128];
	const char *eq = strchr(arg, '=');
	size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
	const char *best = NULL;
	size_t best_dist = (size_t)-1;

	snprintf(name, sizeof(name), "%.*s", (int)len, arg);
	for (struct ks_opt *o = opts; o->name; o++) {
		size_t d = ks_edit_distance(name + (name[1] == '-' ? 2 : 1), o->name);

		if (d < best_dist) {
			best_dist = d;
			best = o->name;
		}
	}
	if (best && ks_is_close(name + (name[1] == '-' ? 2 : 1), best))
		return ks_cli_usage(cmd, "unknown option '%s'; did you mean '--%s'?", name, best);
	return ks_cli_usage(cmd, "unknown option '%s'", name);
}

static void take_value(struct ks_opt *o, const char *value)
{
	o->set = 1;
	if (o->kind == KS_OPT_LIST) {
		o->list = ks_realloc(o->list, (o->n_list + 1) * sizeof(*o->list));
		o->list[o->n_list++] = value;
	} else {
		o->value = value;
	}
}

int ks_opts_parse(const char *cmd, struct ks_opt *opts, const struct ks_help *help, int argc, char **argv,
		  const char ***positional, size_t *n_positional)
{
	int only_positional = 0;

	*positional = ks_calloc((size_t)argc + 1, sizeof(**positional));
	*n_positional = 0;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		struct ks_opt *o;
		const char *value = NULL;

		if (only_positional || arg[0] != '-' || !arg[1]) {
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
		if (o->kind == KS_OPT_FLAG) {
			if (value) {
				ks_cli_usage(cmd, "option '--%s' takes no value", o->name);
				goto usage;
			}
			o->set = 1;
			continue;
		}
		if (!value) {
			if (i + 1 >= argc) {
				ks_cli_usage(cmd, "option '--%s' needs a value (%s)", o->name,
					     o->value_name ? o->value_name : "VALUE");
				goto usage;
			}
			value = argv[++i];
		}
		if (o->kind == KS_OPT_VALUE && o->set) {
			ks_cli_usage(cmd, "option '--%s' given twice", o->name);
			goto usage;
		}
		take_value(o, value);
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

void ks_opts_release(struct ks_opt *opts)
{
	for (struct ks_opt *o = opts; o && o->name; o++) {
		free(o->list);
		o->list = NULL;
		o->n_list = 0;
	}
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
