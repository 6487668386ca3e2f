/*
 * answer.h - turning an LLM's reply into a candidate source.
 *
 * The LLM mutator asks for either a whole new file or SEARCH/REPLACE edits
 * of the parent (prompts/system.md teaches both).  This module owns the
 * reading of the reply: it finds the code, applies the edits, and when it
 * cannot, says why in one line that names the edit, so the reason can go
 * back to the LLM in a repair turn and into the archive.
 *
 * The reply is untrusted text.  Whatever it holds, ks_answer_extract()
 * returns (never crashes, never loops), its work is linear in the size of
 * reply and parent, and replies or parents over KS_ANSWER_MAX_BYTES are
 * refused before any work is done.
 *
 * How a reply is read, in order:
 *
 *  1. Edits.  If the reply holds a line "<<<<<<< SEARCH" anywhere (inside
 *     a code fence or not), it is an edit answer, and every fenced block is
 *     ignored, even one holding a whole file: edits are what the prompts ask
 *     for first, and a model that adds a file after its edits usually shows
 *     an excerpt or the parent, not a better file.  Each edit is
 *         <<<<<<< SEARCH
 *         lines of the parent
 *         =======
 *         replacement lines
 *         >>>>>>> REPLACE
 *     (5 to 9 marker characters, the word in any case, surrounding blanks
 *     ignored; a stray ======= outside an edit is Markdown).  All edits are
 *     checked for shape first (terminated, non-empty SEARCH, at most
 *     KS_ANSWER_MAX_EDITS), then applied in order, each to the result of the
 *     one before.  The SEARCH lines must match a run of whole lines of that
 *     text exactly once: first compared exactly (line endings aside), then,
 *     if nothing matched, with leading and trailing whitespace of each line
 *     ignored and blank lines skipped on both sides.  Found twice or more in
 *     either pass is ambiguous, and a failure.  The matched lines are
 *     replaced by the REPLACE lines, written with the parent's line ending.
 *
 *  2. A whole file.  Otherwise the candidate is the LAST fenced code block
 *     (``` or ~~~, language cuda, cu, cuh, cpp, c++, cxx, cc, c, h, hpp or
 *     none) whose text holds the ksearch launch block "/" "* ksearch".  The
 *     last, not the longest: models draft or quote first and give the final
 *     version at the end.  Blocks in other languages (json, python, text,
 *     ...) and blocks without the launch block are never taken.  If the
 *     chosen block is not closed, the reply was cut off, and that is a
 *     failure rather than a truncated kernel.
 *
 *  3. A bare file.  A reply with no fence at all whose first non-blank line
 *     opens the ksearch block is taken whole.
 *
 *  Anything else fails: "no code block and no SEARCH/REPLACE edits".
 *
 * CRLF in the reply is read as LF.  A whole-file result has LF endings.
 */
#ifndef KSEARCH_ANSWER_H
#define KSEARCH_ANSWER_H

#include <stddef.h>

#include "ksearch/base/error.h"

/* Larger replies or parents are refused: no kernel is a megabyte. */
#define KS_ANSWER_MAX_BYTES ((size_t)1 << 20)
/* More edits than this is a rewrite; the prompts ask for the whole file then. */
#define KS_ANSWER_MAX_EDITS 64

enum ks_answer_form {
	KS_ANSWER_NONE,	      /* no usable form was found */
	KS_ANSWER_WHOLE_FILE, /* a fenced block (or the bare reply) is the new file */
	KS_ANSWER_EDITS,      /* SEARCH/REPLACE edits applied to the parent */
};

/*
 * What ks_answer_extract() found, filled on success and, as far as it got,
 * on failure (so a failure can be recorded with its form and edit number).
 */
struct ks_answer_info {
	enum ks_answer_form form;
	size_t n_blocks;     /* fenced code blocks in the reply, any language */
	size_t chosen_block; /* 1-based number of the block taken as the file; 0 if none */
	size_t n_edits;	     /* SEARCH/REPLACE edits in the reply */
	size_t n_tolerant;   /* edits that matched only when whitespace was ignored */
	/* tolerant[i]: edit i+1 matched only when whitespace was ignored */
	unsigned char tolerant[KS_ANSWER_MAX_EDITS];
	size_t failed_edit; /* 1-based number of the edit that did not apply; 0 if none */
	int unchanged;	    /* the new source is byte-for-byte the parent */
};

/*
 * Read reply text (NUL-terminated) and produce the new candidate source in
 * *new_source (caller frees; NULL on failure).  parent_source may be NULL
 * when there is no parent; an edit answer then fails.  info may be NULL.
 * Returns 0, or -1 with err saying why, e.g.
 *   "edit 2: SEARCH text not found in the parent as changed by edit 1 ..."
 *   "edit 1: SEARCH text found 3 times in the parent ..."
 *   "edit 1: unterminated edit block ..."
 *   "no code block and no SEARCH/REPLACE edits in the answer"
 */
int ks_answer_extract(const char *text, const char *parent_source, char **new_source,
		      struct ks_answer_info *info, struct ks_error *err);

/* "none", "whole_file", "edits": the form's name for logs and the archive. */
const char *ks_answer_form_name(enum ks_answer_form form);

#endif
