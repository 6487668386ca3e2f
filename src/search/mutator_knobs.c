/*
 * mutator_knobs.c - a new source that differs from an elite's by one
 * compiler-facing knob (mutator_knobs.h has the knobs and their rules).
 *
 * The source is read once into tokens by a small lexer that knows what
 * C++ hides code in (comments, string and character literals, raw
 * strings, preprocessor lines with their continuations), so that a knob
 * is found only in code: a __launch_bounds__ in a comment or a string is
 * never touched, and nothing in a hostile source (an unterminated
 * comment or string, a stray quote) makes it read past the end.  Every
 * loop is linear in the source or bounded by a constant.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/util.h"
#include "ksearch/search/mutator_knobs.h"

/* Parents tried per proposal, and knob changes per parent, before giving the slot up. */
#define PARENT_TRIES 8
#define CHANGE_TRIES 8
/* The extern "C" __global__ declarations looked at in one source (the first ones). */
#define MAX_KERNELS 256
/* Tokens between __global__ and the kernel's name at most, and inside one attribute's parentheses. */
#define DECL_TOKENS 64
#define ATTR_TOKENS 4096

static const char *const kind_names[KS_KNOB_KINDS] = { "minblocks", "load", "store", "ptx_load", "unroll" };

const char *ks_knob_kind_name(enum ks_knob_kind kind)
{
	return kind < KS_KNOB_KINDS ? kind_names[kind] : "?";
}

/* ---- the lexer ---- */

enum tok_kind { T_IDENT, T_STRING, T_NUMBER, T_PUNCT };

struct tok {
	enum tok_kind kind;
	size_t at, len;
};

struct scan {
	const char *src;
	size_t n;
	struct tok *toks;
	size_t n_toks, alloc_toks;
	struct ks_knob_site *sites;
	size_t n_sites, alloc_sites;
};

