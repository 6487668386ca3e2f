/*
 * candidate.c - parsing and binding the ksearch block of a candidate.
 */
#include "ksearch/op/candidate.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ksearch/base/json.h"
#include "ksearch/base/util.h"

#define BLOCK_MARK "ksearch"

/*
 * Find "/" "*" followed by optional blanks and "ksearch"; the JSON runs to
 * the first "*" "/".  Only blanks and other comments may come before it, so
 * the launch contract is where a reader expects it: at the top.
 */
/*
 * A kernel's text is UTF-8 and printable: compile logs and `archive show`
 * print it to terminals, and results, records and the compiler's requests
 * carry it as JSON, which is UTF-8 or nothing.
 */
static int check_printable(const char *path, const char *src, struct ks_error *err)
{
	size_t len = strlen(src);
	long bad = ks_utf8_invalid(src, len);
	unsigned code;
	long at;

	if (len > KS_CANDIDATE_MAX_BYTES)
		return ks_fail(
			err,
			"%s: %zu bytes, larger than the limit of 1 MiB (KS_CANDIDATE_MAX_BYTES, %zu bytes) "
			"for a candidate's source",
			path, len, KS_CANDIDATE_MAX_BYTES);
	if (bad >= 0)
		return ks_fail(err,
			       "%s:%d: byte offset %ld: byte 0x%02X is not UTF-8; a kernel's text must be "
			       "UTF-8 (compile logs, records and reports carry it)",
			       path, ks_line_of(src, (size_t)bad), bad, (unsigned char)src[bad]);
	at = ks_text_control(src, &code);
	if (at < 0)
		return 0;
	return ks_fail(err,
		       "%s: line %d: a control character (U+%04X) in the source; a kernel's text must be "
		       "printable (tabs, line ends and UTF-8 are fine), since compile logs and `ksearch "
		       "archive show` print it to terminals",
		       path, ks_line_of(src, (size_t)at), code);
}

static int find_block(const char *path, const char *src, const char **json, size_t *len, struct ks_error *err)
{
	const char *p = src;

	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			p++;
		if (p[0] == '/' && p[1] == '/') {
			p = strchr(p, '\n');
			if (!p)
				break;
			continue;
		}
		if (p[0] == '/' && p[1] == '*') {
			const char *q = p + 2, *end;

			while (*q == ' ' || *q == '\t')
				q++;
			end = strstr(p + 2, "*/");
			if (!end)
				return ks_fail(err, "%s:%d: unterminated comment", path,
					       ks_line_of(src, (size_t)(p - src)));
			if (!strncmp(q, BLOCK_MARK, strlen(BLOCK_MARK))) {
				*json = q + strlen(BLOCK_MARK);
				*len = (size_t)(end - *json);
				return 0;
			}
			p = end + 2;
			continue;
		}
		break;
	}
	return ks_fail(err,
		       "%s: no `/* ksearch { ... } */` block at the top of the file; a candidate "
		       "starts with that block saying how to launch it (see operators/README.md)",
		       path);
}

/* An expression given as a JSON string or integer. */
static int take_expr(const json_t *v, const char *where, char **out, struct ks_error *err)
{
	if (json_is_integer(v)) {
		*out = ks_asprintf("%lld", (long long)json_integer_value(v));
		return 0;
	}
	if (!json_is_string(v))
		return ks_fail(err, "%s: expected an expression (string or integer), got %s", where,
			       ks_json_type_word(v));
	if (json_string_length(v) > KS_CANDIDATE_MAX_EXPR_BYTES)
		return ks_fail(err,
			       "%s: an expression of %zu bytes; at most %d (KS_CANDIDATE_MAX_EXPR_BYTES)",
			       where, json_string_length(v), KS_CANDIDATE_MAX_EXPR_BYTES);
	*out = ks_strdup(json_string_value(v));
	return 0;
}

static int parse_params(struct ks_candidate *cand, const json_t *params, struct ks_error *err)
{
	const char *name;
	json_t *list;

	if (!params)
		return 0;
	if (!json_is_object(params))
		return ks_fail(err, "params: expected an object of NAME -> [values]");
	if (json_object_size(params) > KS_CANDIDATE_MAX_PARAMS)
		return ks_fail(
			err, "params: %zu params; a candidate may have at most %d (KS_CANDIDATE_MAX_PARAMS)",
			json_object_size(params), KS_CANDIDATE_MAX_PARAMS);
	cand->params = ks_calloc(json_object_size(params), sizeof(*cand->params));
	json_object_foreach((json_t *)params, name, list)
	{
		struct ks_param *p = &cand->params[cand->n_params];

		if (!ks_is_identifier(name))
			return ks_fail(err, "params: '%s' is not a valid macro name (letters, digits, _)",
				       name);
		if (!json_is_array(list) || json_array_size(list) == 0)
			return ks_fail(err, "params.%s: expected a non-empty list of integers", name);
		if (json_array_size(list) > KS_CANDIDATE_MAX_VALUES)
			return ks_fail(err,
				       "params.%s: %zu values; a param may have at most %d "
				       "(KS_CANDIDATE_MAX_VALUES)",
				       name, json_array_size(list), KS_CANDIDATE_MAX_VALUES);
		p->name = ks_strdup(name);
		p->n_values = json_array_size(list);
		p->values = ks_calloc(p->n_values, sizeof(*p->values));
		cand->n_params++;
		for (size_t i = 0; i < p->n_values; i++) {
			json_t *v = json_array_get(list, i);

			if (!json_is_integer(v))
				return ks_fail(err, "params.%s[%zu]: expected an integer, got %s", name, i,
					       ks_json_type_word(v));
			p->values[i] = json_integer_value(v);
			for (size_t k = 0; k < i; k++)
				if (p->values[k] == p->values[i])
					return ks_fail(err, "params.%s: value %lld is listed twice", name,
						       (long long)p->values[i]);
		}
	}
	return 0;
}

