/*
 * bench-archive.c - fill an archive with N synthetic candidates, one
 * transaction each as the search inserts them, and report the insert rate
 * and the bytes on disk per candidate, split by database.  The records
 * look like the coordinator's (five workloads, descriptors, kernels,
 * timings; a realistic mix of verdicts) and each has its own ~2 KB source.
 * tools/bench-archive.sh runs it and then times the inspection commands.
 *
 *   bench-archive ROOT N [--nosync] [--seed S]
 *
 * The archive is ROOT/gqa/bench-gpu, with the gqa operator's grid.
 */
#include <jansson.h>
#include <lmdb.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ksearch/archive/archive.h"
#include "ksearch/base/util.h"

static double launch_edges[] = { 1, 2, 3, 9 };
static double smem_edges[] = { 0, 1, 16384, 49153, 102401, 232449 };
static double tc_edges[] = { 0, 1, 2, 3 };
static struct ks_grid_axis grid[] = {
	{ KS_DESC_LAUNCHES, launch_edges, 4 },
	{ KS_DESC_SMEM_BYTES, smem_edges, 6 },
	{ KS_DESC_TENSOR_CORES, tc_edges, 4 },
};

static const struct {
	const char *id;
	double ref_us;
} workloads[] = {
	{ "b1_kv546", 31.7 },	  { "b16_kv8636", 262.4 },   { "b16_kv23079", 671.0 },
	{ "b64_kv28815", 861.2 }, { "b64_kv46287", 1372.9 },
};

/* A mix of verdicts as a search produces them: mostly ok, then compile errors and wrong answers. */
static const char *pick_verdict(unsigned *seed)
{
	int r = rand_r(seed) % 100;

	return r < 60	? "ok"
	       : r < 75 ? "compile_error"
	       : r < 85 ? "wrong"
	       : r < 90 ? "contract_error"
	       : r < 94 ? "crash"
	       : r < 97 ? "timeout"
	       : r < 99 ? "refused"
			: "implausible";
}

static double uniform(unsigned *seed)
{
	return (rand_r(seed) + 0.5) / ((double)RAND_MAX + 1);
}

/* Rounded as a coordinator would print measured times: 4 significant digits. */
static double round4(double v)
{
	char text[32];

	snprintf(text, sizeof(text), "%.4g", v);
	return strtod(text, NULL);
}

/* A unique kernel of about 2 KB (1.6 to 2.4 KB). */
static void make_source(char *buf, size_t size, uint64_t i, unsigned *seed)
{
	int tile = 16 << (rand_r(seed) % 4), splits = 1 << (rand_r(seed) % 5),
	    warps = 4 << (rand_r(seed) % 2);
	int len = snprintf(
		buf, size,
		"/* ksearch\n"
		"{ \"params\": {\"TILE\": [16, 32, 64, 128], \"SPLITS\": [1, 2, 4, 8, 16], \"WARPS\": [4, "
		"8]},\n"
		"  \"scratch\": {\"part_o\": [\"float32\", \"B*HQ*SPLITS*D\"], \"part_lse\": [\"float32\", "
		"\"B*HQ*SPLITS\"]},\n"
		"  \"launch\": [{\"kernel\": \"decode_%llu\", \"grid\": [\"B*HKV\", \"SPLITS\"], \"block\": "
		"[\"WARPS*32\"],\n"
		"              \"smem\": \"TILE*D*4\", \"args\": [\"q\", \"k_cache\", \"v_cache\", "
		"\"kv_indptr\",\n"
		"              \"kv_indices\", \"sm_scale\", \"part_o\", \"part_lse\"]}] }\n"
		"*/\n"
		"// candidate %llu: tile %d, %d splits, %d warps\n"
		"#include <cuda_bf16.h>\n"
		"extern \"C\" __global__ void decode_%llu(const __nv_bfloat16 *q, const __nv_bfloat16 "
		"*k_cache,\n"
		"    const __nv_bfloat16 *v_cache, const int *kv_indptr, const int *kv_indices, float "
		"sm_scale,\n"
		"    float *part_o, float *part_lse)\n"
		"{\n"
		"    extern __shared__ float tile[];\n"
		"    const int b = blockIdx.x / 4, hkv = blockIdx.x %% 4, split = blockIdx.y;\n"
		"    const int begin = kv_indptr[b], end = kv_indptr[b + 1];\n"
		"    const int chunk = (end - begin + %d - 1) / %d;\n"
		"    const int lo = begin + split * chunk, hi = min(end, lo + chunk);\n"
		"    float m = -INFINITY, l = 0.f, acc[8] = {0};\n"
		"    for (int t = lo; t < hi; t += %d) {\n"
		"        const int page = kv_indices[t + threadIdx.x / 32];\n"
		"        tile[threadIdx.x] = __bfloat162float(k_cache[page * 512 + hkv * 128 + threadIdx.x "
		"%% "
		"128]);\n"
		"        __syncthreads();\n",
		(unsigned long long)i, (unsigned long long)i, tile, splits, warps, (unsigned long long)i,
		splits, splits, tile);
	/* a variable amount of unrolled work, so sizes spread as real kernels' do */
	for (int u = 0, n = rand_r(seed) % 9; u < n && (size_t)len + 200 < size; u++)
		len += snprintf(buf + len, size - (size_t)len,
				"        acc[%d] += tile[(threadIdx.x + %d) %% %d] * sm_scale * %.6f;\n",
				u % 8, u * 7 + (int)(i % 13), tile, uniform(seed));
	snprintf(buf + len, size - (size_t)len,
		 "        const float s = acc[0] * %.6f;\n"
		 "        const float m_new = fmaxf(m, s);\n"
		 "        l = l * __expf(m - m_new) + __expf(s - m_new);\n"
		 "        m = m_new;\n"
		 "        __syncthreads();\n"
		 "    }\n"
		 "    const int out = (b * 32 + hkv * 8 + threadIdx.x / 32) * %d + split;\n"
		 "    part_lse[out] = m + __logf(l);\n"
		 "    for (int d = 0; d < 8; d++)\n"
		 "        part_o[out * 128 + (threadIdx.x %% 16) * 8 + d] = acc[d] / l;\n"
		 "}\n",
		 uniform(seed), splits);
}