static int is_ident_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_ident_char(char c)
{
	return is_ident_start(c) || (c >= '0' && c <= '9');
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

static void push_tok(struct scan *s, enum tok_kind kind, size_t at, size_t len)
{
	KS_ALLOC_GROW(s->toks, s->n_toks + 1, s->alloc_toks);
	s->toks[s->n_toks++] = (struct tok){ kind, at, len };
}

/* A new site, or NULL when the source has KS_KNOB_MAX_SITES already. */
static struct ks_knob_site *new_site(struct scan *s, enum ks_knob_kind kind, size_t at, size_t len)
{
	struct ks_knob_site *site;

	if (s->n_sites >= KS_KNOB_MAX_SITES)
		return NULL;
	KS_ALLOC_GROW(s->sites, s->n_sites + 1, s->alloc_sites);
	site = &s->sites[s->n_sites++];
	memset(site, 0, sizeof(*site));
	site->kind = kind;
	site->at = at;
	site->len = len;
	return site;
}

static void add_value(struct ks_knob_site *site, const char *value)
{
	if (site->n_values < KS_KNOB_MAX_VALUES && strcmp(value, site->current))
		snprintf(site->values[site->n_values++], KS_KNOB_VALUE, "%s", value);
}

/* The end of a literal opened by quote at i (one past the closing quote; at a newline or the end if none). */
static size_t skip_quoted(const char *src, size_t n, size_t i, char quote)
{
	for (i++; i < n; i++) {
		if (src[i] == '\\' && i + 1 < n)
			i++;
		else if (src[i] == quote)
			return i + 1;
		else if (src[i] == '\n')
			return i;
	}
	return n;
}

/* The end of a raw string R"delim( ... )delim" whose quote is at i; 0 when it is not one. */
static size_t skip_raw(const char *src, size_t n, size_t i)
{
	size_t d = i + 1, k;

	while (d < n && d - i - 1 <= 16 && src[d] != '(') {
		if (is_space(src[d]) || src[d] == '\n' || src[d] == ')' || src[d] == '\\' || src[d] == '"')
			return 0;
		d++;
	}
	if (d >= n || src[d] != '(')
		return 0;
	for (k = d + 1; k < n; k++)
		if (src[k] == ')' && k + (d - i - 1) + 1 < n &&
		    !memcmp(src + k + 1, src + i + 1, d - i - 1) && src[k + 1 + (d - i - 1)] == '"')
			return k + 2 + (d - i - 1);
	return n;
}

/* The end of a comment opened at i ("//" or "/-*"), the line end of a line comment excluded. */
static size_t skip_comment(const char *src, size_t n, size_t i)
{
	if (src[i + 1] == '/') {
		for (i += 2; i < n; i++) {
			if (src[i] == '\\' && i + 1 < n && src[i + 1] == '\n')
				i++;
			else if (src[i] == '\n')
				return i;
		}
		return n;
	}
	for (i += 2; i + 1 < n; i++)
		if (src[i] == '*' && src[i + 1] == '/')
			return i + 2;
	return n;
}

/* The end of the preprocessor line starting at i (its newline excluded). */
static size_t skip_directive(const char *src, size_t n, size_t i)
{
	while (i < n) {
		if (src[i] == '/' && i + 1 < n && (src[i + 1] == '*' || src[i + 1] == '/')) {
			i = skip_comment(src, n, i);
		} else if (src[i] == '"' || src[i] == '\'') {
			i = skip_quoted(src, n, i, src[i]);
		} else if (src[i] == '\\' && i + 1 < n && src[i + 1] == '\n') {
			i += 2;
		} else if (src[i] == '\\' && i + 2 < n && src[i + 1] == '\r' && src[i + 2] == '\n') {
			i += 3;
		} else if (src[i] == '\n') {
			return i;
		} else {
			i++;
		}
	}
	return n;
}

static size_t skip_spaces(const char *src, size_t end, size_t i)
{
	while (i < end && is_space(src[i]))
		i++;
	return i;
}

static int word_at(const char *src, size_t end, size_t i, const char *word)
{
	size_t len = strlen(word);

	return i + len <= end && !memcmp(src + i, word, len) &&
	       (i + len == end || !is_ident_char(src[i + len]));
}

/* The unroll counts a marked loop may take: "default" is no pragma (the compiler's choice). */
static const char *const unroll_values[] = { "default", "full", "1", "2", "4", "8" };

static struct ks_knob_site *unroll_site(struct scan *s, size_t at, size_t len, const char *current)
{
	struct ks_knob_site *site = new_site(s, KS_KNOB_UNROLL, at, len);

	if (!site)
		return NULL;
	snprintf(site->label, sizeof(site->label), "#pragma unroll");
	snprintf(site->current, sizeof(site->current), "%s", current);
	for (size_t v = 0; v < sizeof(unroll_values) / sizeof(*unroll_values); v++)
		add_value(site, unroll_values[v]);
	return site;
}

/* Whether [i, end) is a comment "/-* ksearch:unroll *-/" and then only blanks to the line's end. */
static int unroll_marker(const char *src, size_t n, size_t i, size_t end)
{
	size_t body = skip_spaces(src, end, i + 2), k;

	if (end < i + 4 || src[end - 2] != '*' || src[end - 1] != '/' || body + 14 > end - 2 ||
	    memcmp(src + body, "ksearch:unroll", 14))
		return 0;
	if (skip_spaces(src, end, body + 14) != end - 2)
		return 0;
	k = skip_spaces(src, n, end);
	return k == n || src[k] == '\n';
}

/*
 * `#pragma unroll N /-* ksearch:unroll *-/` in the directive [i, end):
 * the knob is the text from the '#' to the marker, N a number or nothing.
 */
static void unroll_directive(struct scan *s, size_t i, size_t end)
{
	const char *src = s->src;
	size_t hash = i, count_at, c, k, count_end;
	char current[8];

	i = skip_spaces(src, end, i + 1);
	if (!word_at(src, end, i, "pragma"))
		return;
	i = skip_spaces(src, end, i + 6);
	if (!word_at(src, end, i, "unroll"))
		return;
	count_at = i + 6;
	for (c = count_at; c + 1 < end && !(src[c] == '/' && src[c + 1] == '*'); c++)
		if (!is_space(src[c]) && !is_digit(src[c]))
			return; /* a param or an expression as the count: not ours to change */
	if (c + 1 >= end || !unroll_marker(src, end, c, skip_comment(src, end, c)))
		return;
	k = skip_spaces(src, c, count_at);
	for (count_end = c; count_end > k && is_space(src[count_end - 1]);)
		count_end--;
	if (count_end - k >= sizeof(current))
		return;
	snprintf(current, sizeof(current), "%.*s", (int)(count_end - k), src + k);
	unroll_site(s, hash, c - hash, current[0] ? current : "full");
}

static void lex(struct scan *s)
{
	const char *src = s->src;
	size_t n = s->n, i = 0, j;
	int line_start = 1;

	while (i < n) {
		char c = src[i];

		if (c == '\n') {
			line_start = 1;
			i++;
		} else if (is_space(c)) {
			i++;
		} else if (c == '/' && i + 1 < n && (src[i + 1] == '/' || src[i + 1] == '*')) {
			j = skip_comment(src, n, i);
			/* a marked loop with no pragma yet: the marker alone on its line */
			if (line_start && src[i + 1] == '*' && unroll_marker(src, n, i, j))
				unroll_site(s, i, 0, "default");
			i = j; /* a comment keeps line_start: "/-* x *-/ #define" is not C */
		} else if (c == '#' && line_start) {
			j = skip_directive(src, n, i);
			unroll_directive(s, i, j);
			i = j;
		} else if (is_ident_start(c)) {
			j = i;
			while (j < n && is_ident_char(src[j]))
				j++;
			line_start = 0;
			if (j < n && src[j] == '"' && src[j - 1] == 'R' &&
			    (j - i == 1 || (j - i == 2 && strchr("LuU", src[i])) ||
			     (j - i == 3 && !memcmp(src + i, "u8", 2)))) {
				size_t end = skip_raw(src, n, j);

				if (end) {
					i = end; /* a raw string: never an asm template of ours, never code */
					continue;
				}
			}
			push_tok(s, T_IDENT, i, j - i);
			i = j;
		} else if (is_digit(c) || (c == '.' && i + 1 < n && is_digit(src[i + 1]))) {
			j = i + 1;
			while (j < n) {
				if (is_ident_char(src[j]) || src[j] == '.')
					j++;
				else if ((src[j] == '+' || src[j] == '-') && strchr("eEpP", src[j - 1]))
					j++;
				else if (src[j] == '\'' && j + 1 < n && is_ident_char(src[j + 1]))
					j++;
				else
					break;
			}
			line_start = 0;
			push_tok(s, T_NUMBER, i, j - i);
			i = j;
		} else if (c == '"' || c == '\'') {
			j = skip_quoted(src, n, i, c);
			line_start = 0;
			push_tok(s, c == '"' ? T_STRING : T_NUMBER, i, j - i);
			i = j;
		} else {
			line_start = 0;
			push_tok(s, T_PUNCT, i, 1);
			i++;
		}
	}
}

static int tok_is(const struct scan *s, size_t t, enum tok_kind kind, const char *text)
{
	return t < s->n_toks && s->toks[t].kind == kind && s->toks[t].len == strlen(text) &&
	       !memcmp(s->src + s->toks[t].at, text, s->toks[t].len);
}

static int punct(const struct scan *s, size_t t, char c)
{
	return t < s->n_toks && s->toks[t].kind == T_PUNCT && s->src[s->toks[t].at] == c;
}

/* The token closing the parenthesis opened at token open, within ATTR_TOKENS and no ; { }; 0 when none. */
static size_t close_paren(const struct scan *s, size_t open)
{
	int depth = 0;

	for (size_t t = open; t < s->n_toks && t - open < ATTR_TOKENS; t++) {
		if (punct(s, t, '('))
			depth++;
		else if (punct(s, t, ')') && --depth == 0)
			return t;
		else if (punct(s, t, ';') || punct(s, t, '{') || punct(s, t, '}'))
			return 0;
	}
	return 0;
}

/* ---- kernels: __launch_bounds__ ---- */

struct kernel {
	size_t name;	     /* token of the name; 0: none found */
	size_t lb_open;	     /* token of __launch_bounds__'s '('; 0: none */
	size_t lb_close;     /* its ')' */
	size_t lb_commas[3]; /* the top-level commas inside */
	size_t n_lb_commas;
	int maxnreg; /* has __maxnreg__ */
};

static int is_attribute(const struct scan *s, size_t t)
{
	static const char *const attrs[] = { "__launch_bounds__", "__maxnreg__",
					     "__cluster_dims__",  "__attribute__",
					     "__declspec",	  "__align__",
					     "alignas",		  "__nv_register_params__" };

	for (size_t i = 0; i < sizeof(attrs) / sizeof(*attrs); i++)
		if (tok_is(s, t, T_IDENT, attrs[i]))
			return 1;
	return 0;
}

/* The declaration after the __global__ at token g. */
static void read_kernel(const struct scan *s, size_t g, struct kernel *k)
{
	memset(k, 0, sizeof(*k));
	for (size_t t = g + 1; t < s->n_toks && t - g < DECL_TOKENS; t++) {
		if (punct(s, t, ';') || punct(s, t, '{') || punct(s, t, '}') || punct(s, t, '='))
			return;
		if (s->toks[t].kind != T_IDENT || !punct(s, t + 1, '('))
			continue;
		if (is_attribute(s, t)) {
			size_t close = close_paren(s, t + 1);

			if (!close)
				return;
			if (tok_is(s, t, T_IDENT, "__maxnreg__"))
				k->maxnreg = 1;
			if (tok_is(s, t, T_IDENT, "__launch_bounds__") && !k->lb_open) {
				int depth = 0;

				k->lb_open = t + 1;
				k->lb_close = close;
				for (size_t u = t + 1; u < close; u++) {
					if (punct(s, u, '('))
						depth++;
					else if (punct(s, u, ')'))
						depth--;
					else if (depth == 1 && punct(s, u, ',') && k->n_lb_commas < 3)
						k->lb_commas[k->n_lb_commas++] = u;
				}
			}
			t = close;
			continue;
		}
		k->name = t;
		return;
	}
}

static int same_name(const struct scan *s, size_t a, size_t b)
{
	return s->toks[a].len == s->toks[b].len &&
	       !memcmp(s->src + s->toks[a].at, s->src + s->toks[b].at, s->toks[a].len);
}

/*
 * The block of every launch of kernel (name, len) in the C of the params,
 * "(32 * WARPS)" or "(X) * (Y)", into maxt; 0 when there is none this way
 * (not launched, blocks that differ, a name other than a param, a call).
 */
static int derive_maxt(const struct ks_candidate *cand, const char *name, size_t len, char *maxt, size_t size)
{
	const struct ks_launch *first = NULL;
	size_t used = 0;

	for (size_t i = 0; i < cand->n_launches; i++) {
		const struct ks_launch *l = &cand->launches[i];

		if (strlen(l->kernel) != len || memcmp(l->kernel, name, len))
			continue;
		if (!first) {
			first = l;
			continue;
		}
		if (l->block_rank != first->block_rank)
			return 0;
		for (size_t d = 0; d < l->block_rank; d++)
			if (strcmp(l->block[d], first->block[d]))
				return 0;
	}
	if (!first || !first->block_rank)
		return 0;
	maxt[0] = 0;
	for (size_t d = 0; d < first->block_rank; d++) {
		const char *e = first->block[d];
		int w;

		for (size_t i = 0; e[i];) {
			if (is_ident_start(e[i])) {
				size_t j = i, p;

				while (is_ident_char(e[j]))
					j++;
				for (p = 0; p < cand->n_params; p++)
					if (strlen(cand->params[p].name) == j - i &&
					    !memcmp(cand->params[p].name, e + i, j - i))
						break;
				if (p == cand->n_params)
					return 0; /* an axis or a function: not a macro at compile time */
				i = j;
			} else if (is_digit(e[i]) || strchr(" +-*/%()", e[i])) {
				i++;
			} else {
				return 0;
			}
		}
		w = snprintf(maxt + used, size - used, "%s(%s)", d ? " * " : "", e);
		if (w < 0 || (size_t)w >= size - used)
			return 0;
		used += (size_t)w;
	}
	return 1;
}

static void kernel_sites(struct scan *s, const struct ks_candidate *cand)
{
	struct kernel *ks = ks_calloc(MAX_KERNELS, sizeof(*ks));
	size_t n = 0;

	for (size_t t = 2; t < s->n_toks && n < MAX_KERNELS; t++)
		if (tok_is(s, t, T_IDENT, "__global__") && tok_is(s, t - 2, T_IDENT, "extern") &&
		    tok_is(s, t - 1, T_STRING, "\"C\""))
			read_kernel(s, t, &ks[n++]);
	for (size_t i = 0; i < n; i++) {
		struct kernel *k = &ks[i];
		const struct tok *name = &s->toks[k->name];
		struct ks_knob_site *site = NULL;
		int dup = 0;

		if (!k->name || k->maxnreg)
			continue;
		for (size_t j = 0; j < n; j++)
			dup |= j != i && ks[j].name && same_name(s, k->name, ks[j].name);
		if (dup)
			continue;
		if (k->lb_open) {
			size_t arg0 = k->lb_open + 1;

			if (arg0 == (k->n_lb_commas ? k->lb_commas[0] : k->lb_close))
				continue; /* __launch_bounds__() */
			if (!k->n_lb_commas) {
				site = new_site(s, KS_KNOB_MINBLOCKS, s->toks[k->lb_close].at, 0);
				if (!site)
					break;
				snprintf(site->prefix, sizeof(site->prefix), ", ");
			} else {
				size_t m = k->lb_commas[0] + 1;
				size_t m_end = k->n_lb_commas > 1 ? k->lb_commas[1] : k->lb_close;
				const struct tok *mt = &s->toks[m];

				/* a literal MINB only: a param there is the family's own knob */
				if (m_end != m + 1 || mt->kind != T_NUMBER || mt->len > 4 ||
				    k->n_lb_commas > 2)
					continue;
				if (strspn(s->src + mt->at, "0123456789") < mt->len)
					continue;
				site = new_site(s, KS_KNOB_MINBLOCKS, mt->at, mt->len);
				if (!site)
					break;
				snprintf(site->current, sizeof(site->current), "%.*s", (int)mt->len,
					 s->src + mt->at);
			}
		} else {
			char maxt[KS_KNOB_AFFIX - 32];

			if (!cand || !derive_maxt(cand, s->src + name->at, name->len, maxt, sizeof(maxt)))
				continue;
			site = new_site(s, KS_KNOB_MINBLOCKS, name->at, 0);
			if (!site)
				break;
			snprintf(site->prefix, sizeof(site->prefix), "__launch_bounds__(%s, ", maxt);
			snprintf(site->suffix, sizeof(site->suffix), ") ");
		}
		snprintf(site->label, sizeof(site->label), "%.*s", (int)(name->len < 63 ? name->len : 63),
			 s->src + name->at);
		for (int m = 1; m <= 4; m++) {
			char v[4];

			/* an absent MINB is 1 to ptxas: adding 1 to a __launch_bounds__ would change nothing
			 */
			if (m == 1 && site->len == 0 && !site->suffix[0])
				continue;
			snprintf(v, sizeof(v), "%d", m);
			add_value(site, v);
		}
	}
	free(ks);
}

/* ---- intrinsics: loads and stores ---- */

/* Loads by coherence, weakest first: a load may become one of its class or a stronger one, never weaker. */
static const struct {
	const char *name;
	int class;
} loads[] = {
	{ "__ldg", 0 }, /* the read-only (non-coherent) path: the data never changes during the kernel */
	{ "__ldca", 1 }, { "__ldcs", 1 }, { "__ldlu", 1 }, /* cached in L1 */
	{ "__ldcg", 2 },				   /* L2 only: coherent with other blocks' stores */
};
static const char *const stores[] = { "__stwb", "__stcg", "__stcs", "__stwt" };

/* Whether the identifier at token t is a call of a free function (not a member, not qualified). */
static int free_call(const struct scan *s, size_t t)
{
	if (!punct(s, t + 1, '('))
		return 0;
	if (t == 0)
		return 1;
	if (punct(s, t - 1, '.') || punct(s, t - 1, ':'))
		return 0;
	if (punct(s, t - 1, '>') && t >= 2 && punct(s, t - 2, '-') &&
	    s->toks[t - 2].at + 1 == s->toks[t - 1].at)
		return 0;
	return 1;
}

static void intrinsic_sites(struct scan *s)
{
	for (size_t t = 0; t < s->n_toks; t++) {
		struct ks_knob_site *site;
		int cls = -1;
		size_t i;

		if (s->toks[t].kind != T_IDENT || s->toks[t].len < 5 || s->src[s->toks[t].at] != '_' ||
		    !free_call(s, t))
			continue;
		for (i = 0; i < sizeof(loads) / sizeof(*loads) && cls < 0; i++)
			if (tok_is(s, t, T_IDENT, loads[i].name))
				cls = loads[i].class;
		if (cls >= 0 && cls < 2) {
			if (!(site = new_site(s, KS_KNOB_LOAD, s->toks[t].at, s->toks[t].len)))
				return;
			snprintf(site->current, sizeof(site->current), "%.*s", (int)s->toks[t].len,
				 s->src + s->toks[t].at);
			snprintf(site->label, sizeof(site->label), "%s", site->current);
			for (i = 0; i < sizeof(loads) / sizeof(*loads); i++)
				if (loads[i].class >= cls && loads[i].class > 0)
					add_value(site, loads[i].name);
		}
		for (i = 0; i < sizeof(stores) / sizeof(*stores); i++) {
			if (!tok_is(s, t, T_IDENT, stores[i]))
				continue;
			if (!(site = new_site(s, KS_KNOB_STORE, s->toks[t].at, s->toks[t].len)))
				return;
			snprintf(site->current, sizeof(site->current), "%s", stores[i]);
			snprintf(site->label, sizeof(site->label), "%s", stores[i]);
			for (size_t v = 0; v < sizeof(stores) / sizeof(*stores); v++)
				add_value(site, stores[v]);
		}
	}
}

/* ---- inline PTX: the L1 eviction priority of ld.global ---- */

static const char *const evictions[] = { "", ".L1::no_allocate", ".L1::evict_first", ".L1::evict_last" };

/* One string of an asm statement, [at, end) between its quotes. */
static void ptx_string(struct scan *s, size_t at, size_t end)
{
	static const char *const kept[] = { ".L1::no_allocate", ".L1::evict_first", ".L1::evict_last",
					    ".L1::evict_normal", ".L1::evict_unchanged" };
	const char *src = s->src;

	for (size_t p = at; p + 9 <= end; p++) {
		size_t q = p + 9, hint = 0;
		int nc = 0;
		struct ks_knob_site *site;

		if (memcmp(src + p, "ld.global", 9))
			continue;
		/* the instruction starts here: after a separator, or after a "\n" or "\t" escape */
		if (p > at && !strchr(" {;@", src[p - 1]) &&
		    !(p >= at + 2 && (src[p - 1] == 'n' || src[p - 1] == 't') && src[p - 2] == '\\'))
			continue;
		if (q + 4 <= end && !memcmp(src + q, ".nc.", 4)) {
			nc = 1;
			q += 3;
		}
		for (size_t k = 0; k < sizeof(kept) / sizeof(*kept) && !hint; k++) {
			size_t len = strlen(kept[k]);

			if (q + len < end && !memcmp(src + q, kept[k], len) && src[q + len] == '.')
				hint = len;
		}
		/* then the vector or the type at once: no cache operator, no L2 qualifier we would reorder */
		if (q + hint + 2 >= end || src[q + hint] != '.' ||
		    !(strchr("vbsuf", src[q + hint + 1]) && is_digit(src[q + hint + 2])))
			continue;
		if (!(site = new_site(s, KS_KNOB_PTX_LOAD, q, hint)))
			return;
		snprintf(site->label, sizeof(site->label), "%s", nc ? "ld.global.nc" : "ld.global");
		snprintf(site->current, sizeof(site->current), "%.*s", (int)hint, src + q);
		for (size_t v = 0; v < sizeof(evictions) / sizeof(*evictions); v++)
			add_value(site, evictions[v]);
		p = q + hint;
	}
}

static void ptx_sites(struct scan *s)
{
	for (size_t t = 0; t < s->n_toks; t++) {
		size_t open = t + 1, close;

		if (!tok_is(s, t, T_IDENT, "asm") && !tok_is(s, t, T_IDENT, "__asm__") &&
		    !tok_is(s, t, T_IDENT, "__asm"))
			continue;
		while (tok_is(s, open, T_IDENT, "volatile") || tok_is(s, open, T_IDENT, "__volatile__") ||
		       tok_is(s, open, T_IDENT, "inline") || tok_is(s, open, T_IDENT, "goto"))
			open++;
		if (!punct(s, open, '(') || !(close = close_paren(s, open)))
			continue;
		/* the template: the strings before the first ':' */
		for (size_t u = open + 1; u < close && s->toks[u].kind == T_STRING; u++) {
			const struct tok *str = &s->toks[u];

			if (str->len >= 2 && s->src[str->at + str->len - 1] == '"')
				ptx_string(s, str->at + 1, str->at + str->len - 1);
		}
		t = close;
	}
}

/* ---- finding and editing ---- */

static int by_offset(const void *a, const void *b)
{
	const struct ks_knob_site *x = a, *y = b;

	return x->at < y->at ? -1 : x->at > y->at;
}

void ks_knobs_find(const char *source, const struct ks_candidate *cand, struct ks_knob_site **sites,
		   size_t *n_sites)
{
	struct scan s = { .src = source, .n = strlen(source) };
	size_t at = 0;
	int line = 1;

	lex(&s);
	kernel_sites(&s, cand);
	intrinsic_sites(&s);
	ptx_sites(&s);
	free(s.toks);
	KS_QSORT(s.sites, s.n_sites, by_offset);
	for (size_t i = 0; i < s.n_sites; i++) {
		for (; at < s.sites[i].at; at++)
			line += source[at] == '\n';
		s.sites[i].line = line;
	}
	*sites = s.sites;
	*n_sites = s.n_sites;
}

void ks_knob_edit_of(const struct ks_knob_site *site, int k, struct ks_knob_edit *edit)
{
	const char *value = k >= 0 && k < site->n_values ? site->values[k] : site->current;

	edit->at = site->at;
	edit->len = site->len;
	if (site->kind == KS_KNOB_UNROLL && !strcmp(value, "default"))
		edit->text[0] = 0;
	else if (site->kind == KS_KNOB_UNROLL)
		snprintf(edit->text, sizeof(edit->text), "#pragma unroll %s%s",
			 strcmp(value, "full") ? value : "", strcmp(value, "full") ? " " : "");
	else
		snprintf(edit->text, sizeof(edit->text), "%s%s%s", site->prefix, value, site->suffix);
}

char *ks_knobs_apply(const char *source, const struct ks_knob_edit *edits, size_t n_edits)
{
	size_t n = strlen(source), from = 0;
	struct ks_strbuf out;

	for (size_t i = 0; i < n_edits; i++) {
		if (edits[i].at < from || edits[i].at > n || edits[i].len > n - edits[i].at)
			return NULL;
		from = edits[i].at + edits[i].len;
	}
	ks_strbuf_init(&out);
	from = 0;
	for (size_t i = 0; i < n_edits; i++) {
		ks_strbuf_add(&out, source + from, edits[i].at - from);
		ks_strbuf_adds(&out, edits[i].text);
		from = edits[i].at + edits[i].len;
	}
	ks_strbuf_add(&out, source + from, n - from);
	return ks_strbuf_detach(&out);
}

/* ---- the mutator ---- */

struct knobs {
	struct ks_mutator iface;
	double share;
	uint64_t made[KS_KNOB_KINDS]; /* children proposed in this run, by knob */
};

/*
 * Set a knob of the parent's source: site s to its value v, or, for a
 * load or store and when all is set, every site of the same intrinsic.
 * Returns 0 with p filled, 1 when that source is some family's already,
 * -1 when the archive failed.
 */
static int propose_change(struct knobs *m, struct ks_mutator_host *host, size_t fam, uint64_t parent,
			  const struct ks_knob_site *sites, size_t n_sites, size_t s, int v, int all,
			  struct ks_proposal *p, struct ks_error *err)
{
	const struct ks_family *f = ks_mutator_host_family(host, fam);
	const struct ks_knob_site *site = &sites[s];
	struct ks_knob_edit *edits = ks_calloc(n_sites, sizeof(*edits));
	size_t n_edits = 0, index = 0;
	int is_new = 0, ret = 1;
	char *source;

	/* the other sites of the intrinsic have the same list of values: each takes the one site s takes */
	for (size_t i = 0; i < n_sites; i++) {
		if (i != s &&
		    !(all && sites[i].kind == site->kind && !strcmp(sites[i].current, site->current)))
			continue;
		for (int k = 0; k < sites[i].n_values; k++)
			if (!strcmp(sites[i].values[k], site->values[v])) {
				ks_knob_edit_of(&sites[i], k, &edits[n_edits++]);
				break;
			}
	}
	source = ks_knobs_apply(f->cand.source, edits, n_edits);
	free(edits);
	if (!source)
		return 1;
	if (ks_mutator_host_add_family(host, "knob", source, f->strategy, parent, &index, &is_new, err) < 0)
		ret = -1;
	else if (is_new)
		ret = 0;
	free(source);
	if (ret)
		return ret;
	p->family = index;
	p->parents[0] = parent;
	p->n_parents = 1;
	p->strategy = f->strategy;
	snprintf(p->mutation, sizeof(p->mutation), "knob");
	m->made[site->kind]++;
	ks_mutator_host_log(host, json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:i, s:I}", "event",
					    "knob", "family", ks_mutator_host_family(host, index)->name,
					    "parent_family", f->name, "parent", (json_int_t)parent, "knob",
					    ks_knob_kind_name(site->kind), "label", site->label, "from",
					    site->current, "to", site->values[v], "line", site->line, "sites",
					    (json_int_t)n_edits));
	return 0;
}