struct constraint_names {
	const struct ks_candidate *cand;
	char bad[64];
};

static void constraint_name(const char *name, void *ctx)
{
	struct constraint_names *cn = ctx;

	if (cn->bad[0])
		return;
	for (size_t i = 0; i < cn->cand->n_params; i++)
		if (!strcmp(cn->cand->params[i].name, name))
			return;
	snprintf(cn->bad, sizeof(cn->bad), "%s", name);
}

/*
 * "constraints": conditions over the params that a combination must meet
 * to be tried at all (a tile that must divide a chunk, shared memory
 * under the limit).  Combinations that fail one are never compiled and
 * never counted as failures.  Only params may be named: a constraint is
 * decided before any workload is known.
 */
static int parse_constraints(struct ks_candidate *cand, const json_t *list, struct ks_error *err)
{
	size_t i;
	json_t *item;

	if (!list)
		return 0;
	if (!json_is_array(list))
		return ks_fail(err, "constraints: expected a list of conditions over the params, e.g. "
				    "[\"CHUNK %% TILE == 0\"]");
	if (json_array_size(list) > KS_CANDIDATE_MAX_CONSTRAINTS)
		return ks_fail(err, "constraints: %zu conditions; at most %d (KS_CANDIDATE_MAX_CONSTRAINTS)",
			       json_array_size(list), KS_CANDIDATE_MAX_CONSTRAINTS);
	cand->constraints = ks_calloc(json_array_size(list) + 1, sizeof(*cand->constraints));
	cand->constraint_exprs = ks_calloc(json_array_size(list) + 1, sizeof(*cand->constraint_exprs));
	json_array_foreach(list, i, item)
	{
		struct constraint_names cn = { .cand = cand };
		char where[64];

		snprintf(where, sizeof(where), "constraints[%zu]", i);
		if (!json_is_string(item))
			return ks_fail(err, "%s: expected a condition string", where);
		if (json_string_length(item) > KS_CANDIDATE_MAX_EXPR_BYTES)
			return ks_fail(
				err, "%s: a condition of %zu bytes; at most %d (KS_CANDIDATE_MAX_EXPR_BYTES)",
				where, json_string_length(item), KS_CANDIDATE_MAX_EXPR_BYTES);
		cand->constraints[cand->n_constraints++] = ks_strdup(json_string_value(item));
		if (ks_expr_names(json_string_value(item), constraint_name, &cn, err) < 0 ||
		    ks_expr_parse(json_string_value(item), &cand->constraint_exprs[i], err) < 0) {
			ks_error_prefix(err, "%s", where);
			return -1;
		}
		if (cn.bad[0])
			return ks_fail(
				err,
				"%s: in \"%s\": '%s' is not a param (constraints are over the params only)",
				where, json_string_value(item), cn.bad);
	}
	return 0;
}

static int parse_scratch(struct ks_candidate *cand, const json_t *scratch, struct ks_error *err)
{
	const char *name;
	json_t *spec;

	if (!scratch)
		return 0;
	if (!json_is_object(scratch))
		return ks_fail(err, "scratch: expected an object of name -> [dtype, element count]");
	if (json_object_size(scratch) > KS_CANDIDATE_MAX_SCRATCH)
		return ks_fail(err, "scratch: %zu buffers; at most %d (KS_CANDIDATE_MAX_SCRATCH)",
			       json_object_size(scratch), KS_CANDIDATE_MAX_SCRATCH);
	cand->scratch = ks_calloc(json_object_size(scratch), sizeof(*cand->scratch));
	json_object_foreach((json_t *)scratch, name, spec)
	{
		struct ks_scratch *s = &cand->scratch[cand->n_scratch];
		char where[128];

		if (!ks_is_identifier(name))
			return ks_fail(err, "scratch: '%s' is not a valid buffer name", name);
		if (!json_is_array(spec) || json_array_size(spec) < 2 || json_array_size(spec) > 3 ||
		    !json_is_string(json_array_get(spec, 0)))
			return ks_fail(
				err,
				"scratch.%s: expected [dtype, element-count expression] or [dtype, "
				"element-count expression, \"zeroed\"], e.g. [\"float32\", \"B*HQ*D\"]",
				name);
		if (json_array_size(spec) == 3) {
			const char *init = json_string_value(json_array_get(spec, 2));

			if (!init || strcmp(init, "zeroed"))
				return ks_fail(
					err,
					"scratch.%s[2]: the only initialisation is \"zeroed\" (every byte 0 "
					"before each call, as part of the timed sequence); without it the "
					"buffer holds garbage (NaN bytes) on entry",
					name);
			s->zeroed = 1;
		}
		s->name = ks_strdup(name);

		cand->n_scratch++;
		if (ks_dtype_parse(json_string_value(json_array_get(spec, 0)), &s->dtype, err) < 0) {
			ks_error_prefix(err, "scratch.%s", name);
			return -1;
		}
		snprintf(where, sizeof(where), "scratch.%s[1]", name);
		if (take_expr(json_array_get(spec, 1), where, &s->size, err) < 0)
			return -1;
	}
	return 0;
}