static json_t *make_record(uint64_t i, unsigned *seed)
{
	const char *verdict = pick_verdict(seed);
	int ok = !strcmp(verdict, "ok");
	/* fitness drifts up over the run, so cells keep improving as in a search */
	double fitness = ok ? round4(0.2 + 2.5 * uniform(seed) * (1 + log1p((double)i) / 8)) : 0;
	int launches = 1 + rand_r(seed) % 4;
	json_t *wl = json_array(), *kernels = json_array(), *parents = json_array();
	int mutation = rand_r(seed) % 10;
	char created[32];
	time_t now = time(NULL);

	strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	if (i > 1)
		json_array_append_new(parents, json_integer((json_int_t)(1 + rand_r(seed) % (i - 1))));
	for (size_t w = 0; ok && w < sizeof(workloads) / sizeof(workloads[0]); w++) {
		double speed = fitness * (0.8 + 0.4 * uniform(seed)),
		       median = round4(workloads[w].ref_us / speed);
		double floor_us = round4(workloads[w].ref_us / 40);

		json_array_append_new(
			wl, json_pack("{s:s, s:f, s:f, s:f, s:i, s:f, s:f, s:f, s:f}", "id", workloads[w].id,
				      "median_us", median, "p10_us", round4(median * 0.98), "p90_us",
				      round4(median * 1.04), "reps", 20 + rand_r(seed) % 80, "ref_median_us",
				      workloads[w].ref_us, "speedup", round4(workloads[w].ref_us / median),
				      "floor_us", floor_us, "sol_fraction", round4(floor_us / median)));
	}
	for (int k = 0; k < launches && k < 2; k++)
		json_array_append_new(kernels, json_pack("{s:s, s:i, s:i, s:i, s:i, s:i}", "name",
							 k ? "merge" : "decode_split", "registers",
							 32 + rand_r(seed) % 160, "smem_static", 0, "stack",
							 0, "spills", 0, "max_threads", 1024));
	return json_pack(
		"{s:s, s:s, s:s, s:{s:i, s:i, s:i}, s:o, s:s, s:o, s:o, s:s, s:s, s:o, s:f, s:f,"
		" s:{s:i, s:f, s:i, s:i, s:i, s:i, s:i}, s:o, s:{s:f, s:f, s:f}, s:s}",
		"arch", "sm_90a", "family", "split_kv", "path", "operators/gqa/seeds/split_kv.cu", "params",
		"TILE", 16 << (rand_r(seed) % 4), "SPLITS", 1 << (rand_r(seed) % 5), "WARPS",
		4 << (rand_r(seed) % 2), "parents", parents, "mutation",
		mutation < 5   ? "param"
		: mutation < 7 ? "crossover"
		: mutation < 9 ? "llm"
			       : "tune",
		"prompt_id",
		mutation >= 7 && mutation < 9 ? json_integer(1 + rand_r(seed) % 12) : json_null(), "llm",
		mutation >= 7 && mutation < 9
			? json_pack("{s:i, s:i, s:f}", "prompt_tokens", 3000 + rand_r(seed) % 4000,
				    "completion_tokens", 800 + rand_r(seed) % 2000, "cost_usd",
				    round4(0.01 + uniform(seed) / 20))
			: json_null(),
		"verdict", verdict, "evidence",
		ok ? ""
		   : "kernel.cu(42): error: identifier \"acc_lo\" is undefined\n"
		     "kernel.cu(57): error: expected a \";\"\n2 errors detected in the compilation.",
		"workloads", wl, "fitness", fitness, "sol_fraction", ok ? round4(fitness / 40) : 0.0,
		"descriptors", "smem_bytes", rand_r(seed) % 4 ? rand_r(seed) % 240000 : 0, "occupancy",
		round4(uniform(seed)), "launches", launches, "registers", 32 + rand_r(seed) % 160,
		"tensor_cores", rand_r(seed) % 3, "async_copy", rand_r(seed) % 3, "load_width",
		4 << (rand_r(seed) % 3), "kernels", kernels, "timing", "compile_s",
		round4(0.2 + uniform(seed)), "verify_s", round4(0.3 * uniform(seed)), "time_s",
		round4(ok ? 1 + uniform(seed) : 0), "created", created);
}

