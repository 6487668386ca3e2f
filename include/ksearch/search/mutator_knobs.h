/*
 * mutator_knobs.h - the knob mutator: a new source that differs from an
 * elite's by one compiler-facing knob, for any family (a seed, an LLM's
 * kernel, an earlier knob child).
 *
 * The knobs, each found only where the source already has it, outside
 * comments, strings and preprocessor lines unless said:
 *
 *   minblocks  the minimum blocks per SM of an extern "C" __global__
 *              kernel's __launch_bounds__(MAXT, MINB), 1 to 4 (a register
 *              cap of 65536 / (MAXT * MINB) for ptxas).  MAXT is kept as
 *              written; a literal MINB is replaced, an absent one added; a
 *              MINB that is not a literal (a param) is left alone, so the
 *              family's design space stays.  A kernel without
 *              __launch_bounds__ gets one when every launch of it in the
 *              plan has the same block and that block names only params
 *              and integers with + - * / % ( ): MAXT is then the block's
 *              product, written in the params (macros at compile time), so
 *              it holds for every combination.  NVRTC 13 refuses
 *              __maxnreg__ beside __launch_bounds__ (even with no MINB), so
 *              register caps come from MINB only, and a kernel with
 *              __maxnreg__ is left alone.  A kernel declared twice is left
 *              alone (its declarations must agree).
 *   load       the cache hint of a load intrinsic, never to a weaker
 *              coherence: __ldg (read-only data) may become __ldca, __ldcs,
 *              __ldlu or __ldcg; __ldca, __ldcs and __ldlu (L1) each other
 *              or __ldcg; __ldcg (L2, data other blocks write) and __ldcv
 *              stay.  One call, or every call with the same intrinsic.
 *   store      a store intrinsic among __stwb, __stcg, __stcs and __stwt
 *              (all write the same memory; they differ in what stays in
 *              cache).  One call, or every call of the same intrinsic.
 *   ptx_load   in an asm statement's strings, the L1 eviction priority of
 *              an ld.global or ld.global.nc with no cache operator:
 *              none, .L1::no_allocate, .L1::evict_first or .L1::evict_last
 *              (PTX ISA, ld: hints only, sm_70 and later).
 *   unroll     a loop marked for it (operators/README.md): the marker
 *              comment `/-* ksearch:unroll *-/` alone on the line before
 *              the loop (no pragma: the compiler's choice, "default"), or
 *              `#pragma unroll N /-* ksearch:unroll *-/` (N a number, or
 *              nothing: "full").  The count becomes default, full, 1, 2,
 *              4 or 8, the marker kept.  A count that is not a number (a
 *              param) is left alone.
 *
 * Every edit changes performance hints only, never what the kernel
 * computes.  Finding is linear in the source and bounded
 * (KS_KNOB_MAX_SITES); any text, however malformed, gives sites or none,
 * never a crash.
 */
#ifndef KSEARCH_MUTATOR_KNOBS_H
#define KSEARCH_MUTATOR_KNOBS_H

#include <stddef.h>

#include "ksearch/op/candidate.h"
#include "ksearch/search/mutator.h"

/*
 * The knob mutator: with probability share (0 to 1) per proposal it is
 * asked for, a knob child of a parent picked by the search's mix (the
 * host's generator; share 0 draws nothing, so the other mutators'
 * proposals are exactly those of a search without it).  The child is a
 * new family "knob-<n>" with the parent family's strategy, proposed at the
 * parent's params with mutation "knob" and the parent's id; a source that
 * is some family's already is never proposed.  Free with
 * ks_mutator_free().
 */
struct ks_mutator *ks_mutator_knobs_new(double share);

enum ks_knob_kind {
	KS_KNOB_MINBLOCKS,
	KS_KNOB_LOAD,
	KS_KNOB_STORE,
	KS_KNOB_PTX_LOAD,
	KS_KNOB_UNROLL,
	KS_KNOB_KINDS
};

/* "minblocks", "load", ... */
const char *ks_knob_kind_name(enum ks_knob_kind kind);

#define KS_KNOB_MAX_SITES 2048 /* sites found in one source at most (the first ones) */
#define KS_KNOB_MAX_VALUES 5
#define KS_KNOB_VALUE 24  /* a value's text, NUL included */
#define KS_KNOB_AFFIX 240 /* the text around a value, NUL included */
#define KS_KNOB_TEXT 512  /* an edit's text, NUL included */

/*
 * One knob of a source: the bytes [at, at + len) hold its value now
 * (len 0: it is absent and goes in at `at`); setting it to values[k]
 * writes prefix values[k] suffix there.
 */
struct ks_knob_site {
	enum ks_knob_kind kind;
	size_t at, len;
	int line;		     /* 1-based, of at */
	char label[64];		     /* the kernel, the intrinsic or "ld.global": for messages */
	char current[KS_KNOB_VALUE]; /* the value now: "" when absent (a MINB, a PTX hint) */
	char values[KS_KNOB_MAX_VALUES][KS_KNOB_VALUE]; /* the others it may take */
	int n_values;
	char prefix[KS_KNOB_AFFIX], suffix[8];
};

struct ks_knob_edit {
	size_t at, len;
	char text[KS_KNOB_TEXT];
};

/*
 * The knobs of source, in source order, into *sites (caller frees; NULL
 * when none).  cand, the source's parsed ksearch block, may be NULL: then
 * a kernel without __launch_bounds__ has no minblocks knob.
 */
void ks_knobs_find(const char *source, const struct ks_candidate *cand, struct ks_knob_site **sites,
		   size_t *n_sites);
/* The edit that sets site to its k-th value. */
void ks_knob_edit_of(const struct ks_knob_site *site, int k, struct ks_knob_edit *edit);
/*
 * source with the edits made (sorted by at, none overlapping; caller
 * frees); NULL when they overlap, are out of order or reach past the end.
 */
char *ks_knobs_apply(const char *source, const struct ks_knob_edit *edits, size_t n_edits);

#endif
