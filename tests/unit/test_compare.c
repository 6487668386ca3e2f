/*
 * test_compare.c - decoding every dtype bit-exactly (subnormals, Inf,
 * NaN, the 0xFF poison), the tolerance at its edges, non-finite values on
 * either side, what the report keeps and what the description says.
 */
#include "testlib.h"

#include <math.h>

#include "ksearch/evaluate/compare.h"

static double bf16(uint16_t bits)
{
	return ks_element(KS_DTYPE_BFLOAT16, &bits, 0);
}

static double f16(uint16_t bits)
{
	return ks_element(KS_DTYPE_FLOAT16, &bits, 0);
}

static void bfloat16_decodes_exactly(void **state)
{
	(void)state;
	assert_true(bf16(0x3f80) == 1.0);
	assert_true(bf16(0xc000) == -2.0);
	assert_true(bf16(0x3fc0) == 1.5);
	assert_true(bf16(0x4049) == 3.140625);
	assert_true(bf16(0x7f7f) == ldexp(255.0, 120));	 /* largest finite: (2 - 2^-7) x 2^127 */
	assert_true(bf16(0x0080) == ldexp(1.0, -126));	 /* smallest normal */
	assert_true(bf16(0x0001) == ldexp(1.0, -133));	 /* smallest subnormal */
	assert_true(bf16(0x007f) == ldexp(127.0, -133)); /* largest subnormal */
	assert_true(bf16(0x0000) == 0.0 && !signbit(bf16(0x0000)));
	assert_true(bf16(0x8000) == 0.0 && signbit(bf16(0x8000)));
	assert_true(isinf(bf16(0x7f80)) && bf16(0x7f80) > 0);
	assert_true(isinf(bf16(0xff80)) && bf16(0xff80) < 0);
	assert_true(isnan(bf16(0x7fc0)));
	assert_true(isnan(bf16(0x7f81))); /* signalling payload */
	assert_true(isnan(bf16(0xffff))); /* the poison */
}

static void float16_decodes_exactly(void **state)
{
	(void)state;
	assert_true(f16(0x3c00) == 1.0);
	assert_true(f16(0xc000) == -2.0);
	assert_true(f16(0x3555) == 0.333251953125);
	assert_true(f16(0x7bff) == 65504.0);		/* largest finite */
	assert_true(f16(0x0400) == ldexp(1.0, -14));	/* smallest normal */
	assert_true(f16(0x0001) == ldexp(1.0, -24));	/* smallest subnormal */
	assert_true(f16(0x03ff) == ldexp(1023.0, -24)); /* largest subnormal */
	assert_true(f16(0x8001) == -ldexp(1.0, -24));
	assert_true(f16(0x8000) == 0.0 && signbit(f16(0x8000)));
	assert_true(isinf(f16(0x7c00)) && f16(0x7c00) > 0);
	assert_true(isinf(f16(0xfc00)) && f16(0xfc00) < 0);
	assert_true(isnan(f16(0x7e00)));
	assert_true(isnan(f16(0x7c01))); /* any non-zero mantissa with the top exponent */
	assert_true(isnan(f16(0xffff))); /* the poison */
}

static void wide_dtypes_decode_by_index(void **state)
{
	float f[3] = { 0.1f, -3.5f, 1e30f };
	int32_t i32[2] = { -7, INT32_MAX };
	int64_t i64[2] = { -1, (int64_t)1 << 53 };
	uint16_t halves[3] = { 0x3c00, 0x4000, 0x4200 };
	uint32_t poison = 0xffffffffu;

	(void)state;
	assert_true(ks_element(KS_DTYPE_FLOAT32, f, 0) == (double)0.1f);
	assert_true(ks_element(KS_DTYPE_FLOAT32, f, 1) == -3.5);
	assert_true(ks_element(KS_DTYPE_FLOAT32, f, 2) == (double)1e30f);
	assert_true(isnan(ks_element(KS_DTYPE_FLOAT32, &poison, 0)));
	assert_true(ks_element(KS_DTYPE_INT32, i32, 0) == -7.0);
	assert_true(ks_element(KS_DTYPE_INT32, i32, 1) == 2147483647.0);
	assert_true(ks_element(KS_DTYPE_INT64, i64, 0) == -1.0);
	assert_true(ks_element(KS_DTYPE_INT64, i64, 1) == 9007199254740992.0);
	assert_true(ks_element(KS_DTYPE_FLOAT16, halves, 2) == 3.0);
	assert_true(ks_element(KS_DTYPE_BFLOAT16, halves, 1) == 2.0);
}

static void tolerance_edge_is_inclusive(void **state)
{
	struct ks_compare_report report;
	float ref[1] = { 1.0f };
	float at_edge[1] = { 1.5f };
	float past_edge[1];

	(void)state;
	past_edge[0] = nextafterf(1.5f, 2.0f);
	assert_int_equal(ks_compare(KS_DTYPE_FLOAT32, at_edge, ref, 1, 0.5, 0.0, &report), 1);
	assert_int_equal(report.mismatches, 0);
	assert_true(report.max_abs_error == 0.5);
	assert_int_equal(ks_compare(KS_DTYPE_FLOAT32, past_edge, ref, 1, 0.5, 0.0, &report), 0);
	assert_int_equal(report.mismatches, 1);
	assert_int_equal(report.first[0].index, 0);
}

