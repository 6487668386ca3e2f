/*
 * test_answer.c - reading LLM replies (answer.h): which fenced block is the
 * file, how SEARCH/REPLACE edits match and apply, and that every malformed
 * or hostile reply fails with a reason instead of crashing or stalling.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ksearch/llm/answer.h"
#include "ksearch/base/util.h"
#include "testlib.h"

static const char parent[] =
	"/* ksearch\n"
	"{ \"params\": {\"BLOCK\": [128, 256]},\n"
	"  \"launch\": [{\"kernel\": \"scale\", \"grid\": [\"cdiv(n, BLOCK)\"], \"block\": [\"BLOCK\"],\n"
	"              \"args\": [\"x\", \"y\", \"n\"]}] }\n"
	"*/\n"
	"#include <cuda_bf16.h>\n"
	"\n"
	"extern \"C\" __global__ void scale(const float *x, float *y, int n)\n"
	"{\n"
	"    int i = blockIdx.x * BLOCK + threadIdx.x;\n"
	"    if (i < n)\n"
	"        y[i] = 2.0f * x[i];\n"
	"}\n";

/* A whole file the LLM might send back. */
static const char kernel_v2[] =
	"/* ksearch\n"
	"{ \"params\": {\"BLOCK\": [256]},\n"
	"  \"launch\": [{\"kernel\": \"scale\", \"grid\": [\"cdiv(n, BLOCK)\"], \"block\": [\"BLOCK\"],\n"
	"              \"args\": [\"x\", \"y\", \"n\"]}] }\n"
	"*/\n"
	"extern \"C\" __global__ void scale(const float *x, float *y, int n)\n"
	"{\n"
	"    int i = blockIdx.x * BLOCK + threadIdx.x;\n"
	"    if (i < n)\n"
	"        y[i] = x[i] + x[i];\n"
	"}\n";

static char *extract_ok(const char *answer, const char *par, struct ks_answer_info *info)
{
	struct ks_error err = { { 0 } };
	char *out = (char *)0x1;

	if (ks_answer_extract(answer, par, &out, info, &err) != 0)
		fail_msg("extract failed: %s\n--- answer ---\n%s", err.msg, answer);
	assert_non_null(out);
	return out;
}

static void extract_fails(const char *answer, const char *par, const char *reason,
			  struct ks_answer_info *info)
{
	struct ks_error err = { { 0 } };
	char *out = (char *)0x1;

	if (ks_answer_extract(answer, par, &out, info, &err) == 0)
		fail_msg("extract succeeded, expected \"%s\"; got:\n%s", reason, out);
	assert_null(out);
	assert_contains(err.msg, reason);
}

static char *fenced(const char *before, const char *lang, const char *code, const char *after)
{
	return ks_asprintf("%s```%s\n%s```\n%s", before, lang, code, after);
}

/* ---- whole files ---- */

static void test_whole_file_in_cuda_fence(void **state)
{
	struct ks_answer_info info;
	char *answer = fenced("Here is a faster kernel:\n\n", "cuda", kernel_v2, "\nIt uses an add.\n");
	char *out;

	(void)state;
	out = extract_ok(answer, parent, &info);
	assert_string_equal(out, kernel_v2);
	assert_int_equal(info.form, KS_ANSWER_WHOLE_FILE);
	assert_int_equal(info.n_blocks, 1);
	assert_int_equal(info.chosen_block, 1);
	assert_int_equal(info.n_edits, 0);
	assert_false(info.unchanged);
	assert_string_equal(ks_answer_form_name(info.form), "whole_file");
	free(out);
	free(answer);
}

static void test_whole_file_every_code_language(void **state)
{
	static const char *const langs[] = {
		"", "cu", "cpp", "c++", "CUDA", "cuda title=\"k.cu\"", "cxx", "c"
	};

	(void)state;
	for (size_t i = 0; i < sizeof(langs) / sizeof(langs[0]); i++) {
		char *answer = fenced("", langs[i], kernel_v2, "");
		char *out = extract_ok(answer, NULL, NULL);

		assert_string_equal(out, kernel_v2);
		free(out);
		free(answer);
	}
}

static void test_whole_file_tilde_fence(void **state)
{
	char *answer = ks_asprintf("~~~cuda\n%s~~~\n", kernel_v2);
	char *out;

	(void)state;
	out = extract_ok(answer, parent, NULL);
	assert_string_equal(out, kernel_v2);
	free(out);
	free(answer);
}

