#include "ksearch/base/util.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void out_of_memory(size_t size)
{
	fprintf(stderr, "ksearch: out of memory (asked for %zu bytes)\n", size);
	abort();
}

void *ks_malloc(size_t size)
{
	void *p = malloc(size ? size : 1);

	if (!p)
		out_of_memory(size);
	return p;
}

void *ks_calloc(size_t count, size_t size)
{
	void *p = calloc(count ? count : 1, size ? size : 1);

	if (!p)
		out_of_memory(count * size);
	return p;
}

void *ks_realloc(void *ptr, size_t size)
{
	void *p = realloc(ptr, size ? size : 1);

	if (!p)
		out_of_memory(size);
	return p;
}

char *ks_strdup(const char *s)
{
	return ks_strndup(s, strlen(s));
}

char *ks_strndup(const char *s, size_t n)
{
	char *p = ks_malloc(n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *ks_asprintf(const char *fmt, ...)
{
	struct ks_strbuf sb;
	va_list ap;
	int len;

	ks_strbuf_init(&sb);
	va_start(ap, fmt);
	len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (len < 0)
		return sb.buf;
	sb.buf = ks_realloc(sb.buf, (size_t)len + 1);
	va_start(ap, fmt);
	vsnprintf(sb.buf, (size_t)len + 1, fmt, ap);
	va_end(ap);
	return sb.buf;
}

void ks_strbuf_init(struct ks_strbuf *sb)
{
	sb->alloc = 64;
	sb->len = 0;
	sb->buf = ks_malloc(sb->alloc);
	sb->buf[0] = '\0';
}

void ks_strbuf_release(struct ks_strbuf *sb)
{
	free(sb->buf);
	sb->buf = NULL;
	sb->len = sb->alloc = 0;
}

static void strbuf_grow(struct ks_strbuf *sb, size_t extra)
{
	if (sb->len + extra + 1 <= sb->alloc)
		return;
	while (sb->len + extra + 1 > sb->alloc)
		sb->alloc *= 2;
	sb->buf = ks_realloc(sb->buf, sb->alloc);
}

void ks_strbuf_add(struct ks_strbuf *sb, const char *data, size_t len)
{
	strbuf_grow(sb, len);
	memcpy(sb->buf + sb->len, data, len);
	sb->len += len;
	sb->buf[sb->len] = '\0';
}

void ks_strbuf_adds(struct ks_strbuf *sb, const char *s)
{
	ks_strbuf_add(sb, s, strlen(s));
}

void ks_strbuf_addf(struct ks_strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (len <= 0)
		return;
	strbuf_grow(sb, (size_t)len);
	va_start(ap, fmt);
	vsnprintf(sb->buf + sb->len, (size_t)len + 1, fmt, ap);
	va_end(ap);
	sb->len += (size_t)len;
}

char *ks_strbuf_detach(struct ks_strbuf *sb)
{
	char *buf = sb->buf;

	sb->buf = NULL;
	sb->len = sb->alloc = 0;
	return buf;
}

char *ks_path_join(const char *dir, const char *name)
{
	size_t len = strlen(dir);

	if (len && dir[len - 1] == '/')
		return ks_asprintf("%s%s", dir, name);
	return ks_asprintf("%s/%s", dir, name);
}

const char *ks_basename(const char *path)
{
	static char buf[PATH_MAX];
	size_t len = strlen(path);
	const char *slash;

	while (len > 1 && path[len - 1] == '/')
		len--;
	if (len != strlen(path)) {
		/* trailing slashes: copy so the result is NUL-terminated */
		snprintf(buf, sizeof(buf), "%.*s", (int)len, path);
		path = buf;
	}
	slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

char *ks_exe_dir(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	char *slash;

	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	slash = strrchr(buf, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	return ks_strdup(buf);
}

int ks_read_file(const char *path, char **data, size_t *size, struct ks_error *err)
{
	FILE *f = fopen(path, "rb");
	struct ks_strbuf sb;
	char chunk[65536];
	size_t n;

	*data = NULL;
	if (!f)
		return ks_fail(err, "%s: %s", path, strerror(errno));
	ks_strbuf_init(&sb);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		ks_strbuf_add(&sb, chunk, n);
	if (ferror(f)) {
		int e = errno;

		fclose(f);
		ks_strbuf_release(&sb);
		return ks_fail(err, "%s: read error: %s", path, strerror(e));
	}
	fclose(f);
	if (size)
		*size = sb.len;
	*data = ks_strbuf_detach(&sb);
	return 0;
}

int ks_is_identifier(const char *s)
{
	if (!s || !(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
		return 0;
	for (s++; *s; s++)
		if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9')))
			return 0;
	return 1;
}

size_t ks_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t *row = ks_calloc(lb + 1, sizeof(*row));
	size_t result;

	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	result = row[lb];
	free(row);
	return result;
}

int ks_is_close(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t limit = (la < lb ? la : lb) <= 4 ? 1 : 2;

	if (la >= 3 && !strncmp(a, b, la))
		return 1; /* a prefix of b */
	return ks_edit_distance(a, b) <= limit;
}

int ks_strcmp_ptr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int ks_strcmp_basename_ptr(const void *a, const void *b)
{
	char left[PATH_MAX];

	snprintf(left, sizeof(left), "%s", ks_basename(*(char *const *)a));
	return strcmp(left, ks_basename(*(char *const *)b));
}

int ks_line_of(const char *text, size_t offset)
{
	int line = 1;

	for (size_t i = 0; i < offset && text[i]; i++)
		if (text[i] == '\n')
			line++;
	return line;
}
