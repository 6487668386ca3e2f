/*
 * record.h - a candidate record (archive/README.md, "The candidate
 * record"), typed: what the archive stores, `show` prints and an export
 * holds.
 *
 * A record is written in two places only: its result fields by the one
 * serialiser (ks_result_to_json_into(), result.h), the rest by the search
 * (where the candidate came from: ks_record_to_json()) and the archive
 * (id, source_hash, op, gpu, created).  Everything that reads one reads
 * it as a struct ks_record, parsed once by ks_record_parse() (which reads
 * the result fields with ks_result_from_json()): the archive hands records
 * out that way (archive.h, ks_archive_get_record(), ks_archive_best_record(),
 * ks_archive_foreach_record()).  The export formats read it so too; they
 * hold the stored JSON beside it only to copy it into their files as it
 * is (export.h).
 *
 * The JSON accessors at the end are for the archive's own files, which
 * check and change the stored JSON itself (archive.c, archive_verify.c),
 * and for JSON that is not a record (a profile, a sanitizer check, an
 * LLM's cost, a strategy prompt).  test_result fails on other code under
 * src/ that reads a record's fields by name: json_object_get() with one
 * of a record's keys, or these accessors with any of them, with a key it
 * cannot see, or as ks_record_id(), ks_record_verdict() and
 * ks_record_sanitizer_failed().
 */
#ifndef KSEARCH_RECORD_H
#define KSEARCH_RECORD_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ksearch/base/error.h"
#include "ksearch/evaluate/result.h"
#include "ksearch/op/verdict.h"

/* Which optional fields a record holds (ks_record.has), where absent and 0 read differently. */
enum ks_record_field {
	KS_RECORD_FITNESS = 1 << 0,	 /* "fitness" */
	KS_RECORD_SOL_FRACTION = 1 << 1, /* "sol_fraction" */
	KS_RECORD_SEQ = 1 << 2,		 /* "seq" */
	KS_RECORD_PROMPT_ID = 1 << 3,	 /* "prompt_id" */
};

/*
 * One candidate record.  Strings are never NULL after ks_record_init()
 * ("" when the field is absent); the JSON objects are new references, NULL
 * when absent: params, llm, profile and sanitizer keep the formats of
 * their own modules (the op's params, llm.h, profile.h, sanitize.h).
 */
struct ks_record {
	uint64_t id; /* 0: absent (a record not stored yet) */
	char *op, *gpu, *source_hash, *created;
	/*
	 * the software it was measured with, where the record says (stored as
	 * given: the search writes none of them, records from elsewhere may)
	 */
	char *driver, *toolkit, *nvrtc;
	/* where it came from (the search) */
	char *family, *path, *mutation;
	json_t *params;	   /* an object; NULL when absent */
	uint64_t *parents; /* n_parents ids, in the order stored */
	size_t n_parents;
	int64_t seq;	       /* the search's proposal number (KS_RECORD_SEQ) */
	uint64_t prompt_id;    /* the strategy prompt (KS_RECORD_PROMPT_ID) */
	json_t *llm;	       /* what the LLM answer cost, an object; NULL when absent */
	uint64_t duplicate_of; /* the record whose binary it shares (its result is that one's); 0: none */
	/*
	 * what was measured after (archive.h: ks_archive_set_profile(), ks_archive_set_sanitizer(),
	 * ks_archive_set_confirmation())
	 */
	json_t *profile, *sanitizer, *confirmation;
	int sanitizer_failed;	 /* "sanitizer"."status" is "failed" */
	unsigned has;		 /* enum ks_record_field */
	unsigned has_descriptor; /* bit d: descriptor d (enum ks_descriptor) is in "descriptors" */
	struct ks_result result;
};

/* An empty record, owning nothing. */
void ks_record_init(struct ks_record *rec);
/* Free what rec owns and leave it empty (it may be used again or dropped). */
void ks_record_release(struct ks_record *rec);

/*
 * The one parser: a record from its stored JSON.  "verdict" is required;
 * each other field present must have its type (a null provenance field
 * reads as absent); a failure names the field and the record's id
 * ("record 42: workloads[1].median_us: expected a number, got a string").
 * rec must be initialised; its contents are replaced, and on failure it
 * is left empty.
 */
int ks_record_parse(const json_t *obj, struct ks_record *rec, struct ks_error *err);

/*
 * The search's side of the writer: the record of a new candidate, its
 * provenance (family, path, params, parents, mutation, seq, prompt_id,
 * llm, duplicate_of: those rec holds) and its result
 * (ks_result_to_json_into()), for ks_archive_insert().  A new object.
 */
json_t *ks_record_to_json(const struct ks_record *rec);

/* Whether verdict is ok (the one verdict that has a fitness). */
static inline int ks_record_ok(const struct ks_record *rec)
{
	return rec->result.verdict == KS_VERDICT_OK;
}

/* JSON accessors: see the top of this file for where they belong. */

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
/*
 * The time that ranks the record on one of its "workloads" entries w among
 * that workload's bests (the per-workload bests a dispatch is made of): its
 * median_us, or, once a confirmation (ks_archive_set_confirmation()) timed
 * it again on fresh splits, the slower of the two.  0 when the record may
 * not be a best of it: no valid time, or a confirmation that failed.
 */
double ks_record_ranked_us(const json_t *record, const json_t *w);

#endif
