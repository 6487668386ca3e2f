/*
 * mutators.c - the table of mutators `evolve` runs: one row each, in the
 * order the search asks them for a proposal (the first that proposes wins
 * the slot).  A row names a mutator; its file defines
 * ks_mutator_make_<name>(), which says from the settings whether it takes
 * part in a run.  The row also declares that function, and meson compiles
 * every src/search/mutator_*.c, so a new mutator is its file and its row
 * here (HACKING.md, Adding a mutator).
 */
#include "ksearch/search/mutator.h"

#include <stdlib.h>

#include "ksearch/base/util.h"

/* the LLM's kernels first, then a share of knob children, then the built-in moves --search picks */
#define KS_MUTATORS(X)                                                                                       \
	X(llm)                                                                                               \
	X(knobs)                                                                                             \
	X(param)                                                                                             \
	X(random)                                                                                            \
	X(greedy)

#define DECLARE(name) ks_mutator_make_fn ks_mutator_make_##name;
KS_MUTATORS(DECLARE)
#undef DECLARE

#define ROW(name) ks_mutator_make_##name,
static ks_mutator_make_fn *const table[] = { KS_MUTATORS(ROW) };
#undef ROW

void ks_mutators_make(const struct ks_mutator_settings *settings, const struct ks_mutator ***list, size_t *n)
{
	const size_t rows = sizeof(table) / sizeof(table[0]);

	*list = ks_calloc(rows, sizeof(**list));
	*n = 0;
	for (size_t i = 0; i < rows; i++) {
		const struct ks_mutator *m = table[i](settings);

		if (m)
			(*list)[(*n)++] = m;
	}
}

void ks_mutators_free(const struct ks_mutator **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ks_mutator_free(list[i]);
	free(list);
}
