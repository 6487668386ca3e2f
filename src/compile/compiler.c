/*
 * compiler.c - NVRTC behind a process boundary.
 */
#include "ksearch/compile/compiler.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "ksearch/base/cpus.h"
#include "ksearch/base/frame.h"
#include "ksearch/base/json.h"
#include "ksearch/base/proc.h"
#include "ksearch/base/util.h"
#include "ksearch/compile/ptx.h"

static json_t *kernels_to_json(const struct ks_compile_result *res)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < res->n_kernels; i++) {
		const struct ks_kernel_resources *k = &res->kernels[i];

		json_array_append_new(arr,
				      json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "name", k->name,
						"registers", k->registers, "static_smem", k->static_smem,
						"stack_bytes", k->stack_bytes, "spill_stores",
						k->spill_stores, "spill_loads", k->spill_loads, "const_bytes",
						k->const_bytes, "barriers", k->barriers));
	}
	return arr;
}

static int kernels_from_json(const json_t *arr, struct ks_compile_result *res, struct ks_error *err)
{
	if (!json_is_array(arr))
		return ks_fail(err, "compiler process: malformed answer (kernels)");
	res->n_kernels = json_array_size(arr);
	res->kernels = ks_calloc(res->n_kernels ? res->n_kernels : 1, sizeof(*res->kernels));
	for (size_t i = 0; i < res->n_kernels; i++) {
		struct ks_kernel_resources *k = &res->kernels[i];
		const char *name = NULL;

		if (json_unpack(json_array_get(arr, i), "{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "name",
				&name, "registers", &k->registers, "static_smem", &k->static_smem,
				"stack_bytes", &k->stack_bytes, "spill_stores", &k->spill_stores,
				"spill_loads", &k->spill_loads, "const_bytes", &k->const_bytes, "barriers",
				&k->barriers))
			return ks_fail(err, "compiler process: malformed answer (kernel %zu)", i);
		snprintf(k->name, sizeof(k->name), "%s", name);
	}
	return 0;
}

/* ---- the analysis of the PTX, as the child sends it ---- */

static json_t *names_to_json(char **names, size_t count)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < count; i++)
		json_array_append_new(arr, ks_json_text(names[i]));
	return arr;
}

static int names_from_json(const json_t *arr, char ***names, size_t *count)
{
	*names = NULL;
	*count = 0;
	if (!json_is_array(arr))
		return -1;
	*names = ks_calloc(json_array_size(arr) ? json_array_size(arr) : 1, sizeof(**names));
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const char *name = json_string_value(json_array_get(arr, i));

		if (!name)
			return -1;
		(*names)[(*count)++] = ks_strdup(name);
	}
	return 0;
}

static json_t *analysis_to_json(const struct ks_ptx_analysis *a)
{
	json_t *kernels = json_array();

	for (size_t i = 0; i < a->n_kernels; i++) {
		const struct ks_ptx_kernel_facts *k = &a->kernels[i];
		json_t *params = json_array();

		for (size_t p = 0; p < k->entry.n_params; p++)
			json_array_append_new(params,
					      json_pack("[i, i, s]", (int)k->entry.params[p].cls,
							k->entry.params[p].bytes, k->entry.params[p].type));
		json_array_append_new(kernels,
				      json_pack("{s:b, s:o, s:[i,i,i], s:[i,i,i], s:i, s:i, s:i}", "found",
						k->found, "params", params, "maxntid", k->entry.maxntid[0],
						k->entry.maxntid[1], k->entry.maxntid[2], "reqntid",
						k->entry.reqntid[0], k->entry.reqntid[1], k->entry.reqntid[2],
						"tensor_cores", (int)k->desc.tensor_cores, "async_copy",
						(int)k->desc.async_copy, "widest_load_bytes",
						k->desc.widest_load_bytes));
	}
	return json_pack("{s:o, s:o, s:o, s:o}", "kernels", kernels, "forbidden_calls",
			 names_to_json(a->forbidden_calls, a->n_forbidden_calls), "mutable_globals",
			 names_to_json(a->mutable_globals, a->n_mutable_globals), "variables",
			 names_to_json(a->variables, a->n_variables));
}

