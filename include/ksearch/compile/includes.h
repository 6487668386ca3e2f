/*
 * includes.h - what a candidate's source may ask the compiler to read.
 *
 * NVRTC reads any file a directive names: `#include "/proc/self/environ"`
 * or `#include "/home/me/.ssh/id_rsa"` puts the file's text into the
 * compile log, and the log goes into the archive and into the next LLM
 * prompt.  A candidate is one self-contained file: it may include the
 * toolkit's headers by their plain names in angle brackets
 * (`#include <cuda_bf16.h>`, `<cuda/pipeline>`), nothing else.
 *
 * ks_includes_check() finds every directive that reads a file
 * (include, include_next, import, embed, in any spelling the
 * preprocessor accepts: `#`, `%:` or `??=`, comments and spliced lines
 * between the pieces) and every __has_include, and refuses any whose
 * target is not such a name: a quoted or absolute path, a `..`, a macro.
 * It looks for them in three readings of the source (comments removed as
 * the compiler does, comments removed without regard to strings, and no
 * comments removed), so that a string or comment the scanner reads
 * differently from the compiler cannot hide a directive: it may refuse a
 * harmless oddity, it does not miss a directive.
 */
#ifndef KSEARCH_INCLUDES_H
#define KSEARCH_INCLUDES_H

#include <stddef.h>

/* 0 when every file-reading directive of `source` names a toolkit header;
 * else 1, with `why` (size `n`) naming the first directive refused and its
 * line in the source. */
int ks_includes_check(const char *source, char *why, size_t n);

#endif
