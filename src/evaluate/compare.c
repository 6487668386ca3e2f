/*
 * compare.c - element-wise comparison of outputs on the host.
 *
 * The half-precision formats are decoded here in plain C rather than with
 * a compiler's _Float16 or __bf16, so that the host build needs nothing
 * beyond C11 and every bit pattern (subnormals, Inf, NaN payloads) decodes
 * the same way on every machine.
 */
#include "ksearch/evaluate/compare.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static uint16_t load_u16(const void *data, int64_t index)
{
	uint16_t bits;

	memcpy(&bits, (const unsigned char *)data + 2 * index, sizeof(bits));
	return bits;
}

/* bfloat16 is the top half of a float32: widening is exact. */
static double bf16_to_double(uint16_t bits)
{
	uint32_t wide = (uint32_t)bits << 16;
	float value;

	memcpy(&value, &wide, sizeof(value));
	return value;
}

/* IEEE 754 binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. */
static double f16_to_double(uint16_t bits)
{
	int exponent = (bits >> 10) & 0x1f;
	int mantissa = bits & 0x3ff;
	double magnitude;

	if (exponent == 0x1f)
		magnitude = mantissa ? NAN : INFINITY;
	else if (exponent == 0)
		magnitude = ldexp(mantissa, -24); /* subnormal: 0.m x 2^-14 */
	else
		magnitude = ldexp(mantissa | 0x400, exponent - 25);
	return (bits & 0x8000) ? -magnitude : magnitude;
}

double ks_element(enum ks_dtype dtype, const void *data, int64_t index)
{
	const unsigned char *bytes = data;

	switch (dtype) {
	case KS_DTYPE_BFLOAT16:
		return bf16_to_double(load_u16(data, index));
	case KS_DTYPE_FLOAT16:
		return f16_to_double(load_u16(data, index));
	case KS_DTYPE_FLOAT32: {
		float value;

		memcpy(&value, bytes + 4 * index, sizeof(value));
		return value;
	}
	case KS_DTYPE_INT32: {
		int32_t value;

		memcpy(&value, bytes + 4 * index, sizeof(value));
		return value;
	}
	case KS_DTYPE_INT64: {
		int64_t value;

		memcpy(&value, bytes + 8 * index, sizeof(value));
		return (double)value;
	}
	}
	return NAN;
}

static void keep_mismatch(struct ks_compare_report *report, int64_t index, double got, double expected)
{
	struct ks_mismatch *m;

	if (report->n_first == KS_COMPARE_KEEP)
		return;
	m = &report->first[report->n_first++];
	m->index = index;
	m->got = got;
	m->expected = expected;
}

int ks_compare(enum ks_dtype dtype, const void *got, const void *ref, int64_t numel, double atol, double rtol,
	       struct ks_compare_report *report)
{
	memset(report, 0, sizeof(*report));
	report->max_abs_index = -1;
	report->atol = atol;
	report->rtol = rtol;

	for (int64_t i = 0; i < numel; i++) {
		double g = ks_element(dtype, got, i);
		double r = ks_element(dtype, ref, i);
		int got_finite = isfinite(g), ref_finite = isfinite(r);

		report->checked++;
		if (!got_finite) {
			report->nonfinite++;
			if (isnan(g))
				report->nan++;
		}
		if (!ref_finite)
			report->ref_nonfinite++;
		if (got_finite && ref_finite) {
			double error = fabs(g - r);

			if (error > report->max_abs_error || report->max_abs_index < 0) {
				report->max_abs_error = error;
				report->max_abs_index = i;
			}
			/* Written so that a NaN tolerance fails rather than passes. */
			if (error <= atol + rtol * fabs(r))
				continue;
		}
		report->mismatches++;
		keep_mismatch(report, i, g, r);
	}
	return report->mismatches == 0;
}

/* snprintf that appends, and stops quietly when buf is full. */
struct text {
	char *buf;
	size_t size, len;
};

static void add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->len + 1 >= t->size)
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->buf + t->len, t->size - t->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	t->len += (size_t)n;
	if (t->len >= t->size)
		t->len = t->size - 1;
}

/*
 * Integers in full; other values with float32's 9 significant digits, so
 * that two values that differ never print the same.
 */
static void add_value(struct text *t, double v)
{
	if (isnan(v))
		add(t, "NaN");
	else if (isinf(v))
		add(t, v < 0 ? "-Inf" : "Inf");
	else if (v == trunc(v) && fabs(v) < 1e15)
		add(t, "%.0f", v);
	else
		add(t, "%.9g", v);
}

static const char *plural(int64_t n)
{
	return n == 1 ? "" : "s";
}

void ks_compare_describe(const struct ks_compare_report *report, const char *output_name, char *buf,
			 size_t size)
{
	struct text t = { buf, size, 0 };
	int64_t got_inf = report->nonfinite - report->nan;

	if (!size)
		return;
	buf[0] = '\0';
	add(&t, "output %s: ", output_name);
	if (!report->mismatches)
		add(&t, "all %lld element%s match", (long long)report->checked, plural(report->checked));
	else
		add(&t, "%lld of %lld element%s differ", (long long)report->mismatches,
		    (long long)report->checked, plural(report->checked));
	if (report->nonfinite) {
		add(&t, " (");
		if (report->nan)
			add(&t, "%lld NaN", (long long)report->nan);
		if (report->nan && got_inf)
			add(&t, ", ");
		if (got_inf)
			add(&t, "%lld Inf", (long long)got_inf);
		add(&t, " in the output%s)", report->nan ? "; NaN is what unwritten elements hold" : "");
	}
	if (report->ref_nonfinite)
		add(&t,
		    "; the reference itself has %lld NaN or Inf value%s, so it cannot judge "
		    "those elements",
		    (long long)report->ref_nonfinite, plural(report->ref_nonfinite));
	if (report->max_abs_index >= 0) {
		add(&t, "; max abs error ");
		add_value(&t, report->max_abs_error);
		add(&t, " at [%lld]", (long long)report->max_abs_index);
	}
	add(&t, "; tolerance |got - expected| <= %g + %g*|expected|", report->atol, report->rtol);
	for (size_t i = 0; i < report->n_first; i++) {
		const struct ks_mismatch *m = &report->first[i];

		add(&t, "%s[%lld] got ", i ? ", " : "; first: ", (long long)m->index);
		add_value(&t, m->got);
		add(&t, " expected ");
		add_value(&t, m->expected);
	}
	if (report->mismatches > (int64_t)report->n_first)
		add(&t, ", ...");
	add(&t, ".");
}