static int analysis_from_json(const json_t *obj, const struct ks_compile_request *req,
			      struct ks_ptx_analysis *a, struct ks_error *err)
{
	const json_t *kernels = json_object_get(obj, "kernels");

	memset(a, 0, sizeof(*a));
	if (!json_is_array(kernels) || json_array_size(kernels) != req->n_kernels)
		goto malformed;
	a->kernels = ks_calloc(req->n_kernels ? req->n_kernels : 1, sizeof(*a->kernels));
	a->n_kernels = req->n_kernels;
	for (size_t i = 0; i < req->n_kernels; i++) {
		struct ks_ptx_kernel_facts *k = &a->kernels[i];
		json_t *params = NULL;
		int tc = 0, ac = 0;

		k->name = ks_strdup(req->kernels[i]);
		if (json_unpack(json_array_get(kernels, i), "{s:b, s:o, s:[iii], s:[iii], s:i, s:i, s:i}",
				"found", &k->found, "params", &params, "maxntid", &k->entry.maxntid[0],
				&k->entry.maxntid[1], &k->entry.maxntid[2], "reqntid", &k->entry.reqntid[0],
				&k->entry.reqntid[1], &k->entry.reqntid[2], "tensor_cores", &tc, "async_copy",
				&ac, "widest_load_bytes", &k->desc.widest_load_bytes) ||
		    !json_is_array(params))
			goto malformed;
		k->desc.tensor_cores = (enum ks_tensor_cores)tc;
		k->desc.async_copy = (enum ks_async_copy)ac;
		k->entry.params = ks_calloc(json_array_size(params) ? json_array_size(params) : 1,
					    sizeof(*k->entry.params));
		for (size_t p = 0; p < json_array_size(params); p++) {
			struct ks_ptx_param *param = &k->entry.params[p];
			const char *type = NULL;
			int cls = 0;

			if (json_unpack(json_array_get(params, p), "[iis]", &cls, &param->bytes, &type))
				goto malformed;
			param->cls = (enum ks_ptx_param_class)cls;
			snprintf(param->type, sizeof(param->type), "%s", type);
			k->entry.n_params++;
		}
	}
	if (names_from_json(json_object_get(obj, "forbidden_calls"), &a->forbidden_calls,
			    &a->n_forbidden_calls) < 0 ||
	    names_from_json(json_object_get(obj, "mutable_globals"), &a->mutable_globals,
			    &a->n_mutable_globals) < 0 ||
	    names_from_json(json_object_get(obj, "variables"), &a->variables, &a->n_variables) < 0)
		goto malformed;
	return 0;
malformed:
	ks_ptx_analysis_release(a);
	return ks_fail(err, "compiler process: malformed answer (analysis)");
}

/*
 * A compile process serves several requests (ks_compile_isolated()), so
 * its CPU limit is its CPU time so far plus the request's seconds: a soft
 * limit, whose SIGXCPU ends it.
 */
static void limit_cpu(unsigned seconds)
{
	struct rusage ru;
	struct rlimit rl;
	rlim_t want;

	if (getrusage(RUSAGE_SELF, &ru) || getrlimit(RLIMIT_CPU, &rl))
		return;
	want = (rlim_t)ru.ru_utime.tv_sec + (rlim_t)ru.ru_stime.tv_sec + 1 + seconds;
	if (rl.rlim_max != RLIM_INFINITY && want > rl.rlim_max)
		want = rl.rlim_max;
	rl.rlim_cur = want;
	setrlimit(RLIMIT_CPU, &rl);
}

