#include "ksearch/base/fs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ksearch/base/util.h"

int ks_mkdir_p(const char *dir, struct ks_error *err)
{
	char *copy = ks_strdup(dir);
	struct stat st;
	int ret = -1;

	for (char *p = copy + 1;; p++) {
		char saved = *p;

		if (saved != '/' && saved != '\0')
			continue;
		*p = '\0';
		if (mkdir(copy, 0777) < 0 && errno != EEXIST) {
			ks_fail(err, "cannot create folder %s: %s", copy, strerror(errno));
			goto cleanup;
		}
		*p = saved;
		if (!saved)
			break;
	}
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		ks_fail(err, "%s exists and is not a folder", dir);
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(copy);
	return ret;
}

int ks_write_file_atomic(const char *path, const void *data, size_t len, struct ks_error *err)
{
	char *tmp = ks_asprintf("%s.tmp.%ld", path, (long)getpid());
	FILE *f = fopen(tmp, "w");
	int ret = -1;

	if (!f) {
		ks_fail(err, "cannot write %s: %s", tmp, strerror(errno));
		goto cleanup;
	}
	if (fwrite(data, 1, len, f) != len || fflush(f)) {
		ks_fail(err, "writing %s: %s", tmp, strerror(errno));
		fclose(f);
		goto cleanup;
	}
	if (fclose(f)) {
		ks_fail(err, "writing %s: %s", tmp, strerror(errno));
		goto cleanup;
	}
	if (rename(tmp, path) < 0) {
		ks_fail(err, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
		goto cleanup;
	}
	ret = 0;
cleanup:
	if (ret < 0)
		unlink(tmp);
	free(tmp);
	return ret;
}
