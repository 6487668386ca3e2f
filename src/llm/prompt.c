/*
 * prompt.c - loading prompt templates and rendering {{name}} placeholders.
 */
#include "ksearch/llm/prompt.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/fs.h"
#include "ksearch/base/util.h"

/* How much of a bad placeholder or name an error message quotes. */
#define QUOTE_MAX 40
/* How many known names an "unknown placeholder" error lists. */
#define LIST_MAX 24

void ks_prompt_vars_init(struct ks_prompt_vars *vars)
{
	vars->items = NULL;
	vars->n = vars->alloc = 0;
}

void ks_prompt_vars_release(struct ks_prompt_vars *vars)
{
	for (size_t i = 0; i < vars->n; i++) {
		free(vars->items[i].name);
		free(vars->items[i].value);
	}
	free(vars->items);
	ks_prompt_vars_init(vars);
}

static struct ks_prompt_var *find_var(const struct ks_prompt_vars *vars, const char *name, size_t len)
{
	for (size_t i = 0; i < vars->n; i++)
		if (strlen(vars->items[i].name) == len && !memcmp(vars->items[i].name, name, len))
			return &vars->items[i];
	return NULL;
}

/* Take ownership of value. */
static void set_owned(struct ks_prompt_vars *vars, const char *name, char *value)
{
	struct ks_prompt_var *var = find_var(vars, name, strlen(name));

	if (var) {
		free(var->value);
		var->value = value;
		return;
	}
	KS_ALLOC_GROW(vars->items, vars->n + 1, vars->alloc);
	vars->items[vars->n].name = ks_strdup(name);
	vars->items[vars->n].value = value;
	vars->n++;
}

void ks_prompt_vars_set(struct ks_prompt_vars *vars, const char *name, const char *value)
{
	set_owned(vars, name, ks_strdup(value ? value : ""));
}

void ks_prompt_vars_setf(struct ks_prompt_vars *vars, const char *name, const char *fmt, ...)
{
	va_list ap;
	char *value;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (len < 0)
		len = 0;
	value = ks_malloc((size_t)len + 1);
	value[0] = '\0';
	va_start(ap, fmt);
	vsnprintf(value, (size_t)len + 1, fmt, ap);
	va_end(ap);
	set_owned(vars, name, value);
}

const char *ks_prompt_vars_get(const struct ks_prompt_vars *vars, const char *name)
{
	struct ks_prompt_var *var = find_var(vars, name, strlen(name));

	return var ? var->value : NULL;
}

static int is_ident_start(char c)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_ident_char(char c)
{
	return is_ident_start(c) || (c >= '0' && c <= '9');
}

