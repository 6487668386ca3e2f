/*
 * eval.c - running jobs on a GPU worker, with deadlines and restarts.
 */
#include "ksearch/evaluate/eval.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ksearch/base/frame.h"
#include "ksearch/base/random.h"
#include "ksearch/base/util.h"

/* Writing a job to a worker that stopped reading is given up after this long. */
#define JOB_WRITE_MS 30000

/* A fresh per-job token: the worker must echo it in every frame of the job. */
static void job_token(char *hex, size_t size)
{
	unsigned char raw[16];

	ks_os_random(raw, sizeof(raw));
	for (size_t i = 0; i < sizeof(raw) && 2 * i + 2 < size; i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
}

/* Whether msg belongs to the job (its id and token): anything else is refused. */
static int frame_belongs(const json_t *msg, uint64_t job, const char *token)
{
	const char *got = json_string_value(json_object_get(msg, "token"));
	const json_t *id = json_object_get(msg, "job");

	return got && !strcmp(got, token) && json_is_integer(id) && (uint64_t)json_integer_value(id) == job;
}

static int profile_from_json(const json_t *j, struct ks_device_profile *p)
{
	const char *name = "", *slug = "", *arch = "", *source = "";
	json_int_t total = 0;

	memset(p, 0, sizeof(*p));
	if (json_unpack((json_t *)j, "{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:i, s:i, s:F, s:F, s:F, s:s}",
			"name", &name, "slug", &slug, "arch", &arch, "cc_major", &p->cc_major, "cc_minor",
			&p->cc_minor, "sm_count", &p->sm_count, "l2_bytes", &p->l2_bytes, "total_mem", &total,
			"max_smem_per_block_optin", &p->max_smem_per_block_optin, "max_threads_per_sm",
			&p->max_threads_per_sm, "dram_gbps", &p->dram_gbps, "peak_fp32_tflops",
			&p->peak_fp32_tflops, "peak_bf16_tflops", &p->peak_bf16_tflops, "peak_source",
			&source))
		return -1;
	snprintf(p->name, sizeof(p->name), "%s", name);
	snprintf(p->slug, sizeof(p->slug), "%s", slug);
	snprintf(p->arch, sizeof(p->arch), "%s", arch);
	snprintf(p->peak_source, sizeof(p->peak_source), "%s", source);
	p->total_mem = (size_t)total;
	return 0;
}

static int start_worker(struct ks_evaluator *ev, int timeout_ms, struct ks_error *err)
{
	char gpu[16];
	const char *args[] = { "__worker", "--gpu", gpu, NULL };
	struct ks_blob *blobs = NULL;
	size_t n_blobs = 0;
	json_t *hello = NULL;
	enum ks_frame_status st;
	int ok = 0, ret = -1;

	snprintf(gpu, sizeof(gpu), "%d", ev->gpu);
	if (ks_child_spawn(&ev->worker, args, NULL, err) < 0)
		return -1;
	st = ks_frame_read(ev->worker.from_child, ks_now_ms() + timeout_ms, &hello, &blobs, &n_blobs, err);
	if (st != KS_FRAME_OK) {
		ks_child_kill(&ev->worker);
		ks_error_prefix(err, "GPU worker for GPU %d did not start", ev->gpu);
		goto cleanup;
	}
	json_unpack(hello, "{s:b}", "ok", &ok);
	if (!ok) {
		ks_fail(err, "GPU worker for GPU %d: %s", ev->gpu,
			json_string_value(json_object_get(hello, "error")) ?: "failed to start");
		ks_child_finish(&ev->worker, 2000, NULL);
		goto cleanup;
	}
	snprintf(ev->cpus, sizeof(ev->cpus), "%s", json_string_value(json_object_get(hello, "cpus")) ?: "");
	snprintf(ev->uuid, sizeof(ev->uuid), "%s", json_string_value(json_object_get(hello, "uuid")) ?: "");
	json_decref(ev->profile_json);
	ev->profile_json = json_incref(json_object_get(hello, "profile"));
	if (profile_from_json(ev->profile_json, &ev->profile) < 0) {
		ks_fail(err, "GPU worker for GPU %d: malformed device profile", ev->gpu);
		ks_child_kill(&ev->worker);
		/* a failed open is not closed (ks_gpu_backend_open()): nothing may stay held */
		json_decref(ev->profile_json);
		ev->profile_json = NULL;
		goto cleanup;
	}
	ret = 0;
cleanup:
	json_decref(hello);
	ks_blobs_free(blobs, n_blobs);
	return ret;
}

int ks_evaluator_open(struct ks_evaluator *ev, int gpu, const struct ks_eval_options *opts,
		      struct ks_error *err)
{
	memset(ev, 0, sizeof(*ev));
	ev->gpu = gpu;
	return start_worker(ev, opts && opts->startup_timeout_ms ? opts->startup_timeout_ms : 180000, err);
}

void ks_evaluator_close(struct ks_evaluator *ev)
{
	if (ev->worker.pid > 0) {
		struct ks_error err;
		json_t *quit = json_pack("{s:s}", "type", "quit");

		ks_frame_write(ev->worker.to_child, ks_now_ms() + 5000, quit, NULL, 0, &err);
		json_decref(quit);
		ks_child_finish(&ev->worker, 5000, NULL);
	}
	json_decref(ev->profile_json);
	ev->profile_json = NULL;
}

/* A verdict the evaluator reached itself: the worker never answered. */
static void set_verdict(struct ks_result *res, enum ks_verdict verdict, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_verdict(struct ks_result *res, enum ks_verdict verdict, const char *fmt, ...)
{
	va_list ap;
	char *evidence;

	va_start(ap, fmt);
	evidence = ks_vasprintf(fmt, ap);
	va_end(ap);
	ks_result_fail(res, verdict, "%s", evidence);
	free(evidence);
}

int ks_evaluator_run(struct ks_evaluator *ev, const struct ks_op *op, const struct ks_candidate *cand,
		     const int64_t *params, const struct ks_build *build, const struct ks_eval_options *opts,
		     struct ks_result *res, struct ks_error *err)
{
	char token[40];
	json_t *job, *params_json = json_array(), *only = json_array();
	struct ks_blob cubin = { build->compiled.cubin, build->compiled.cubin_size };
	int64_t deadline, t0 = ks_now_ms();
	int ret = -1;

	ks_result_release(res);
	if (ev->worker.pid <= 0) {
		ev->restarts++;
		if (start_worker(ev, opts && opts->startup_timeout_ms ? opts->startup_timeout_ms : 180000,
				 err) < 0)
			return -1;
	}
	for (size_t i = 0; i < cand->n_params; i++)
		json_array_append_new(params_json, json_integer(params[i]));
	for (size_t i = 0; opts && i < opts->n_workloads; i++)
		json_array_append_new(only, json_string(opts->workloads[i]));
	job_token(token, sizeof(token));
	/*
	 * No seed travels: the worker draws every secret of the job (keys,
	 * guard contents, input values, length splits, which runs are verified)
	 * from the OS itself, each on its own (worker.c, start_job()).
	 */
	job = json_pack("{s:s, s:I, s:s, s:s, s:s, s:s, s:o, s:o}", "type", "eval", "job",
			(json_int_t)++ev->jobs, "token", token, "op_dir", op->dir, "path", cand->path,
			"source", cand->source, "params", params_json, "workloads", only);
	if (opts && opts->time_cap_ms)
		json_object_set_new(job, "time_cap_ms", json_integer(opts->time_cap_ms));
	{
		/* the module's variables, which the worker checks after every run */
		json_t *variables = json_array();

		for (size_t i = 0; i < build->n_variables; i++)
			json_array_append_new(variables, json_string(build->variables[i]));
		json_object_set_new(job, "variables", variables);
	}

	if (ks_frame_write(ev->worker.to_child, ks_now_ms() + JOB_WRITE_MS, job, &cubin, 1, err) < 0) {
		json_decref(job);
		ks_child_kill(&ev->worker);
		ks_error_prefix(err, "GPU worker");
		return -1;
	}
	json_decref(job);
	deadline = ks_now_ms() + 60000; /* until the worker announces its own */
	for (;;) {
		struct ks_blob *blobs = NULL;
		size_t n_blobs = 0;
		json_t *msg = NULL;
		const char *type;
		enum ks_frame_status st =
			ks_frame_read(ev->worker.from_child, deadline, &msg, &blobs, &n_blobs, err);

		ks_blobs_free(blobs, n_blobs);
		if (st == KS_FRAME_TIMEOUT) {
			ks_child_kill(&ev->worker);
			set_verdict(
				res, KS_VERDICT_TIMEOUT,
				"no answer within the deadline (derived from the reference's time); "
				"the kernel probably never finishes. The worker was killed and restarted");
			break;
		}
		if (st != KS_FRAME_OK) {
			int status = 0;
			char how[128];

			ks_child_finish(&ev->worker, 2000, &status);
			ks_child_describe_status(status, how, sizeof(how));
			set_verdict(res, KS_VERDICT_CRASH, "the GPU worker %s while running the candidate",
				    how);
			break;
		}
		if (!frame_belongs(msg, ev->jobs, token)) {
			/*
			 * Replies travel where no candidate code can write, so this is
			 * a worker gone wrong: it must never decide a verdict.
			 */
			json_decref(msg);
			ks_child_kill(&ev->worker);
			set_verdict(res, KS_VERDICT_CRASH,
				    "the GPU worker sent a message that does not belong to this job (wrong "
				    "job id "
				    "or token); it was killed and restarted, and nothing it said was used");
			break;
		}
		type = json_string_value(json_object_get(msg, "type"));
		if (type && !strcmp(type, "deadline")) {
			deadline = ks_now_ms() + json_integer_value(json_object_get(msg, "ms"));
			json_decref(msg);
			continue;
		}
		if (!type || strcmp(type, "result")) {
			json_decref(msg);
			ks_child_kill(&ev->worker);
			ks_fail(err, "GPU worker: unexpected message");
			goto cleanup;
		}
		if (json_object_get(msg, "internal_error")) {
			ks_fail(err, "GPU worker: %s",
				json_string_value(json_object_get(msg, "internal_error")));
			json_decref(msg);
			goto cleanup;
		}
		/* the result frame is a result's JSON form: parsed in one place */
		if (ks_result_from_json(msg, res, err) < 0) {
			json_decref(msg);
			ks_error_prefix(err, "GPU worker: malformed result");
			goto cleanup;
		}
		json_decref(msg);
		if (res->verdict == KS_VERDICT_CRASH)
			ks_child_finish(&ev->worker, 5000, NULL); /* it exits after a crash */
		break;
	}
	res->has |= KS_RESULT_EVALUATED;
	res->timing.wall_s = (double)(ks_now_ms() - t0) / 1000.0;
	ret = 0;
cleanup:
	if (ret < 0)
		ks_result_release(res);
	return ret;
}