/* The documented rule: the LAST candidate block wins, not the longest or the first. */
static void test_whole_file_last_candidate_block_wins(void **state)
{
	struct ks_answer_info info;
	char *longer = ks_asprintf("%s// a long draft comment that makes this block the longest one by far\n"
				   "// ... and longer still ...\n",
				   parent);
	char *answer = ks_asprintf(
		"First, the parent for reference:\n```cuda\n%s```\n"
		"The launch plan as JSON:\n```json\n{\"grid\": [1]}\n```\n"
		"The final version:\n```cuda\n%s```\n"
		"The helper I changed:\n```cuda\n__device__ float twice(float v) { return v + v; }\n```\n",
		longer, kernel_v2);
	char *out;

	(void)state;
	out = extract_ok(answer, parent, &info);
	assert_string_equal(out, kernel_v2);
	assert_int_equal(info.n_blocks, 4);
	assert_int_equal(info.chosen_block, 3); /* the helper excerpt has no launch block */
	free(out);
	free(answer);
	free(longer);
}

static void test_whole_file_other_languages_never_taken(void **state)
{
	char *answer = ks_asprintf("```python\n%s```\n```text\n%s```\n", kernel_v2, kernel_v2);

	(void)state;
	extract_fails(answer, parent, "none of the answer's 2 code blocks is a candidate file", NULL);
	free(answer);
}

static void test_whole_file_needs_launch_block(void **state)
{
	(void)state;
	extract_fails("```cuda\n__global__ void k() {}\n```\n", parent,
		      "none of the answer's 1 code blocks is a candidate file", NULL);
}

static void test_whole_file_unclosed_fence_is_cut_off(void **state)
{
	struct ks_answer_info info;
	char *answer = ks_asprintf("Here:\n```cuda\n%.*s", 200, kernel_v2);

	(void)state;
	extract_fails(answer, parent, "the code block opened on answer line 2 is never closed", &info);
	assert_int_equal(info.form, KS_ANSWER_WHOLE_FILE);
	free(answer);
}

static void test_whole_file_indented_fence(void **state)
{
	const char *answer = "1. The kernel:\n"
			     "   ```cuda\n"
			     "   /* ksearch {\"launch\": []} */\n"
			     "   __global__ void k()\n"
			     "   {\n"
			     "       return;\n"
			     "   }\n"
			     "   ```\n";
	char *out;

	(void)state;
	out = extract_ok(answer, parent, NULL);
	assert_string_equal(out, "/* ksearch {\"launch\": []} */\n__global__ void k()\n{\n    return;\n}\n");
	free(out);
}

static void test_whole_file_bare_reply(void **state)
{
	struct ks_answer_info info;
	char *answer = ks_asprintf("\n\n%s", kernel_v2);
	char *out;

	(void)state;
	out = extract_ok(answer, parent, &info);
	assert_int_equal(info.form, KS_ANSWER_WHOLE_FILE);
	assert_int_equal(info.chosen_block, 0);
	assert_non_null(strstr(out, kernel_v2));
	free(out);
	free(answer);
}

static void test_whole_file_crlf_reply(void **state)
{
	struct ks_strbuf body;
	char *answer, *out;

	(void)state;
	ks_strbuf_init(&body);
	for (const char *p = kernel_v2; *p; p++)
		ks_strbuf_adds(&body, *p == '\n' ? "\r\n" : (char[]){ *p, 0 });
	answer = ks_asprintf("Here it is:\r\n```cuda\r\n%s```\r\n", body.buf);
	out = extract_ok(answer, parent, NULL);
	assert_string_equal(out, kernel_v2);
	free(out);
	/* a bare reply, no fence: LF too */
	out = extract_ok(body.buf, parent, NULL);
	assert_string_equal(out, kernel_v2);
	free(out);
	free(answer);
	ks_strbuf_release(&body);
}

/* ---- failures with no code ---- */

static void test_no_code(void **state)
{
	struct ks_answer_info info;

	(void)state;
	extract_fails("I would try a larger block size, but I cannot write the code.", parent,
		      "no code block and no SEARCH/REPLACE edits in the answer", &info);
	assert_int_equal(info.form, KS_ANSWER_NONE);
	extract_fails("", parent, "no code block and no SEARCH/REPLACE edits", NULL);
	extract_fails("\n\n   \n", parent, "no code block and no SEARCH/REPLACE edits", NULL);
}

