/*
 * test_includes.c - a candidate may make the compiler read the toolkit's
 * headers and nothing else: every spelling of a directive that reads a
 * file is found (digraphs, trigraphs, comments and spliced lines between
 * its pieces, a string that fools a naive comment stripper), quoted,
 * absolute, '..' and macro targets are refused, and ordinary kernels
 * (#pragma, #define, token pasting, angle-bracket toolkit headers) pass.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ksearch/compile/includes.h"

static const char *const refused[] = {
	"#include \"/proc/self/environ\"\n",
	"#include \"helper.cuh\"\n",
	"  #   include \"x.h\"\n",
	"#/* a comment */include \"x.h\"\n",
	"# // no: a line comment ends the directive\ninclude \"x.h\"\n",
	"#inc\\\nlude \"x.h\"\n",
	"#inc\\  \r\nlude \"x.h\"\n",
	"#include \\\n\"x.h\"\n",
	"%:include \"x.h\"\n",
	"?\?=include \"x.h\"\n",
	"#define F \"/etc/passwd\"\n#include F\n",
	"#define F <cuda_bf16.h>\n#include F\n",
	"#include </etc/passwd>\n",
	"#include <cuda/../../../../etc/passwd>\n",
	"#include <cuda//std>\n",
	"#include <>\n",
	"#include <cuda_bf16.h\n",
	"#include\n",
	"#include_next \"x.h\"\n",
	"#import \"x.h\"\n",
	"#embed \"/etc/passwd\"\n",
	"#if __has_include(\"/root/.ssh/id_rsa\")\n#endif\n",
	"#if __has_include ( </etc/shadow> )\n#endif\n",
	"#if __has_include_next(\"x\")\n#endif\n",
	"#if __has_include__(\"/etc/passwd\")\n#endif\n",
	"#define H __has_include\n#if H(\"x\")\n#endif\n",
	/* a comment opener inside a string: a stripper blind to strings drops the directive */
	"const char *a = \"/*\";\n#include \"/etc/passwd\"\nconst char *b = \"*/\";\n",
	/* a raw string the scanner might end early or late */
	"const char *r = R\"x(\n)\")x\";\n#include \"/etc/passwd\"\n",
	"const char *r = u8R\"(text)\";\n#include \"/etc/passwd\"\n",
	/* a char literal with a quote, and digit separators */
	"char q = '\"'; int n = 1'000'000;\n#include \"/etc/passwd\"\n",
	/* fails closed: a directive in a comment is refused too (say why, the user deletes it) */
	"/* #include \"x.h\" */\n",
	"// #include \"x.h\"\n",
};

static const char *const allowed[] = {
	"#include <cuda_bf16.h>\n",
	"# include < cuda/pipeline >\n",
	"#include <cuda/std/cstdint>\n",
	"#include <cooperative_groups/reduce.h>\n",
	"%:include <cuda_fp16.h>\n",
	"#include_next <cuda_fp16.h>\n",
	"#if __has_include(<cuda_fp8.h>)\n#include <cuda_fp8.h>\n#endif\n",
	"#if __has_include_next (<cuda_fp8.h>) && __has_include__(<cuda.h>)\n#endif\n",
	"#pragma unroll 4\n#define CAT(a, b) a##b\n#define STR(x) #x\n",
	"const char *s = \"# not a directive\"; // nor this: #pragma\n",
	"int include = 3; int x = include * 2; /* include \"x\" without a hash is a word */\n",
	"extern \"C\" __global__ void k(float *y) { y[0] = 1.0f % 2 ? 1 : 0; }\n",
	"",
};

static void test_file_reading_directives_are_refused(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(refused) / sizeof(*refused); i++) {
		char why[512] = "";

		if (!ks_includes_check(refused[i], why, sizeof(why)))
			fail_msg("not refused: %s", refused[i]);
		if (!strstr(why, "line ") || !strstr(why, "angle brackets"))
			fail_msg("%s: the evidence names no line or rule: %s", refused[i], why);
	}
}

static void test_toolkit_headers_and_ordinary_code_pass(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(allowed) / sizeof(*allowed); i++) {
		char why[512] = "";

		if (ks_includes_check(allowed[i], why, sizeof(why)))
			fail_msg("refused: %s: %s", allowed[i], why);
	}
}

static void test_evidence_names_the_original_line(void **state)
{
	char why[512];

	(void)state;
	/* two spliced lines and a block comment of three lines come before it: line 7 */
	assert_int_equal(ks_includes_check("#define A 1 \\\n + 2\n/* one\n two\n three */\n"
					   "int x;\n#include \"/etc/hostname\"\n",
					   why, sizeof(why)),
			 1);
	assert_non_null(strstr(why, "line 7: "));
	assert_non_null(strstr(why, "/etc/hostname"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_reading_directives_are_refused),
		cmocka_unit_test(test_toolkit_headers_and_ordinary_code_pass),
		cmocka_unit_test(test_evidence_names_the_original_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