/* Up to QUOTE_MAX bytes of s on one line, printable ASCII only. */
static void quote(const char *s, size_t len, char *buf, size_t size)
{
	size_t n = 0;

	for (size_t i = 0; i < len && n + 4 < size; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\n' || i == QUOTE_MAX) {
			memcpy(buf + n, "...", 3);
			n += 3;
			break;
		}
		buf[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	buf[n] = '\0';
}

static int unknown_placeholder(const char *tpl, size_t at, const char *name, size_t len,
			       const struct ks_prompt_vars *vars, struct ks_error *err)
{
	char shown[QUOTE_MAX + 8], wanted[QUOTE_MAX + 8];
	struct ks_strbuf known;
	int ret;

	quote(name, len, shown, sizeof(shown));
	snprintf(wanted, sizeof(wanted), "%s", shown);
	for (size_t i = 0; i < vars->n; i++)
		if (len <= QUOTE_MAX && ks_is_close(wanted, vars->items[i].name))
			return ks_fail(err, "line %d: unknown placeholder {{%s}} (did you mean {{%s}}?)",
				       ks_line_of(tpl, at), shown, vars->items[i].name);
	ks_strbuf_init(&known);
	for (size_t i = 0; i < vars->n && i < LIST_MAX; i++)
		ks_strbuf_addf(&known, "%s%s", i ? ", " : "", vars->items[i].name);
	if (vars->n > LIST_MAX)
		ks_strbuf_adds(&known, ", ...");
	ret = ks_fail(err, "line %d: unknown placeholder {{%s}} (values given: %s)", ks_line_of(tpl, at),
		      shown, vars->n ? known.buf : "none");
	ks_strbuf_release(&known);
	return ret;
}

int ks_prompt_render(const char *template_text, const struct ks_prompt_vars *vars, char **out,
		     struct ks_error *err)
{
	const char *tpl = template_text, *p = tpl, *lit = tpl;
	struct ks_strbuf sb;
	char shown[QUOTE_MAX + 8];
	int ret = -1;

	*out = NULL;
	ks_strbuf_init(&sb);
	while ((p = strstr(p, "{{"))) {
		const char *q = p + 2, *name;
		const struct ks_prompt_var *var;
		size_t name_len, value_len;

		ks_strbuf_add(&sb, lit, (size_t)(p - lit));
		if (q[0] == '{' && q[1] == '{') {
			ks_strbuf_add(&sb, "{{", 2);
			p = lit = q + 2;
			continue;
		}
		while (*q == ' ' || *q == '\t')
			q++;
		name = q;
		if (is_ident_start(*q))
			while (is_ident_char(*q))
				q++;
		name_len = (size_t)(q - name);
		while (*q == ' ' || *q == '\t')
			q++;
		if (!name_len || q[0] != '}' || q[1] != '}') {
			quote(p, strlen(p), shown, sizeof(shown));
			ks_fail(err,
				"line %d: malformed placeholder `%s`: a placeholder is {{name}}; "
				"write {{{{ for a literal {{",
				ks_line_of(tpl, (size_t)(p - tpl)), shown);
			goto cleanup;
		}
		var = find_var(vars, name, name_len);
		if (!var) {
			unknown_placeholder(tpl, (size_t)(p - tpl), name, name_len, vars, err);
			goto cleanup;
		}
		value_len = strlen(var->value);
		if (sb.len > KS_PROMPT_MAX_BYTES || value_len > KS_PROMPT_MAX_BYTES - sb.len) {
			ks_fail(err,
				"line %d: the rendered prompt would be larger than %zu bytes ({{%s}} is %zu "
				"bytes)",
				ks_line_of(tpl, (size_t)(p - tpl)), KS_PROMPT_MAX_BYTES, var->name,
				value_len);
			goto cleanup;
		}
		ks_strbuf_add(&sb, var->value, value_len);
		p = lit = q + 2;
	}
	ks_strbuf_adds(&sb, lit);
	if (sb.len > KS_PROMPT_MAX_BYTES) {
		ks_fail(err, "the rendered prompt is larger than %zu bytes", KS_PROMPT_MAX_BYTES);
		goto cleanup;
	}
	*out = ks_strbuf_detach(&sb);
	ret = 0;
cleanup:
	if (ret)
		ks_strbuf_release(&sb);
	return ret;
}

/* Relative, inside dir, and plain: letters, digits, _ - . and / between parts. */
static int is_safe_name(const char *name)
{
	const char *part = name;

	if (!*name || *name == '/')
		return 0;
	for (const char *s = name; *s; s++)
		if (!is_ident_char(*s) && *s != '-' && *s != '.' && *s != '/')
			return 0;
	for (;;) {
		const char *slash = strchr(part, '/');
		size_t len = slash ? (size_t)(slash - part) : strlen(part);

		if (len == 0 || (len <= 2 && !strncmp(part, "..", len)))
			return 0; /* "a//b", ".", ".." */
		if (!slash)
			return 1;
		part = slash + 1;
	}
}

int ks_prompt_load(const char *dir, const char *name, char **text, struct ks_error *err)
{
	char *file = NULL, *path = NULL;
	size_t size = 0;
	int ret = -1;

	*text = NULL;
	if (!is_safe_name(name)) {
		char shown[QUOTE_MAX + 8];

		quote(name, strlen(name), shown, sizeof(shown));
		return ks_fail(err,
			       "prompt template name '%s' is not a relative name like \"mutate\" or "
			       "\"strategies/vector_loads\"",
			       shown);
	}
	file = ks_asprintf("%s.md", name);
	path = ks_path_join(dir, file);
	if (ks_read_file(path, text, &size, err) < 0) {
		ks_error_prefix(err, "prompt template '%s'", name);
		goto cleanup;
	}
	if (strlen(*text) != size) {
		ks_fail(err, "prompt template '%s': %s holds a NUL byte; templates are text", name, path);
		goto cleanup;
	}
	if (size > KS_PROMPT_MAX_BYTES) {
		ks_fail(err, "prompt template '%s': %s is larger than %zu bytes", name, path,
			KS_PROMPT_MAX_BYTES);
		goto cleanup;
	}
	ret = 0;
cleanup:
	if (ret) {
		free(*text);
		*text = NULL;
	}
	free(file);
	free(path);
	return ret;
}

void ks_prompt_list_free(char **names, size_t n_names)
{
	if (!names)
		return;
	for (size_t i = 0; i < n_names; i++)
		free(names[i]);
	free(names);
}

int ks_prompt_list(const char *dir, const char *subdir, char ***names, size_t *n_names, struct ks_error *err)
{
	char *path = ks_path_join(dir, subdir);
	DIR *d = opendir(path);
	struct dirent *ent;
	char **list = NULL;
	size_t n = 0, alloc = 0;
	int ret = -1;

	*names = NULL;
	*n_names = 0;
	if (!d) {
		ks_fail(err, "prompt folder %s: %s", path, strerror(errno));
		goto cleanup;
	}
	while ((ent = readdir(d))) {
		size_t len = strlen(ent->d_name);

		if (ent->d_name[0] == '.' || len <= 3 || strcmp(ent->d_name + len - 3, ".md") ||
		    !strcmp(ent->d_name, "README.md"))
			continue;
		KS_ALLOC_GROW(list, n + 1, alloc);
		list[n++] = ks_asprintf("%s/%.*s", subdir, (int)(len - 3), ent->d_name);
	}
	if (!n) {
		ks_fail(err, "prompt folder %s holds no templates (*.md)", path);
		goto cleanup;
	}
	KS_QSORT(list, n, ks_strcmp_ptr);
	*names = list;
	*n_names = n;
	list = NULL;
	ret = 0;
cleanup:
	if (d)
		closedir(d);
	ks_prompt_list_free(list, n);
	free(path);
	return ret;
}
