/*
 * compiler.c - NVRTC behind a process boundary.
 */
#include "ksearch/compile/compiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/frame.h"
#include "ksearch/base/json.h"
#include "ksearch/base/proc.h"
#include "ksearch/base/util.h"

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

int ks_compile_child_main(int in_fd, int out_fd)
{
	struct ks_compile_request req = { 0 };
	struct ks_compile_result res = { 0 };
	struct ks_define *defines = NULL;
	struct ks_blob *blobs = NULL, out_blobs[2];
	size_t n_blobs = 0;
	struct ks_error err;
	json_t *msg = NULL, *reply = NULL, *defs;
	int rc;

	if (ks_frame_read(in_fd, -1, &msg, &blobs, &n_blobs, &err) != KS_FRAME_OK) {
		fprintf(stderr, "ksearch __compile: %s\n", err.msg);
		return 1;
	}
	if (json_unpack(msg, "{s:s, s:s, s:s, s:o}", "source", &req.source, "source_name", &req.source_name,
			"arch", &req.arch, "defines", &defs) ||
	    !json_is_array(defs)) {
		fprintf(stderr, "ksearch __compile: malformed request\n");
		json_decref(msg);
		ks_blobs_free(blobs, n_blobs);
		return 1;
	}
	req.n_defines = json_array_size(defs);
	defines = ks_calloc(req.n_defines ? req.n_defines : 1, sizeof(*defines));
	for (size_t i = 0; i < req.n_defines; i++) {
		json_int_t value = 0;

		json_unpack(json_array_get(defs, i), "[sI]", &defines[i].name, &value);
		defines[i].value = value;
	}
	req.defines = defines;
	ks_error_clear(&err);
	rc = ks_nvrtc_compile(&req, &res, &err);
	/* the log quotes the source: ks_json_text() keeps a byte that is not UTF-8 from losing the reply */
	reply = json_pack("{s:b, s:o, s:o?, s:o}", "ok", rc == 0, "error", ks_json_text(err.msg), "log",
			  res.log ? ks_json_text(res.log) : NULL, "kernels", kernels_to_json(&res));
	out_blobs[0] = (struct ks_blob){ res.ptx, res.ptx ? res.ptx_size : 0 };
	out_blobs[1] = (struct ks_blob){ res.cubin, res.cubin_size };
	rc = ks_frame_write(out_fd, ks_now_ms() + 60000, reply, out_blobs, 2, &err);
	json_decref(reply);
	json_decref(msg);
	ks_blobs_free(blobs, n_blobs);
	free(defines);
	ks_compile_result_release(&res);
	return rc < 0 ? 1 : 0;
}

int ks_compile_isolated(const struct ks_compile_request *req, const struct ks_compile_limits *limits,
			struct ks_compile_result *out, struct ks_error *err)
{
	static const char *const args[] = { "__compile", NULL };
	struct ks_child_limits child_limits = { .address_space = (size_t)8 << 30 };
	int timeout_ms = 120000;
	struct ks_child child;
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
	child_limits.cpu_seconds = (unsigned)(timeout_ms / 1000 + 10);
	for (size_t i = 0; i < req->n_defines; i++)
		json_array_append_new(
			defs, json_pack("[sI]", req->defines[i].name, (json_int_t)req->defines[i].value));
	msg = json_pack("{s:s, s:o, s:s, s:o}", "source", req->source, "source_name",
			ks_json_text(req->source_name), "arch", req->arch, "defines", defs);
	if (!msg) {
		/* ks_candidate_parse() refuses such a source; this is the last line */
		out->log = ks_strdup("the source is not UTF-8 text (or a define's name is not), so it cannot "
				     "be sent to the compiler process");
		ks_fail(err, "compilation failed:\n%s", out->log);
		goto cleanup;
	}
	if (ks_child_spawn(&child, args, &child_limits, err) < 0)
		goto cleanup;
	if (ks_frame_write(child.to_child, ks_now_ms() + timeout_ms, msg, NULL, 0, err) < 0) {
		ks_child_kill(&child);
		ks_error_prefix(err, "compiler process");
		goto cleanup;
	}
	st = ks_frame_read(child.from_child, ks_now_ms() + timeout_ms, &reply, &blobs, &n_blobs, err);
	if (st == KS_FRAME_TIMEOUT) {
		ks_child_kill(&child);
		out->log =
			ks_asprintf("NVRTC ran past its time limit (%d s) and was killed", timeout_ms / 1000);
		ks_fail(err, "compilation failed:\n%s", out->log);
		goto cleanup;
	}
	if (st != KS_FRAME_OK) {
		char how[128];

		ks_child_finish(&child, 1000, &status);
		ks_child_describe_status(status, how, sizeof(how));
		out->log =
			ks_asprintf("the compiler process %s before answering (out of memory? limit %zu MiB)",
				    how, child_limits.address_space >> 20);
		ks_fail(err, "compilation failed:\n%s", out->log);
		goto cleanup;
	}
	ks_child_finish(&child, 5000, &status);
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
	ret = 0;
cleanup:
	json_decref(msg);
	json_decref(reply);
	ks_blobs_free(blobs, n_blobs);
	return ret;
}