/* ---- edits ---- */

static void test_edit_exact(void **state)
{
	struct ks_answer_info info;
	const char *answer = "Use an add instead of a multiply.\n"
			     "```cuda\n"
			     "<<<<<<< SEARCH\n"
			     "    if (i < n)\n"
			     "        y[i] = 2.0f * x[i];\n"
			     "=======\n"
			     "    if (i < n)\n"
			     "        y[i] = x[i] + x[i];\n"
			     ">>>>>>> REPLACE\n"
			     "```\n";
	char *expected = test_replace(parent, "2.0f * x[i]", "x[i] + x[i]");
	char *out;

	(void)state;
	out = extract_ok(answer, parent, &info);
	assert_string_equal(out, expected);
	assert_int_equal(info.form, KS_ANSWER_EDITS);
	assert_int_equal(info.n_edits, 1);
	assert_int_equal(info.n_tolerant, 0);
	assert_int_equal(info.tolerant[0], 0);
	assert_int_equal(info.failed_edit, 0);
	assert_string_equal(ks_answer_form_name(info.form), "edits");
	free(out);
	free(expected);
}

/* Edit 2 quotes a line that exists only after edit 1. */
static void test_edits_apply_in_order(void **state)
{
	struct ks_answer_info info;
	const char *answer = "<<<<<<< SEARCH\n"
			     "{ \"params\": {\"BLOCK\": [128, 256]},\n"
			     "=======\n"
			     "{ \"params\": {\"BLOCK\": [256, 512], \"UNROLL\": [1, 2]},\n"
			     ">>>>>>> REPLACE\n"
			     "\n"
			     "and then\n"
			     "\n"
			     "<<<<<<< SEARCH\n"
			     "{ \"params\": {\"BLOCK\": [256, 512], \"UNROLL\": [1, 2]},\n"
			     "=======\n"
			     "{ \"params\": {\"BLOCK\": [256, 512], \"UNROLL\": [1, 2, 4]},\n"
			     ">>>>>>> REPLACE\n"
			     "<<<<<<< SEARCH\n"
			     "#include <cuda_bf16.h>\n"
			     "=======\n"
			     ">>>>>>> REPLACE\n";
	char *step = test_replace(parent, "[128, 256]}", "[256, 512], \"UNROLL\": [1, 2, 4]}");
	char *expected = test_replace(step, "#include <cuda_bf16.h>\n", "");
	char *out;

	(void)state;
	out = extract_ok(answer, parent, &info);
	assert_string_equal(out, expected);
	assert_int_equal(info.n_edits, 3);
	assert_int_equal(info.n_tolerant, 0);
	free(out);
	free(step);
	free(expected);
}

/*
 * Indentation changed, a blank line dropped, trailing blanks added: the
 * tolerant pass finds the lines and replaces the parent's own line range
 * (blank lines inside it included, the ones around it kept).
 */
static void test_edit_whitespace_tolerant(void **state)
{
	struct ks_answer_info info;
	const char *answer = "<<<<<<< SEARCH\n"
			     "#include <cuda_bf16.h>\n"
			     "extern \"C\" __global__ void scale(const float *x, float *y, int n)   \n"
			     "{\n"
			     "\tint i = blockIdx.x * BLOCK + threadIdx.x;\n"
			     "\n"
			     "=======\n"
			     "extern \"C\" __global__ void __launch_bounds__(BLOCK) scale(const float *x, "
			     "float *y, int n)\n"
			     "{\n"
			     "    const int i = blockIdx.x * BLOCK + threadIdx.x;\n"
			     ">>>>>>> REPLACE\n";
	char *expected =
		test_replace(parent,
			     "#include <cuda_bf16.h>\n\nextern \"C\" __global__ void scale(const float *x, "
			     "float *y, int n)\n{\n    int i",
			     "extern \"C\" __global__ void __launch_bounds__(BLOCK) scale(const float *x, "
			     "float *y, int n)\n{\n    const int i");
	char *out;

	(void)state;
	out = extract_ok(answer, parent, &info);
	assert_string_equal(out, expected);
	assert_int_equal(info.n_edits, 1);
	assert_int_equal(info.n_tolerant, 1);
	assert_int_equal(info.tolerant[0], 1);
	free(out);
	free(expected);
}

