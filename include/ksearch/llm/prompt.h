/*
 * prompt.h - the LLM mutator's prompt templates.
 *
 * A template is Markdown text (prompts/<name>.md) with {{name}}
 * placeholders; prompts/README.md lists each template's placeholders.
 * This module loads templates and renders them:
 *
 *   - {{name}} (blanks allowed inside the braces, name a C identifier) is
 *     replaced by the value of name; a placeholder with no value is an
 *     error naming it, so a renamed variable cannot silently send the LLM
 *     an empty section.  Values given but not used are fine: templates
 *     differ in what they need.
 *   - {{{{ is a literal {{.  Any other {{ that does not open a placeholder
 *     is an error.  Single braces and }} need no escape.
 *   - Values are inserted as they are and never rendered again, so a
 *     kernel or a strategy holding "{{" is safe.  Strategy prompts are
 *     values (the LLM rewrites them), never templates.
 *
 * Rendering is linear in the output, whose size is capped at
 * KS_PROMPT_MAX_BYTES.
 */
#ifndef KSEARCH_PROMPT_H
#define KSEARCH_PROMPT_H

#include <stddef.h>

#include "ksearch/base/error.h"

/* A rendered prompt larger than this is an error, not a request. */
#define KS_PROMPT_MAX_BYTES ((size_t)16 << 20)

struct ks_prompt_var {
	char *name;
	char *value;
};

/* name -> value pairs; owns copies of both. */
struct ks_prompt_vars {
	struct ks_prompt_var *items;
	size_t n;
	size_t alloc;
};

void ks_prompt_vars_init(struct ks_prompt_vars *vars);
void ks_prompt_vars_release(struct ks_prompt_vars *vars);
/* Copy name and value in; a second set of a name replaces its value. */
void ks_prompt_vars_set(struct ks_prompt_vars *vars, const char *name, const char *value);
void ks_prompt_vars_setf(struct ks_prompt_vars *vars, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), nonnull(3)));
/* The value of name (borrowed, valid until the next set or release), or NULL. */
const char *ks_prompt_vars_get(const struct ks_prompt_vars *vars, const char *name);

/*
 * Render template_text with vars into *out (caller frees).  Errors say the
 * template line: "line 12: unknown placeholder {{parent_sorce}} (did you
 * mean {{parent_source}}?)"; callers prefix the template's name.
 */
int ks_prompt_render(const char *template_text, const struct ks_prompt_vars *vars, char **out,
		     struct ks_error *err);

/*
 * Read dir/<name>.md into *text (caller frees).  name is a relative path
 * without ".md", e.g. "mutate" or "strategies/vector_loads"; names that
 * could leave dir ("..", a leading "/") are refused.
 */
int ks_prompt_load(const char *dir, const char *name, char **text, struct ks_error *err);

/*
 * The templates in dir/<subdir>/ as names ks_prompt_load() takes
 * ("strategies/vector_loads"), sorted; README.md is not a template.  The
 * caller frees with ks_prompt_list_free().  An empty or missing folder is
 * an error.
 */
int ks_prompt_list(const char *dir, const char *subdir, char ***names, size_t *n_names, struct ks_error *err);
void ks_prompt_list_free(char **names, size_t n_names);

#endif