static double seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Pages each named database holds, from LMDB itself (the archive must be closed). */
static void print_breakdown(const char *dir, uint64_t n)
{
	static const char *const dbs[] = { "candidates", "sources",    "source_text", "dedup", "grid",
					   "by_fitness", "by_verdict", "history",     "meta" };
	MDB_env *env;
	MDB_txn *txn;

	if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 16) || mdb_env_open(env, dir, MDB_RDONLY, 0644) ||
	    mdb_txn_begin(env, NULL, MDB_RDONLY, &txn)) {
		fprintf(stderr, "cannot open %s to measure it\n", dir);
		return;
	}
	printf("%-12s %12s %12s %14s\n", "database", "entries", "MB", "bytes/cand");
	for (size_t i = 0; i < sizeof(dbs) / sizeof(dbs[0]); i++) {
		MDB_dbi dbi;
		MDB_stat st;
		double bytes;

		if (mdb_dbi_open(txn, dbs[i], 0, &dbi) || mdb_stat(txn, dbi, &st))
			continue;
		bytes = (double)(st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages) * st.ms_psize;
		printf("%-12s %12zu %12.1f %14.1f\n", dbs[i], st.ms_entries, bytes / 1e6, bytes / (double)n);
	}
	mdb_txn_abort(txn);
	mdb_env_close(env);
}

int main(int argc, char **argv)
{
	struct ks_archive_options opts = { .flags = KS_ARCHIVE_CREATE, .grid = grid, .n_grid = 3 };
	struct ks_archive *ar;
	struct ks_archive_metrics m;
	struct ks_error err;
	struct stat st;
	unsigned seed = 1;
	uint64_t n;
	size_t record_bytes = 0;
	double start, last;
	char source[4096], *dir, *data;

	if (argc < 3) {
		fprintf(stderr, "usage: %s ROOT N [--nosync] [--seed S]\n", argv[0]);
		return 2;
	}
	n = strtoull(argv[2], NULL, 10);
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--nosync"))
			opts.flags |= KS_ARCHIVE_NOSYNC;
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = (unsigned)atoi(argv[++i]);
		else {
			fprintf(stderr, "%s: unknown argument '%s'\n", argv[0], argv[i]);
			return 2;
		}
	}
	if (ks_archive_open(&ar, argv[1], "gqa", "Bench GPU", &opts, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	printf("filling %s with %llu candidates, one transaction each%s\n", ks_archive_path(ar),
	       (unsigned long long)n,
	       (opts.flags & KS_ARCHIVE_NOSYNC) ? " (no fsync per commit)" : " (fsync per commit)");
	fflush(stdout);
	start = last = seconds();
	for (uint64_t i = 1; i <= n; i++) {
		json_t *record = make_record(i, &seed);
		char *text = json_dumps(record, KS_ARCHIVE_RECORD_JSON);

		record_bytes += strlen(text);
		free(text);
		make_source(source, sizeof(source), i, &seed);
		if (ks_archive_insert(ar, record, source, NULL, &err) < 0) {
			fprintf(stderr, "insert %llu: %s\n", (unsigned long long)i, err.msg);
			return 1;
		}
		json_decref(record);
		if (i % 100000 == 0) {
			double now = seconds();

			printf("  %9llu  %8.0f inserts/s (last 100000)\n", (unsigned long long)i,
			       100000 / (now - last));
			fflush(stdout);
			last = now;
		}
	}
	last = seconds() - start;
	if (ks_archive_metrics(ar, &m, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	dir = ks_strdup(ks_archive_path(ar));
	ks_archive_close(ar);
	data = ks_path_join(dir, "data.mdb");
	stat(data, &st);
	printf("inserted     %llu in %.1f s: %.0f inserts/s\n", (unsigned long long)n, last, n / last);
	printf("data.mdb     %.1f MB (%.0f bytes/candidate; allocated %.0f bytes/candidate)\n",
	       st.st_size / 1e6, (double)st.st_size / n, (double)st.st_blocks * 512 / n);
	printf("source text  %.0f bytes/candidate (%llu distinct sources)\n", (double)m.source_bytes / n,
	       (unsigned long long)m.sources);
	printf("record JSON  %.0f bytes/candidate (as given; the archive adds id, op, gpu, source_hash)\n",
	       (double)record_bytes / n);
	printf("grid         %llu of %llu cells filled, QD-score %.1f, best %.3f\n",
	       (unsigned long long)m.cells_filled, (unsigned long long)m.cells, m.qd_score, m.best_fitness);
	print_breakdown(dir, n);
	free(data);
	free(dir);
	return 0;
}
