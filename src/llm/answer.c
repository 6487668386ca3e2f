/*
 * answer.c - reading an LLM reply: fences, SEARCH/REPLACE edits, matching.
 *
 * All matching is over lines.  A text is split once into records (the
 * bytes compared, their hash, where the line sits), and a SEARCH block is
 * found with Knuth-Morris-Pratt over those records, so the work stays
 * linear however repetitive the text is: a naive scan for a thousand
 * identical lines in a megabyte of identical lines would be quadratic.
 */
#include "ksearch/llm/answer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ksearch/base/hash.h"
#include "ksearch/base/util.h"

/* How much of a SEARCH line an error message quotes. */
#define QUOTE_MAX 60

/* One line of a text: the bytes compared, and where the line sits. */
struct line {
	const char *key; /* exact: the line less its ending; tolerant: trimmed */
	size_t key_len;
	uint64_t hash;
	size_t start;	/* offset of the line in its text */
	size_t end;	/* offset just past its line ending, or the text's length */
	int terminated; /* the line ends with '\n' (not the text's unterminated tail) */
};

enum match_mode {
	MATCH_EXACT,	/* every line, compared less its line ending */
	MATCH_TOLERANT, /* blank lines dropped, the others trimmed */
};

/* One SEARCH/REPLACE edit, as ranges of reply lines [begin, end). */
struct edit {
	size_t line; /* 1-based reply line of its "<<<<<<< SEARCH" */
	size_t search_begin, search_end;
	size_t replace_begin, replace_end;
};

enum marker { MARK_NONE, MARK_SEARCH, MARK_DIVIDER, MARK_REPLACE };

const char *ks_answer_form_name(enum ks_answer_form form)
{
	switch (form) {
	case KS_ANSWER_WHOLE_FILE:
		return "whole_file";
	case KS_ANSWER_EDITS:
		return "edits";
	case KS_ANSWER_NONE:
		break;
	}
	return "none";
}

static int is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static void trim(const char **s, size_t *len)
{
	while (*len && is_blank(**s)) {
		(*s)++;
		(*len)--;
	}
	while (*len && is_blank((*s)[*len - 1]))
		(*len)--;
}

/* FNV-1a: a cheap filter before memcmp, not a fingerprint; equal lines are always compared. */
static uint64_t hash_bytes(const char *s, size_t len)
{
	return ks_fnv1a(s, len);
}

/*
 * Split text[0, len) into lines.  A final '\n' ends the last line rather
 * than starting an empty one.  In MATCH_TOLERANT mode blank lines are left
 * out and the rest trimmed; start and end still give the whole line.
 */
static struct line *split_lines(const char *text, size_t len, enum match_mode mode, size_t *n_lines)
{
	size_t cap = 1, n = 0, pos = 0;
	const char *p = text;
	struct line *lines;

	while ((p = memchr(p, '\n', len - (size_t)(p - text)))) {
		cap++;
		p++;
	}
	lines = ks_malloc(cap * sizeof(*lines));
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t line_end = nl ? (size_t)(nl - text) : len;
		struct line *l = &lines[n];

		l->start = pos;
		l->end = nl ? line_end + 1 : len;
		l->terminated = nl != NULL;
		l->key = text + pos;
		l->key_len = line_end - pos;
		if (mode == MATCH_TOLERANT)
			trim(&l->key, &l->key_len);
		else if (l->key_len && l->key[l->key_len - 1] == '\r')
			l->key_len--;
		pos = l->end;
		if (mode == MATCH_TOLERANT && !l->key_len)
			continue;
		l->hash = hash_bytes(l->key, l->key_len);
		n++;
	}
	*n_lines = n;
	return lines;
}

static int line_eq(const struct line *a, const struct line *b)
{
	return a->hash == b->hash && a->key_len == b->key_len && !memcmp(a->key, b->key, a->key_len);
}

