#include "ksearch/base/fs.h"

#include <errno.h>
#include <stdint.h>
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

/* "1 MiB", "64 KiB", "1000 bytes" */
static void format_size(size_t bytes, char *buf, size_t size)
{
	if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
		snprintf(buf, size, "%zu MiB", bytes >> 20);
	else if (bytes >= 1024 && bytes % 1024 == 0)
		snprintf(buf, size, "%zu KiB", bytes >> 10);
	else
		snprintf(buf, size, "%zu bytes", bytes);
}

int ks_read_file_max(const char *path, size_t max, char **data, size_t *size, struct ks_error *err)
{
	FILE *f;
	struct ks_strbuf sb;
	struct stat st;
	char chunk[65536];
	size_t n;

	*data = NULL;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return ks_fail(err, "%s: is a folder, not a file", path);
	f = fopen(path, "rb");
	if (!f)
		return ks_fail(err, "%s: %s", path, strerror(errno));
	ks_strbuf_init(&sb);
	/* one byte past the limit says it is over, without reading on (/dev/zero never ends) */
	while (sb.len <= max &&
	       (n = fread(chunk, 1, sizeof(chunk) < max + 1 - sb.len ? sizeof(chunk) : max + 1 - sb.len, f)) >
		       0)
		ks_strbuf_add(&sb, chunk, n);
	if (ferror(f)) {
		int e = errno;

		fclose(f);
		ks_strbuf_release(&sb);
		return ks_fail(err, "%s: read error: %s", path, strerror(e));
	}
	fclose(f);
	if (sb.len > max) {
		char limit[32];

		ks_strbuf_release(&sb);
		format_size(max, limit, sizeof(limit));
		return ks_fail(err, "%s: larger than the limit of %s", path, limit);
	}
	if (size)
		*size = sb.len;
	*data = ks_strbuf_detach(&sb);
	return 0;
}

int ks_read_file(const char *path, char **data, size_t *size, struct ks_error *err)
{
	return ks_read_file_max(path, SIZE_MAX - 1, data, size, err);
}
