/*
 * archive_open.c - what every command on an archive shares: finding and
 * opening the archive a command names (--archive, --op, --gpu), reading
 * a record by id with errors that say what exists, printing params and
 * values, and when to colour.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "archive_cli.h"
static void list_envs(struct ks_strbuf *sb, const struct ks_archive_env *envs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ks_strbuf_addf(sb, "%s%s/%s", i ? ", " : "", envs[i].op, envs[i].gpu_slug);
}

int ks_archive_cli_resolve(const char *cmd, const struct ks_archive_pick *pick, char **op_key,
			   char **gpu_slug)
{
	const char *root = pick->root, *op = pick->op, *gpu = pick->gpu;
	struct ks_archive_env *envs;
	char *slug = gpu ? ks_archive_gpu_slug(gpu) : NULL;
	size_t n, matches = 0, match = 0;
	struct ks_strbuf sb;
	struct ks_error err;
	int ret = KS_EXIT_FAILED;

	*op_key = *gpu_slug = NULL;
	if (ks_archive_list_envs(root, &envs, &n, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		free(slug);
		return KS_EXIT_FAILED;
	}
	for (size_t i = 0; i < n; i++) {
		if ((op && strcmp(op, envs[i].op)) || (slug && strcmp(slug, envs[i].gpu_slug)))
			continue;
		matches++;
		match = i;
	}
	ks_strbuf_init(&sb);
	list_envs(&sb, envs, n);
	if (!n) {
		ks_cli_error(cmd,
			     "no archive in %s (`ksearch evolve` creates one, and "
			     "`ksearch archive import FILE` fills one from an export)",
			     root);
	} else if (!matches) {
		struct ks_strbuf what;

		ks_strbuf_init(&what);
		if (op)
			ks_strbuf_addf(&what, "operator '%s'", op);
		if (gpu)
			ks_strbuf_addf(&what, "%sGPU '%s'", op ? " on " : "", gpu);
		ks_cli_error(cmd, "no archive for %s in %s; it holds: %s", what.buf, root, sb.buf);
		ks_strbuf_release(&what);
	} else if (matches > 1) {
		ks_cli_error(cmd, "%s holds several archives%s: %s; choose one with --op NAME%s", root,
			     op ? " for this operator" : "", sb.buf,
			     op ? " and --gpu MODEL" : " (and --gpu MODEL)");
	} else {
		*op_key = ks_strdup(envs[match].op);
		*gpu_slug = ks_strdup(envs[match].gpu_slug);
		ret = 0;
	}
	ks_strbuf_release(&sb);
	ks_archive_envs_free(envs, n);
	free(slug);
	return ret;
}

int ks_archive_cli_open(const char *cmd, const struct ks_archive_pick *pick, struct ks_archive **ar)
{
	struct ks_archive_options options = { .flags = KS_ARCHIVE_READONLY };
	struct ks_error err;
	char *op, *gpu;
	int ret = ks_archive_cli_resolve(cmd, pick, &op, &gpu);

	*ar = NULL;
	if (ret)
		return ret;
	if (ks_archive_open(ar, pick->root, op, gpu, &options, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		ret = KS_EXIT_FAILED;
	}
	free(op);
	free(gpu);
	return ret;
}

int ks_archive_parse_id(const char *text, uint64_t *id, struct ks_error *err)
{
	char *end;
	unsigned long long v;

	if (text[0] == '#')
		text++;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (!*text || *end || errno || v == 0 || !isdigit((unsigned char)text[0]))
		return ks_fail(err,
			       "'%s' is not a candidate id (a number from 1, as `ksearch archive ls` shows)",
			       text);
	*id = v;
	return 0;
}

int ks_archive_cli_parse_id(const char *cmd, const char *text, uint64_t *id)
{
	struct ks_error err;

	if (ks_archive_parse_id(text, id, &err) == 0)
		return 0;
	ks_cli_usage(cmd, "%s", err.msg);
	return -1;
}

int ks_archive_id_option(const struct ks_option *opt, const char *arg, struct ks_error *err)
{
	if (ks_archive_parse_id(arg, opt->value, err) < 0) {
		ks_error_prefix(err, "--%s", opt->long_name);
		return -1;
	}
	return 0;
}

/* Says there is no candidate id in ar. */
static void no_such_id(const char *cmd, struct ks_archive *ar, uint64_t id)
{
	struct ks_archive_metrics m;
	struct ks_error err;

	if (ks_archive_metrics(ar, &m, &err) == 0 && m.candidates)
		ks_cli_error(cmd, "no candidate #%llu in %s (its ids go from 1 to %llu)",
			     (unsigned long long)id, ks_archive_path(ar),
			     (unsigned long long)(m.next_id - 1));
	else
		ks_cli_error(cmd, "no candidate #%llu in %s (it is empty)", (unsigned long long)id,
			     ks_archive_path(ar));
}

int ks_archive_cli_get(const char *cmd, struct ks_archive *ar, uint64_t id, json_t **record, char **source)
{
	struct ks_error err;

	if (ks_archive_get(ar, id, record, source, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		return -1;
	}
	if (*record)
		return 0;
	no_such_id(cmd, ar, id);
	return -1;
}

int ks_archive_cli_get_record(const char *cmd, struct ks_archive *ar, uint64_t id, struct ks_record *rec,
			      char **source)
{
	struct ks_error err;

	if (ks_archive_get_record(ar, id, rec, source, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		return -1;
	}
	if (rec->id)
		return 0;
	no_such_id(cmd, ar, id);
	return -1;
}

/* Formatting */

void ks_archive_format_value(const json_t *value, struct ks_strbuf *sb)
{
	if (json_is_integer(value))
		ks_strbuf_addf(sb, "%lld", (long long)json_integer_value(value));
	else if (json_is_real(value))
		ks_strbuf_addf(sb, "%g", json_real_value(value));
	else if (json_is_string(value))
		ks_strbuf_adds(sb, json_string_value(value));
	else if (json_is_true(value) || json_is_false(value))
		ks_strbuf_adds(sb, json_is_true(value) ? "true" : "false");
	else {
		char *text = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);

		ks_strbuf_adds(sb, text ? text : "null");
		free(text);
	}
}

void ks_archive_format_params(const json_t *params, struct ks_strbuf *sb)
{
	const char *key;
	json_t *value;
	size_t start = sb->len;

	json_object_foreach((json_t *)params, key, value)
	{
		ks_strbuf_addf(sb, "%s%s=", sb->len > start ? " " : "", key);
		ks_archive_format_value(value, sb);
	}
}

const char *const ks_color_choices[] = { "auto", "always", "never", NULL };

int ks_archive_cli_color(enum ks_color_when when)
{
	const char *term = getenv("TERM");

	if (when == KS_COLOR_ALWAYS)
		return 1;
	if (when == KS_COLOR_NEVER)
		return 0;
	return isatty(STDOUT_FILENO) && !getenv("NO_COLOR") && !(term && !strcmp(term, "dumb"));
}