static void rtol_scales_with_the_reference_magnitude(void **state)
{
	struct ks_compare_report report;
	float ref[2] = { 2.0f, -2.0f };
	float ok[2] = { 2.5f, -2.5f }; /* |error| 0.5 = 0.25 * |ref| */
	float bad[2];

	(void)state;
	bad[0] = nextafterf(2.5f, 3.0f);
	bad[1] = nextafterf(-2.5f, -3.0f);
	assert_int_equal(ks_compare(KS_DTYPE_FLOAT32, ok, ref, 2, 0.0, 0.25, &report), 1);
	assert_int_equal(ks_compare(KS_DTYPE_FLOAT32, bad, ref, 2, 0.0, 0.25, &report), 0);
	assert_int_equal(report.mismatches, 2);
	/* atol and rtol add up */
	assert_int_equal(ks_compare(KS_DTYPE_FLOAT32, bad, ref, 2, 0.001, 0.25, &report), 1);
}

static void integers_compare_exactly(void **state)
{
	struct ks_compare_report report;
	int32_t ref[4] = { 0, 5, 17, -3 };
	int32_t got[4] = { 0, 5, 18, -3 };

	(void)state;
	assert_int_equal(ks_compare(KS_DTYPE_INT32, ref, ref, 4, 0.0, 0.0, &report), 1);
	assert_int_equal(ks_compare(KS_DTYPE_INT32, got, ref, 4, 0.0, 0.0, &report), 0);
	assert_int_equal(report.mismatches, 1);
	assert_int_equal(report.first[0].index, 2);
	assert_true(report.first[0].got == 18.0 && report.first[0].expected == 17.0);
}

static void nonfinite_output_fails_whatever_the_tolerance(void **state)
{
	struct ks_compare_report report;
	float ref[4] = { 1.0f, 2.0f, INFINITY, 4.0f };
	float got[4] = { NAN, INFINITY, INFINITY, -INFINITY };

	(void)state;
	assert_int_equal(ks_compare(KS_DTYPE_FLOAT32, got, ref, 4, INFINITY, INFINITY, &report), 0);
	assert_int_equal(report.checked, 4);
	assert_int_equal(report.mismatches, 4);
	assert_int_equal(report.nonfinite, 4);
	assert_int_equal(report.nan, 1);
	/* Inf == Inf still fails: an overflow is never a match */
	assert_int_equal(report.ref_nonfinite, 1);
	assert_int_equal(report.max_abs_index, -1);
}

static void nonfinite_reference_fails_and_is_counted(void **state)
{
	struct ks_compare_report report;
	float ref[3] = { 1.0f, NAN, 3.0f };
	float got[3] = { 1.0f, 2.0f, 3.0f };

	(void)state;
	assert_int_equal(ks_compare(KS_DTYPE_FLOAT32, got, ref, 3, 1.0, 1.0, &report), 0);
	assert_int_equal(report.mismatches, 1);
	assert_int_equal(report.nonfinite, 0);
	assert_int_equal(report.ref_nonfinite, 1);
	assert_int_equal(report.first[0].index, 1);
	assert_true(isnan(report.first[0].expected));
}

static void poisoned_output_fails_in_every_float_dtype(void **state)
{
	struct ks_compare_report report;
	unsigned char poison[64], zeros[64];
	const enum ks_dtype dtypes[] = { KS_DTYPE_BFLOAT16, KS_DTYPE_FLOAT16, KS_DTYPE_FLOAT32 };

	(void)state;
	memset(poison, 0xff, sizeof(poison));
	memset(zeros, 0, sizeof(zeros));
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
		assert_int_equal(ks_compare(dtypes[i], poison, zeros, 8, 1e9, 1e9, &report), 0);
		assert_int_equal(report.mismatches, 8);
		assert_int_equal(report.nan, 8);
	}
}

static void report_keeps_the_first_mismatches_in_order(void **state)
{
	struct ks_compare_report report;
	float ref[100], got[100];

	(void)state;
	for (int i = 0; i < 100; i++)
		ref[i] = got[i] = (float)i;
	for (int i = 10; i < 100; i += 5)
		got[i] += 0.25f; /* 18 mismatches */
	got[97] = 200.0f;	 /* the worst one, not among the first kept */
	assert_int_equal(ks_compare(KS_DTYPE_FLOAT32, got, ref, 100, 0.1, 0.0, &report), 0);
	assert_int_equal(report.checked, 100);
	assert_int_equal(report.mismatches, 19);
	assert_int_equal(report.n_first, KS_COMPARE_KEEP);
	for (size_t k = 0; k < KS_COMPARE_KEEP; k++) {
		assert_int_equal(report.first[k].index, 10 + 5 * (int64_t)k);
		assert_true(report.first[k].got == ref[10 + 5 * k] + 0.25);
		assert_true(report.first[k].expected == ref[10 + 5 * k]);
	}
	assert_true(report.max_abs_error == 103.0);
	assert_int_equal(report.max_abs_index, 97);
	assert_true(report.atol == 0.1 && report.rtol == 0.0);
}

