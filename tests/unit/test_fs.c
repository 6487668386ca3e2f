/*
 * test_fs.c - ks_mkdir_p() makes every missing folder and refuses a file
 * in the way; ks_write_file_atomic() leaves the whole file and no
 * temporary one, and on failure the old file untouched.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ksearch/base/fs.h"
#include "ksearch/base/util.h"
#include "testlib.h"

static int is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static size_t entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static void test_mkdir_p_makes_every_missing_folder(void **state)
{
	char *dir = test_tmpdir();
	char *deep = ks_asprintf("%s/a/b/c", dir);
	char *file = ks_asprintf("%s/a/b/c/f", dir);
	char *under = ks_asprintf("%s/a/b/c/f/g", dir);
	struct ks_error err;

	(void)state;
	assert_int_equal(ks_mkdir_p(deep, &err), 0);
	assert_true(is_dir(deep));
	assert_int_equal(ks_mkdir_p(deep, &err), 0); /* already there */
	test_write(dir, "a/b/c/f", "x");
	assert_int_equal(ks_mkdir_p(file, &err), -1);
	assert_non_null(strstr(err.msg, "is not a folder"));
	assert_int_equal(ks_mkdir_p(under, &err), -1);
	assert_non_null(strstr(err.msg, "cannot create folder"));
	free(deep);
	free(file);
	free(under);
	test_rmtree(dir);
}

static void test_write_file_atomic_replaces_whole_or_not_at_all(void **state)
{
	char *dir = test_tmpdir();
	char *path = ks_asprintf("%s/out.txt", dir);
	char *missing = ks_asprintf("%s/no/such/out.txt", dir);
	struct ks_error err;
	char *text = NULL;
	size_t len = 0;

	(void)state;
	assert_int_equal(ks_write_file_atomic(path, "old\n", 4, &err), 0);
	assert_int_equal(ks_write_file_atomic(path, "new\0bytes", 9, &err), 0);
	assert_int_equal(ks_read_file(path, &text, &len, &err), 0);
	assert_int_equal(len, 9);
	assert_memory_equal(text, "new\0bytes", 9);
	assert_int_equal(entries(dir), 1); /* no temporary file left */
	assert_int_equal(ks_write_file_atomic(missing, "x", 1, &err), -1);
	assert_non_null(strstr(err.msg, "cannot write"));
	assert_int_equal(entries(dir), 1);
	free(text);
	free(path);
	free(missing);
	test_rmtree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mkdir_p_makes_every_missing_folder),
		cmocka_unit_test(test_write_file_atomic_replaces_whole_or_not_at_all),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
