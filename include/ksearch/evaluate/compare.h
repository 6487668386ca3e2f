/*
 * compare.h - comparing a candidate's outputs with the reference's, on the host.
 *
 * An element passes when it is finite and |got - ref| <= atol + rtol*|ref|;
 * NaN or Inf in got always fails (poisoned, unwritten outputs are NaN), and
 * so does a NaN or Inf in ref: the reference must be finite to judge by,
 * and the report counts such elements apart so that the blame lands on it.
 * The report keeps the first few mismatches with their indices and values,
 * so a verdict of "wrong" carries evidence a person can act on.
 */
#ifndef KSEARCH_COMPARE_H
#define KSEARCH_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/op/op.h"

#define KS_COMPARE_KEEP 8

struct ks_mismatch {
	int64_t index;
	double got, expected;
};

struct ks_compare_report {
	int64_t checked;
	int64_t mismatches;    /* elements failing the tolerance (NaN/Inf included) */
	int64_t nonfinite;     /* NaN or Inf in got */
	int64_t nan;	       /* of those, NaN (what poisoned, unwritten elements read as) */
	int64_t ref_nonfinite; /* NaN or Inf in ref: the reference is broken, and fails too */
	double max_abs_error;  /* over elements finite in both */
	int64_t max_abs_index; /* where it occurs; -1 when no element is finite in both */
	double atol, rtol;     /* the tolerance compared with, for the description */
	struct ks_mismatch first[KS_COMPARE_KEEP];
	size_t n_first;
};

/* Convert one element of dtype at data[index] to double. */
double ks_element(enum ks_dtype dtype, const void *data, int64_t index);

/* Compare numel elements of dtype; returns 1 when all pass, 0 otherwise. */
int ks_compare(enum ks_dtype dtype, const void *got, const void *ref, int64_t numel, double atol, double rtol,
	       struct ks_compare_report *report);

/* "output lse: 12 of 2048 elements differ (3 NaN); first: [5] got 1.25 expected 1.5, ..." */
void ks_compare_describe(const struct ks_compare_report *report, const char *output_name, char *buf,
			 size_t size);

#endif