/*
 * Occurrences of pat[0, m) in txt[0, n), overlapping ones included (m >= 1);
 * *first gets where the first one starts.  Knuth-Morris-Pratt: each text
 * line takes part in at most one successful comparison, so the bytes
 * compared are linear too.
 */
static size_t find_all(const struct line *txt, size_t n, const struct line *pat, size_t m, size_t *first)
{
	size_t *fail = ks_malloc(m * sizeof(*fail));
	size_t count = 0, k = 0;

	fail[0] = 0;
	for (size_t i = 1; i < m; i++) {
		while (k > 0 && !line_eq(&pat[i], &pat[k]))
			k = fail[k - 1];
		if (line_eq(&pat[i], &pat[k]))
			k++;
		fail[i] = k;
	}
	k = 0;
	for (size_t i = 0; i < n; i++) {
		while (k > 0 && !line_eq(&txt[i], &pat[k]))
			k = fail[k - 1];
		if (line_eq(&txt[i], &pat[k]))
			k++;
		if (k == m) {
			if (count++ == 0)
				*first = i + 1 - m;
			k = fail[k - 1];
		}
	}
	free(fail);
	return count;
}

/* The word after a marker run: "SEARCH" or "REPLACE", any case, nothing else. */
static int word_is(const char *s, size_t len, const char *word)
{
	trim(&s, &len);
	return len == strlen(word) && !strncasecmp(s, word, len);
}

static enum marker marker_of(const struct line *l)
{
	const char *s = l->key;
	size_t len = l->key_len, run = 0;
	char c;

	trim(&s, &len);
	if (len < 5)
		return MARK_NONE;
	c = s[0];
	if (c != '<' && c != '=' && c != '>')
		return MARK_NONE;
	while (run < len && s[run] == c)
		run++;
	if (run < 5 || run > 9)
		return MARK_NONE;
	if (c == '=')
		return run == len ? MARK_DIVIDER : MARK_NONE;
	if (c == '<')
		return word_is(s + run, len - run, "SEARCH") ? MARK_SEARCH : MARK_NONE;
	return word_is(s + run, len - run, "REPLACE") ? MARK_REPLACE : MARK_NONE;
}

/* Copy text with CRLF turned into LF; *len gets the new length. */
static char *normalize_newlines(const char *text, size_t len, size_t *out_len)
{
	char *out = ks_malloc(len + 1);
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		if (text[i] == '\r' && i + 1 < len && text[i + 1] == '\n')
			continue;
		out[n++] = text[i];
	}
	out[n] = '\0';
	*out_len = n;
	return out;
}

