/*
 * record.h - reading fields of a candidate record (archive/README.md, "The
 * candidate record") as JSON: what the archive stores, `show --json`
 * prints and an export holds.
 *
 * A record is written in two places only: its result fields by the one
 * serialiser (ks_result_to_json_into(), result.h), the rest by the search
 * (where the candidate came from) and the archive (id, source_hash, op,
 * gpu, created).  Everything that reads one, the engine and the commands,
 * reads it with these, with a fallback for a field that is absent or of
 * another type (records of older archives lack newer fields).
 */
#ifndef KSEARCH_RECORD_H
#define KSEARCH_RECORD_H

#include <jansson.h>
#include <stdint.h>

#include "ksearch/op/verdict.h"

/* "id": the archive's id, 0 when absent. */
uint64_t ks_record_id(const json_t *record);
/* A text field, or fallback. */
const char *ks_record_str(const json_t *record, const char *field, const char *fallback);
/* A text field that is not empty, or fallback (for text shown to a reader). */
const char *ks_record_text(const json_t *record, const char *field, const char *fallback);

/* A number field, or 0. */
double ks_record_num(const json_t *record, const char *field);
/* "verdict" into *verdict; -1 when absent or not a verdict's name (*verdict is then crash). */
int ks_record_verdict(const json_t *record, enum ks_verdict *verdict);
/*
 * 1 when the record's "sanitizer" check failed (sanitize.h): such a record
 * keeps its verdict and fitness but is no elite and no per-workload best.
 */
int ks_record_sanitizer_failed(const json_t *record);

#endif