static int parse_dims(const json_t *list, const char *where, char **out, size_t *rank, struct ks_error *err)
{
	if (json_is_string(list) || json_is_integer(list)) {
		*rank = 1;
		return take_expr(list, where, &out[0], err);
	}
	if (!json_is_array(list) || json_array_size(list) < 1 || json_array_size(list) > 3)
		return ks_fail(err, "%s: expected a list of 1 to 3 expressions", where);
	for (size_t i = 0; i < json_array_size(list); i++) {
		char field[160];

		snprintf(field, sizeof(field), "%s[%zu]", where, i);
		if (take_expr(json_array_get(list, i), field, &out[i], err) < 0)
			return -1;
		*rank = i + 1;
	}
	return 0;
}

static int parse_launches(struct ks_candidate *cand, const json_t *launch, struct ks_error *err)
{
	if (!json_is_array(launch) || json_array_size(launch) == 0)
		return ks_fail(
			err,
			"launch: expected a non-empty list of {\"kernel\", \"grid\", \"block\", \"args\"}");
	if (json_array_size(launch) > KS_CANDIDATE_MAX_LAUNCHES)
		return ks_fail(
			err,
			"launch: %zu launches; a candidate may make at most %d (KS_CANDIDATE_MAX_LAUNCHES)",
			json_array_size(launch), KS_CANDIDATE_MAX_LAUNCHES);
	cand->launches = ks_calloc(json_array_size(launch), sizeof(*cand->launches));
	for (size_t i = 0; i < json_array_size(launch); i++) {
		const json_t *spec = json_array_get(launch, i);
		struct ks_launch *l = &cand->launches[cand->n_launches];
		json_t *kernel, *args, *smem;
		const char *key;
		json_t *unused;
		char where[64];

		if (!json_is_object(spec))
			return ks_fail(err, "launch[%zu]: expected an object", i);
		cand->n_launches++;
		json_object_foreach((json_t *)spec, key, unused)
		{
			if (strcmp(key, "kernel") && strcmp(key, "grid") && strcmp(key, "block") &&
			    strcmp(key, "smem") && strcmp(key, "args") && strcmp(key, "pdl"))
				return ks_fail(err,
					       "launch[%zu]: unknown field '%s' (fields: kernel, grid, "
					       "block, smem, args, pdl)",
					       i, key);
		}
		if (json_object_get(spec, "pdl")) {
			if (!json_is_boolean(json_object_get(spec, "pdl")))
				return ks_fail(err, "launch[%zu].pdl: expected true or false", i);
			l->pdl = json_is_true(json_object_get(spec, "pdl"));
			if (l->pdl && i == 0)
				return ks_fail(
					err, "launch[0].pdl: programmatic dependent launch overlaps a launch "
					     "with the one before it; the first launch has none");
		}
		kernel = json_object_get(spec, "kernel");
		if (!json_is_string(kernel) || !ks_is_identifier(json_string_value(kernel)))
			return ks_fail(err,
				       "launch[%zu].kernel: expected the name of an extern \"C\" __global__ "
				       "function",
				       i);
		l->kernel = ks_strdup(json_string_value(kernel));
		snprintf(where, sizeof(where), "launch[%zu].grid", i);
		if (!json_object_get(spec, "grid"))
			return ks_fail(err, "%s: missing", where);
		if (parse_dims(json_object_get(spec, "grid"), where, l->grid, &l->grid_rank, err) < 0)
			return -1;
		snprintf(where, sizeof(where), "launch[%zu].block", i);
		if (!json_object_get(spec, "block"))
			return ks_fail(err, "%s: missing", where);
		if (parse_dims(json_object_get(spec, "block"), where, l->block, &l->block_rank, err) < 0)
			return -1;
		smem = json_object_get(spec, "smem");
		snprintf(where, sizeof(where), "launch[%zu].smem", i);
		if (smem) {
			if (take_expr(smem, where, &l->smem, err) < 0)
				return -1;
		} else {
			l->smem = ks_strdup("0");
		}
		args = json_object_get(spec, "args");
		if (!json_is_array(args))
			return ks_fail(err,
				       "launch[%zu].args: expected a list of names (op tensors, scalars, "
				       "axes, scratch)",
				       i);
		if (json_array_size(args) > KS_CANDIDATE_MAX_ARGS)
			return ks_fail(err,
				       "launch[%zu].args: %zu arguments; at most %d (KS_CANDIDATE_MAX_ARGS)",
				       i, json_array_size(args), KS_CANDIDATE_MAX_ARGS);
		l->args = ks_calloc(json_array_size(args), sizeof(*l->args));
		for (size_t k = 0; k < json_array_size(args); k++) {
			json_t *a = json_array_get(args, k);

			if (!json_is_string(a))
				return ks_fail(err, "launch[%zu].args[%zu]: expected a name, got %s", i, k,
					       ks_json_type_word(a));
			l->args[l->n_args++].name = ks_strdup(json_string_value(a));
		}
	}
	return 0;
}

/*
 * Every enumeration of the params (the first allowed combination, the
 * count of allowed ones, --all-params, the mutators' scans) is bounded
 * here, before anything enumerates.
 */
/*
 * "start": where the params begin, NAME -> one of its values (params it
 * leaves out begin at their first value): what `ksearch check` runs
 * without --param, and the combination the search evaluates a seed at.
 * Lets a family keep its value lists in order (a move goes one place
 * along them) and still begin where it was measured best.  It must meet
 * the constraints.
 */
