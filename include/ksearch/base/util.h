/*
 * util.h - small helpers every module uses: allocation that cannot return
 * NULL (running out of memory aborts with a message, as git's xmalloc
 * does: no caller could do better), strings and paths (whole files: fs.h).
 */
#ifndef KSEARCH_UTIL_H
#define KSEARCH_UTIL_H

#include <stdarg.h>
#include <stddef.h>

void *ks_malloc(size_t size);
void *ks_calloc(size_t count, size_t size);
void *ks_realloc(void *ptr, size_t size);
char *ks_strdup(const char *s);
char *ks_strndup(const char *s, size_t n);
char *ks_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2), nonnull(1)));
char *ks_vasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0), nonnull(1)));

/*
 * Growable arrays, as git's ALLOC_GROW: make room for at least nr
 * elements in array, whose capacity (in elements, a size_t) is alloc;
 * both are updated.  The capacity grows by half again plus 16, so that
 * appending one at a time costs amortised O(1).  The array may move: no
 * pointer into it may be kept across a grow.  Running out of memory (or a
 * size that does not fit size_t) aborts, as ks_realloc() does.
 *
 *	KS_ALLOC_GROW(items, n + 1, alloc);
 *	items[n++] = item;
 */
#define KS_ALLOC_GROW(array, nr, alloc) ((array) = ks_array_grow((array), (nr), &(alloc), sizeof(*(array))))
void *ks_array_grow(void *array, size_t nr, size_t *alloc, size_t elem_size);

/*
 * The same for code that must outlive running out of memory (the compile
 * child under its memory limit): 0, or -1 with array and alloc unchanged.
 */
#define KS_ALLOC_TRY_GROW(array, nr, alloc) ks_array_try_grow(&(array), (nr), &(alloc), sizeof(*(array)))
int ks_array_try_grow(void *array_ptr, size_t nr, size_t *alloc, size_t elem_size);

/* qsort() that accepts an empty array with a NULL base (qsort's base must not be NULL). */
#define KS_QSORT(base, n, cmp) ks_qsort((base), (n), sizeof(*(base)), (cmp))
void ks_qsort(void *base, size_t n, size_t elem_size, int (*cmp)(const void *, const void *));

/* A growing NUL-terminated string; buf is never NULL after init. */
struct ks_strbuf {
	char *buf;
	size_t len;
	size_t alloc;
};

void ks_strbuf_init(struct ks_strbuf *sb);
void ks_strbuf_release(struct ks_strbuf *sb);
void ks_strbuf_add(struct ks_strbuf *sb, const char *data, size_t len);
void ks_strbuf_adds(struct ks_strbuf *sb, const char *s);
void ks_strbuf_addf(struct ks_strbuf *sb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), nonnull(2)));
/* Hand the buffer to the caller (who frees it) and reset sb. */
char *ks_strbuf_detach(struct ks_strbuf *sb);

/* Seconds on the monotonic clock (ks_now_ms()'s, frame.h). */
double ks_now_s(void);

/* "a" + "b" -> "a/b" (no doubled slash). Caller frees. */
char *ks_path_join(const char *dir, const char *name);
/* The last path component, pointing into path. Trailing slashes ignored. */
const char *ks_basename(const char *path);
/* The folder holding the running executable, or NULL. Caller frees. */
char *ks_exe_dir(void);

/* [A-Za-z_][A-Za-z0-9_]* */
int ks_is_identifier(const char *s);

/* Levenshtein distance, for "did you mean" suggestions. */
size_t ks_edit_distance(const char *a, const char *b);
/* Whether b is a plausible intended spelling of a (the same in other case, a prefix, a typo). */
int ks_is_close(const char *a, const char *b);

/* qsort comparators for arrays of char *. */
int ks_strcmp_ptr(const void *a, const void *b);
int ks_strcmp_basename_ptr(const void *a, const void *b);

/* 1-based line number of offset in text. */
int ks_line_of(const char *text, size_t offset);

/*
 * Text that may reach a terminal (a kernel's source, an LLM's strategy):
 * the offset of its first control character other than tab, line ends,
 * form feed and vertical tab, DEL and C1 controls written as UTF-8
 * included, with its code point in *code; -1 when there is none.  An escape
 * sequence could retitle a terminal or write its clipboard (OSC 52).
 */
long ks_text_control(const char *text, unsigned *code);

/*
 * The offset of the first byte of text[0..len) that is not part of well-
 * formed UTF-8 (a stray continuation byte, a truncated sequence, an
 * overlong form, a surrogate, a code point past U+10FFFF: what jansson
 * refuses to put in a JSON string), or -1 when it is all UTF-8.  NUL bytes
 * count as text here: callers that must refuse them look for them.
 */
long ks_utf8_invalid(const char *text, size_t len);
/* The length of the longest prefix of text[0..len) that ends on a whole UTF-8 sequence. */
size_t ks_utf8_prefix(const char *text, size_t len);
/*
 * A malloc'd copy of the NUL-terminated text with every byte that is not
 * part of well-formed UTF-8 replaced by U+FFFD: safe to put in JSON.
 */
char *ks_utf8_sanitize(const char *text);

#endif