static void test_edit_tolerant_flags_only_that_edit(void **state)
{
	struct ks_answer_info info;
	const char *answer = "<<<<<<< SEARCH\n"
			     "    if (i < n)\n"
			     "=======\n"
			     "    if (i < n && i >= 0)\n"
			     ">>>>>>> REPLACE\n"
			     "<<<<<<< SEARCH\n"
			     "y[i] = 2.0f * x[i];\n"
			     "=======\n"
			     "        y[i] = 3.0f * x[i];\n"
			     ">>>>>>> REPLACE\n";
	char *out;

	(void)state;
	out = extract_ok(answer, parent, &info);
	assert_non_null(strstr(out, "    if (i < n && i >= 0)\n        y[i] = 3.0f * x[i];\n}\n"));
	assert_int_equal(info.n_edits, 2);
	assert_int_equal(info.n_tolerant, 1);
	assert_int_equal(info.tolerant[0], 0);
	assert_int_equal(info.tolerant[1], 1);
	free(out);
}

/* An exact match that is unique wins even where the tolerant pass would be ambiguous. */
static void test_edit_exact_before_tolerant(void **state)
{
	const char *par = "a();\n    x = 1;\nb();\nx = 1;\nc();\n";
	const char *answer = "<<<<<<< SEARCH\nx = 1;\n=======\nx = 2;\n>>>>>>> REPLACE\n";
	char *out;

	(void)state;
	out = extract_ok(answer, par, NULL);
	assert_string_equal(out, "a();\n    x = 1;\nb();\nx = 2;\nc();\n");
	free(out);
}

static void test_edit_not_found(void **state)
{
	struct ks_answer_info info;
	const char *answer = "<<<<<<< SEARCH\n"
			     "    if (i < n)\n"
			     "=======\n"
			     "    if (i < n && n > 0)\n"
			     ">>>>>>> REPLACE\n"
			     "<<<<<<< SEARCH\n"
			     "    y[i] = 4.0f * x[i];\n"
			     "=======\n"
			     "    y[i] = 5.0f * x[i];\n"
			     ">>>>>>> REPLACE\n";

	(void)state;
	extract_fails(answer, parent, "edit 2: SEARCH text not found in the parent as changed by edit 1",
		      &info);
	assert_int_equal(info.form, KS_ANSWER_EDITS);
	assert_int_equal(info.failed_edit, 2);
	assert_int_equal(info.n_edits, 2);
	extract_fails(answer, parent, "first SEARCH line `y[i] = 4.0f * x[i];`", NULL);
	extract_fails("<<<<<<< SEARCH\nnope();\n=======\nyes();\n>>>>>>> REPLACE\n", parent,
		      "edit 1: SEARCH text not found in the parent,", NULL);
}

/* Only whole lines match: part of a line is not found. */
static void test_edit_matches_whole_lines_only(void **state)
{
	(void)state;
	extract_fails("<<<<<<< SEARCH\n2.0f * x[i]\n=======\n3.0f * x[i]\n>>>>>>> REPLACE\n", parent,
		      "edit 1: SEARCH text not found", NULL);
}

static void test_edit_ambiguous(void **state)
{
	struct ks_answer_info info;
	const char *par = "int a = 0;\nsync();\nint b = 0;\nsync();\nint c = 0;\nsync();\n";

	(void)state;
	extract_fails("<<<<<<< SEARCH\nsync();\n=======\n__syncthreads();\n>>>>>>> REPLACE\n", par,
		      "edit 1: SEARCH text found 3 times in the parent", &info);
	assert_int_equal(info.failed_edit, 1);
	/* only ambiguous once whitespace is ignored */
	extract_fails("<<<<<<< SEARCH\n x = 1;\n=======\nx = 2;\n>>>>>>> REPLACE\n", "  x = 1;\nx = 1;\n",
		      "edit 1: SEARCH text found 2 times in the parent when whitespace is ignored", NULL);
}

/* Overlapping occurrences count: "a a" is twice in "a a a". */
static void test_edit_ambiguous_overlapping(void **state)
{
	(void)state;
	extract_fails("<<<<<<< SEARCH\na();\na();\n=======\nb();\n>>>>>>> REPLACE\n", "a();\na();\na();\n",
		      "edit 1: SEARCH text found 2 times", NULL);
}

