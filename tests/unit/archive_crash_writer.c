/*
 * archive_crash_writer.c - a helper for tests/cli/t0100-archive-crash.sh:
 * inserts synthetic results into an archive in a loop, one transaction
 * each, and prints each id on stdout only after ks_archive_insert()
 * returned (so every id printed was committed).  The test kills it with
 * SIGKILL at random moments and checks that the archive verifies and
 * holds every printed id.
 *
 *   archive_crash_writer ROOT [--count N] [--map-size BYTES] [--nosync]
 *
 * The archive is ROOT/crashop/crash-gpu.  --map-size starts the map that
 * small (the default is 128 KiB) so that it grows, and kills land in the
 * middle of growing it too.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ksearch/archive/archive.h"

static double launch_edges[] = { 1, 2, 3, 9 };
static double smem_edges[] = { 0, 1, 16384, 49153, 102401 };
static struct ks_grid_axis grid[] = {
	{ KS_DESC_LAUNCHES, launch_edges, 4 },
	{ KS_DESC_SMEM_BYTES, smem_edges, 5 },
};

static const char *const verdicts[] = { "ok", "ok", "ok", "compile_error", "wrong", "crash", "timeout" };

static json_t *synthetic_record(unsigned *seed, uint64_t last_id)
{
	const char *verdict = verdicts[rand_r(seed) % 7];
	int ok = !strcmp(verdict, "ok");
	json_t *parents = json_array();

	if (last_id)
		json_array_append_new(parents, json_integer((json_int_t)(1 + rand_r(seed) % last_id)));
	return json_pack("{s:s, s:s, s:{s:i, s:i}, s:o, s:s, s:s, s:s, s:f, s:{s:i, s:f, s:i, s:i}}",
			 "family", "split_kv", "path", "seeds/split_kv.cu", "params", "SPLITS",
			 1 << (rand_r(seed) % 5), "WARPS", 4 << (rand_r(seed) % 2), "parents", parents,
			 "mutation", "param", "verdict", verdict, "evidence", ok ? "" : "synthetic failure",
			 "fitness", ok ? (rand_r(seed) % 100000) / 10000.0 : 0.0, "descriptors", "launches",
			 1 + rand_r(seed) % 9, "occupancy", 0.5, "smem_bytes", rand_r(seed) % 110000,
			 "registers", 32 + rand_r(seed) % 200);
}

int main(int argc, char **argv)
{
	struct ks_archive_options opts = {
		.flags = KS_ARCHIVE_CREATE, .grid = grid, .n_grid = 2, .map_size = 128 << 10
	};
	struct ks_archive *ar;
	struct ks_error err;
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid() << 16;
	long long count = -1;
	uint64_t last_id = 0;
	char source[4096];

	if (argc < 2) {
		fprintf(stderr, "usage: %s ROOT [--count N] [--map-size BYTES] [--nosync]\n", argv[0]);
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--count") && i + 1 < argc)
			count = atoll(argv[++i]);
		else if (!strcmp(argv[i], "--map-size") && i + 1 < argc)
			opts.map_size = (size_t)atoll(argv[++i]);
		else if (!strcmp(argv[i], "--nosync"))
			opts.flags |= KS_ARCHIVE_NOSYNC;
		else {
			fprintf(stderr, "%s: unknown argument '%s'\n", argv[0], argv[i]);
			return 2;
		}
	}
	if (ks_archive_open(&ar, argv[1], "crashop", "Crash GPU", &opts, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	for (long long n = 0; count < 0 || n < count; n++) {
		struct ks_archive_insert_result res;
		json_t *record = synthetic_record(&seed, last_id);
		int len, pad = rand_r(&seed) % 3000;

		/* a few sources repeat, to exercise the deduplicated store */
		len = snprintf(source, sizeof(source), "// synthetic kernel %u\n", rand_r(&seed) % 5000);
		memset(source + len, 'k', (size_t)pad);
		source[len + pad] = '\0';
		if (ks_archive_insert(ar, record, source, &res, &err) < 0) {
			fprintf(stderr, "insert: %s\n", err.msg);
			json_decref(record);
			ks_archive_close(ar);
			return 1;
		}
		json_decref(record);
		last_id = res.id;
		printf("%llu\n", (unsigned long long)res.id);
		fflush(stdout);
	}
	ks_archive_close(ar);
	return 0;
}
