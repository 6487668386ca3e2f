/*
 * worker.c - the GPU evaluator process: verification and timing that no
 * kernel can fool (see worker.h for the protocol, docs/design.md for the
 * threat model each defence answers).
 */
#include "ksearch/evaluate/worker.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ksearch/base/cpus.h"
#include "ksearch/base/frame.h"
#include "ksearch/base/hash.h"
#include "ksearch/base/pcg.h"
#include "ksearch/base/random.h"
#include "ksearch/base/util.h"
#include "ksearch/compile/nvrtc.h"
#include "ksearch/evaluate/compare.h"
#include "ksearch/evaluate/cuda.h"
#include "ksearch/evaluate/devpool.h"
#include "ksearch/evaluate/gpukit.h"
#include "ksearch/evaluate/launch.h"
#include "ksearch/evaluate/result.h"
#include "ksearch/op/candidate.h"
#include "ksearch/op/op.h"
#include "ksearch/op/verdict.h"

/* A time this far under the floor cannot be real (the floor's bandwidth is a copy kernel's). */
#define SOL_IMPLAUSIBLE 1.25

/* Guard band on each side of every buffer a kernel is given. */
#define GUARD_BYTES (64 * 1024)
/* The job's random guard pattern (a power of two): each band holds it from a random offset. */
#define GUARD_PATTERN_BYTES (64 * 1024)
/* Buffers start at this alignment (cuMemAlloc's own), so vector loads still work. */
#define BUF_ALIGN 256

/*
 * Each timed repetition of a candidate is verified against the reference
 * with probability 1/VERIFY_ONE_IN, decided after it ran, and only verified
 * repetitions are timed: a kernel that skips work when it guesses it is
 * not checked gains nothing, and is caught once a guess is wrong.
 */
#define VERIFY_ONE_IN 2
#define MIN_VERIFIED 10

/*
 * A workload with a structure (KV lengths, page tables) is timed on
 * DEFAULT_SPLITS splits of it, one of each enum ks_split in turn, drawn
 * for the job; each split gets SPLIT_VERIFIED verified samples, and the
 * workload's time is the slowest split's median (evaluator 4; the median
 * of the three under 3 let a kernel twice as slow on one kind win).
 */
#define DEFAULT_SPLITS 3
#define MAX_SPLITS KS_RESULT_MAX_SPLITS
#define SPLIT_VERIFIED 7
/*
 * The reference is timed on REF_DRAWS canonical splits of each kind, so its
 * median is a typical time (on one split of each, a kernel that gives
 * each request a CTA was off by up to 40%, by how the longest request fell).
 */
#define REF_DRAWS 3
/* How much longer than on the first split the reference may take on another (skewed: 15x seen). */
#define SPLIT_REF_SLOWER 30

/* Device printf: bytes kept as evidence, and the capture file's size at which it is emptied. */
#define PRINTF_KEEP 2048
#define PRINTF_TRIM (1 << 20)

/* Replies that the coordinator does not read within this long end the worker. */
#define REPLY_WRITE_MS 60000
/*
 * A deadline is announced this much longer than the step asks, and not
 * again while the one standing covers the step and is no longer than that:
 * a message per timed run woke the coordinator every few hundred
 * microseconds, and on a busy host each wake-up cost the worker its CPU
 * (BENCHMARKS.md, "Why evaluations slowed beside other workers").  A hang is
 * found at most this much later.
 */
#define ANNOUNCE_SLACK_S 1.0

#define MAX_LAUNCHES 16
#define MAX_SCRATCH 16
#define MAX_TENSORS 64 /* inputs, and outputs, of an operator */

/* A device buffer with a guard band on each side: [base, ptr) and [ptr + bytes, base + alloc). */
struct gbuf {
	CUdeviceptr base, ptr;
	size_t bytes, alloc;
};

/* A module-scope variable of a loaded candidate, and its keyed sum right after loading. */
struct module_var {
	char *name;
	CUdeviceptr ptr;
	size_t bytes;
	uint64_t sum;
};

/* A loaded program: a candidate or the reference. */
struct program {
	const struct ks_candidate *cand;
	const int64_t *params;
	CUmodule module;
	CUfunction fns[MAX_LAUNCHES];
	struct module_var *vars;
	size_t n_vars;
};

/* The inputs of one workload. */
struct inputs {
	struct gbuf *buf; /* zero-sized for scalars */
	double *scalar;	  /* scalar inputs' values */
	uint64_t *sum;	  /* keyed sums after the last generation */
};

struct outputs {
	struct gbuf *buf;
	int64_t *numel;
};

struct scratch {
	struct gbuf buf[MAX_SCRATCH];
	int zeroed[MAX_SCRATCH];
	size_t n;
};

/* The guard bands of one set of buffers, as the kit's region table, and what each region guards. */
/*
 * Two arrays of n: regions is what the device's guard table holds (copied
 * as it is), what says in words which band a region is.
 */
struct guards {
	struct ks_guard_region *regions; /* kept here: the device copy is written anew for each check */
	CUdeviceptr table;
	size_t table_bytes;
	unsigned int n;
	size_t alloc_regions, alloc_what;
	uint64_t max_bytes;
	char (*what)[96]; /* "after output 'lse'" per region */
};

struct settings {
	int trials; /* input sets per check workload */
	int min_reps, max_reps, warmup;
	double warmup_s;   /* warm-up lasts at least this long */
	int fixed_samples; /* > 0: stop at this many samples (a split), not when the median settles */
	int time_cap_ms;   /* per benchmark workload */
	int splits;	   /* length splits a structured benchmark workload is timed on */
};

/* One structure of a workload: which split of its lengths, and the seed of that split and page table. */
struct structure {
	uint64_t seed;
	enum ks_split split;
};

/*
 * What this job keeps secret from the candidate, each drawn from the OS on
 * its own (start_job()), so that what a kernel can read (a band, an input)
 * says nothing of the rest: which runs are verified (rng, whose draws never
 * reach the device), the checksum key (a kernel argument of the checksum
 * launches, never in device memory), the guard pattern (checked against
 * this copy, uploaded before every check).
 */
struct job {
	json_int_t id;
	char token[64];
	struct ks_pcg32 rng;
	struct ks_hash_key key;
	unsigned char pattern[GUARD_PATTERN_BYTES];
};

struct worker {
	int out_fd;
	const struct ks_cuda *cu;
	struct ks_gpukit *kit;
	CUstream stream;
	struct ks_device_profile prof;
	CUevent start, stop;
	CUdeviceptr slots;   /* scratch words for queued checks */
	CUdeviceptr pattern; /* the device copy of job.pattern, written anew before every guard launch */
	size_t n_slots;
	struct job job;
	CUevent prepared; /* recorded before a timed run's preparation: prepared..start is its GPU time */
	/* where a job's time goes besides the timed launches (seconds), for the record */
	struct {
		double inputs, prepare, checks, verify, wait, warmup, prechecks, announce;
		int runs, verified, announcements;
		uint64_t misses_before; /* the pool's, when the job started */
	} overhead;
	/* device buffers kept from one evaluation to the next (devpool.h) */
	struct ks_devpool pool;
	double announced_until; /* the deadline the coordinator holds (our clock); 0: none announced */
	/* device printf, captured from our stdout */
	char printf_head[PRINTF_KEEP + 1];
	size_t printf_kept;
	uint64_t printf_bytes;
	/*
	 * The operator of the last job, its reference and the reference's
	 * times.  ref (the reference's first params) is timed: fitness's
	 * baseline.  oracle computes the outputs candidates are verified
	 * against: the reference's last params when it declares more than one
	 * combination (the same code, more of it in flight), else ref itself.
	 */
	char *op_dir;
	struct ks_op op;
	struct ks_candidate ref_cand;
	struct program ref, oracle_own;
	const struct program *oracle;
	double *ref_us; /* per benchmark workload; < 0: not measured yet */
};