static void test_edit_unterminated(void **state)
{
	struct ks_answer_info info;

	(void)state;
	extract_fails("<<<<<<< SEARCH\n    if (i < n)\n=======\n    if (i <= n)\n", parent,
		      "edit 1: unterminated edit block", &info);
	assert_int_equal(info.form, KS_ANSWER_EDITS);
	assert_int_equal(info.failed_edit, 1);
	extract_fails("<<<<<<< SEARCH\n    if (i < n)\n", parent, "has no `=======`", NULL);
	extract_fails("<<<<<<< SEARCH\n    if (i < n)\n=======\nx\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> "
		      "REPLACE\n",
		      parent, "edit 1: unterminated edit block", NULL);
	extract_fails("<<<<<<< SEARCH\n    if (i < n)\n>>>>>>> REPLACE\n", parent,
		      "edit 1: unterminated edit block", NULL);
	extract_fails("<<<<<<< SEARCH\n    if (i < n)\n=======\nx\n=======\ny\n>>>>>>> REPLACE\n", parent,
		      "second `=======`", NULL);
}

/* A broken second edit fails the answer before the first one is applied. */
static void test_edit_shape_checked_before_applying(void **state)
{
	struct ks_answer_info info;
	const char *answer = "<<<<<<< SEARCH\n    if (i < n)\n=======\n    if (i < n + 1)\n>>>>>>> REPLACE\n"
			     "<<<<<<< SEARCH\n        y[i] = 2.0f * x[i];\n=======\n";

	(void)state;
	extract_fails(answer, parent, "edit 2: unterminated edit block", &info);
	assert_int_equal(info.failed_edit, 2);
}

static void test_edit_empty_search(void **state)
{
	struct ks_answer_info info;

	(void)state;
	extract_fails("<<<<<<< SEARCH\n=======\n#include <cuda_fp16.h>\n>>>>>>> REPLACE\n", parent,
		      "edit 1: empty SEARCH section", &info);
	assert_int_equal(info.failed_edit, 1);
	extract_fails("<<<<<<< SEARCH\n   \n\t\n=======\nx\n>>>>>>> REPLACE\n", parent,
		      "edit 1: empty SEARCH section", NULL);
}

static void test_edit_stray_replace_marker(void **state)
{
	(void)state;
	extract_fails("<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n>>>>>>> REPLACE\n", "a\n",
		      "answer line 6: `>>>>>>> REPLACE` with no `<<<<<<< SEARCH` before it", NULL);
}

/* Marker runs of 5 to 9 characters, any case, blanks around. */
static void test_edit_marker_variants(void **state)
{
	char *out;

	(void)state;
	out = extract_ok("  <<<<< search  \nb();\n\t=========\nc();\n>>>>>>>>> Replace\n", "a();\nb();\n",
			 NULL);
	assert_string_equal(out, "a();\nc();\n");
	free(out);
	/* four is not a marker: this is no edit, and no code */
	extract_fails("<<<< SEARCH\nb();\n====\nc();\n>>>> REPLACE\n", "a();\nb();\n", "no code block", NULL);
}

/* The documented rule: edits win over a whole-file block in the same answer. */
static void test_edits_win_over_whole_file_block(void **state)
{
	struct ks_answer_info info;
	char *answer =
		ks_asprintf("The change:\n```cuda\n"
			    "<<<<<<< SEARCH\n        y[i] = 2.0f * x[i];\n=======\n        y[i] = -x[i];\n"
			    ">>>>>>> REPLACE\n```\n"
			    "And the whole file for convenience:\n```cuda\n%s```\n",
			    kernel_v2);
	char *expected = test_replace(parent, "2.0f * x[i]", "-x[i]");
	char *out;

	(void)state;
	out = extract_ok(answer, parent, &info);
	assert_string_equal(out, expected);
	assert_int_equal(info.form, KS_ANSWER_EDITS);
	assert_int_equal(info.n_edits, 1);
	assert_int_equal(info.chosen_block, 0);
	free(out);
	free(expected);
	free(answer);
}

static void test_edit_deletes_and_keeps_unterminated_last_line(void **state)
{
	char *out;

	(void)state;
	out = extract_ok("<<<<<<< SEARCH\nb();\n=======\n>>>>>>> REPLACE\n", "a();\nb();\nc();", NULL);
	assert_string_equal(out, "a();\nc();");
	free(out);
	out = extract_ok("<<<<<<< SEARCH\nc();\n=======\nd();\ne();\n>>>>>>> REPLACE\n", "a();\nc();", NULL);
	assert_string_equal(out, "a();\nd();\ne();");
	free(out);
}