static int parse_start(struct ks_candidate *cand, const json_t *start, struct ks_error *err)
{
	int64_t values[KS_CANDIDATE_MAX_PARAMS];
	const char *name;
	json_t *v;
	char why[256];

	if (!start)
		return 0;
	if (!json_is_object(start))
		return ks_fail(err, "start: expected an object of NAME -> value, e.g. {\"TILE\": 64}");
	json_object_foreach((json_t *)start, name, v)
	{
		struct ks_param *p = NULL;
		struct ks_strbuf known;

		for (size_t i = 0; i < cand->n_params; i++)
			if (!strcmp(cand->params[i].name, name))
				p = &cand->params[i];
		if (!p) {
			ks_strbuf_init(&known);
			for (size_t i = 0; i < cand->n_params; i++)
				ks_strbuf_addf(&known, "%s%s", i ? ", " : "", cand->params[i].name);
			ks_fail(err, "start.%s: not a param (params: %s)", name,
				cand->n_params ? known.buf : "none");
			ks_strbuf_release(&known);
			return -1;
		}
		if (!json_is_integer(v))
			return ks_fail(err, "start.%s: expected an integer, got %s", name,
				       ks_json_type_word(v));
		p->start = p->n_values;
		for (size_t k = 0; k < p->n_values; k++)
			if (p->values[k] == json_integer_value(v))
				p->start = k;
		if (p->start == p->n_values) {
			ks_strbuf_init(&known);
			for (size_t k = 0; k < p->n_values; k++)
				ks_strbuf_addf(&known, "%s%lld", k ? ", " : "", (long long)p->values[k]);
			ks_fail(err, "start.%s: %lld is not one of its values (%s)", name,
				(long long)json_integer_value(v), known.buf);
			ks_strbuf_release(&known);
			return -1;
		}
	}
	for (size_t i = 0; i < cand->n_params; i++)
		values[i] = cand->params[i].values[cand->params[i].start];
	if (!ks_params_allowed(cand, values, why, sizeof(why)))
		return ks_fail(err, "start: %s", why);
	return 0;
}

static int check_combinations(const struct ks_candidate *cand, struct ks_error *err)
{
	uint64_t combos = 1, bytes = 0;

	for (size_t i = 0; i < cand->n_params; i++) {
		combos *= cand->params[i].n_values; /* each <= 64, checked against 2^20 as it grows */
		if (combos > KS_CANDIDATE_MAX_COMBINATIONS)
			return ks_fail(
				err,
				"params: more than %d combinations (the product of the value lists' "
				"lengths, up to params.%s); at most %d (KS_CANDIDATE_MAX_COMBINATIONS)",
				KS_CANDIDATE_MAX_COMBINATIONS, cand->params[i].name,
				KS_CANDIDATE_MAX_COMBINATIONS);
	}
	if (!cand->n_constraints)
		return 0;
	bytes = 32; /* what testing one combination costs besides reading the constraints */
	for (size_t i = 0; i < cand->n_constraints; i++)
		bytes += strlen(cand->constraints[i]);
	if (combos * bytes > KS_CANDIDATE_MAX_CONSTRAINT_WORK)
		return ks_fail(
			err,
			"constraints: %llu combinations times (32 + %llu bytes of constraints) is %llu; at "
			"most %llu (KS_CANDIDATE_MAX_CONSTRAINT_WORK): fewer values or shorter constraints",
			(unsigned long long)combos, (unsigned long long)(bytes - 32),
			(unsigned long long)(combos * bytes),
			(unsigned long long)KS_CANDIDATE_MAX_CONSTRAINT_WORK);
	return 0;
}

int ks_candidate_parse(const char *path, const char *source, struct ks_candidate *cand, struct ks_error *err)
{
	const char *json = NULL;
	size_t len = 0;
	json_error_t jerr;
	json_t *root = NULL;
	const char *key;
	json_t *unused;
	int ret = -1;

	memset(cand, 0, sizeof(*cand));
	cand->path = ks_strdup(path);
	cand->source = ks_strdup(source);
	if (check_printable(path, source, err) < 0 || find_block(path, source, &json, &len, err) < 0)
		goto cleanup;
	cand->block_line = ks_line_of(source, (size_t)(json - source));
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		int line = cand->block_line + (jerr.line > 0 ? jerr.line - 1 : 0);
		int column = jerr.column;

		if (jerr.line == 1) {
			/* the JSON starts part-way along its first line */
			const char *line_start = json;

			while (line_start > source && line_start[-1] != '\n')
				line_start--;
			column += (int)(json - line_start);
		}
		ks_fail(err, "%s:%d:%d: malformed JSON in the ksearch block: %s", path, line, column,
			jerr.text);
		goto cleanup;
	}
	if (!json_is_object(root)) {
		ks_fail(err, "%s:%d: the ksearch block must hold a JSON object", path, cand->block_line);
		goto cleanup;
	}
	json_object_foreach(root, key, unused)
	{
		if (strcmp(key, "params") && strcmp(key, "start") && strcmp(key, "constraints") &&
		    strcmp(key, "scratch") && strcmp(key, "launch")) {
			ks_fail(err,
				"%s:%d: ksearch block: unknown field '%s' (fields: params, start, "
				"constraints, scratch, launch)",
				path, cand->block_line, key);
			goto cleanup;
		}
	}
	if (parse_params(cand, json_object_get(root, "params"), err) < 0 ||
	    parse_constraints(cand, json_object_get(root, "constraints"), err) < 0 ||
	    parse_scratch(cand, json_object_get(root, "scratch"), err) < 0 ||
	    parse_launches(cand, json_object_get(root, "launch"), err) < 0) {
		ks_error_prefix(err, "%s:%d: ksearch block", path, cand->block_line);
		goto cleanup;
	}
	if (check_combinations(cand, err) < 0 || parse_start(cand, json_object_get(root, "start"), err) < 0) {
		ks_error_prefix(err, "%s:%d: ksearch block", path, cand->block_line);
		goto cleanup;
	}
	for (size_t i = 0; i < cand->n_scratch; i++)
		for (size_t k = 0; k < cand->n_params; k++)
			if (!strcmp(cand->scratch[i].name, cand->params[k].name)) {
				ks_fail(err,
					"%s:%d: ksearch block: '%s' is both a param and a scratch buffer",
					path, cand->block_line, cand->scratch[i].name);
				goto cleanup;
			}
	ret = 0;