static int knobs_propose(void *ctx, struct ks_mutator_host *host, struct ks_proposal *p, struct ks_error *err)
{
	struct knobs *m = ctx;
	struct ks_pcg32 *rng = ks_mutator_host_rng(host);
	struct ks_parents pk;
	int ret = 1;

	/* no draw at all with a share of 0: the other mutators make the proposals they made without it */
	if (m->share <= 0 || ks_pcg32_double(rng) >= m->share)
		return 1;
	ks_mutator_host_parents(host, &pk);
	for (int attempt = 0; pk.usable && attempt < PARENT_TRIES && ret == 1; attempt++) {
		size_t a = ks_mutator_host_pick_parent(host, rng, &pk);
		size_t fam = (size_t)pk.family[a];
		const struct ks_family *f = ks_mutator_host_family(host, fam);
		struct ks_knob_site *sites = NULL;
		size_t n_sites = 0;

		if (f->broken || ks_mutator_host_params_of(host, pk.elites[a].id, fam, p->params) < 0)
			continue;
		ks_knobs_find(f->cand.source, &f->cand, &sites, &n_sites);
		/* a source with no knob is passed over: another parent may have one */
		for (int k = 0; n_sites && k < CHANGE_TRIES && ret == 1; k++) {
			size_t s = ks_pcg32_bounded(rng, (uint32_t)n_sites);
			int v = (int)ks_pcg32_bounded(rng, (uint32_t)sites[s].n_values);
			int all = (sites[s].kind == KS_KNOB_LOAD || sites[s].kind == KS_KNOB_STORE) &&
				  ks_pcg32_bounded(rng, 2);

			ret = propose_change(m, host, fam, pk.elites[a].id, sites, n_sites, s, v, all, p,
					     err);
		}
		free(sites);
	}
	ks_parents_release(&pk);
	return ret;
}