/* A bit of a line for a message: printable ASCII only, so logs and JSON stay valid. */
static void quote_line(const struct line *l, char *buf, size_t size)
{
	const char *s = l->key;
	size_t len = l->key_len, n = 0;

	trim(&s, &len);
	for (size_t i = 0; i < len && n + 4 < size; i++) {
		unsigned char c = (unsigned char)s[i];

		if (i == QUOTE_MAX) {
			memcpy(buf + n, "...", 3);
			n += 3;
			break;
		}
		buf[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	buf[n] = '\0';
}

static int has_search_text(const struct line *reply, const struct edit *e)
{
	for (size_t i = e->search_begin; i < e->search_end; i++) {
		const char *s = reply[i].key;
		size_t len = reply[i].key_len;

		trim(&s, &len);
		if (len)
			return 1;
	}
	return 0;
}

/*
 * Find every edit in the reply and check its shape; nothing is applied
 * yet, so a malformed last edit fails before the first one is tried.
 */
static int parse_edits(const struct line *reply, size_t n, struct edit **edits, size_t *n_edits,
		       struct ks_answer_info *info, struct ks_error *err)
{
	enum { OUTSIDE, IN_SEARCH, IN_REPLACE } state = OUTSIDE;
	struct edit *list = ks_calloc(KS_ANSWER_MAX_EDITS, sizeof(*list));
	struct edit cur = { 0 };
	size_t count = 0;
	int ret = -1;

	for (size_t i = 0; i < n; i++) {
		enum marker mark = marker_of(&reply[i]);

		if (mark == MARK_NONE)
			continue;
		if (state == OUTSIDE) {
			if (mark == MARK_SEARCH) {
				if (count == KS_ANSWER_MAX_EDITS) {
					ks_fail(err,
						"the answer has more than %d SEARCH/REPLACE edits; "
						"for a change that large, send the whole file",
						KS_ANSWER_MAX_EDITS);
					goto cleanup;
				}
				cur.line = i + 1;
				cur.search_begin = i + 1;
				state = IN_SEARCH;
			} else if (mark == MARK_REPLACE) {
				ks_fail(err,
					"answer line %zu: `>>>>>>> REPLACE` with no `<<<<<<< SEARCH` before "
					"it",
					i + 1);
				goto cleanup;
			}
			/* a stray ======= outside an edit is Markdown (a heading underline) */
		} else if (state == IN_SEARCH) {
			if (mark == MARK_DIVIDER) {
				cur.search_end = i;
				cur.replace_begin = i + 1;
				state = IN_REPLACE;
			} else {
				info->failed_edit = count + 1;
				ks_fail(err,
					"edit %zu: unterminated edit block: the `<<<<<<< SEARCH` on answer "
					"line %zu "
					"has no `=======` before the %s on line %zu",
					count + 1, cur.line,
					mark == MARK_SEARCH ? "next `<<<<<<< SEARCH`" : "`>>>>>>> REPLACE`",
					i + 1);
				goto cleanup;
			}
		} else {
			if (mark == MARK_REPLACE) {
				cur.replace_end = i;
				if (!has_search_text(reply, &cur)) {
					info->failed_edit = count + 1;
					ks_fail(err,
						"edit %zu: empty SEARCH section (answer line %zu); quote the "
						"parent lines "
						"to change, or the lines next to where new code goes",
						count + 1, cur.line);
					goto cleanup;
				}
				list[count++] = cur;
				state = OUTSIDE;
			} else {
				info->failed_edit = count + 1;
				ks_fail(err,
					"edit %zu: unterminated edit block: the `<<<<<<< SEARCH` on answer "
					"line %zu "
					"has no `>>>>>>> REPLACE` before the %s on line %zu",
					count + 1, cur.line,
					mark == MARK_SEARCH ? "next `<<<<<<< SEARCH`" : "second `=======`",
					i + 1);
				goto cleanup;
			}
		}
	}
	if (state != OUTSIDE) {
		info->failed_edit = count + 1;
		ks_fail(err,
			"edit %zu: unterminated edit block: the `<<<<<<< SEARCH` on answer line %zu has no "
			"%s "
			"(was the answer cut off?)",
			count + 1, cur.line, state == IN_SEARCH ? "`=======`" : "`>>>>>>> REPLACE`");
		goto cleanup;
	}
	*edits = list;
	*n_edits = count;
	list = NULL;
	ret = 0;
cleanup:
	info->n_edits = ret ? count + (state != OUTSIDE) : count;
	free(list);
	return ret;
}

/* "the parent", or "the parent as changed by edits 1-3": what an edit was matched against. */
static void describe_target(size_t number, char *buf, size_t size)
{
	if (number == 1)
		snprintf(buf, size, "the parent");
	else if (number == 2)
		snprintf(buf, size, "the parent as changed by edit 1");
	else
		snprintf(buf, size, "the parent as changed by edits 1-%zu", number - 1);
}

/*
 * Apply edit number (1-based) to *work: find its SEARCH lines exactly
 * once (exact pass, then tolerant pass) and put its REPLACE lines there,
 * each ended with eol.
 */
static int apply_edit(struct ks_strbuf *work, const struct line *reply, const struct edit *e, size_t number,
		      const char *eol, struct ks_answer_info *info, struct ks_error *err)
{
	const struct line *pat = reply + e->search_begin;
	size_t m = e->search_end - e->search_begin;
	struct line *txt = NULL, *tpat = NULL;
	size_t n = 0, tm = 0, first = 0, count;
	size_t from = 0, to = 0; /* the byte range of work replaced */
	int last_open = 0, ret = -1;
	char target[64], quote[QUOTE_MAX + 8];
	struct ks_strbuf out;

	describe_target(number, target, sizeof(target));
	txt = split_lines(work->buf, work->len, MATCH_EXACT, &n);
	count = find_all(txt, n, pat, m, &first);
	if (count == 1) {
		from = txt[first].start;
		to = txt[first + m - 1].end;
		last_open = !txt[first + m - 1].terminated;
	} else if (count > 1) {
		info->failed_edit = number;
		ret = ks_fail(err,
			      "edit %zu: SEARCH text found %zu times in %s (answer line %zu); "
			      "quote more surrounding lines so that it matches exactly once",
			      number, count, target, e->line);
		goto cleanup;
	} else {
		struct line *filtered;

		/* search lines keep their reply positions; only keys are re-read */
		free(txt);
		txt = split_lines(work->buf, work->len, MATCH_TOLERANT, &n);
		filtered = ks_malloc(m * sizeof(*filtered));
		for (size_t i = 0; i < m; i++) {
			struct line l = pat[i];

			trim(&l.key, &l.key_len);
			if (!l.key_len)
				continue;
			l.hash = hash_bytes(l.key, l.key_len);
			filtered[tm++] = l;
		}
		tpat = filtered;
		count = tm ? find_all(txt, n, tpat, tm, &first) : 0;
		if (count != 1) {
			quote_line(tm ? &tpat[0] : &pat[0], quote, sizeof(quote));
			info->failed_edit = number;
			if (count == 0)
				ret = ks_fail(
					err,
					"edit %zu: SEARCH text not found in %s, even ignoring whitespace "
					"(answer line %zu, first SEARCH line `%s`); SEARCH must quote whole "
					"lines of the current source",
					number, target, e->line, quote);
			else
				ret = ks_fail(
					err,
					"edit %zu: SEARCH text found %zu times in %s when whitespace is "
					"ignored (answer line %zu, first SEARCH line `%s`); quote more "
					"surrounding lines so that it matches exactly once",
					number, count, target, e->line, quote);
			goto cleanup;
		}
		from = txt[first].start;
		to = txt[first + tm - 1].end;
		last_open = !txt[first + tm - 1].terminated;
		info->tolerant[number - 1] = 1;
		info->n_tolerant++;
	}

	ks_strbuf_init(&out);
	ks_strbuf_add(&out, work->buf, from);
	for (size_t i = e->replace_begin; i < e->replace_end; i++) {
		ks_strbuf_add(&out, reply[i].key, reply[i].key_len);
		/* the parent's unterminated last line stays unterminated */
		if (!(last_open && i + 1 == e->replace_end))
			ks_strbuf_adds(&out, eol);
	}
	ks_strbuf_add(&out, work->buf + to, work->len - to);
	ks_strbuf_release(work);
	*work = out;
	ret = 0;
cleanup:
	free(txt);
	free(tpat);
	return ret;
}

static int apply_edits(const char *parent, size_t parent_len, const struct line *reply,
		       const struct edit *edits, size_t n_edits, char **new_source,
		       struct ks_answer_info *info, struct ks_error *err)
{
	const char *nl = memchr(parent, '\n', parent_len);
	/* the replacement lines follow the parent's line ending */
	const char *eol = (nl && nl > parent && nl[-1] == '\r') ? "\r\n" : "\n";
	struct ks_strbuf work;

	ks_strbuf_init(&work);
	ks_strbuf_add(&work, parent, parent_len);
	for (size_t i = 0; i < n_edits; i++) {
		if (apply_edit(&work, reply, &edits[i], i + 1, eol, info, err) < 0) {
			ks_strbuf_release(&work);
			return -1;
		}
	}
	*new_source = ks_strbuf_detach(&work);
	return 0;
}

/* "/" "*", blanks, "ksearch": the start of a candidate's launch block. */
static int has_launch_block(const char *s, size_t len)
{
	const char *end = s + len, *p = s;

	while ((p = memmem(p, (size_t)(end - p), "/*", 2))) {
		const char *q = p + 2;

		while (q < end && (*q == ' ' || *q == '\t'))
			q++;
		if ((size_t)(end - q) >= 7 && !memcmp(q, "ksearch", 7))
			return 1;
		p += 2;
	}
	return 0;
}

/* Languages a candidate file may be fenced as; "" is a bare fence. */
static int is_code_language(const char *info, size_t len)
{
	static const char *const names[] = { "",    "cuda", "cu", "cuh", "cpp", "c++",
					     "cxx", "cc",   "c",  "h",	 "hpp" };
	size_t word = 0;

	while (word < len && !is_blank(info[word]) && info[word] != '{')
		word++;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (word == strlen(names[i]) && !strncasecmp(info, names[i], word))
			return 1;
	return 0;
}

/* A fence line: indent, then 3 or more ` or ~; *info gets the rest. */
static int fence_open(const struct line *l, char *fence_char, size_t *run, size_t *indent, const char **info,
		      size_t *info_len)
{
	const char *s = l->key;
	size_t len = l->key_len, i = 0, r = 0;

	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (i == len || (s[i] != '`' && s[i] != '~'))
		return 0;
	while (i + r < len && s[i + r] == s[i])
		r++;
	if (r < 3)
		return 0;
	*fence_char = s[i];
	*run = r;
	*indent = i;
	*info = s + i + r;
	*info_len = len - i - r;
	trim(info, info_len);
	/* ```x``` on one line is inline code, not a fence (CommonMark) */
	if (*fence_char == '`' && memchr(*info, '`', *info_len))
		return 0;
	return 1;
}

static int fence_close(const struct line *l, char fence_char, size_t run)
{
	const char *s = l->key;
	size_t len = l->key_len, r = 0;

	trim(&s, &len);
	while (r < len && s[r] == fence_char)
		r++;
	return r == len && r >= run;
}

/*
 * Rule 2 of answer.h: the last fenced block in a code language holding a
 * launch block.  Content lines lose up to the fence's indentation, as
 * Markdown reads them.
 */
static int take_whole_file(const char *reply_text, const struct line *reply, size_t n, char **new_source,
			   struct ks_answer_info *info, struct ks_error *err)
{
	size_t chosen_open = 0, chosen_begin = 0, chosen_end = 0, chosen_indent = 0;
	int chosen_closed = 0, found = 0;
	size_t i = 0;
	struct ks_strbuf out;

	while (i < n) {
		char fence_char;
		size_t run, indent, info_len, begin, end;
		const char *lang;
		int closed = 0;

		if (!fence_open(&reply[i], &fence_char, &run, &indent, &lang, &info_len)) {
			i++;
			continue;
		}
		begin = i + 1;
		for (end = begin; end < n; end++)
			if (fence_close(&reply[end], fence_char, run)) {
				closed = 1;
				break;
			}
		info->n_blocks++;
		if (is_code_language(lang, info_len) && end > begin &&
		    has_launch_block(reply_text + reply[begin].start,
				     reply[end - 1].end - reply[begin].start)) {
			found = 1;
			chosen_open = i;
			chosen_begin = begin;
			chosen_end = end;
			chosen_indent = indent;
			chosen_closed = closed;
			info->chosen_block = info->n_blocks;
		}
		i = closed ? end + 1 : end;
	}

	if (!found) {
		if (info->n_blocks)
			return ks_fail(
				err,
				"none of the answer's %zu code blocks is a candidate file (a ```cuda block "
				"holding the `/* ksearch` launch block), and there are no SEARCH/REPLACE "
				"edits",
				info->n_blocks);
		return ks_fail(err, "no code block and no SEARCH/REPLACE edits in the answer");
	}
	info->form = KS_ANSWER_WHOLE_FILE;
	if (!chosen_closed)
		return ks_fail(
			err,
			"the code block opened on answer line %zu is never closed: the answer looks cut "
			"off (too few output tokens?), so the kernel would be incomplete",
			chosen_open + 1);
	ks_strbuf_init(&out);
	for (size_t k = chosen_begin; k < chosen_end; k++) {
		const char *s = reply[k].key;
		size_t len = reply[k].key_len, strip = 0;

		while (strip < chosen_indent && strip < len && (s[strip] == ' ' || s[strip] == '\t'))
			strip++;
		ks_strbuf_add(&out, s + strip, len - strip);
		ks_strbuf_add(&out, "\n", 1);
	}
	*new_source = ks_strbuf_detach(&out);
	return 0;
}

/* Rule 3 of answer.h: no fence, and the reply starts with the launch block. */
static int is_bare_file(const struct line *reply, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *s = reply[i].key;
		size_t len = reply[i].key_len;

		trim(&s, &len);
		if (!len)
			continue;
		if (len < 2 || s[0] != '/' || s[1] != '*')
			return 0;
		return has_launch_block(s, len);
	}
	return 0;
}

int ks_answer_extract(const char *text, const char *parent_source, char **new_source,
		      struct ks_answer_info *info, struct ks_error *err)
{
	struct ks_answer_info local;
	struct line *reply = NULL;
	struct edit *edits = NULL;
	size_t text_len, parent_len = 0, reply_len, n = 0, n_edits = 0;
	char *reply_text = NULL;
	int has_edits = 0, ret = -1;

	if (!info)
		info = &local;
	memset(info, 0, sizeof(*info));
	*new_source = NULL;
	if (!text)
		return ks_fail(err, "no answer text");
	/* strnlen: a hostile reply costs no more than the limit to measure */
	text_len = strnlen(text, KS_ANSWER_MAX_BYTES + 1);
	if (text_len > KS_ANSWER_MAX_BYTES)
		return ks_fail(err, "the answer is larger than %zu bytes; refused without reading it",
			       KS_ANSWER_MAX_BYTES);
	if (parent_source) {
		parent_len = strnlen(parent_source, KS_ANSWER_MAX_BYTES + 1);
		if (parent_len > KS_ANSWER_MAX_BYTES)
			return ks_fail(err, "the parent source is larger than %zu bytes; refused",
				       KS_ANSWER_MAX_BYTES);
	}

	reply_text = normalize_newlines(text, text_len, &reply_len);
	reply = split_lines(reply_text, reply_len, MATCH_EXACT, &n);
	for (size_t i = 0; i < n && !has_edits; i++)
		has_edits = marker_of(&reply[i]) == MARK_SEARCH;

	if (has_edits) {
		info->form = KS_ANSWER_EDITS;
		if (parse_edits(reply, n, &edits, &n_edits, info, err) < 0)
			goto cleanup;
		if (!parent_source) {
			ks_fail(err, "the answer is SEARCH/REPLACE edits, but there is no parent source to "
				     "apply them to");
			goto cleanup;
		}
		if (apply_edits(parent_source, parent_len, reply, edits, n_edits, new_source, info, err) < 0)
			goto cleanup;
	} else if (is_bare_file(reply, n) && !memmem(reply_text, reply_len, "```", 3) &&
		   !memmem(reply_text, reply_len, "~~~", 3)) {
		info->form = KS_ANSWER_WHOLE_FILE;
		*new_source = ks_strndup(reply_text, reply_len);
	} else if (take_whole_file(reply_text, reply, n, new_source, info, err) < 0) {
		goto cleanup;
	}
	info->unchanged = parent_source && !strcmp(*new_source, parent_source);
	ret = 0;
cleanup:
	free(edits);
	free(reply);
	free(reply_text);
	return ret;
}
