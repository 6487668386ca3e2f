#include "ksearch/base/util.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
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

/* The capacity for nr elements of elem_size bytes, or 0 when it does not fit size_t. */
static size_t grown_capacity(size_t nr, size_t alloc, size_t elem_size)
{
	size_t want = alloc + alloc / 2 + 16;

	if (want < alloc || want < nr)
		want = nr;
	if (elem_size && want > SIZE_MAX / elem_size)
		return nr <= SIZE_MAX / elem_size ? nr : 0;
	return want;
}

int ks_array_try_grow(void *array_ptr, size_t nr, size_t *alloc, size_t elem_size)
{
	void *array, *grown;
	size_t want;

	if (nr <= *alloc)
		return 0;
	want = grown_capacity(nr, *alloc, elem_size);
	if (!want)
		return -1;
	/* array_ptr is the address of a T *: copied, not aliased as a void * */
	memcpy(&array, array_ptr, sizeof(array));
	grown = realloc(array, want * elem_size > 0 ? want * elem_size : 1);
	if (!grown)
		return -1;
	memcpy(array_ptr, &grown, sizeof(grown));
	*alloc = want;
	return 0;
}

void *ks_array_grow(void *array, size_t nr, size_t *alloc, size_t elem_size)
{
	size_t want;

	if (nr <= *alloc)
		return array;
	want = grown_capacity(nr, *alloc, elem_size);
	if (!want) {
		fprintf(stderr, "ksearch: out of memory (an array of %zu elements of %zu bytes)\n", nr,
			elem_size);
		abort();
	}
	array = ks_realloc(array, want * elem_size);
	*alloc = want;
	return array;
}

void ks_qsort(void *base, size_t n, size_t elem_size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, elem_size, cmp);
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

char *ks_vasprintf(const char *fmt, va_list ap)
{
	va_list again;
	char *text;
	int len;

	va_copy(again, ap);
	len = vsnprintf(NULL, 0, fmt, ap);
	if (len < 0) {
		va_end(again);
		return ks_strdup("");
	}
	text = ks_malloc((size_t)len + 1);
	vsnprintf(text, (size_t)len + 1, fmt, again);
	va_end(again);
	return text;
}

char *ks_asprintf(const char *fmt, ...)
{
	va_list ap;
	char *text;

	va_start(ap, fmt);
	text = ks_vasprintf(fmt, ap);
	va_end(ap);
	return text;
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
	if (extra > SIZE_MAX - sb->len - 1) {
		fprintf(stderr, "ksearch: out of memory (a string of %zu + %zu bytes)\n", sb->len, extra);
		abort();
	}
	KS_ALLOC_GROW(sb->buf, sb->len + extra + 1, sb->alloc);
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

	if (!strcasecmp(a, b))
		return 1; /* the same name in other case: GQA for gqa */
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

long ks_text_control(const char *text, unsigned *code)
{
	for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
		*code = *p;
		if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
			*code = p[1]; /* U+0080..U+009F */
		else if (!((*p < 0x20 && !strchr("\t\n\r\f\v", *p)) || *p == 0x7f))
			continue;
		return (long)((const char *)p - text);
	}
	return -1;
}

/* Length of the well-formed UTF-8 sequence at p (at most avail bytes), 0 when there is none. */
static size_t utf8_sequence(const unsigned char *p, size_t avail)
{
	size_t n;
	unsigned lo = 0x80, hi = 0xbf;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4;
	else
		return 0; /* a continuation byte, an overlong lead (c0, c1) or past U+10FFFF */
	if (n > avail)
		return 0;
	/* the second byte's range rules out overlongs, surrogates and code points past U+10FFFF */
	if (p[0] == 0xe0)
		lo = 0xa0;
	else if (p[0] == 0xed)
		hi = 0x9f;
	else if (p[0] == 0xf0)
		lo = 0x90;
	else if (p[0] == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

long ks_utf8_invalid(const char *text, size_t len)
{
	const unsigned char *p = (const unsigned char *)text;

	for (size_t i = 0; i < len;) {
		size_t n = utf8_sequence(p + i, len - i);

		if (!n)
			return (long)i;
		i += n;
	}
	return -1;
}

size_t ks_utf8_prefix(const char *text, size_t len)
{
	const unsigned char *p = (const unsigned char *)text;
	size_t i = 0;

	while (i < len) {
		size_t n = utf8_sequence(p + i, len - i);

		if (!n)
			break;
		i += n;
	}
	return i;
}

char *ks_utf8_sanitize(const char *text)
{
	const unsigned char *p = (const unsigned char *)text;
	size_t len = strlen(text);
	struct ks_strbuf sb;

	ks_strbuf_init(&sb);
	for (size_t i = 0; i < len;) {
		size_t n = utf8_sequence(p + i, len - i);

		if (n) {
			ks_strbuf_add(&sb, text + i, n);
			i += n;
		} else {
			ks_strbuf_adds(&sb, "\xef\xbf\xbd"); /* U+FFFD */
			i++;
		}
	}
	return ks_strbuf_detach(&sb);
}

int ks_line_of(const char *text, size_t offset)
{
	int line = 1;

	for (size_t i = 0; i < offset && text[i]; i++)
		if (text[i] == '\n')
			line++;
	return line;
}

double ks_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
