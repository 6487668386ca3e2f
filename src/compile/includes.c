/*
 * includes.c - the file-reading directives a candidate may use (includes.h).
 */
#include "ksearch/compile/includes.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/util.h"

/* A reading of the source: its characters, and each one's line in the
 * original text (spliced lines and removed comments keep the numbers true). */
struct reading {
	char *text;
	int *line;
	size_t len;
};

static void reading_init(struct reading *r, size_t cap)
{
	r->text = ks_malloc(cap + 1);
	r->line = ks_malloc((cap + 1) * sizeof(*r->line));
	r->len = 0;
}

static void reading_put(struct reading *r, char c, int line)
{
	r->text[r->len] = c;
	r->line[r->len++] = line;
	r->text[r->len] = '\0';
}

static void reading_release(struct reading *r)
{
	free(r->text);
	free(r->line);
}

/* Backslash-newline joins lines.  Blanks between the backslash and the
 * newline are tolerated too (GCC does; a compiler that does not sees two
 * lines, and the later readings still find a directive in either case). */
static void splice(const char *src, struct reading *out)
{
	int line = 1;

	reading_init(out, strlen(src));
	for (const char *p = src; *p; p++) {
		if (*p == '\\') {
			const char *q = p + 1;

			while (*q == ' ' || *q == '\t')
				q++;
			if (*q == '\r')
				q++;
			if (*q == '\n') {
				line++;
				p = q;
				continue;
			}
		}
		reading_put(out, *p, line);
		if (*p == '\n')
			line++;
	}
}

static int ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* The end of a quoted literal starting at i (its opening quote), or of the
 * line, whichever comes first: an unterminated literal ends with its line. */
static size_t skip_quoted(const struct reading *in, size_t i)
{
	char quote = in->text[i];

	for (i++; i < in->len && in->text[i] != '\n'; i++) {
		if (in->text[i] == '\\' && i + 1 < in->len && in->text[i + 1] != '\n')
			i++;
		else if (in->text[i] == quote)
			return i + 1;
	}
	return i;
}

/* A raw string R"delim( ... )delim" starting at i (its 'R'): its end, or 0
 * when this is not one. */
static size_t skip_raw(const struct reading *in, size_t i)
{
	char close[20];
	size_t d = i + 2, n;
	const char *end;

	if (in->text[i + 1] != '"')
		return 0;
	while (d < in->len && d - (i + 2) < 16 && in->text[d] != '(' && !strchr(" \\)\t\n", in->text[d]))
		d++;
	if (d >= in->len || in->text[d] != '(')
		return 0;
	n = d - (i + 2);
	close[0] = ')';
	memcpy(close + 1, in->text + i + 2, n);
	close[n + 1] = '"';
	close[n + 2] = '\0';
	end = strstr(in->text + d + 1, close);
	return end ? (size_t)(end - in->text) + n + 2 : in->len;
}

/* Comments become one blank each.  With `strings`, quoted and raw literals
 * are copied as they are (a "/" "*" inside one starts no comment), as the
 * compiler reads them; without, every comment opener counts. */
static void strip_comments(const struct reading *in, int strings, struct reading *out)
{
	reading_init(out, in->len);
	for (size_t i = 0; i < in->len;) {
		const char *t = in->text + i;
		size_t end = i;

		if (t[0] == '/' && t[1] == '/') {
			while (i < in->len && in->text[i] != '\n')
				i++;
			continue;
		}
		if (t[0] == '/' && t[1] == '*') {
			const char *close = strstr(t + 2, "*/");

			reading_put(out, ' ', in->line[i]);
			i = close ? (size_t)(close - in->text) + 2 : in->len;
			continue;
		}
		if (strings && (t[0] == '"' || t[0] == '\''))
			end = skip_quoted(in, i);
		else if (strings && t[0] == 'R' && (i == 0 || !ident_char(t[-1]) || strchr("uUL8", t[-1])))
			end = skip_raw(in, i);
		if (end <= i)
			end = i + 1;
		for (; i < end; i++)
			reading_put(out, in->text[i], in->line[i]);
	}
}