/* Answer one request; 0 when the reply went out. */
static int serve_one(json_t *msg, int out_fd)
{
	struct ks_compile_request req = { 0 };
	struct ks_compile_result res = { 0 };
	struct ks_define *defines = NULL;
	struct ks_blob out_blobs[2];
	struct ks_error err;
	json_t *reply = NULL, *defs, *kernels;
	const char **names = NULL;
	json_int_t cpu_seconds = 0;
	int rc;

	if (json_unpack(msg, "{s:s, s:s, s:s, s:o, s?I}", "source", &req.source, "source_name",
			&req.source_name, "arch", &req.arch, "defines", &defs, "cpu_seconds", &cpu_seconds) ||
	    !json_is_array(defs)) {
		fprintf(stderr, "ksearch __compile: malformed request\n");
		return -1;
	}
	if (cpu_seconds > 0)
		limit_cpu((unsigned)cpu_seconds);
	req.n_defines = json_array_size(defs);
	defines = ks_calloc(req.n_defines ? req.n_defines : 1, sizeof(*defines));
	for (size_t i = 0; i < req.n_defines; i++) {
		json_int_t value = 0;

		json_unpack(json_array_get(defs, i), "[sI]", &defines[i].name, &value);
		defines[i].value = value;
	}
	req.defines = defines;
	kernels = json_object_get(msg, "analyze");
	if (json_is_array(kernels)) {
		req.n_kernels = json_array_size(kernels);
		names = ks_calloc(req.n_kernels ? req.n_kernels : 1, sizeof(*names));
		for (size_t i = 0; i < req.n_kernels; i++)
			names[i] = json_string_value(json_array_get(kernels, i))
					   ? json_string_value(json_array_get(kernels, i))
					   : "";
		req.kernels = names;
	}
	ks_error_clear(&err);
	rc = ks_nvrtc_compile(&req, &res, &err);
	/* the log quotes the source: ks_json_text() keeps a byte that is not UTF-8 from losing the reply */
	reply = json_pack("{s:b, s:o, s:o?, s:o}", "ok", rc == 0, "error", ks_json_text(err.msg), "log",
			  res.log ? ks_json_text(res.log) : NULL, "kernels", kernels_to_json(&res));
	if (rc == 0 && json_is_array(kernels)) {
		/* the candidate's PTX is read here, under this process's deadline and memory limit */
		struct ks_ptx_analysis analysis;
		struct ks_error why;

		ks_error_clear(&why);
		if (ks_ptx_analyze(res.ptx, req.kernels, req.n_kernels, &analysis, &why) < 0) {
			json_object_set_new(reply, "analysis_error", ks_json_text(why.msg));
		} else {
			json_object_set_new(reply, "analysis", analysis_to_json(&analysis));
			ks_ptx_analysis_release(&analysis);
		}
	}
	out_blobs[0] = (struct ks_blob){ res.ptx, res.ptx ? res.ptx_size : 0 };
	out_blobs[1] = (struct ks_blob){ res.cubin, res.cubin_size };
	rc = ks_frame_write(out_fd, ks_now_ms() + 60000, reply, out_blobs, 2, &err);
	json_decref(reply);
	free(defines);
	free(names);
	ks_compile_result_release(&res);
	return rc < 0 ? -1 : 0;
}

int ks_compile_child_main(int in_fd, int out_fd)
{
	for (;;) {
		struct ks_blob *blobs = NULL;
		size_t n_blobs = 0;
		struct ks_error err;
		json_t *msg = NULL;
		enum ks_frame_status st = ks_frame_read(in_fd, -1, &msg, &blobs, &n_blobs, &err);
		int rc;

		if (st == KS_FRAME_EOF)
			return 0; /* the parent is done with this process */
		if (st != KS_FRAME_OK) {
			fprintf(stderr, "ksearch __compile: %s\n", err.msg);
			return 1;
		}
		rc = serve_one(msg, out_fd);
		json_decref(msg);
		ks_blobs_free(blobs, n_blobs);
		if (rc < 0)
			return 1;
	}
}

