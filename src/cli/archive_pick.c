/*
 * archive_pick.c - picking one verified candidate of an archive for a
 * command that runs it again (`ksearch profile`, `ksearch sanitize`).
 */
#include <string.h>

#include "archive_cli.h"

int ks_archive_cli_pick_verified(const char *cmd, const char *verb, const struct ks_archive_pick *pick,
				 uint64_t id, int best, json_t **record, char **source, char **op_key,
				 char **gpu)
{
	struct ks_archive *ar = NULL;
	struct ks_error err;
	int ret = KS_EXIT_FAILED;

	if (ks_archive_cli_open(cmd, pick, &ar))
		return KS_EXIT_FAILED;
	if (best) {
		if (ks_archive_best(ar, record, source, &err) < 0) {
			ks_cli_error(cmd, "%s", err.msg);
			goto cleanup;
		}
		if (!*record) {
			ks_cli_error(cmd, "%s holds no verified candidate yet", ks_archive_path(ar));
			goto cleanup;
		}
	} else if (ks_archive_cli_get(cmd, ar, id, record, source) < 0) {
		goto cleanup;
	}
	if (strcmp(ks_record_str(*record, "verdict", ""), "ok")) {
		ks_cli_error(cmd, "candidate #%llu is %s: only verified candidates are %s",
			     (unsigned long long)ks_record_id(*record),
			     ks_record_str(*record, "verdict", "?"), verb);
		goto cleanup;
	}
	*op_key = ks_strdup(ks_archive_op(ar));
	*gpu = ks_strdup(ks_archive_gpu(ar));
	ret = 0;
cleanup:
	ks_archive_close(ar);
	return ret;
}

char **ks_archive_cli_record_params(const json_t *record, size_t *n)
{
	const json_t *params = json_object_get(record, "params"), *v;
	char **out = ks_calloc(json_object_size(params) + 1, sizeof(*out));
	const char *name;

	*n = 0;
	json_object_foreach((json_t *)params, name, v) out[(*n)++] =
		ks_asprintf("%s=%lld", name, (long long)json_integer_value(v));
	return out;
}

void ks_archive_cli_params_free(char **params, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(params[i]);
	free(params);
}