/* What ends a job early: the verdict (not ok) with its evidence. */
struct outcome {
	enum ks_verdict verdict;
	int internal; /* ksearch's own failure, not the candidate's */
	char evidence[KS_ERROR_MAX];
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int fail_cuda(struct outcome *oc, enum ks_verdict verdict, CUresult rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Record a failure; CUDA's words go last so the evidence reads "what: why". */
static int fail_cuda(struct outcome *oc, enum ks_verdict verdict, CUresult rc, const char *fmt, ...)
{
	char what[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	oc->verdict = verdict;
	if (rc != CUDA_SUCCESS)
		snprintf(oc->evidence, sizeof(oc->evidence), "%s: %s", what, ks_cuda_strerror(rc));
	else
		snprintf(oc->evidence, sizeof(oc->evidence), "%s", what);
	return -1;
}

static int fail_internal(struct outcome *oc, const char *msg)
{
	oc->internal = 1;
	oc->verdict = KS_VERDICT_CRASH;
	snprintf(oc->evidence, sizeof(oc->evidence), "%s", msg);
	return -1;
}

/* Send msg (stolen) to the coordinator, stamped with the job's id and token. */
static void send_msg(struct worker *w, json_t *msg)
{
	struct ks_error err;

	if (w->job.token[0]) {
		json_object_set_new(msg, "job", json_integer(w->job.id));
		json_object_set_new(msg, "token", json_string(w->job.token));
	}
	if (ks_frame_write(w->out_fd, ks_now_ms() + REPLY_WRITE_MS, msg, NULL, 0, &err) < 0) {
		/* the coordinator is gone or stopped listening: nothing left to work for */
		json_decref(msg);
		exit(1);
	}
	json_decref(msg);
}

/*
 * Tell the coordinator how long the next step may take before it should
 * give up on us: unless the deadline it holds already covers the step and
 * ends at most ANNOUNCE_SLACK_S after the step would (a longer one, left
 * from a slower step, would let a hang go unnoticed for longer).
 */
static void announce(struct worker *w, double seconds)
{
	double t0 = now_s(), until = t0 + seconds;

	if (w->announced_until >= until && w->announced_until <= until + ANNOUNCE_SLACK_S)
		return;
	seconds += ANNOUNCE_SLACK_S;
	send_msg(w, json_pack("{s:s, s:I}", "type", "deadline", "ms", (json_int_t)(seconds * 1000.0)));
	/* the coordinator's deadline starts when it reads this, later than t0: ours is the earlier */
	w->announced_until = t0 + seconds;
	w->overhead.announce += now_s() - t0;
	w->overhead.announcements++;
}

/* ---- device printf: captured, bounded, evidence only ---- */

/*
 * The driver writes device printf to stdout at synchronisation points.
 * Our stdout is an anonymous file that nothing reads as a message: what a
 * kernel prints is kept (the first PRINTF_KEEP bytes of a job) and counted,
 * and shown as evidence, never parsed.
 */
static int printf_capture_start(void)
{
	int fd = memfd_create("ksearch-device-printf", MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fd != 1 && (dup2(fd, 1) < 0 || close(fd) < 0))
		return -1;
	return fcntl(1, F_SETFL, fcntl(1, F_GETFL) | O_APPEND);
}

/* Move what was printed since the last call into the job's evidence and empty the file. */
static void printf_collect(struct worker *w)
{
	struct stat st;
	ssize_t n;

	fflush(stdout);
	if (fstat(1, &st) < 0 || st.st_size <= 0)
		return;
	if (w->printf_kept < PRINTF_KEEP) {
		n = pread(1, w->printf_head + w->printf_kept, PRINTF_KEEP - w->printf_kept, 0);
		if (n > 0)
			w->printf_kept += (size_t)n;
	}
	w->printf_bytes += (uint64_t)st.st_size;
	if (ftruncate(1, 0) < 0)
		return;
}

static void printf_reset(struct worker *w)
{
	printf_collect(w);
	w->printf_kept = 0;
	w->printf_bytes = 0;
}

/* What the kernel printed into res (the byte count and the first bytes, anything unprintable as '?'). */
static void printf_into(struct worker *w, struct ks_result *res)
{
	printf_collect(w);
	if (!w->printf_bytes)
		return;
	for (size_t i = 0; i < w->printf_kept; i++) {
		unsigned char c = (unsigned char)w->printf_head[i];

		if ((c < 0x20 && c != '\n' && c != '\t') || c >= 0x7f)
			w->printf_head[i] = '?';
	}
	w->printf_head[w->printf_kept] = '\0';
	res->printf_bytes = w->printf_bytes;
	free(res->printf_head);
	res->printf_head = ks_strdup(w->printf_head);
}

/* ---- guarded buffers ---- */

static void gbuf_free(struct worker *w, struct gbuf *b)
{
	ks_devpool_put(&w->pool, b->base, b->alloc);
	memset(b, 0, sizeof(*b));
}

static CUresult gbuf_alloc(struct worker *w, size_t bytes, struct gbuf *b)
{
	size_t body = (bytes + BUF_ALIGN - 1) / BUF_ALIGN * BUF_ALIGN;
	CUresult rc;

	memset(b, 0, sizeof(*b));
	b->alloc = GUARD_BYTES + (body ? body : BUF_ALIGN) + GUARD_BYTES;
	rc = ks_devpool_get(&w->pool, b->alloc, &b->base);
	if (rc != CUDA_SUCCESS)
		return rc;
	b->ptr = b->base + GUARD_BYTES;
	b->bytes = bytes;
	return CUDA_SUCCESS;
}

static void guards_release(struct worker *w, struct guards *g)
{
	ks_devpool_put(&w->pool, g->table, g->table_bytes);
	free(g->regions);
	free(g->what);
	memset(g, 0, sizeof(*g));
}

/* One more buffer to guard: its two bands, each the job's pattern from a random offset. */
static void guards_add(struct guards *g, const struct gbuf *b, const char *kind, const char *name)
{
	struct ks_guard_region before = { b->base, (uint64_t)(b->ptr - b->base),
					  ks_os_random64() & (GUARD_PATTERN_BYTES - 1) };
	struct ks_guard_region after = { b->ptr + b->bytes,
					 (uint64_t)(b->base + b->alloc - b->ptr - b->bytes),
					 ks_os_random64() & (GUARD_PATTERN_BYTES - 1) };

	KS_ALLOC_GROW(g->regions, (size_t)g->n + 2, g->alloc_regions);
	KS_ALLOC_GROW(g->what, (size_t)g->n + 2, g->alloc_what);
	g->regions[g->n] = before;
	snprintf(g->what[g->n++], sizeof(*g->what), "before %s '%s'", kind, name);
	g->regions[g->n] = after;
	snprintf(g->what[g->n++], sizeof(*g->what), "past the end of %s '%s'", kind, name);
	if (before.bytes > g->max_bytes)
		g->max_bytes = before.bytes;
	if (after.bytes > g->max_bytes)
		g->max_bytes = after.bytes;
}

/* ---- buffers ---- */

static void inputs_free(struct worker *w, const struct ks_op *op, struct inputs *in)
{
	if (!in->buf)
		return;
	for (size_t i = 0; i < op->n_inputs; i++)
		gbuf_free(w, &in->buf[i]);
	free(in->buf);
	free(in->scalar);
	free(in->sum);
	memset(in, 0, sizeof(*in));
}

/* Room for the checks queued after one run: input sums, variable sums, the guard result. */
static int slots_reserve(struct worker *w, size_t n, struct outcome *oc)
{
	CUresult rc;

	if (n <= w->n_slots)
		return 0;
	if (w->slots)
		w->cu->mem_free(w->slots);
	w->slots = 0;
	w->n_slots = 0;
	rc = w->cu->mem_alloc(&w->slots, n * sizeof(uint64_t));
	if (rc != CUDA_SUCCESS)
		return fail_cuda(oc, KS_VERDICT_CRASH, rc, "allocating the evaluator's check words");
	w->n_slots = n;
	return 0;
}

/* Is this generator part of a workload's structure (fixed for timing) rather than its values? */
static int structural(enum ks_generator_kind kind)
{
	return kind == KS_GEN_INDPTR || kind == KS_GEN_PAGE_PERMUTATION;
}

/* Which inputs inputs_fill() makes anew. */
enum fill {
	FILL_ALL,
	FILL_FRESH,	/* those that get new values for every timed call (fresh_per_call) */
	FILL_STRUCTURE, /* the workload's structure: indptr lengths, page permutations */
};

/*
 * Fill the inputs: values each from a seed of their own drawn from the OS
 * (what a kernel can learn of one, by reading it, predicts no other),
 * structure (indptr lengths, page permutations) from st, so that a
 * workload's timed input sets differ in their data but not in their
 * shape until the timing moves to its next split.  Then the keyed sum of
 * every input made, for the check after the next run: queued into the
 * check words from slot `at` on (made[i] says which), to be read back
 * with whatever else the caller queues after it (inputs_settle()).  The
 * sums wait in device memory a kernel could write, but keyed: what it
 * could put there would fail the comparison, never pass an input it
 * changed.  The caller has reserved the slots.
 */
static int inputs_queue(struct worker *w, const struct ks_workload *wl, const struct structure *st,
			enum fill what, struct inputs *in, size_t at, char *made, struct outcome *oc)
{
	const struct ks_op *op = &w->op;
	struct ks_error err;

	for (size_t i = 0; i < op->n_inputs; i++) {
		const struct ks_tensor *t = &op->inputs[i];
		int is_structure = structural(wl->generators[i].kind);
		int64_t numel = (int64_t)(in->buf[i].bytes / ks_dtype_size(t->dtype));
		uint64_t s;

		/* the structure stays as it is within a split, fresh_per_call or not */
		made[i] = is_structure ? what != FILL_FRESH
				       : what == FILL_ALL || (what == FILL_FRESH && t->fresh_per_call);
		if (!made[i])
			continue;
		s = is_structure ? ks_mix64_pair(st->seed, i + 1) : ks_os_random64();
		if (t->is_scalar) {
			in->scalar[i] = ks_gpukit_scalar(&wl->generators[i], s);
			continue;
		}
		if (ks_gpukit_generate_split(w->kit, in->buf[i].ptr, t->dtype, numel, &wl->generators[i],
					     &wl->axes, s, st ? st->split : KS_SPLIT_UNIFORM, &err) < 0 ||
		    (in->buf[i].bytes &&
		     ks_gpukit_checksum_async(w->kit, in->buf[i].ptr, in->buf[i].bytes, &w->job.key,
					      w->slots + 8 * (at + i), &err) < 0))
			return fail_internal(oc, err.msg);
	}
	return 0;
}

/* The sums inputs_queue() left, once read back: the inputs' sums from now on. */
static void inputs_settle(const struct ks_op *op, struct inputs *in, const char *made, const uint64_t *sums)
{
	for (size_t i = 0; i < op->n_inputs; i++)
		if (in->buf[i].bytes && made[i])
			in->sum[i] = sums[i];
}

/* inputs_queue() with its sums read back at once. */
static int inputs_fill(struct worker *w, const struct ks_workload *wl, const struct structure *st,
		       enum fill what, struct inputs *in, struct outcome *oc)
{
	const struct ks_op *op = &w->op;
	CUresult rc;

	uint64_t *sums = ks_calloc(op->n_inputs ? op->n_inputs : 1, sizeof(*sums));
	char *made = ks_calloc(op->n_inputs ? op->n_inputs : 1, 1);
	int ret = -1;

	if (slots_reserve(w, op->n_inputs, oc) < 0 || inputs_queue(w, wl, st, what, in, 0, made, oc) < 0)
		goto cleanup;
	rc = w->cu->memcpy_dtoh_async(sums, w->slots, op->n_inputs * sizeof(uint64_t), w->stream);
	if (rc == CUDA_SUCCESS)
		rc = w->cu->stream_synchronize(w->stream);
	if (rc != CUDA_SUCCESS) {
		fail_cuda(oc, KS_VERDICT_CRASH, rc, "workload %s: generating inputs", wl->id);
		goto cleanup;
	}
	inputs_settle(op, in, made, sums);
	ret = 0;
cleanup:
	free(sums);
	free(made);
	return ret;
}

static int inputs_make(struct worker *w, const struct ks_workload *wl, const struct structure *st,
		       struct inputs *in, struct outcome *oc)
{
	const struct ks_op *op = &w->op;
	struct ks_error err;

	in->buf = ks_calloc(op->n_inputs, sizeof(*in->buf));
	in->scalar = ks_calloc(op->n_inputs, sizeof(*in->scalar));
	in->sum = ks_calloc(op->n_inputs, sizeof(*in->sum));
	for (size_t i = 0; i < op->n_inputs; i++) {
		const struct ks_tensor *t = &op->inputs[i];
		int64_t numel;
		CUresult rc;

		if (t->is_scalar)
			continue;
		if (ks_tensor_numel(t, wl, &numel, &err) < 0)
			return fail_internal(oc, err.msg);
		rc = gbuf_alloc(w, (size_t)numel * ks_dtype_size(t->dtype), &in->buf[i]);
		if (rc != CUDA_SUCCESS) {
			snprintf(err.msg, sizeof(err.msg), "cannot allocate input %s (%lld elements): %s",
				 t->name, (long long)numel, ks_cuda_strerror(rc));
			return fail_internal(oc, err.msg);
		}
	}
	return inputs_fill(w, wl, st, FILL_ALL, in, oc);
}

static void outputs_free(struct worker *w, const struct ks_op *op, struct outputs *out)
{
	if (!out->buf)
		return;
	for (size_t i = 0; i < op->n_outputs; i++)
		gbuf_free(w, &out->buf[i]);
	free(out->buf);
	free(out->numel);
	memset(out, 0, sizeof(*out));
}

static int outputs_make(struct worker *w, const struct ks_workload *wl, struct outputs *out,
			struct outcome *oc)
{
	const struct ks_op *op = &w->op;
	struct ks_error err;

	out->buf = ks_calloc(op->n_outputs, sizeof(*out->buf));
	out->numel = ks_calloc(op->n_outputs, sizeof(*out->numel));
	for (size_t i = 0; i < op->n_outputs; i++) {
		CUresult rc;

		if (ks_tensor_numel(&op->outputs[i], wl, &out->numel[i], &err) < 0)
			return fail_internal(oc, err.msg);
		rc = gbuf_alloc(w, (size_t)out->numel[i] * ks_dtype_size(op->outputs[i].dtype), &out->buf[i]);
		if (rc != CUDA_SUCCESS) {
			snprintf(err.msg, sizeof(err.msg), "cannot allocate output %s (%lld elements): %s",
				 op->outputs[i].name, (long long)out->numel[i], ks_cuda_strerror(rc));
			return fail_internal(oc, err.msg);
		}
	}
	return 0;
}

static void scratch_free(struct worker *w, struct scratch *s)
{
	for (size_t i = 0; i < s->n; i++)
		gbuf_free(w, &s->buf[i]);
	memset(s, 0, sizeof(*s));
}

/* Scratch is the candidate's request: failing to satisfy it is the candidate's problem. */
static int scratch_make(struct worker *w, const struct program *prog, const struct ks_plan *plan,
			struct scratch *s, struct outcome *oc)
{
	if (plan->n_scratch > MAX_SCRATCH)
		return fail_cuda(oc, KS_VERDICT_CONTRACT_ERROR, CUDA_SUCCESS,
				 "%zu scratch buffers (at most %d)", plan->n_scratch, MAX_SCRATCH);
	s->n = plan->n_scratch;
	for (size_t i = 0; i < plan->n_scratch; i++) {
		CUresult rc = gbuf_alloc(w, (size_t)plan->scratch_bytes[i], &s->buf[i]);

		s->zeroed[i] = prog->cand->scratch[i].zeroed;
		if (rc != CUDA_SUCCESS)
			return fail_cuda(oc, KS_VERDICT_REFUSED, rc,
					 "cannot allocate scratch '%s' of %lld bytes",
					 prog->cand->scratch[i].name, (long long)plan->scratch_bytes[i]);
	}
	return 0;
}

/*
 * The region table and the pattern on the device, queued anew from the
 * host's copies before every use: they sit in device memory a kernel could
 * find, and a table it had emptied, or a pattern it had rewritten to match
 * a band it wrote, would pass every check.  (From pageable memory the copy
 * is staged before the call returns, and it is ordered on the stream
 * before the guard kernel.)
 */
static CUresult guards_upload(struct worker *w, const struct guards *g)
{
	CUresult rc = w->cu->memcpy_htod_async(g->table, g->regions, g->n * sizeof(*g->regions), w->stream);

	if (rc == CUDA_SUCCESS)
		rc = w->cu->memcpy_htod_async(w->pattern, w->job.pattern, sizeof(w->job.pattern), w->stream);
	return rc;
}

/* Guard every buffer a candidate is given (inputs, outputs, scratch) and fill the bands. */
static int guards_make(struct worker *w, const struct program *prog, const struct inputs *in,
		       const struct outputs *out, const struct scratch *s, struct guards *g,
		       struct outcome *oc)
{
	const struct ks_op *op = &w->op;
	struct ks_error err;
	CUresult rc;

	memset(g, 0, sizeof(*g));
	for (size_t i = 0; i < op->n_inputs; i++)
		if (in->buf[i].base)
			guards_add(g, &in->buf[i], "input", op->inputs[i].name);
	for (size_t i = 0; i < op->n_outputs; i++)
		guards_add(g, &out->buf[i], "output", op->outputs[i].name);
	for (size_t i = 0; i < s->n; i++)
		guards_add(g, &s->buf[i], "scratch", prog->cand->scratch[i].name);
	g->table_bytes = g->n * sizeof(*g->regions);
	rc = ks_devpool_get(&w->pool, g->table_bytes, &g->table);
	if (rc == CUDA_SUCCESS)
		rc = guards_upload(w, g);
	if (rc != CUDA_SUCCESS) {
		fail_cuda(oc, KS_VERDICT_CRASH, rc, "setting up guard bands");
		oc->internal = 1;
		return -1;
	}
	if (ks_gpukit_guards(w->kit, g->table, g->n, g->max_bytes, w->pattern, GUARD_PATTERN_BYTES, 0, &err) <
	    0)
		return fail_internal(oc, err.msg);
	return 0;
}

/* NaN bytes in everything the program writes, so unwritten elements fail. */
static int poison(struct worker *w, const struct outputs *out, const struct scratch *s, struct outcome *oc)
{
	struct ks_error err;

	for (size_t i = 0; i < w->op.n_outputs; i++)
		if (out->buf[i].bytes &&
		    ks_gpukit_poison(w->kit, out->buf[i].ptr, out->buf[i].bytes, &err) < 0)
			return fail_internal(oc, err.msg);
	for (size_t i = 0; i < s->n; i++)
		if (s->buf[i].bytes && ks_gpukit_poison(w->kit, s->buf[i].ptr, s->buf[i].bytes, &err) < 0)
			return fail_internal(oc, err.msg);
	return 0;
}

/* ---- programs ---- */

static void program_unload(struct worker *w, struct program *prog)
{
	if (prog->module)
		w->cu->module_unload(prog->module);
	prog->module = NULL;
	for (size_t i = 0; i < prog->n_vars; i++)
		free(prog->vars[i].name);
	free(prog->vars);
	prog->vars = NULL;
	prog->n_vars = 0;
}

/*
 * Load a fresh module for this evaluation (nothing of an earlier load
 * survives), find its kernels, and take the keyed sum of each of its
 * module variables (variables: a JSON array of names, may be NULL), so
 * that a change to any of them shows after every run.
 */
static int program_load(struct worker *w, struct program *prog, const void *image, const json_t *variables,
			struct outcome *oc)
{
	CUresult rc = w->cu->module_load_data(&prog->module, image);
	struct ks_error err;

	if (rc != CUDA_SUCCESS) {
		prog->module = NULL;
		return fail_cuda(oc, KS_VERDICT_CRASH, rc, "loading the compiled module");
	}
	if (prog->cand->n_launches > MAX_LAUNCHES)
		return fail_cuda(oc, KS_VERDICT_CONTRACT_ERROR, CUDA_SUCCESS, "%zu launches (at most %d)",
				 prog->cand->n_launches, MAX_LAUNCHES);
	for (size_t i = 0; i < prog->cand->n_launches; i++) {
		rc = w->cu->module_get_function(&prog->fns[i], prog->module, prog->cand->launches[i].kernel);
		if (rc != CUDA_SUCCESS)
			return fail_cuda(oc, KS_VERDICT_CONTRACT_ERROR, rc, "kernel '%s'",
					 prog->cand->launches[i].kernel);
	}
	prog->vars = ks_calloc(json_array_size(variables) + 1, sizeof(*prog->vars));
	for (size_t i = 0; i < json_array_size(variables); i++) {
		const char *name = json_string_value(json_array_get(variables, i));
		struct module_var *v = &prog->vars[prog->n_vars];

		if (!name)
			continue;
		rc = w->cu->module_get_global(&v->ptr, &v->bytes, prog->module, name);
		if (rc == CUDA_ERROR_NOT_FOUND || (rc == CUDA_SUCCESS && !v->bytes))
			continue; /* ptxas dropped it: nothing can hold state in it */
		if (rc != CUDA_SUCCESS)
			return fail_cuda(oc, KS_VERDICT_CRASH, rc, "finding the module variable '%s'", name);
		v->name = ks_strdup(name);
		prog->n_vars++;
		/* the same sum check_after_run() takes, without the length term */
		if (slots_reserve(w, 1, oc) < 0)
			return -1;
		if (ks_gpukit_checksum_async(w->kit, v->ptr, v->bytes, &w->job.key, w->slots, &err) < 0)
			return fail_internal(oc, err.msg);

		rc = w->cu->memcpy_dtoh_async(&v->sum, w->slots, sizeof(v->sum), w->stream);
		if (rc == CUDA_SUCCESS)
			rc = w->cu->stream_synchronize(w->stream);
		if (rc != CUDA_SUCCESS)
			return fail_cuda(oc, KS_VERDICT_CRASH, rc, "reading the module variable '%s'", name);
	}
	return 0;
}

/*
 * Allow each kernel the most dynamic shared memory any workload asks of
 * it, and run it with the largest shared-memory carveout.  The carveout
 * is for the scrub (prepare_run()): it wipes every SM's shared memory in
 * that configuration, and a kernel run in a smaller one could read a
 * part it does not reach (about 1 KB per SM on an H200, measured by
 * test_gpukit; a kernel of the hostile suite found its own earlier run's
 * signature there).  Every candidate and the reference run alike, and
 * the exported launcher sets the same.
 */
static int program_set_smem(struct worker *w, struct program *prog, struct outcome *oc)
{
	const struct ks_op *op = &w->op;
	const struct ks_workload *lists[2] = { op->workloads, op->check_workloads };
	size_t counts[2] = { op->n_workloads, op->n_check_workloads };
	int64_t most[MAX_LAUNCHES] = { 0 };
	struct ks_error err;

	for (int l = 0; l < 2; l++) {
		for (size_t k = 0; k < counts[l]; k++) {
			struct ks_plan plan;

			if (ks_plan_resolve(prog->cand, op, &lists[l][k], prog->params, &plan, &err) < 0)
				return fail_cuda(oc, KS_VERDICT_CONTRACT_ERROR, CUDA_SUCCESS, "%s", err.msg);
			for (size_t i = 0; i < plan.n_launches && i < MAX_LAUNCHES; i++)
				if (plan.launches[i].smem > most[i])
					most[i] = plan.launches[i].smem;
			ks_plan_release(&plan);
		}
	}
	for (size_t i = 0; i < prog->cand->n_launches; i++) {
		CUresult rc = w->cu->func_set_attribute(prog->fns[i],
							CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
							CU_SHAREDMEM_CARVEOUT_MAX_SHARED);

		if (rc != CUDA_SUCCESS)
			return fail_cuda(oc, KS_VERDICT_CRASH, rc,
					 "kernel '%s': setting the largest shared-memory carveout",
					 prog->cand->launches[i].kernel);
		rc = ks_cuda_allow_cluster(w->cu, prog->fns[i]);
		if (rc != CUDA_SUCCESS)
			return fail_cuda(oc, KS_VERDICT_REFUSED, rc,
					 "kernel '%s': allowing its cluster of more than 8 CTAs",
					 prog->cand->launches[i].kernel);
		if (most[i] <= 48 * 1024)
			continue;

		rc = w->cu->func_set_attribute(prog->fns[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					       (int)most[i]);
		if (rc != CUDA_SUCCESS)
			return fail_cuda(
				oc, KS_VERDICT_REFUSED, rc,
				"kernel '%s' asks for %lld bytes of dynamic shared memory; this GPU allows "
				"%d per block",
				prog->cand->launches[i].kernel, (long long)most[i],
				w->prof.max_smem_per_block_optin);
	}
	return 0;
}

/*
 * Queue the program's launch sequence on the stream, no synchronization:
 * the zeroing of "zeroed" scratch (part of the call, so it is timed),
 * then the launches in order (launch.h, shared with the profile runner).
 */
static int program_launch(struct worker *w, const struct program *prog, const struct ks_plan *plan,
			  const struct ks_workload *wl, const struct inputs *in, const struct outputs *out,
			  const struct scratch *s, struct outcome *oc)
{
	CUdeviceptr in_ptr[MAX_TENSORS], out_ptr[MAX_TENSORS], scratch_ptr[MAX_SCRATCH];
	struct ks_launch_buffers bufs = { in_ptr, in->scalar, out_ptr, scratch_ptr };
	struct ks_launch_error why;
	static const enum ks_verdict verdicts[] = {
		[KS_LAUNCH_CUDA] = KS_VERDICT_CRASH,
		[KS_LAUNCH_CONTRACT] = KS_VERDICT_CONTRACT_ERROR,
		[KS_LAUNCH_UNSUPPORTED] = KS_VERDICT_REFUSED,
	};

	if (w->op.n_inputs > MAX_TENSORS || w->op.n_outputs > MAX_TENSORS)
		return fail_internal(oc, "the operator has more inputs or outputs than the worker handles");
	for (size_t i = 0; i < w->op.n_inputs; i++)
		in_ptr[i] = in->buf[i].ptr;
	for (size_t i = 0; i < w->op.n_outputs; i++)
		out_ptr[i] = out->buf[i].ptr;
	for (size_t i = 0; i < s->n; i++)
		scratch_ptr[i] = s->buf[i].ptr;
	if (ks_launch_sequence(w->cu, w->stream, &w->op, prog->cand, prog->fns, plan, wl, &bufs, &why) == 0)
		return 0;
	if (why.failure == KS_LAUNCH_INTERNAL)
		return fail_internal(oc, why.what);
	return fail_cuda(oc, verdicts[why.failure], why.cuda_rc, "%s", why.what);
}

/*
 * What comes before every run of a candidate, outside any timed region:
 * outputs and scratch poisoned, and every SM's shared memory scrubbed, so
 * that nothing of an earlier run (its own, the reference's) can be read.
 */
static int prepare_run(struct worker *w, const struct outputs *out, const struct scratch *s,
		       struct outcome *oc)
{
	struct ks_error err;

	if (poison(w, out, s, oc) < 0)
		return -1;
	if (ks_gpukit_scrub_shared(w->kit, &err) < 0)
		return fail_internal(oc, err.msg);
	return 0;
}

static int sync_stream(struct worker *w, const char *what, const struct ks_workload *wl, struct outcome *oc)
{
	CUresult rc = w->cu->stream_synchronize(w->stream);

	printf_collect(w);
	if (rc != CUDA_SUCCESS)
		return fail_cuda(oc, KS_VERDICT_CRASH, rc, "workload %s: %s", wl->id, what);
	return 0;
}

/* The check words check_after_run() uses: input sums, variable sums, the guard result (2). */
static size_t check_slots(const struct worker *w, const struct program *prog)
{
	return w->op.n_inputs + prog->n_vars + 2;
}

/*
 * After a run of a candidate: its inputs (keyed sums against the ones
 * taken after they were generated), its module variables (against their
 * sums at load) and every guard band must be as they were.  checks_queue()
 * puts the sums and the guard kernel on the stream, into the first
 * check_slots() words (reserved by the caller); checks_judge() reads what
 * came back.  With only_fresh, the inputs that keep their values between
 * timed calls are left for the check at the end of the timing (a change to
 * them lasts until then: nothing makes them again).  when names the run in
 * the evidence.
 */
static int checks_queue(struct worker *w, const struct program *prog, const struct ks_workload *wl,
			const struct inputs *in, const struct guards *g, int only_fresh, const char *when,
			struct outcome *oc)
{
	const struct ks_op *op = &w->op;
	size_t n_in = op->n_inputs, n_var = prog->n_vars, guard_slot = n_in + n_var;
	struct ks_error err;
	CUresult rc;

	for (size_t i = 0; i < n_in; i++)
		if (in->buf[i].bytes && (!only_fresh || op->inputs[i].fresh_per_call) &&
		    ks_gpukit_checksum_async(w->kit, in->buf[i].ptr, in->buf[i].bytes, &w->job.key,
					     w->slots + 8 * i, &err) < 0)
			return fail_internal(oc, err.msg);
	for (size_t i = 0; i < n_var; i++)
		if (ks_gpukit_checksum_async(w->kit, prog->vars[i].ptr, prog->vars[i].bytes, &w->job.key,
					     w->slots + 8 * (n_in + i), &err) < 0)
			return fail_internal(oc, err.msg);
	rc = guards_upload(w, g);
	if (rc != CUDA_SUCCESS)
		return fail_cuda(oc, KS_VERDICT_CRASH, rc, "workload %s%s: checking guard bands", wl->id,
				 when);
	if (ks_gpukit_guards(w->kit, g->table, g->n, g->max_bytes, w->pattern, GUARD_PATTERN_BYTES,
			     w->slots + 8 * guard_slot, &err) < 0)
		return fail_internal(oc, err.msg);
	return 0;
}

static int checks_judge(struct worker *w, const struct program *prog, const struct ks_workload *wl,
			const struct inputs *in, const struct guards *g, int only_fresh, const char *when,
			const uint64_t *got, struct outcome *oc)
{
	const struct ks_op *op = &w->op;
	size_t n_in = op->n_inputs, n_var = prog->n_vars, guard_slot = n_in + n_var;

	for (size_t i = 0; i < n_in; i++)
		if (in->buf[i].bytes && (!only_fresh || op->inputs[i].fresh_per_call) && got[i] != in->sum[i])
			return fail_cuda(oc, KS_VERDICT_WRONG, CUDA_SUCCESS,
					 "workload %s%s: the candidate wrote into its input '%s' (inputs are "
					 "read-only, every byte of them)",
					 wl->id, when, op->inputs[i].name);
	for (size_t i = 0; i < n_var; i++)
		if (got[n_in + i] != prog->vars[i].sum)
			return fail_cuda(
				oc, KS_VERDICT_WRONG, CUDA_SUCCESS,
				"workload %s%s: the module variable '%s' changed while the candidate "
				"ran: a kernel must not keep state between calls",
				wl->id, when, prog->vars[i].name);
	if (got[guard_slot]) {
		uint64_t first = got[guard_slot + 1];
		unsigned int region = (unsigned int)(first >> 40);

		return fail_cuda(
			oc, KS_VERDICT_WRONG, CUDA_SUCCESS,
			"workload %s%s: the candidate wrote outside its buffers: %llu byte%s of guard "
			"band changed, the first %s (offset %llu in the band)",
			wl->id, when, (unsigned long long)got[guard_slot], got[guard_slot] == 1 ? "" : "s",
			region < g->n ? g->what[region] : "in an unknown band",
			(unsigned long long)(first & ((1ull << 40) - 1)));
	}
	return 0;
}

/* checks_queue(), read back in one synchronization, and checks_judge(). */
static int check_after_run(struct worker *w, const struct program *prog, const struct ks_workload *wl,
			   const struct inputs *in, const struct guards *g, int only_fresh, const char *when,
			   struct outcome *oc)
{
	size_t n = check_slots(w, prog);
	uint64_t *got = ks_calloc(n, sizeof(*got));
	CUresult rc;
	int ret = -1;

	if (slots_reserve(w, n, oc) < 0 || checks_queue(w, prog, wl, in, g, only_fresh, when, oc) < 0)
		goto cleanup;
	rc = w->cu->memcpy_dtoh_async(got, w->slots, n * sizeof(*got), w->stream);
	if (rc == CUDA_SUCCESS)
		rc = w->cu->stream_synchronize(w->stream);
	if (rc != CUDA_SUCCESS) {
		fail_cuda(oc, KS_VERDICT_CRASH, rc, "workload %s%s: checking what the candidate touched",
			  wl->id, when);
		goto cleanup;
	}
	ret = checks_judge(w, prog, wl, in, g, only_fresh, when, got, oc);
cleanup:
	free(got);
	return ret;
}

/* Copy every output to the host (malloc'd arrays the caller frees). */
static int download(struct worker *w, const struct outputs *out, void **host, const struct ks_workload *wl,
		    struct outcome *oc)
{
	for (size_t i = 0; i < w->op.n_outputs; i++) {
		CUresult rc;

		host[i] = ks_malloc(out->buf[i].bytes ? out->buf[i].bytes : 1);
		rc = w->cu->memcpy_dtoh(host[i], out->buf[i].ptr, out->buf[i].bytes);
		if (rc != CUDA_SUCCESS)
			return fail_cuda(oc, KS_VERDICT_CRASH, rc, "workload %s: reading output %s", wl->id,
					 w->op.outputs[i].name);
	}
	return 0;
}

static void host_free(void **host, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(host[i]);
		host[i] = NULL;
	}
}

static int compare_all(const struct ks_op *op, void **got, void **ref, const struct outputs *out,
		       const struct ks_workload *wl, const char *when, struct outcome *oc)
{
	for (size_t i = 0; i < op->n_outputs; i++) {
		const struct ks_tensor *t = &op->outputs[i];
		struct ks_compare_report report;
		char text[2048];

		if (ks_compare(t->dtype, got[i], ref[i], out->numel[i], t->atol, t->rtol, &report))
			continue;
		ks_compare_describe(&report, t->name, text, sizeof(text));
		return fail_cuda(oc, KS_VERDICT_WRONG, CUDA_SUCCESS, "workload %s%s: %s", wl->id, when, text);
	}
	return 0;
}

/* ---- the reference ---- */

static void drop_op(struct worker *w)
{
	program_unload(w, &w->ref);
	program_unload(w, &w->oracle_own);
	ks_candidate_release(&w->ref_cand);
	ks_op_release(&w->op);
	free(w->op_dir);
	free(w->ref_us);
	free((void *)w->ref.params);
	free((void *)w->oracle_own.params);
	ks_devpool_drain(&w->pool); /* another operator's buffers have other sizes */
	w->op_dir = NULL;
	w->ref_us = NULL;
	memset(&w->ref, 0, sizeof(w->ref));
	memset(&w->oracle_own, 0, sizeof(w->oracle_own));
	w->oracle = NULL;
}

/* Build the reference with the params of combination `index` into prog (trusted code: in-process). */
static int reference_load(struct worker *w, size_t index, struct program *prog, struct outcome *oc)
{
	const struct ks_candidate *cand = &w->ref_cand;
	struct ks_compile_request req = { 0 };
	struct ks_compile_result res = { 0 };
	struct ks_define defines[KS_CANDIDATE_MAX_PARAMS];
	struct ks_error err;
	int64_t *params = ks_calloc(cand->n_params ? cand->n_params : 1, sizeof(*params));

	if (index == 0)
		ks_params_first(cand, params);
	else
		ks_params_nth(cand, index, params);
	prog->cand = cand;
	prog->params = params;
	for (size_t i = 0; i < cand->n_params && i < KS_CANDIDATE_MAX_PARAMS; i++)
		defines[i] = (struct ks_define){ cand->params[i].name, params[i] };
	req.source = cand->source;
	req.source_name = cand->path;
	req.arch = w->prof.arch;
	req.defines = defines;
	req.n_defines = cand->n_params < KS_CANDIDATE_MAX_PARAMS ? cand->n_params : KS_CANDIDATE_MAX_PARAMS;
	req.resources_optional = 1;
	if (ks_nvrtc_compile(&req, &res, &err) < 0) {
		ks_compile_result_release(&res);
		return fail_internal(oc, err.msg);
	}
	if (program_load(w, prog, res.cubin, NULL, oc) < 0 || program_set_smem(w, prog, oc) < 0) {
		ks_compile_result_release(&res);
		oc->internal = 1;
		return -1;
	}
	ks_compile_result_release(&res);
	return 0;
}

/* Load the op and build its reference, and the oracle when the reference declares one. */
static int use_op(struct worker *w, const char *op_dir, struct outcome *oc)
{
	struct ks_error err;
	size_t count;

	if (w->op_dir && !strcmp(w->op_dir, op_dir))
		return 0;
	drop_op(w);
	if (ks_op_load(op_dir, &w->op, &err) < 0 ||
	    ks_candidate_load(w->op.reference_path, &w->ref_cand, &err) < 0 ||
	    ks_candidate_bind(&w->ref_cand, &w->op, &err) < 0)
		return fail_internal(oc, err.msg);
	count = ks_params_count(&w->ref_cand);
	if (reference_load(w, 0, &w->ref, oc) < 0 ||
	    (count > 1 && reference_load(w, count - 1, &w->oracle_own, oc) < 0))
		return -1;
	w->oracle = count > 1 ? &w->oracle_own : &w->ref;
	w->ref_us = ks_calloc(w->op.n_workloads, sizeof(*w->ref_us));
	for (size_t i = 0; i < w->op.n_workloads; i++)
		w->ref_us[i] = -1;
	w->op_dir = ks_strdup(op_dir);
	return 0;
}

/* One run of the reference, its outputs still on the device until reference_clear(). */
struct ref_run {
	struct outputs out;
	struct scratch s;
	struct ks_plan plan;
};

/*
 * Overwrite the reference's outputs and free them: no candidate may ever
 * find them.  The poison is queued on the one stream every later launch
 * uses, so it lands before any of them; a buffer the pool gives back to
 * the driver is freed by cuMemFree, which waits for the device.
 */
static void reference_clear(struct worker *w, struct ref_run *rr)
{
	struct outcome ignored = { 0 };

	if (rr->out.buf)
		poison(w, &rr->out, &rr->s, &ignored);
	outputs_free(w, &w->op, &rr->out);
	scratch_free(w, &rr->s);
	ks_plan_release(&rr->plan);
}

/* Queue the reference on in, into fresh (poisoned) device outputs; no synchronization. */
static int reference_queue(struct worker *w, const struct ks_workload *wl, const struct inputs *in,
			   struct ref_run *rr, struct outcome *oc)
{
	struct ks_error err;

	memset(rr, 0, sizeof(*rr));
	if (ks_plan_resolve(w->oracle->cand, &w->op, wl, w->oracle->params, &rr->plan, &err) < 0)
		return fail_internal(oc, err.msg);
	if (outputs_make(w, wl, &rr->out, oc) < 0 || scratch_make(w, w->oracle, &rr->plan, &rr->s, oc) < 0 ||
	    poison(w, &rr->out, &rr->s, oc) < 0 ||
	    program_launch(w, w->oracle, &rr->plan, wl, in, &rr->out, &rr->s, oc) < 0) {
		oc->internal = 1;
		return -1;
	}
	return 0;
}

/* Run the reference on in into fresh device outputs; *seconds gets the run's wall time. */
static int reference_run(struct worker *w, const struct ks_workload *wl, const struct inputs *in,
			 struct ref_run *rr, double *seconds, struct outcome *oc)
{
	double t0 = now_s();

	if (reference_queue(w, wl, in, rr, oc) < 0)
		return -1;
	if (sync_stream(w, "running the reference", wl, oc) < 0) {
		oc->internal = 1;
		return -1;
	}
	*seconds = now_s() - t0;
	return 0;
}

/* The reference must produce finite values everywhere, or nothing can be judged. */
static int reference_finite(struct worker *w, const struct ks_workload *wl, void **host,
			    const struct outputs *out, struct outcome *oc)
{
	for (size_t i = 0; i < w->op.n_outputs; i++) {
		struct ks_compare_report report;
		char text[1024], msg[KS_ERROR_MAX];

		if (ks_compare(w->op.outputs[i].dtype, host[i], host[i], out->numel[i], 0, 0, &report))
			continue;
		ks_compare_describe(&report, w->op.outputs[i].name, text, sizeof(text));
		snprintf(msg, sizeof(msg), "workload %s: the reference produced non-finite values: %s",
			 wl->id, text);
		return fail_internal(oc, msg);
	}
	return 0;
}

/* Run the reference on in and bring its outputs home; nothing of them stays on the device. */
static int reference_outputs(struct worker *w, const struct ks_workload *wl, const struct inputs *in,
			     void **host, double *seconds, struct outcome *oc)
{
	struct ref_run rr;
	int ret = -1;

	if (reference_run(w, wl, in, &rr, seconds, oc) < 0)
		goto cleanup;
	if (download(w, &rr.out, host, wl, oc) < 0) {
		oc->internal = 1;
		goto cleanup;
	}
	ret = reference_finite(w, wl, host, &rr.out, oc);
cleanup:
	reference_clear(w, &rr);
	return ret;
}

/* ---- correctness ---- */

static int check_workload(struct worker *w, const struct program *cand, const struct ks_workload *wl,
			  const struct settings *set, struct outcome *oc)
{
	struct ks_plan plan = { 0 };
	struct ks_error err;
	int ret = -1;

	/* each trial a split of its own kind (a workload with given lengths ignores it), the first at random
	 */
	unsigned first_split = (unsigned)(ks_os_random64() % KS_SPLIT_COUNT);

	if (ks_plan_resolve(cand->cand, &w->op, wl, cand->params, &plan, &err) < 0)
		return fail_cuda(oc, KS_VERDICT_CONTRACT_ERROR, CUDA_SUCCESS, "%s", err.msg);
	for (int trial = 0; trial < set->trials; trial++) {
		struct inputs in = { 0 };
		struct outputs out = { 0 };
		struct scratch s = { 0 };
		struct guards g = { 0 };
		void *ref[16] = { 0 }, *got[16] = { 0 };
		const char *when = trial ? " (second input set)" : "";
		struct structure st = { ks_os_random64(),
					(enum ks_split)((first_split + (unsigned)trial) % KS_SPLIT_COUNT) };
		double ref_s = 0;
		int ok = 0;

		announce(w, 120);
		if (inputs_make(w, wl, &st, &in, oc) < 0 ||
		    reference_outputs(w, wl, &in, ref, &ref_s, oc) < 0)
			goto trial_done;
		/* the candidate gets a hundred times the reference's time, and a few seconds */
		announce(w, 5 + 100 * ref_s);
		if (outputs_make(w, wl, &out, oc) < 0 || scratch_make(w, cand, &plan, &s, oc) < 0 ||
		    guards_make(w, cand, &in, &out, &s, &g, oc) < 0 || prepare_run(w, &out, &s, oc) < 0 ||
		    program_launch(w, cand, &plan, wl, &in, &out, &s, oc) < 0 ||
		    sync_stream(w, "running the candidate", wl, oc) < 0 ||
		    check_after_run(w, cand, wl, &in, &g, 0, when, oc) < 0 ||
		    download(w, &out, got, wl, oc) < 0)
			goto trial_done;
		ok = compare_all(&w->op, got, ref, &out, wl, when, oc) == 0;
	trial_done:
		host_free(ref, w->op.n_outputs);
		host_free(got, w->op.n_outputs);
		guards_release(w, &g);
		outputs_free(w, &w->op, &out);
		scratch_free(w, &s);
		inputs_free(w, &w->op, &in);
		if (!ok)
			goto cleanup;
	}
	ret = 0;
cleanup:
	ks_plan_release(&plan);
	return ret;
}

/* ---- timing ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double quantile(const double *sorted, int n, double q)
{
	double pos = q * (n - 1);
	int lo = (int)pos;

	if (lo + 1 >= n)
		return sorted[n - 1];
	return sorted[lo] + (pos - lo) * (sorted[lo + 1] - sorted[lo]);
}

struct stats {
	double *samples; /* the caller's room for max_reps samples, or NULL */
	double median, p10, p90, min;
	int reps; /* timed runs the statistics are made of (for a candidate: the verified ones) */
	int runs; /* timed runs made */
};

static void summarize(double *samples, int n, struct stats *st)
{
	qsort(samples, (size_t)n, sizeof(*samples), cmp_double);
	st->median = quantile(samples, n, 0.5);
	st->p10 = quantile(samples, n, 0.1);
	st->p90 = quantile(samples, n, 0.9);
	st->min = samples[0];
	st->reps = n;
}

/* The buffers one program is timed with, and its plan. */
struct timed {
	const struct program *prog;
	const struct ks_plan *plan;
	const struct ks_workload *wl;
	struct inputs *in;
	const struct outputs *out;
	const struct scratch *s;
	const struct guards *g; /* NULL for the trusted reference */
};

/*
 * One timed run.  Outside the timed region: fresh input values from seed
 * (so no answer of an earlier run is an answer to this one), outputs and
 * scratch poisoned, shared memory scrubbed, the L2 flushed.  Timed: the
 * launch sequence alone, between events.  After it, for a candidate: its
 * inputs, variables and guard bands checked.  All of it is queued on the
 * stream and waited for once: on a host whose cores are all busy every
 * wait costs a wake-up, and the three waits a run had (inputs, run,
 * checks) were most of its host time.
 */
static int run_timed(struct worker *w, const struct timed *t, int run, double *us, struct outcome *oc)
{
	const struct ks_op *op = &w->op;
	size_t n_check = t->g ? check_slots(w, t->prog) : 0, n = n_check + op->n_inputs;
	uint64_t *got = ks_calloc(n, sizeof(*got));
	char *made = ks_calloc(op->n_inputs ? op->n_inputs : 1, 1);
	struct ks_error err;
	char when[64];
	float ms = 0, prep_ms = 0;
	CUresult rc;
	int ret = -1;

	double t0 = now_s(), t1, waited;

	snprintf(when, sizeof(when), " (timed run %d)", run);
	if (slots_reserve(w, n, oc) < 0 ||
	    inputs_queue(w, t->wl, NULL, FILL_FRESH, t->in, n_check, made, oc) < 0)
		goto cleanup;
	w->overhead.inputs += now_s() - t0;
	rc = w->cu->event_record(w->prepared, w->stream);
	if (rc != CUDA_SUCCESS) {
		fail_cuda(oc, KS_VERDICT_CRASH, rc, "workload %s: recording an event", t->wl->id);
		goto cleanup;
	}
	if (prepare_run(w, t->out, t->s, oc) < 0)
		goto cleanup;
	if (ks_gpukit_flush_l2(w->kit, &err) < 0) {
		fail_internal(oc, err.msg);
		goto cleanup;
	}
	rc = w->cu->event_record(w->start, w->stream);
	if (rc != CUDA_SUCCESS) {
		fail_cuda(oc, KS_VERDICT_CRASH, rc, "workload %s: recording an event", t->wl->id);
		goto cleanup;
	}
	t1 = now_s();
	if (program_launch(w, t->prog, t->plan, t->wl, t->in, t->out, t->s, oc) < 0)
		goto cleanup;
	rc = w->cu->event_record(w->stop, w->stream);
	if (rc == CUDA_SUCCESS && t->g && checks_queue(w, t->prog, t->wl, t->in, t->g, 1, when, oc) < 0)
		goto cleanup;
	/* one synchronization for all of it: the run, its checks and the new inputs' sums */
	if (rc == CUDA_SUCCESS)
		rc = w->cu->memcpy_dtoh_async(got, w->slots, n * sizeof(*got), w->stream);
	if (rc == CUDA_SUCCESS)
		rc = w->cu->stream_synchronize(w->stream);
	waited = now_s() - t1;
	if (rc == CUDA_SUCCESS)
		rc = w->cu->event_elapsed_time(&ms, w->start, w->stop);
	printf_collect(w);
	if (rc != CUDA_SUCCESS) {
		fail_cuda(oc, KS_VERDICT_CRASH, rc, "workload %s: timed run %d", t->wl->id, run);
		goto cleanup;
	}
	inputs_settle(op, t->in, made, got + n_check);
	*us = ms * 1000.0;
	if (w->cu->event_elapsed_time(&prep_ms, w->prepared, w->start) == CUDA_SUCCESS)
		w->overhead.prepare += prep_ms / 1000.0;
	ret = 0;
	if (!t->g)
		goto cleanup;
	w->overhead.runs++;
	w->overhead.wait += waited;
	t1 = now_s();
	ret = checks_judge(w, t->prog, t->wl, t->in, t->g, 1, when, got, oc);
	w->overhead.checks += now_s() - t1;
cleanup:
	free(got);
	free(made);
	return ret;
}

/*
 * The candidate's outputs of timed run `run` against the reference's on
 * the same inputs, compared on the device; only a failure brings both
 * home, where compare.h decides and describes it.  Every input, not only
 * the fresh ones, is checked first, and judged before the reference runs:
 * a kernel that rewrote one the reference reads (lengths, weights) would
 * otherwise be "verified" against its own edit, or crash the reference.
 * The reference and the comparison are then waited for once.
 */
static int verify_run(struct worker *w, const struct timed *t, int run, struct outcome *oc)
{
	const struct ks_op *op = &w->op;
	void *got[16] = { 0 }, *ref[16] = { 0 };
	uint64_t *found = ks_calloc(2 * op->n_outputs + 1, sizeof(*found));
	struct ref_run rr;
	struct ks_error err;
	char when[96];
	double t0 = now_s();
	int bad = 0, ret = -1;
	CUresult rc;

	memset(&rr, 0, sizeof(rr));
	snprintf(when, sizeof(when), " (timed run %d, checked before its verification)", run);
	if (check_after_run(w, t->prog, t->wl, t->in, t->g, 0, when, oc) < 0)
		goto cleanup;
	w->overhead.prechecks += now_s() - t0;
	snprintf(when, sizeof(when), " (timed run %d, one of the timed runs verified at random)", run);
	if (slots_reserve(w, 2 * op->n_outputs, oc) < 0 || reference_queue(w, t->wl, t->in, &rr, oc) < 0)
		goto cleanup;
	for (size_t i = 0; i < op->n_outputs; i++) {
		if (ks_gpukit_compare(w->kit, op->outputs[i].dtype, t->out->buf[i].ptr, rr.out.buf[i].ptr,
				      t->out->numel[i], op->outputs[i].atol, op->outputs[i].rtol,
				      w->slots + 16 * i, &err) < 0) {
			fail_internal(oc, err.msg);
			goto cleanup;
		}
	}
	rc = w->cu->memcpy_dtoh_async(found, w->slots, 2 * op->n_outputs * sizeof(*found), w->stream);
	if (rc == CUDA_SUCCESS)
		rc = w->cu->stream_synchronize(w->stream);
	printf_collect(w);
	if (rc != CUDA_SUCCESS) {
		/* the candidate's run and the inputs it left were checked before: this is ours */
		fail_cuda(oc, KS_VERDICT_CRASH, rc,
			  "workload %s%s: running the reference and comparing outputs", t->wl->id, when);
		oc->internal = 1;
		goto cleanup;
	}
	for (size_t i = 0; i < op->n_outputs; i++)
		bad |= found[2 * i] != 0;
	if (bad) {
		if (download(w, t->out, got, t->wl, oc) < 0 || download(w, &rr.out, ref, t->wl, oc) < 0 ||
		    reference_finite(w, t->wl, ref, &rr.out, oc) < 0)
			goto cleanup;
		if (compare_all(op, got, ref, t->out, t->wl, when, oc) < 0)
			goto cleanup;
	}
	ret = 0;
cleanup:
	reference_clear(w, &rr);
	host_free(got, op->n_outputs);
	host_free(ref, op->n_outputs);
	free(found);
	w->overhead.verify += now_s() - t0;
	w->overhead.verified++;
	return ret;
}

/*
 * Time a program until the median of its samples stops moving or the
 * time cap.  For a candidate, each run is verified with probability
 * 1/VERIFY_ONE_IN, decided by the job's secret generator after the run,
 * and only verified runs are samples: the time rests on runs whose output
 * was checked, and the kernel cannot tell which those will be.
 */
static int time_program(struct worker *w, const struct timed *t, const struct settings *set, double ref_s,
			struct stats *st, struct outcome *oc)
{
	double *samples = ks_calloc((size_t)set->max_reps + 1, sizeof(*samples));
	double *sorted = ks_calloc((size_t)set->max_reps + 1, sizeof(*sorted));
	double t_start = now_s(), last_median = -1, us = 0;
	int verify = t->g != NULL, run = 0, n = 0, ret = -1, stable = 0;
	int min_samples = verify ? (set->min_reps / 3 > MIN_VERIFIED ? set->min_reps / 3 : MIN_VERIFIED)
				 : set->min_reps;

	int step = verify ? 5 : 10;

	/* warm up until the clocks have settled: a few runs and at least warmup_s (5 ms) */
	for (int i = 0; i < set->warmup || now_s() - t_start < set->warmup_s; i++) {
		announce(w, 10 + 110 * ref_s);
		if (run_timed(w, t, 0, &us, oc) < 0)
			goto cleanup;
		if (now_s() - t_start > set->time_cap_ms / 2000.0)
			break; /* a slow kernel: its timed runs need the time more */
	}
	if (verify)
		w->overhead.warmup += now_s() - t_start;
	t_start = now_s();
	while (run < set->max_reps) {
		int counted;

		announce(w, 10 + 110 * ref_s);
		run++;
		if (run_timed(w, t, run, &us, oc) < 0)
			goto cleanup;
		counted = !verify || ks_pcg32_bounded(&w->job.rng, VERIFY_ONE_IN) == 0;
		/* never a time without a verified run behind it */
		if (verify && !counted && n == 0 && run == set->max_reps)
			counted = 1;
		if (counted && verify && verify_run(w, t, run, oc) < 0)
			goto cleanup;
		if (!counted)
			continue;
		samples[n++] = us;
		if (set->fixed_samples > 0 && n >= set->fixed_samples)
			break;
		if (n >= 3 && now_s() - t_start > set->time_cap_ms / 1000.0)
			break;
		if (set->fixed_samples <= 0 && n >= min_samples && n % step == 0) {
			double median;

			memcpy(sorted, samples, (size_t)n * sizeof(*samples));
			qsort(sorted, (size_t)n, sizeof(*sorted), cmp_double);
			median = quantile(sorted, n, 0.5);
			/* stable: two checks in a row within 0.5% */
			if (last_median > 0 && fabs(median - last_median) <= 0.005 * median) {
				if (++stable >= 2)
					break;
			} else {
				stable = 0;
			}
			last_median = median;
		}
	}
	/* the inputs that kept their values through every run: still every byte as made */
	if (verify && check_after_run(w, t->prog, t->wl, t->in, t->g, 0, " (after the timed runs)", oc) < 0)
		goto cleanup;
	if (st->samples)
		memcpy(st->samples, samples, (size_t)n * sizeof(*samples));
	summarize(samples, n, st);
	st->runs = run;
	ret = 0;
cleanup:
	free(samples);
	free(sorted);
	return ret;
}

struct timing {
	const char *id;
	struct stats cand; /* over the splits: the slowest one's median; quantiles of all samples */
	double ref_median;
	double floor_us;
	int n_splits;
	double split_us[MAX_SPLITS]; /* each split's median */
	enum ks_split split[MAX_SPLITS];
};

/* Does the workload have a structure (indptr lengths, a page table) that a split can change? */
static int has_structure(const struct ks_workload *wl, const struct ks_op *op)
{
	for (size_t i = 0; i < op->n_inputs; i++)
		if (structural(wl->generators[i].kind))
			return 1;
	return 0;
}

static double median_of(const double *values, int n)
{
	double sorted[MAX_SPLITS * REF_DRAWS];

	memcpy(sorted, values, (size_t)n * sizeof(*values));
	qsort(sorted, (size_t)n, sizeof(*sorted), cmp_double);
	return quantile(sorted, n, 0.5);
}

static double max_of(const double *values, int n)
{
	double most = values[0];

	for (int i = 1; i < n; i++)
		most = values[i] > most ? values[i] : most;
	return most;
}

/*
 * FNV-1a of a string: the public seed of an operator's canonical
 * structures.  Its basis is FNV's with the last digit lost
 * (14695981039346656037); kept, since the reference's time is measured
 * on the structures it derives.
 */
static uint64_t fnv(const char *text)
{
	return ks_fnv1a_from(1469598103934665603ull, text, strlen(text));
}

/*
 * The reference's time on benchmark workload wi, once per worker: the median of its
 * medians on REF_DRAWS canonical splits of each kind the candidates are
 * timed on (n_splits of them; one when the workload has no structure),
 * drawn from the operator's and the workload's names.  The reference is
 * trusted, so its structure may be public, and a fixed one keeps fitness
 * (reference time over the candidate's) on one scale across workers and
 * runs; the candidates' splits are secret.  Leaves in allocated (with the
 * last canonical structure) for the candidate's splits to refill.
 */
static int time_reference(struct worker *w, size_t wi, const struct ks_plan *ref_plan,
			  const struct settings *ref_set, int n_splits, struct inputs *in,
			  struct outputs *ref_out, struct scratch *ref_scratch, struct outcome *oc)
{
	const struct ks_workload *wl = &w->op.workloads[wi];
	int n_draws = n_splits > 1 ? n_splits * REF_DRAWS : 1;
	double split_us[MAX_SPLITS * REF_DRAWS];

	for (int k = 0; k < n_draws; k++) {
		struct structure st = { ks_mix64_pair(fnv(w->op.name), fnv(wl->id) + (uint64_t)k),
					(enum ks_split)((KS_SPLIT_EVEN + k) % KS_SPLIT_COUNT) };
		struct timed t = { &w->ref, ref_plan, wl, in, ref_out, ref_scratch, NULL };
		struct settings this_set = *ref_set;
		struct stats stats = { 0 };
		void *ref_host[16] = { 0 };
		double ref_s = 0;
		int failed;

		if (k > 0) {
			this_set.warmup = 1;
			this_set.warmup_s = 0;
		}
		announce(w, 120);
		failed = (k == 0 ? inputs_make(w, wl, &st, in, oc)
				 : inputs_fill(w, wl, &st, FILL_STRUCTURE, in, oc)) < 0 ||
			 reference_outputs(w, wl, in, ref_host, &ref_s, oc) < 0;
		host_free(ref_host, w->op.n_outputs);
		if (failed)
			return -1;
		if ((k == 0 && (outputs_make(w, wl, ref_out, oc) < 0 ||
				scratch_make(w, &w->ref, ref_plan, ref_scratch, oc) < 0)) ||
		    time_program(w, &t, &this_set, ref_s, &stats, oc) < 0) {
			oc->internal = 1;
			return -1;
		}
		split_us[k] = stats.median;
	}
	w->ref_us[wi] = median_of(split_us, n_draws);
	return 0;
}

/*
 * Time the candidate on benchmark workload wi.  A workload with a
 * structure is timed on set->splits splits of it drawn for this job, one
 * of each kind in turn from a random first (even, skewed, uniform), each
 * with a page table of its own: no kernel can bake in the split or the
 * page table it will be timed on, and its time is the slowest split's
 * median, a time that holds for splits of every kind the search never
 * saw.  The reference is timed once per worker, on canonical splits of
 * the same kinds (time_reference()), and keeps its typical time (the
 * median): fitness ranks candidates by their own times alone, since a
 * geometric mean of reference / candidate over fixed workloads is a
 * constant over the geometric mean of the candidate's.
 */
static int time_workload(struct worker *w, const struct program *cand, size_t wi, const struct settings *set,
			 struct timing *tm, struct outcome *oc)
{
	const struct ks_workload *wl = &w->op.workloads[wi];
	struct inputs in = { 0 };
	struct ks_plan plan = { 0 }, ref_plan = { 0 };
	struct outputs out = { 0 }, ref_out = { 0 };
	struct scratch s = { 0 }, ref_scratch = { 0 };
	struct guards g = { 0 };
	struct ks_error err;
	struct settings split_set = *set, ref_set = *set;
	double *pool = NULL, ref_s = 0;
	unsigned first_kind = (unsigned)(ks_os_random64() % KS_SPLIT_COUNT);
	int n_splits = has_structure(wl, &w->op) ? set->splits : 1, pooled = 0, time_ref = w->ref_us[wi] < 0;
	int ret = -1;

	tm->id = wl->id;
	tm->n_splits = n_splits;
	if (n_splits > 1) {
		/* a fixed count of verified samples per split; the clocks warm up on the first split only */
		split_set.fixed_samples = SPLIT_VERIFIED;
		split_set.time_cap_ms = set->time_cap_ms / n_splits > 1 ? set->time_cap_ms / n_splits : 1;
		ref_set.fixed_samples = 10; /* on each of n_splits * REF_DRAWS canonical splits */
		ref_set.time_cap_ms = split_set.time_cap_ms;
	}
	pool = ks_calloc((size_t)n_splits * ((size_t)set->max_reps + 1), sizeof(*pool));
	if (ks_plan_resolve(cand->cand, &w->op, wl, cand->params, &plan, &err) < 0) {
		fail_cuda(oc, KS_VERDICT_CONTRACT_ERROR, CUDA_SUCCESS, "%s", err.msg);
		goto cleanup;
	}
	if (time_ref && ks_plan_resolve(w->ref.cand, &w->op, wl, w->ref.params, &ref_plan, &err) < 0) {
		fail_internal(oc, err.msg);
		goto cleanup;
	}
	if (time_ref &&
	    time_reference(w, wi, &ref_plan, &ref_set, n_splits, &in, &ref_out, &ref_scratch, oc) < 0)
		goto cleanup;
	for (int k = 0; k < n_splits; k++) {
		struct structure st = { ks_os_random64(),
					(enum ks_split)((first_kind + (unsigned)k) % KS_SPLIT_COUNT) };
		struct stats cand_stats = { .samples = pool + pooled };
		void *ref_host[16] = { 0 };
		int failed;

		tm->split[k] = st.split;
		announce(w, 120);
		/*
		 * One reference run on the first split: it must give finite values,
		 * and its time sets the deadlines; a later split may take the
		 * reference up to SPLIT_REF_SLOWER times longer (a skewed one).
		 */
		failed = (in.buf ? inputs_fill(w, wl, &st, FILL_STRUCTURE, &in, oc)
				 : inputs_make(w, wl, &st, &in, oc)) < 0 ||
			 (k == 0 && reference_outputs(w, wl, &in, ref_host, &ref_s, oc) < 0);
		host_free(ref_host, w->op.n_outputs);
		if (failed)
			goto cleanup;
		{
			struct timed t = { cand, &plan, wl, &in, &out, &s, &g };
			struct settings this_set = split_set;

			if (k > 0) {
				this_set.warmup = 1;
				this_set.warmup_s = 0;
			}
			if (k == 0 &&
			    (outputs_make(w, wl, &out, oc) < 0 || scratch_make(w, cand, &plan, &s, oc) < 0 ||
			     guards_make(w, cand, &in, &out, &s, &g, oc) < 0))
				goto cleanup;
			if (time_program(w, &t, &this_set, k ? SPLIT_REF_SLOWER * ref_s : ref_s, &cand_stats,
					 oc) < 0)
				goto cleanup;
		}
		tm->split_us[k] = cand_stats.median;
		pooled += cand_stats.reps;
		tm->cand.runs += cand_stats.runs;
	}
	tm->ref_median = w->ref_us[wi];
	summarize(pool, pooled, &tm->cand);
	tm->cand.median = max_of(tm->split_us, n_splits); /* the workload's time: its slowest split */
	{
		int64_t bytes = 0, flops = 0;
		double t_bytes, t_flops;

		if (ks_expr_eval(w->op.min_bytes, &wl->axes, &bytes, &err) < 0 ||
		    ks_expr_eval(w->op.flops, &wl->axes, &flops, &err) < 0) {
			fail_internal(oc, err.msg);
			goto cleanup;
		}
		t_bytes = (double)bytes / (w->prof.dram_gbps * 1e3);
		t_flops = (double)flops / (w->prof.peak_bf16_tflops * 1e6);
		tm->floor_us = t_bytes > t_flops ? t_bytes : t_flops;
	}
	ret = 0;
cleanup:
	free(pool);
	guards_release(w, &g);
	inputs_free(w, &w->op, &in);
	outputs_free(w, &w->op, &out);
	outputs_free(w, &w->op, &ref_out);
	scratch_free(w, &s);
	scratch_free(w, &ref_scratch);
	ks_plan_release(&plan);
	ks_plan_release(&ref_plan);
	return ret;
}

/* ---- one job ---- */

static void read_settings(const json_t *job, struct settings *set)
{
	const json_t *v;

	*set = (struct settings){ .trials = 2,
				  .min_reps = 30,
				  .max_reps = 500,
				  .warmup = 3,
				  .warmup_s = 0.005,
				  .time_cap_ms = 300,
				  .splits = DEFAULT_SPLITS };
	if ((v = json_object_get(job, "trials")) && json_integer_value(v) >= 2)
		set->trials = (int)json_integer_value(v);
	if ((v = json_object_get(job, "min_reps")) && json_integer_value(v) >= 3)
		set->min_reps = (int)json_integer_value(v);
	if ((v = json_object_get(job, "max_reps")) && json_integer_value(v) >= set->min_reps)
		set->max_reps = (int)json_integer_value(v);
	if ((v = json_object_get(job, "time_cap_ms")) && json_integer_value(v) > 0)
		set->time_cap_ms = (int)json_integer_value(v);
	if ((v = json_object_get(job, "splits")) && json_integer_value(v) >= 1 &&
	    json_integer_value(v) <= MAX_SPLITS)
		set->splits = (int)json_integer_value(v);
}

/* The plan's launches as the driver sees them, at the largest benchmark workload, into res. */
static void launches_into(struct worker *w, const struct program *cand, struct ks_result *res)
{
	struct ks_plan plan;
	struct ks_error err;

	if (ks_plan_resolve(cand->cand, &w->op, &w->op.workloads[w->op.n_workloads - 1], cand->params, &plan,
			    &err) < 0)
		return;
	for (size_t i = 0; i < plan.n_launches; i++) {
		const struct ks_launch_dims *d = &plan.launches[i];
		struct ks_result_launch *l = ks_result_add_launch(res, cand->cand->launches[i].kernel);
		int blocks = 0, warps_per_block = (int)((d->threads + 31) / 32);

		if (w->cu->occupancy_max_active_blocks(&blocks, cand->fns[i], (int)d->threads,
						       (size_t)d->smem) == CUDA_SUCCESS)
			l->occupancy = (double)blocks * warps_per_block / (w->prof.max_threads_per_sm / 32);
		l->blocks_per_sm = blocks;
		l->threads = d->threads;
		l->dynamic_smem = d->smem;
	}
	ks_plan_release(&plan);
}

/* The job's secrets: its id and token (echoed in every frame) and a generator no kernel can see. */
static int start_job(struct worker *w, const json_t *job)
{
	const char *token = json_string_value(json_object_get(job, "token"));
	const json_t *id = json_object_get(job, "job");

	if (!token || strlen(token) >= sizeof(w->job.token) || !json_is_integer(id))
		return -1;
	w->job.id = json_integer_value(id);
	snprintf(w->job.token, sizeof(w->job.token), "%s", token);
	{
		uint64_t state = ks_os_random64(), stream = ks_os_random64();

		ks_pcg32_seed(&w->job.rng, state, stream);
	}
	ks_os_random(&w->job.key, sizeof(w->job.key));
	ks_os_random(w->job.pattern, sizeof(w->job.pattern));
	printf_reset(w);
	memset(&w->overhead, 0, sizeof(w->overhead));
	w->overhead.misses_before = w->pool.misses;
	w->announced_until = 0; /* each job starts on the coordinator's own deadline */
	return 0;
}

static json_t *evaluate(struct worker *w, const json_t *job, const struct ks_blob *cubin, int *crashed)
{
	struct outcome oc = { .verdict = KS_VERDICT_OK };
	struct ks_candidate cand = { 0 };
	struct program prog = { 0 };
	struct settings set;
	struct ks_error err;
	struct timing *timings = NULL;
	struct ks_result res;
	json_t *result = NULL, *params_json;
	const char *op_dir, *path, *source;
	int64_t *params = NULL;
	double t0 = now_s(), verify_s = 0, time_s = 0, log_speedup = 0, log_sol = 0;
	size_t n_timed = 0;

	ks_result_init(&res);
	read_settings(job, &set);
	if (json_unpack((json_t *)job, "{s:s, s:s, s:s, s:o}", "op_dir", &op_dir, "path", &path, "source",
			&source, "params", &params_json) ||
	    !json_is_array(params_json)) {
		fail_internal(&oc, "malformed eval job");
		goto done;
	}
	if (use_op(w, op_dir, &oc) < 0)
		goto done;
	if (ks_candidate_parse(path, source, &cand, &err) < 0 || ks_candidate_bind(&cand, &w->op, &err) < 0) {
		fail_cuda(&oc, KS_VERDICT_CONTRACT_ERROR, CUDA_SUCCESS, "%s", err.msg);
		goto done;
	}
	if (json_array_size(params_json) != cand.n_params || cand.n_launches > MAX_LAUNCHES) {
		fail_internal(&oc, "eval job: params do not match the candidate");
		goto done;
	}
	params = ks_calloc(cand.n_params ? cand.n_params : 1, sizeof(*params));
	for (size_t i = 0; i < cand.n_params; i++)
		params[i] = json_integer_value(json_array_get(params_json, i));
	prog.cand = &cand;
	prog.params = params;
	if (program_load(w, &prog, cubin->data, json_object_get(job, "variables"), &oc) < 0 ||
	    program_set_smem(w, &prog, &oc) < 0)
		goto done;
	launches_into(w, &prog, &res);

	for (size_t i = 0; i < w->op.n_check_workloads; i++)
		if (check_workload(w, &prog, &w->op.check_workloads[i], &set, &oc) < 0)
			goto done;
	verify_s = now_s() - t0;

	timings = ks_calloc(w->op.n_workloads, sizeof(*timings));
	for (size_t i = 0; i < w->op.n_workloads; i++) {
		const json_t *only = json_object_get(job, "workloads");
		int wanted = !json_array_size(only);

		for (size_t k = 0; k < json_array_size(only); k++)
			wanted |= !strcmp(json_string_value(json_array_get(only, k)) ?: "",
					  w->op.workloads[i].id);
		if (!wanted)
			continue;
		if (time_workload(w, &prog, i, &set, &timings[n_timed], &oc) < 0)
			goto done;
		n_timed++;
	}
	time_s = now_s() - t0 - verify_s;
	for (size_t i = 0; i < n_timed; i++) {
		const struct timing *tm = &timings[i];
		double speedup = tm->ref_median / tm->cand.median;
		double sol = tm->floor_us / tm->cand.median;
		struct ks_result_workload *out = ks_result_add_workload(&res, tm->id);

		out->median_us = tm->cand.median;
		out->p10_us = tm->cand.p10;
		out->p90_us = tm->cand.p90;
		out->min_us = tm->cand.min;
		out->reps = tm->cand.reps;
		out->runs = tm->cand.runs;
		out->ref_median_us = tm->ref_median;
		out->speedup = speedup;
		out->floor_us = tm->floor_us;
		out->sol_fraction = sol;
		out->n_splits = tm->n_splits > 1 ? (size_t)tm->n_splits : 0;
		for (size_t k = 0; k < out->n_splits; k++) {
			snprintf(out->splits[k].kind, sizeof(out->splits[k].kind), "%s",
				 ks_split_name(tm->split[k]));
			out->splits[k].median_us = tm->split_us[k];
		}
		log_speedup += log(speedup);
		log_sol += log(sol);
		if (sol > SOL_IMPLAUSIBLE && oc.verdict == KS_VERDICT_OK)
			fail_cuda(&oc, KS_VERDICT_IMPLAUSIBLE, CUDA_SUCCESS,
				  "workload %s: %.2f us is %.2fx faster than the speed-of-light floor of "
				  "%.2f us "
				  "(min_bytes over the measured %.0f GB/s); no kernel can do that",
				  tm->id, tm->cand.median, sol, tm->floor_us, w->prof.dram_gbps);
	}
done:
	*crashed = oc.verdict == KS_VERDICT_CRASH && !oc.internal;
	if (oc.internal) {
		result = json_pack("{s:s, s:s}", "type", "result", "internal_error", oc.evidence);
	} else {
		res.verdict = oc.verdict;
		ks_result_set_evidence(&res, "%s", oc.evidence);
		res.fitness =
			oc.verdict == KS_VERDICT_OK && n_timed ? exp(log_speedup / (double)n_timed) : 0.0;
		res.sol_fraction = n_timed ? exp(log_sol / (double)n_timed) : 0.0;
		res.timing.verify_s = verify_s;
		res.timing.time_s = time_s;
		/* what the defences of the timed phase cost, beside the timed launches themselves */
		res.overhead = (struct ks_result_overhead){
			.inputs_s = w->overhead.inputs,
			.prepare_s = w->overhead.prepare,
			.checks_s = w->overhead.checks,
			.verify_s = w->overhead.verify,
			.wait_s = w->overhead.wait,
			.warmup_s = w->overhead.warmup,
			.prechecks_s = w->overhead.prechecks,
			.announce_s = w->overhead.announce,
			.runs = w->overhead.runs,
			.verified_runs = w->overhead.verified,
			.announcements = w->overhead.announcements,
			.allocations = (int64_t)(w->pool.misses - w->overhead.misses_before)
		};
		res.has = KS_RESULT_EVALUATED | KS_RESULT_OVERHEAD;
		/* what the kernel printed: evidence for a person, never read as a message */
		printf_into(w, &res);
		/* the frame is the result's one JSON form (result.h) */
		result = ks_result_to_json(&res);
		json_object_set_new(result, "type", json_string("result"));
	}
	ks_result_release(&res);
	free(timings);
	program_unload(w, &prog);
	ks_candidate_release(&cand);
	free(params);
	if (oc.internal) {
		/* a half-evaluated op may have left state behind: start clean next time */
		drop_op(w);
	}
	return result;
}

static json_t *profile_json(const struct ks_device_profile *p)
{
	return json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:i, s:i, s:f, s:f, s:f, s:s}", "name",
			 p->name, "slug", p->slug, "arch", p->arch, "cc_major", p->cc_major, "cc_minor",
			 p->cc_minor, "sm_count", p->sm_count, "l2_bytes", p->l2_bytes, "total_mem",
			 (json_int_t)p->total_mem, "max_smem_per_block_optin", p->max_smem_per_block_optin,
			 "max_threads_per_sm", p->max_threads_per_sm, "dram_gbps", p->dram_gbps,
			 "peak_fp32_tflops", p->peak_fp32_tflops, "peak_bf16_tflops", p->peak_bf16_tflops,
			 "peak_source", p->peak_source);
}