/*
 * A compile process serves one compiling thread for up to
 * KS_COMPILE_SERVES compiles, then is replaced: starting one costs a
 * compile some 5-8% of its CPU (exec, loading NVRTC, its first call), and
 * a host of 4 GPUs is bound by its compiles' CPU.  It is replaced at once
 * after anything but a clean compile (a compile error, a timeout, a
 * crash), so what a failing candidate did to it ends with it.  Its CPU
 * limit is set by itself for each request (limit_cpu()); its address-space
 * limit holds for its life, which KS_COMPILE_SERVES bounds.
 */
struct server {
	struct ks_child child;
	int served;
};

static pthread_key_t server_key;
static pthread_once_t server_once = PTHREAD_ONCE_INIT;

static void server_end(struct server *s)
{
	if (s->child.pid > 0)
		ks_child_finish(&s->child, 2000, NULL);
	s->served = 0;
}

static void server_free(void *p)
{
	server_end(p);
	free(p);
}

/* The main thread never runs a key's destructor: its process ends its server on exit. */
static void end_main_server(void)
{
	struct server *s = pthread_getspecific(server_key);

	if (s)
		server_end(s);
}

static void server_key_make(void)
{
	if (pthread_key_create(&server_key, server_free) == 0)
		atexit(end_main_server);
}

static struct server *thread_server(void)
{
	struct server *s;

	pthread_once(&server_once, server_key_make);
	s = pthread_getspecific(server_key);
	if (!s) {
		s = ks_calloc(1, sizeof(*s));
		s->child.pid = 0;
		s->child.to_child = s->child.from_child = -1;
		if (pthread_setspecific(server_key, s)) {
			free(s);
			return NULL;
		}
	}
	return s;
}

pid_t ks_compile_process(void)
{
	struct server *s = thread_server();

	return s ? s->child.pid : 0;
}

int ks_compile_isolated(const struct ks_compile_request *req, const struct ks_compile_limits *limits,
			struct ks_compile_result *out, struct ks_ptx_analysis *analysis, struct ks_error *err)
{
	static const char *const args[] = { "__compile", NULL };
	/*
	 * Compiles are throughput work; the timings, the verification and the
	 * messages between ranks wait on the CPU for every evaluation.  On a
	 * host whose cores the compilers fill, a compile yields to them, and
	 * leaves the GPU workers' own cores alone (cpus.h).  SCHED_IDLE, so
	 * that any wake-up preempts a compile at once, measured no better than
	 * nice on a 4-GPU host (BENCHMARKS.md, "Issue 27: a core for each GPU
	 * worker").
	 */
	const struct ks_cpu_plan *plan = ks_cpu_plan_host();
	struct ks_child_limits child_limits = { .address_space = (size_t)8 << 30,
						.nice = KS_COMPILE_NICE,
						.cpus = plan->n_reserved ? &plan->rest : NULL };
	/* a memory limit of its own: a process of its own */
	struct server *server = limits && limits->memory_bytes ? NULL : thread_server(),
		      one = { .child = { 0, -1, -1 } };
	struct server *s = server ? server : &one;
	int timeout_ms = 120000;
	unsigned cpu_seconds;
	struct ks_blob *blobs = NULL;
	size_t n_blobs = 0;
	enum ks_frame_status st;
	json_t *msg = NULL, *reply = NULL, *defs = json_array();
	const char *error = "";
	json_t *log = NULL;
	int ok = 0, status = 0, ret = -1;