static void test_edit_crlf(void **state)
{
	char *out;

	(void)state;
	/* CRLF answer, LF parent: an exact match */
	out = extract_ok("<<<<<<< SEARCH\r\nb();\r\n=======\r\nx();\r\n>>>>>>> REPLACE\r\n",
			 "a();\nb();\nc();\n", NULL);
	assert_string_equal(out, "a();\nx();\nc();\n");
	free(out);
	/* LF answer, CRLF parent: the new lines follow the parent's endings */
	out = extract_ok("<<<<<<< SEARCH\nb();\n=======\nx();\ny();\n>>>>>>> REPLACE\n",
			 "a();\r\nb();\r\nc();\r\n", NULL);
	assert_string_equal(out, "a();\r\nx();\r\ny();\r\nc();\r\n");
	free(out);
}

static void test_edit_unchanged_flag(void **state)
{
	struct ks_answer_info info;
	char *out;

	(void)state;
	out = extract_ok("<<<<<<< SEARCH\n    if (i < n)\n=======\n    if (i < n)\n>>>>>>> REPLACE\n", parent,
			 &info);
	assert_string_equal(out, parent);
	assert_true(info.unchanged);
	free(out);
}

static void test_edit_needs_parent(void **state)
{
	(void)state;
	extract_fails("<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n", NULL, "no parent source", NULL);
}

static void test_edit_count_limit(void **state)
{
	struct ks_strbuf answer;

	(void)state;
	ks_strbuf_init(&answer);
	for (int i = 0; i <= KS_ANSWER_MAX_EDITS; i++)
		ks_strbuf_addf(&answer, "<<<<<<< SEARCH\nline%d\n=======\nLINE%d\n>>>>>>> REPLACE\n", i, i);
	extract_fails(answer.buf, parent, "more than 64 SEARCH/REPLACE edits", NULL);
	ks_strbuf_release(&answer);
}

/* ---- size limits and hostile input ---- */

static void test_two_mib_answer_refused(void **state)
{
	size_t size = (size_t)2 << 20;
	char *answer = malloc(size + 1);
	char *big_parent;

	(void)state;
	assert_non_null(answer);
	memset(answer, 'x', size);
	memcpy(answer, "```cuda\n/* ksearch {} */\n", 25);
	answer[size] = '\0';
	extract_fails(answer, parent, "the answer is larger than 1048576 bytes", NULL);
	/* a parent that large is refused too */
	big_parent = answer;
	extract_fails("<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n", big_parent,
		      "the parent source is larger than", NULL);
	free(answer);
}

/*
 * The shapes that make naive matching quadratic: a megabyte of identical
 * lines, searched for a long run of the same line.  Linear matching takes
 * milliseconds; quadratic would take minutes.
 */
static void test_repetitive_input_stays_linear(void **state)
{
	size_t parent_lines = (KS_ANSWER_MAX_BYTES - 16) / 4, search_lines = 150000;
	struct ks_strbuf par, answer;
	clock_t start = clock();
	double seconds;

	(void)state;
	ks_strbuf_init(&par);
	for (size_t i = 0; i < parent_lines; i++)
		ks_strbuf_add(&par, "xyz\n", 4);
	ks_strbuf_init(&answer);
	ks_strbuf_adds(&answer, "<<<<<<< SEARCH\n");
	for (size_t i = 0; i < search_lines; i++)
		ks_strbuf_add(&answer, i % 2 ? " xyz\n" : "xyz\n", i % 2 ? 5 : 4);
	ks_strbuf_adds(&answer, "=======\n>>>>>>> REPLACE\n");
	extract_fails(answer.buf, par.buf, "found", NULL);
	ks_strbuf_release(&answer);

	ks_strbuf_init(&answer);
	ks_strbuf_adds(&answer, "<<<<<<< SEARCH\n");
	for (size_t i = 0; i < search_lines; i++)
		ks_strbuf_add(&answer, "xyz\n", 4);
	ks_strbuf_adds(&answer, "xyw\n=======\n>>>>>>> REPLACE\n");
	extract_fails(answer.buf, par.buf, "not found", NULL);
	ks_strbuf_release(&answer);
	ks_strbuf_release(&par);

	seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
	if (seconds > 20.0)
		fail_msg("matching took %.1f s: not linear", seconds);
}

/*
 * Replies assembled at random from the pieces that matter (markers, fences,
 * launch blocks, code, blanks, CR): each either yields a source or fails
 * with a reason, never anything else.
 */