static void empty_comparison_passes(void **state)
{
	struct ks_compare_report report;
	float none[1] = { NAN };

	(void)state;
	assert_int_equal(ks_compare(KS_DTYPE_FLOAT32, none, none, 0, 0.0, 0.0, &report), 1);
	assert_int_equal(report.checked, 0);
	assert_int_equal(report.max_abs_index, -1);
}

static void describe_gives_counts_errors_and_first_mismatches(void **state)
{
	struct ks_compare_report report;
	char text[1024];
	float ref[10] = { 0, 1, 2, 3, 4, 1.5f, 6, 7, 8, 9 };
	float got[10] = { 0, 1, 2, 3, 4, 1.25f, NAN, 7, 8, INFINITY };

	(void)state;
	ks_compare(KS_DTYPE_FLOAT32, got, ref, 10, 0.01, 0.001, &report);
	ks_compare_describe(&report, "lse", text, sizeof(text));
	assert_contains(text, "output lse: 3 of 10 elements differ");
	assert_contains(text, "1 NaN, 1 Inf in the output");
	assert_contains(text, "unwritten");
	assert_contains(text, "max abs error 0.25 at [5]");
	assert_contains(text, "0.01 + 0.001*|expected|");
	assert_contains(text, "first: [5] got 1.25 expected 1.5, [6] got NaN expected 6, "
			      "[9] got Inf expected 9.");
	assert_null(strchr(text, '\n'));
}

static void describe_says_when_everything_matches(void **state)
{
	struct ks_compare_report report;
	char text[512];
	float ref[4] = { 1, 2, 3, 4 };

	(void)state;
	ks_compare(KS_DTYPE_FLOAT32, ref, ref, 4, 0.0, 0.0, &report);
	ks_compare_describe(&report, "out", text, sizeof(text));
	assert_contains(text, "output out: all 4 elements match");
	assert_null(strstr(text, "first:"));
	assert_null(strstr(text, "NaN"));
}

static void describe_blames_a_broken_reference(void **state)
{
	struct ks_compare_report report;
	char text[512];
	float ref[2] = { NAN, 1.0f };
	float got[2] = { 0.0f, 1.0f };

	(void)state;
	ks_compare(KS_DTYPE_FLOAT32, got, ref, 2, 0.0, 0.0, &report);
	ks_compare_describe(&report, "o", text, sizeof(text));
	assert_contains(text, "1 of 2 elements differ");
	assert_contains(text, "the reference itself has 1 NaN or Inf value");
	assert_contains(text, "[0] got 0 expected NaN");
}

static void describe_marks_mismatches_it_leaves_out(void **state)
{
	struct ks_compare_report report;
	char text[2048];
	int32_t ref[20] = { 0 }, got[20];

	(void)state;
	for (int i = 0; i < 20; i++)
		got[i] = 1000000 + i;
	ks_compare(KS_DTYPE_INT32, got, ref, 20, 0.0, 0.0, &report);
	ks_compare_describe(&report, "idx", text, sizeof(text));
	assert_contains(text, "20 of 20 elements differ");
	assert_contains(text, "[7] got 1000007 expected 0, ...");
	assert_null(strstr(text, "[8]"));
}

static void describe_truncates_safely(void **state)
{
	struct ks_compare_report report;
	char text[24];
	float ref[2] = { 0, 0 }, got[2] = { 1, 2 };

	(void)state;
	ks_compare(KS_DTYPE_FLOAT32, got, ref, 2, 0.0, 0.0, &report);
	memset(text, 'x', sizeof(text));
	ks_compare_describe(&report, "a_rather_long_output_name", text, 16);
	assert_int_equal(strlen(text), 15);
	assert_int_equal(text[16], 'x');	    /* nothing written past size */
	ks_compare_describe(&report, "o", text, 0); /* size 0 writes nothing */
	assert_int_equal(text[0], 'o');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bfloat16_decodes_exactly),
		cmocka_unit_test(float16_decodes_exactly),
		cmocka_unit_test(wide_dtypes_decode_by_index),
		cmocka_unit_test(tolerance_edge_is_inclusive),
		cmocka_unit_test(rtol_scales_with_the_reference_magnitude),
		cmocka_unit_test(integers_compare_exactly),
		cmocka_unit_test(nonfinite_output_fails_whatever_the_tolerance),
		cmocka_unit_test(nonfinite_reference_fails_and_is_counted),
		cmocka_unit_test(poisoned_output_fails_in_every_float_dtype),
		cmocka_unit_test(report_keeps_the_first_mismatches_in_order),
		cmocka_unit_test(empty_comparison_passes),
		cmocka_unit_test(describe_gives_counts_errors_and_first_mismatches),
		cmocka_unit_test(describe_says_when_everything_matches),
		cmocka_unit_test(describe_blames_a_broken_reference),
		cmocka_unit_test(describe_marks_mismatches_it_leaves_out),
		cmocka_unit_test(describe_truncates_safely),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