	memset(out, 0, sizeof(*out));
	if (limits && limits->memory_bytes)
		child_limits.address_space = limits->memory_bytes;
	if (limits && limits->timeout_ms)
		timeout_ms = limits->timeout_ms;
	cpu_seconds = (unsigned)(timeout_ms / 1000 + 10);
	for (size_t i = 0; i < req->n_defines; i++)
		json_array_append_new(
			defs, json_pack("[sI]", req->defines[i].name, (json_int_t)req->defines[i].value));
	msg = json_pack("{s:s, s:o, s:s, s:o, s:I}", "source", req->source, "source_name",
			ks_json_text(req->source_name), "arch", req->arch, "defines", defs, "cpu_seconds",
			(json_int_t)cpu_seconds);
	if (msg && analysis) {
		json_t *kernels = json_array();

		memset(analysis, 0, sizeof(*analysis));
		for (size_t i = 0; i < req->n_kernels; i++)
			json_array_append_new(kernels, ks_json_text(req->kernels[i]));
		json_object_set_new(msg, "analyze", kernels);
	}
	if (!msg) {
		/* ks_candidate_parse() refuses such a source; this is the last line */
		out->log = ks_strdup("the source is not UTF-8 text (or a define's name is not), so it cannot "
				     "be sent to the compiler process");
		ks_fail(err, "compilation failed:\n%s", out->log);
		goto cleanup;
	}
	/* one that served before may have died idle (killed by the OOM killer): then a new one */
	if (s->child.pid > 0 &&
	    ks_frame_write(s->child.to_child, ks_now_ms() + timeout_ms, msg, NULL, 0, err) < 0)
		ks_child_kill(&s->child);
	else if (s->child.pid > 0)
		goto sent;
	s->served = 0;
	if (ks_child_spawn(&s->child, args, &child_limits, err) < 0)
		goto cleanup;
	if (ks_frame_write(s->child.to_child, ks_now_ms() + timeout_ms, msg, NULL, 0, err) < 0) {
		ks_child_kill(&s->child);
		ks_error_prefix(err, "compiler process");
		goto cleanup;
	}
sent:
	st = ks_frame_read(s->child.from_child, ks_now_ms() + timeout_ms, &reply, &blobs, &n_blobs, err);
	if (st == KS_FRAME_TIMEOUT) {
		ks_child_kill(&s->child);
		out->log = ks_asprintf("the compiler process (NVRTC, then the PTX checks) ran past its time "
				       "limit (%d s) and was killed",
				       timeout_ms / 1000);
		ks_fail(err, "compilation failed:\n%s", out->log);
		goto cleanup;
	}
	if (st != KS_FRAME_OK) {
		char how[128];

		ks_child_finish(&s->child, 1000, &status);
		ks_child_describe_status(status, how, sizeof(how));
		out->log =
			ks_asprintf("the compiler process %s before answering (out of memory? limit %zu MiB)",
				    how, child_limits.address_space >> 20);
		ks_fail(err, "compilation failed:\n%s", out->log);
		goto cleanup;
	}
	if (json_unpack(reply, "{s:b, s:s, s?o}", "ok", &ok, "error", &error, "log", &log) || n_blobs != 2 ||
	    kernels_from_json(json_object_get(reply, "kernels"), out, err) < 0) {
		ks_fail(err, "compiler process: malformed answer");
		goto cleanup;
	}
	if (json_is_string(log))
		out->log = ks_strdup(json_string_value(log));
	if (!ok) {
		ks_fail(err, "%s", error);
		goto cleanup;
	}
	out->ptx = ks_malloc(blobs[0].size + 1);
	memcpy(out->ptx, blobs[0].data, blobs[0].size);
	out->ptx[blobs[0].size] = '\0';
	out->ptx_size = blobs[0].size;
	out->cubin = blobs[1].data;
	out->cubin_size = blobs[1].size;
	blobs[1].data = NULL;
	if (analysis) {
		const char *why = json_string_value(json_object_get(reply, "analysis_error"));

		if (why) {
			ks_fail(err, "%s", why);
			ret = 1;
			goto cleanup;
		}
		if (analysis_from_json(json_object_get(reply, "analysis"), req, analysis, err) < 0)
			goto cleanup;
	}
	ret = 0;
cleanup:
	/* kept only after a clean compile, and for at most KS_COMPILE_SERVES */
	if (ret != 0 || !server || ++s->served >= KS_COMPILE_SERVES)
		server_end(s);
	json_decref(msg);
	json_decref(reply);
	ks_blobs_free(blobs, n_blobs);
	return ret;
}