cleanup:
	json_decref(root);
	if (ret < 0)
		ks_candidate_release(cand);
	return ret;
}

int ks_candidate_read(const char *path, char **source, struct ks_error *err)
{
	struct stat st;
	struct ks_strbuf sb;
	char chunk[65536];
	size_t n;
	const char *nul;
	FILE *f;

	*source = NULL;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return ks_fail(err, "%s: is a folder, not a file", path);
	f = fopen(path, "rb");
	if (!f)
		return ks_fail(err, "%s: %s", path, strerror(errno));
	ks_strbuf_init(&sb);
	/* one byte past the limit says it is over, without reading on (/dev/zero never ends) */
	while (sb.len <= KS_CANDIDATE_MAX_BYTES &&
	       (n = fread(chunk, 1,
			  sizeof(chunk) < KS_CANDIDATE_MAX_BYTES + 1 - sb.len
				  ? sizeof(chunk)
				  : KS_CANDIDATE_MAX_BYTES + 1 - sb.len,
			  f)) > 0)
		ks_strbuf_add(&sb, chunk, n);
	if (ferror(f)) {
		int e = errno;

		fclose(f);
		ks_strbuf_release(&sb);
		return ks_fail(err, "%s: read error: %s", path, strerror(e));
	}
	fclose(f);
	if (sb.len > KS_CANDIDATE_MAX_BYTES) {
		ks_strbuf_release(&sb);
		ks_fail(err,
			"%s: larger than the limit of 1 MiB (KS_CANDIDATE_MAX_BYTES, %zu bytes) for a "
			"candidate's "
			"source",
			path, KS_CANDIDATE_MAX_BYTES);
		return 1;
	}
	nul = memchr(sb.buf, '\0', sb.len);
	if (nul) {
		size_t at = (size_t)(nul - sb.buf);

		ks_fail(err, "%s:%d: byte offset %zu: a NUL byte; a candidate is CUDA C++ text", path,
			ks_line_of(sb.buf, at), at);
		ks_strbuf_release(&sb);
		return 1;
	}
	*source = ks_strbuf_detach(&sb);
	return 0;
}

int ks_candidate_load(const char *path, struct ks_candidate *cand, struct ks_error *err)
{
	char *source;
	int ret;

	memset(cand, 0, sizeof(*cand));
	if (ks_candidate_read(path, &source, err))
		return -1;
	ret = ks_candidate_parse(path, source, cand, err);
	free(source);
	return ret;
}

/* ---- binding to an operator ---- */

struct name_check {
	const struct ks_candidate *cand;
	const struct ks_op *op;
	char bad[64];
};

static int param_index(const struct ks_candidate *cand, const char *name)
{
	for (size_t i = 0; i < cand->n_params; i++)
		if (!strcmp(cand->params[i].name, name))
			return (int)i;
	return -1;
}

static int scratch_index(const struct ks_candidate *cand, const char *name)
{
	for (size_t i = 0; i < cand->n_scratch; i++)
		if (!strcmp(cand->scratch[i].name, name))
			return (int)i;
	return -1;
}

static void check_name(const char *name, void *ctx)
{
	struct name_check *nc = ctx;

	if (nc->bad[0])
		return;
	if (ks_op_axis_index(nc->op, name) < 0 && param_index(nc->cand, name) < 0)
		snprintf(nc->bad, sizeof(nc->bad), "%s", name);
}

static void list_names(const struct ks_candidate *cand, const struct ks_op *op, struct ks_strbuf *sb)
{
	for (size_t i = 0; i < op->n_axes; i++)
		ks_strbuf_addf(sb, "%s%s", sb->len ? ", " : "", op->axes[i].name);
	for (size_t i = 0; i < cand->n_params; i++)
		ks_strbuf_addf(sb, "%s%s", sb->len ? ", " : "", cand->params[i].name);
}

static int check_expr(const struct ks_candidate *cand, const struct ks_op *op, const char *expr,
		      const char *where, struct ks_error *err)
{
	struct name_check nc = { .cand = cand, .op = op };
	struct ks_strbuf known;

	if (ks_expr_names(expr, check_name, &nc, err) < 0) {
		ks_error_prefix(err, "%s", where);
		return -1;
	}
	if (!nc.bad[0])
		return 0;
	ks_strbuf_init(&known);
	list_names(cand, op, &known);
	ks_fail(err,
		"%s: in \"%s\": unknown name '%s' (expressions may use the op's axes and the params: %s)",
		where, expr, nc.bad, known.buf);
	ks_strbuf_release(&known);
	return -1;
}

static int bind_arg(struct ks_candidate *cand, const struct ks_op *op, struct ks_arg *arg, const char *where,
		    struct ks_error *err)
{
	int i;