static int knobs_start(void *ctx, struct ks_mutator_host *host, struct ks_error *err)
{
	struct knobs *m = ctx;

	(void)host;
	(void)err;
	memset(m->made, 0, sizeof(m->made));
	return 0;
}

static void knobs_summary(void *ctx, FILE *out)
{
	struct knobs *m = ctx;
	uint64_t total = 0;

	for (int k = 0; k < KS_KNOB_KINDS; k++)
		total += m->made[k];
	if (!total)
		return;
	fprintf(out, "knob mutator: %llu new source%s (", (unsigned long long)total, total == 1 ? "" : "s");
	for (int k = 0, first = 1; k < KS_KNOB_KINDS; k++)
		if (m->made[k]) {
			fprintf(out, "%s%s %llu", first ? "" : ", ", kind_names[k],
				(unsigned long long)m->made[k]);
			first = 0;
		}
	fprintf(out, ")\n");
}

static void knobs_free(void *ctx)
{
	free(ctx);
}

static const char *const mutations[] = { "knob", NULL };

struct ks_mutator *ks_mutator_knobs_new(double share)
{
	struct knobs *m = ks_calloc(1, sizeof(*m));

	m->share = share;
	m->iface = (struct ks_mutator){
		.name = "knob",
		.mutations = mutations,
		.ctx = m,
		.start = knobs_start,
		.propose = knobs_propose,
		.summary = knobs_summary,
		.free = knobs_free,
	};
	return &m->iface;
}

/* a share of --knob-share; not given: 0.1 beside map-elites, none beside a baseline (it stays itself) */
const struct ks_mutator *ks_mutator_make_knobs(const struct ks_mutator_settings *settings)
{
	double share = settings->knob_share;

	if (share < 0)
		share = strcmp(settings->search, "map-elites") ? 0 : 0.1;
	return share > 0 ? ks_mutator_knobs_new(share) : NULL;
}