static void test_random_replies_never_crash(void **state)
{
	static const char *const pieces[] = {
		"<<<<<<< SEARCH\n",
		"=======\n",
		">>>>>>> REPLACE\n",
		"```cuda\n",
		"```\n",
		"~~~\n",
		"```json\n",
		"/* ksearch {} */\n",
		"    if (i < n)\n",
		"        y[i] = 2.0f * x[i];\n",
		"}\n",
		"\n",
		"  \t \n",
		"\r\n",
		"text ",
		"{",
		"/*",
		"<<<<<<<",
		"``",
		"#include <cuda_bf16.h>\n",
	};
	unsigned seed = 12345;

	(void)state;
	for (int round = 0; round < 3000; round++) {
		struct ks_strbuf answer;
		struct ks_answer_info info;
		struct ks_error err = { { 0 } };
		char *out = NULL;
		int n = rand_r(&seed) % 24, rc;

		ks_strbuf_init(&answer);
		for (int i = 0; i < n; i++)
			ks_strbuf_adds(&answer, pieces[rand_r(&seed) % (sizeof(pieces) / sizeof(pieces[0]))]);
		rc = ks_answer_extract(answer.buf, round % 5 ? parent : NULL, &out, &info, &err);
		if (rc == 0) {
			assert_non_null(out);
			assert_int_not_equal(info.form, KS_ANSWER_NONE);
		} else {
			assert_int_equal(rc, -1);
			assert_null(out);
			assert_true(err.msg[0] != '\0');
		}
		free(out);
		ks_strbuf_release(&answer);
	}
}

static void test_error_messages_are_printable(void **state)
{
	struct ks_error err = { { 0 } };
	char *out = NULL;

	(void)state;
	assert_int_equal(
		ks_answer_extract("<<<<<<< SEARCH\n\x01\xff\xfe bad \x1b[31m\n=======\nx\n>>>>>>> REPLACE\n",
				  parent, &out, NULL, &err),
		-1);
	for (const char *p = err.msg; *p; p++)
		assert_true((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_file_in_cuda_fence),
		cmocka_unit_test(test_whole_file_every_code_language),
		cmocka_unit_test(test_whole_file_tilde_fence),
		cmocka_unit_test(test_whole_file_last_candidate_block_wins),
		cmocka_unit_test(test_whole_file_other_languages_never_taken),
		cmocka_unit_test(test_whole_file_needs_launch_block),
		cmocka_unit_test(test_whole_file_unclosed_fence_is_cut_off),
		cmocka_unit_test(test_whole_file_indented_fence),
		cmocka_unit_test(test_whole_file_bare_reply),
		cmocka_unit_test(test_whole_file_crlf_reply),
		cmocka_unit_test(test_no_code),
		cmocka_unit_test(test_edit_exact),
		cmocka_unit_test(test_edits_apply_in_order),
		cmocka_unit_test(test_edit_whitespace_tolerant),
		cmocka_unit_test(test_edit_tolerant_flags_only_that_edit),
		cmocka_unit_test(test_edit_exact_before_tolerant),
		cmocka_unit_test(test_edit_not_found),
		cmocka_unit_test(test_edit_matches_whole_lines_only),
		cmocka_unit_test(test_edit_ambiguous),
		cmocka_unit_test(test_edit_ambiguous_overlapping),
		cmocka_unit_test(test_edit_unterminated),
		cmocka_unit_test(test_edit_shape_checked_before_applying),
		cmocka_unit_test(test_edit_empty_search),
		cmocka_unit_test(test_edit_stray_replace_marker),
		cmocka_unit_test(test_edit_marker_variants),
		cmocka_unit_test(test_edits_win_over_whole_file_block),
		cmocka_unit_test(test_edit_deletes_and_keeps_unterminated_last_line),
		cmocka_unit_test(test_edit_crlf),
		cmocka_unit_test(test_edit_unchanged_flag),
		cmocka_unit_test(test_edit_needs_parent),
		cmocka_unit_test(test_edit_count_limit),
		cmocka_unit_test(test_two_mib_answer_refused),
		cmocka_unit_test(test_repetitive_input_stays_linear),
		cmocka_unit_test(test_random_replies_never_crash),
		cmocka_unit_test(test_error_messages_are_printable),
	};

	return cmocka_run_group_tests_name("answer", tests, NULL, NULL);
}