	if ((i = ks_op_input_index(op, arg->name)) >= 0) {
		arg->kind = op->inputs[i].is_scalar ? KS_ARG_SCALAR : KS_ARG_INPUT;
	} else if ((i = ks_op_output_index(op, arg->name)) >= 0) {
		arg->kind = KS_ARG_OUTPUT;
	} else if ((i = ks_op_axis_index(op, arg->name)) >= 0) {
		arg->kind = KS_ARG_AXIS;
	} else if ((i = scratch_index(cand, arg->name)) >= 0) {
		arg->kind = KS_ARG_SCRATCH;
	} else {
		struct ks_strbuf known;

		ks_strbuf_init(&known);
		for (size_t k = 0; k < op->n_inputs; k++)
			ks_strbuf_addf(&known, "%s%s", known.len ? ", " : "", op->inputs[k].name);
		for (size_t k = 0; k < op->n_outputs; k++)
			ks_strbuf_addf(&known, ", %s", op->outputs[k].name);
		for (size_t k = 0; k < op->n_axes; k++)
			ks_strbuf_addf(&known, ", %s", op->axes[k].name);
		for (size_t k = 0; k < cand->n_scratch; k++)
			ks_strbuf_addf(&known, ", %s", cand->scratch[k].name);
		ks_fail(err,
			"%s: unknown argument '%s' (an argument names an op tensor, scalar, axis or "
			"scratch buffer: %s)",
			where, arg->name, known.buf);
		ks_strbuf_release(&known);
		return -1;
	}
	arg->index = i;
	return 0;
}

int ks_candidate_bind(struct ks_candidate *cand, const struct ks_op *op, struct ks_error *err)
{
	char where[96];

	cand->bound = 0;
	for (size_t i = 0; i < cand->n_params; i++) {
		const char *name = cand->params[i].name;

		if (ks_op_axis_index(op, name) >= 0 || ks_op_input_index(op, name) >= 0 ||
		    ks_op_output_index(op, name) >= 0)
			return ks_fail(
				err,
				"%s:%d: param '%s' has the name of an axis or tensor of op %s; rename it",
				cand->path, cand->block_line, name, op->key);
	}
	for (size_t i = 0; i < cand->n_scratch; i++) {
		snprintf(where, sizeof(where), "scratch.%s", cand->scratch[i].name);
		if (ks_op_axis_index(op, cand->scratch[i].name) >= 0 ||
		    ks_op_input_index(op, cand->scratch[i].name) >= 0 ||
		    ks_op_output_index(op, cand->scratch[i].name) >= 0)
			return ks_fail(err, "%s:%d: %s: the name is already an axis or tensor of op %s",
				       cand->path, cand->block_line, where, op->key);
		if (check_expr(cand, op, cand->scratch[i].size, where, err) < 0)
			goto fail;
	}
	for (size_t i = 0; i < cand->n_launches; i++) {
		struct ks_launch *l = &cand->launches[i];

		for (size_t d = 0; d < l->grid_rank; d++) {
			snprintf(where, sizeof(where), "launch[%zu] (%s).grid[%zu]", i, l->kernel, d);
			if (check_expr(cand, op, l->grid[d], where, err) < 0)
				goto fail;
		}
		for (size_t d = 0; d < l->block_rank; d++) {
			snprintf(where, sizeof(where), "launch[%zu] (%s).block[%zu]", i, l->kernel, d);
			if (check_expr(cand, op, l->block[d], where, err) < 0)
				goto fail;
		}
		snprintf(where, sizeof(where), "launch[%zu] (%s).smem", i, l->kernel);
		if (check_expr(cand, op, l->smem, where, err) < 0)
			goto fail;
		for (size_t k = 0; k < l->n_args; k++) {
			snprintf(where, sizeof(where), "launch[%zu] (%s).args[%zu]", i, l->kernel, k);
			if (bind_arg(cand, op, &l->args[k], where, err) < 0)
				goto fail;
		}
	}
	cand->bound = 1;
	return 0;
fail:
	ks_error_prefix(err, "%s:%d", cand->path, cand->block_line);
	return -1;
}

void ks_candidate_release(struct ks_candidate *cand)
{
	if (!cand)
		return;
	free(cand->path);
	free(cand->source);
	for (size_t i = 0; i < cand->n_params; i++) {
		free(cand->params[i].name);
		free(cand->params[i].values);
	}
	free(cand->params);
	for (size_t i = 0; i < cand->n_constraints; i++) {
		free(cand->constraints[i]);
		if (cand->constraint_exprs)
			ks_expr_free(cand->constraint_exprs[i]);
	}
	free(cand->constraints);
	free(cand->constraint_exprs);
	for (size_t i = 0; i < cand->n_scratch; i++) {

		free(cand->scratch[i].name);
		free(cand->scratch[i].size);
	}
	free(cand->scratch);
	for (size_t i = 0; i < cand->n_launches; i++) {
		struct ks_launch *l = &cand->launches[i];

		free(l->kernel);
		for (size_t d = 0; d < 3; d++) {
			free(l->grid[d]);
			free(l->block[d]);
		}
		free(l->smem);
		for (size_t k = 0; k < l->n_args; k++)
			free(l->args[k].name);
		free(l->args);
	}
	free(cand->launches);
	memset(cand, 0, sizeof(*cand));
}

/* ---- params ---- */