static const char *cache_dir(char *buf, size_t size)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");

	if (getenv("KSEARCH_CACHE"))
		snprintf(buf, size, "%s", getenv("KSEARCH_CACHE"));
	else if (xdg && *xdg)
		snprintf(buf, size, "%s/ksearch/devices", xdg);
	else if (home && *home)
		snprintf(buf, size, "%s/.cache/ksearch/devices", home);
	else
		return NULL;
	return buf;
}

/*
 * Move this process onto its GPU's core of the host's plan (cpus.h), the
 * CPUs into cpus ("" when the plan has none for it).
 */
static void take_core(const struct worker *w, char *cpus, size_t size)
{
	int domain, bus, device, g = -1;

	if (!ks_gpukit_pci(w->kit, &domain, &bus, &device))
		g = ks_cpu_host_gpu_index(KS_NVIDIA_GPUS_DIR, domain, bus, device);
	if (ks_cpu_pin_process(ks_cpu_plan_host(), g, cpus, size) < 0)
		cpus[0] = '\0'; /* a refusal leaves the worker where it was: slower beside compiles, no less
				   right */
}

int ks_worker_main(int in_fd, int out_fd, int gpu)
{
	struct ks_gpu_info info;
	char cpus[64];
	struct worker w = { .out_fd = out_fd };
	struct ks_error err;
	char dir[4096];
	int cached = 0;

	if (printf_capture_start() < 0) {
		send_msg(&w, json_pack("{s:s, s:b, s:s}", "type", "hello", "ok", 0, "error",
				       "cannot set up the capture of device printf (memfd_create)"));
		return 1;
	}
	if (ks_cuda_load(&w.cu, &err) < 0 || ks_gpukit_open(&w.kit, w.cu, gpu, &err) < 0) {
		send_msg(&w, json_pack("{s:s, s:b, s:s}", "type", "hello", "ok", 0, "error", err.msg));
		return 1;
	}
	take_core(&w, cpus, sizeof(cpus));
	if (ks_gpukit_profile(w.kit, cache_dir(dir, sizeof(dir)), &w.prof, &cached, &err) < 0) {
		send_msg(&w, json_pack("{s:s, s:b, s:s}", "type", "hello", "ok", 0, "error", err.msg));
		return 1;
	}
	w.stream = ks_gpukit_stream(w.kit);
	/* a sixteenth of the GPU's memory: gqa's buffers of every workload take about a gigabyte */
	ks_devpool_init(&w.pool, w.cu, w.prof.total_mem / 16);
	if (w.cu->event_create(&w.start, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
	    w.cu->event_create(&w.stop, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
	    w.cu->event_create(&w.prepared, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
	    w.cu->mem_alloc(&w.pattern, GUARD_PATTERN_BYTES) != CUDA_SUCCESS) {
		send_msg(&w, json_pack("{s:s, s:b, s:s}", "type", "hello", "ok", 0, "error",
				       "cannot create CUDA events or the guard pattern's buffer"));
		return 1;
	}
	/* which GPU this is, for the results' "where" (result.h); "" when the driver does not say */
	if (ks_cuda_device_info(gpu, &info, &err) < 0)
		info.uuid[0] = '\0';
	send_msg(&w,
		 json_pack("{s:s, s:b, s:o, s:b, s:s, s:s}", "type", "hello", "ok", 1, "profile",
			   profile_json(&w.prof), "profile_cached", cached, "cpus", cpus, "uuid", info.uuid));
	for (;;) {
		json_t *msg = NULL, *result;
		struct ks_blob *blobs = NULL;
		size_t n_blobs = 0;
		const char *type;
		int crashed = 0;

		if (ks_frame_read(in_fd, -1, &msg, &blobs, &n_blobs, &err) != KS_FRAME_OK)
			break; /* the coordinator closed our stdin: we are done */
		type = json_string_value(json_object_get(msg, "type"));
		if (type && !strcmp(type, "quit")) {
			json_decref(msg);
			ks_blobs_free(blobs, n_blobs);
			break;
		}
		memset(&w.job, 0, sizeof(w.job));
		if (!type || strcmp(type, "eval") || n_blobs < 1 || start_job(&w, msg) < 0)
			result = json_pack("{s:s, s:s}", "type", "result", "internal_error",
					   "malformed request");
		else
			result = evaluate(&w, msg, &blobs[0], &crashed);
		send_msg(&w, result);
		memset(&w.job, 0, sizeof(w.job));
		json_decref(msg);
		ks_blobs_free(blobs, n_blobs);
		if (crashed)
			return 3; /* the context is gone: the coordinator starts a fresh worker */
	}
	drop_op(&w);
	ks_devpool_release(&w.pool);
	if (w.slots)
		w.cu->mem_free(w.slots);
	if (w.pattern)
		w.cu->mem_free(w.pattern);
	ks_gpukit_close(w.kit);
	return 0;
}