static size_t skip_blanks(const struct reading *r, size_t i)
{
	while (i < r->len && isspace((unsigned char)r->text[i]))
		i++;
	return i;
}

/* A toolkit header's name: letters, digits, '_', '.', '-' and '/' between
 * them; no leading '/', no "..", no empty part. */
static int header_name_ok(const char *name, size_t n)
{
	if (n == 0 || name[0] == '/' || name[n - 1] == '/')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!(ident_char(c) || c == '.' || c == '-' || c == '/'))
			return 0;
		if (c == '/' && name[i + 1] == '/')
			return 0;
		if (c == '.' && name[i + 1] == '.')
			return 0;
	}
	return 1;
}

/* At i, after blanks: "<name>" with an allowed name?  Sets *end past it. */
static int angle_target_ok(const struct reading *r, size_t i)
{
	const char *close;
	size_t a, b;

	i = skip_blanks(r, i);
	if (i >= r->len || r->text[i] != '<' || !(close = memchr(r->text + i, '>', r->len - i)))
		return 0;
	a = i + 1;
	b = (size_t)(close - r->text);
	while (a < b && (r->text[a] == ' ' || r->text[a] == '\t'))
		a++;
	while (b > a && (r->text[b - 1] == ' ' || r->text[b - 1] == '\t'))
		b--;
	return header_name_ok(r->text + a, b - a);
}

static int word_at(const struct reading *r, size_t i, const char *word)
{
	size_t n = strlen(word);

	return i + n <= r->len && !strncmp(r->text + i, word, n) &&
	       (i + n == r->len || !ident_char(r->text[i + n]));
}

static void describe(const struct reading *r, size_t at, char *why, size_t n, const char *what)
{
	size_t end = at;

	while (end < r->len && r->text[end] != '\n' && end - at < 80)
		end++;
	snprintf(why, n,
		 "line %d: %s `%.*s`: a candidate may include only the CUDA toolkit's headers, by name in "
		 "angle brackets (#include <cuda_bf16.h>); a quoted or absolute path, a '..' or a macro "
		 "could make the compiler read any file (its text would reach the log, the archive and "
		 "the LLM)",
		 r->line[at], what, (int)(end - at), r->text + at);
}

/* The first refused directive or __has_include in one reading; 0 if none. */
static int scan(const struct reading *r, char *why, size_t n)
{
	static const char *const directives[] = { "include_next", "include", "import", "embed" };

	for (size_t i = 0; i < r->len; i++) {
		const char *t = r->text + i;
		size_t hash = 0, j;

		if (t[0] == '#')
			hash = 1;
		else if (t[0] == '%' && t[1] == ':')
			hash = 2;
		else if (t[0] == '?' && t[1] == '?' && t[2] == '=')
			hash = 3;
		if (hash) {
			j = skip_blanks(r, i + hash);
			for (size_t d = 0; d < sizeof(directives) / sizeof(*directives); d++) {
				if (!word_at(r, j, directives[d]))
					continue;
				if (!angle_target_ok(r, j + strlen(directives[d]))) {
					describe(r, i, why, n, "refused directive");
					return 1;
				}
				break;
			}
			continue;
		}
		/* __has_include, __has_include_next, and any other spelling that starts so
		 * (GCC's __has_include__): an identifier, then "(<name>)" */
		if ((i == 0 || !ident_char(t[-1])) && !strncmp(t, "__has_include", 13)) {
			for (j = i; j < r->len && ident_char(r->text[j]); j++)
				;
			j = skip_blanks(r, j);
			if (j >= r->len || r->text[j] != '(' || !angle_target_ok(r, j + 1)) {
				describe(r, i, why, n, "refused test");
				return 1;
			}
		}
	}
	return 0;
}

int ks_includes_check(const char *source, char *why, size_t n)
{
	struct reading spliced, aware, blind;
	int refused;

	splice(source, &spliced);
	strip_comments(&spliced, 1, &aware);
	strip_comments(&spliced, 0, &blind);
	refused = scan(&aware, why, n) || scan(&blind, why, n) || scan(&spliced, why, n);
	reading_release(&spliced);
	reading_release(&aware);
	reading_release(&blind);
	return refused;
}