void ks_params_first(const struct ks_candidate *cand, int64_t *values)
{
	size_t count = ks_params_count(cand);

	for (size_t i = 0; i < cand->n_params; i++)
		values[i] = cand->params[i].values[cand->params[i].start];
	if (ks_params_allowed(cand, values, NULL, 0))
		return;
	/* the first combination, in enumeration order, that meets the constraints */
	for (size_t i = 1; i < count; i++) {
		ks_params_nth(cand, i, values);
		if (ks_params_allowed(cand, values, NULL, 0))
			return;
	}
	for (size_t i = 0; i < cand->n_params; i++)
		values[i] = cand->params[i].values[0];
}

int ks_params_assign(const struct ks_candidate *cand, const char *const *assignments, size_t n,
		     int64_t *values, struct ks_error *err)
{
	for (size_t a = 0; a < n; a++) {
		const char *eq = strchr(assignments[a], '=');
		char name[64], *end;
		long long value;
		int p;

		if (!eq || eq == assignments[a] || (size_t)(eq - assignments[a]) >= sizeof(name))
			return ks_fail(err, "--param '%s': expected NAME=VALUE, e.g. --param TILE=64",
				       assignments[a]);
		memcpy(name, assignments[a], (size_t)(eq - assignments[a]));
		name[eq - assignments[a]] = '\0';
		p = param_index(cand, name);
		if (p < 0) {
			struct ks_strbuf known;

			ks_strbuf_init(&known);
			for (size_t i = 0; i < cand->n_params; i++)
				ks_strbuf_addf(&known, "%s%s", i ? ", " : "", cand->params[i].name);
			ks_fail(err, "--param %s: %s has no param '%s' (its params: %s)", assignments[a],
				cand->path, name, cand->n_params ? known.buf : "none");
			ks_strbuf_release(&known);
			return -1;
		}
		errno = 0;
		value = strtoll(eq + 1, &end, 10);
		if (!eq[1] || *end || errno)
			return ks_fail(err, "--param %s: '%s' is not an integer", assignments[a], eq + 1);
		for (size_t i = 0; i < cand->params[p].n_values; i++) {
			if (cand->params[p].values[i] == value) {
				values[p] = value;
				goto next;
			}
		}
		{
			struct ks_strbuf allowed;

			ks_strbuf_init(&allowed);
			for (size_t i = 0; i < cand->params[p].n_values; i++)
				ks_strbuf_addf(&allowed, "%s%lld", i ? ", " : "",
					       (long long)cand->params[p].values[i]);
			ks_fail(err, "--param %s: %lld is not among %s's values [%s]", assignments[a], value,
				name, allowed.buf);
			ks_strbuf_release(&allowed);
			return -1;
		}
	next:;
	}
	return 0;
}

size_t ks_params_count(const struct ks_candidate *cand)
{
	size_t count = 1;

	for (size_t i = 0; i < cand->n_params; i++)
		if (__builtin_mul_overflow(count, cand->params[i].n_values, &count))
			return SIZE_MAX;
	return count;
}

void ks_params_nth(const struct ks_candidate *cand, size_t index, int64_t *values)
{
	for (size_t i = cand->n_params; i-- > 0;) {
		size_t n = cand->params[i].n_values;

		values[i] = cand->params[i].values[index % n];
		index /= n;
	}
}

int ks_params_allowed(const struct ks_candidate *cand, const int64_t *values, char *why, size_t size)
{
	/* called once per combination when enumerating: no allocation, the env lives on the stack */
	struct ks_env_entry entries[KS_CANDIDATE_MAX_PARAMS];
	struct ks_env env = { entries, 0, KS_CANDIDATE_MAX_PARAMS };
	struct ks_error err;
	int allowed = 1;

	if (!cand->n_constraints)
		return 1;
	if (cand->n_params > KS_CANDIDATE_MAX_PARAMS)
		return 0; /* ks_candidate_parse() makes none */
	for (size_t i = 0; i < cand->n_params; i++) {
		size_t len = strlen(cand->params[i].name);

		if (len >= sizeof(entries[i].name))
			return 0;
		memcpy(entries[i].name, cand->params[i].name, len + 1);
		entries[i].value = values[i];
		env.count++;
	}
	for (size_t i = 0; i < cand->n_constraints && allowed; i++) {
		int64_t v = 0;
		int rc = cand->constraint_exprs && cand->constraint_exprs[i]
				 ? ks_expr_value(cand->constraint_exprs[i], &env, &v, &err)
				 : ks_expr_eval(cand->constraints[i], &env, &v, &err);

		if (rc < 0) {
			/* a condition that cannot be decided (a division by zero) does not hold */
			if (why)
				snprintf(why, size, "constraints[%zu]: %s", i, err.msg);
			allowed = 0;
		} else if (!v) {
			char params[256];

			if (why) {
				ks_params_format(cand, values, params, sizeof(params));
				snprintf(why, size, "constraints[%zu] \"%s\" does not hold for %s", i,
					 cand->constraints[i], params);
			}
			allowed = 0;
		}
	}
	return allowed;
}

size_t ks_params_count_allowed(const struct ks_candidate *cand)
{
	size_t count = ks_params_count(cand), allowed = 0;
	int64_t *values;

	if (!cand->n_constraints || count == SIZE_MAX)
		return count;
	values = ks_calloc(cand->n_params ? cand->n_params : 1, sizeof(*values));
	for (size_t i = 0; i < count; i++) {
		ks_params_nth(cand, i, values);
		allowed += ks_params_allowed(cand, values, NULL, 0);
	}
	free(values);
	return allowed;
}

void ks_params_format(const struct ks_candidate *cand, const int64_t *values, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < cand->n_params && used < size; i++) {
		int n = snprintf(buf + used, size - used, "%s%s=%lld", i ? " " : "", cand->params[i].name,
				 (long long)values[i]);
		if (n < 0)
			break;
		used += (size_t)n;
	}
	if (!cand->n_params)
		snprintf(buf, size, "(no params)");
}

/* ---- plans ---- */

int ks_plan_env(const struct ks_candidate *cand, const struct ks_workload *w, const int64_t *params,
		struct ks_env *env, struct ks_error *err)
{
	for (size_t i = 0; i < w->axes.count; i++)
		if (ks_env_set(env, w->axes.entries[i].name, w->axes.entries[i].value, err) < 0)
			return -1;
	for (size_t i = 0; i < cand->n_params; i++)
		if (ks_env_set(env, cand->params[i].name, params[i], err) < 0)
			return -1;
	return 0;
}

static int eval_in(const char *expr, const struct ks_env *env, int64_t *out, const char *where,
		   struct ks_error *err)
{
	if (ks_expr_eval(expr, env, out, err) < 0) {
		ks_error_prefix(err, "%s", where);
		return -1;
	}
	return 0;
}

int ks_plan_resolve(const struct ks_candidate *cand, const struct ks_op *op, const struct ks_workload *w,
		    const int64_t *params, struct ks_plan *plan, struct ks_error *err)
{
	static const int64_t grid_max[3] = { 2147483647, 65535, 65535 };
	static const int64_t block_max[3] = { 1024, 1024, 64 };
	static const char axis_name[3] = { 'x', 'y', 'z' };
	struct ks_env env;
	char where[160];
	int ret = -1;

	(void)op;
	memset(plan, 0, sizeof(*plan));
	ks_env_init(&env);
	if (ks_plan_env(cand, w, params, &env, err) < 0)
		goto cleanup;
	plan->n_launches = cand->n_launches;
	plan->launches = ks_calloc(cand->n_launches, sizeof(*plan->launches));
	plan->n_scratch = cand->n_scratch;
	plan->scratch_bytes = ks_calloc(cand->n_scratch, sizeof(*plan->scratch_bytes));
	for (size_t i = 0; i < cand->n_scratch; i++) {
		int64_t elems;

		snprintf(where, sizeof(where), "scratch.%s", cand->scratch[i].name);
		if (eval_in(cand->scratch[i].size, &env, &elems, where, err) < 0)
			goto cleanup;
		if (elems < 0) {
			ks_fail(err, "%s: \"%s\" = %lld elements; a size cannot be negative", where,
				cand->scratch[i].size, (long long)elems);
			goto cleanup;
		}
		if (__builtin_mul_overflow(elems, (int64_t)ks_dtype_size(cand->scratch[i].dtype),
					   &plan->scratch_bytes[i])) {
			ks_fail(err, "%s: size in bytes overflows", where);
			goto cleanup;
		}
	}
	for (size_t i = 0; i < cand->n_launches; i++) {
		const struct ks_launch *l = &cand->launches[i];
		struct ks_launch_dims *dims = &plan->launches[i];

		for (size_t d = 0; d < 3; d++) {
			dims->grid[d] = 1;
			dims->block[d] = 1;
		}
		for (size_t d = 0; d < l->grid_rank; d++) {
			snprintf(where, sizeof(where), "launch[%zu] (%s).grid.%c", i, l->kernel,
				 axis_name[d]);
			if (eval_in(l->grid[d], &env, &dims->grid[d], where, err) < 0)
				goto cleanup;
			if (dims->grid[d] < 1 || dims->grid[d] > grid_max[d]) {
				ks_fail(err, "%s: \"%s\" = %lld, outside CUDA's range [1, %lld]", where,
					l->grid[d], (long long)dims->grid[d], (long long)grid_max[d]);
				goto cleanup;
			}
		}
		for (size_t d = 0; d < l->block_rank; d++) {
			snprintf(where, sizeof(where), "launch[%zu] (%s).block.%c", i, l->kernel,
				 axis_name[d]);
			if (eval_in(l->block[d], &env, &dims->block[d], where, err) < 0)
				goto cleanup;
			if (dims->block[d] < 1 || dims->block[d] > block_max[d]) {
				ks_fail(err, "%s: \"%s\" = %lld, outside CUDA's range [1, %lld]", where,
					l->block[d], (long long)dims->block[d], (long long)block_max[d]);
				goto cleanup;
			}
		}
		dims->threads = dims->block[0] * dims->block[1] * dims->block[2];
		if (dims->threads > 1024) {
			ks_fail(err, "launch[%zu] (%s): %lld threads per block; CUDA allows at most 1024", i,
				l->kernel, (long long)dims->threads);
			goto cleanup;
		}
		snprintf(where, sizeof(where), "launch[%zu] (%s).smem", i, l->kernel);
		if (eval_in(l->smem, &env, &dims->smem, where, err) < 0)
			goto cleanup;
		if (dims->smem < 0) {
			ks_fail(err, "%s: \"%s\" = %lld bytes; shared memory cannot be negative", where,
				l->smem, (long long)dims->smem);
			goto cleanup;
		}
	}
	ret = 0;
cleanup:
	ks_env_release(&env);
	if (ret < 0) {
		ks_error_prefix(err, "%s, workload %s", cand->path, w->id);
		ks_plan_release(plan);
	}
	return ret;
}

void ks_plan_release(struct ks_plan *plan)
{
	if (!plan)
		return;
	free(plan->launches);
	free(plan->scratch_bytes);
	memset(plan, 0, sizeof(*plan));
}
