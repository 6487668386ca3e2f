/*
 * sanitize.c - the coordinator's side of the sanitizer checks: running
 * compute-sanitizer over `ksearch __profile_run --plain`, reading its
 * words, and the record's "sanitizer" object (see sanitize.h).
 */
#include "ksearch/evaluate/sanitize.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ksearch/base/fs.h"
#include "ksearch/base/json.h"
#include "ksearch/base/proc.h"
#include "ksearch/base/util.h"
#include "ksearch/evaluate/profile.h"

#define DEFAULT_TIMEOUT_MS 300000
#define TAG "========= "
#define PRINT_LIMIT "20"

const char *ks_sanitize_status_name(enum ks_sanitize_status status)
{
	switch (status) {
	case KS_SANITIZE_CLEAN:
		return "clean";
	case KS_SANITIZE_FAILED:
		return "failed";
	case KS_SANITIZE_INCOMPLETE:
		return "incomplete";
	case KS_SANITIZE_UNAVAILABLE:
		return "unavailable";
	}
	return "?";
}

/* ---- the sanitizer's words ---- */

/*
 * Lines that report an error of the program (memcheck, racecheck; synccheck
 * and initcheck for completeness).  The first three are accesses: never a
 * sign that the tool cannot work.
 */
static const char *const error_starts[] = {
	"Invalid ",
	"Misaligned ",
	"Out-of-range ",
	"Program hit ",
	"Error: Race reported",
	"Illegal ",
	"Warp ",
	"Lane ",
	"Malloc/Free ",
	"Barrier error",
	"Uninitialized ",
	"Hardware exception",
};

/* The tool saying that it cannot work here: not the candidate's doing. */
static const char *const unavailable_marks[] = {
	"Device not supported",
	"not supported on this",
	"Internal Sanitizer Error",
	"failed to initialize",
	"Unable to ",
	"(error 999)",
	"CUDA_ERROR_UNKNOWN",
	"CUDA_ERROR_NOT_SUPPORTED",
	"No attachable process",
	"could not be loaded",
};

static int starts_with_any(const char *line, size_t len, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(list[i]);

		if (len >= l && !memcmp(line, list[i], l))
			return 1;
	}
	return 0;
}

static int holds_any(const char *line, size_t len, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memmem(line, len, list[i], strlen(list[i])))
			return 1;
	return 0;
}

/* line[0..len) into buf as printable ASCII (anything else becomes '?'). */
static void printable(const char *line, size_t len, char *buf, size_t size)
{
	size_t n = 0;

	for (size_t i = 0; i < len && n + 1 < size; i++) {
		unsigned char c = (unsigned char)line[i];

		buf[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	while (n && buf[n - 1] == ' ')
		n--;
	buf[n] = '\0';
}

/* The number after needle in line, or -1. */
static long number_after(const char *line, size_t len, const char *needle)
{
	const char *p = memmem(line, len, needle, strlen(needle));
	long v = 0;
	int digits = 0;

	if (!p)
		return -1;
	for (p += strlen(needle); p < line + len && *p == ' '; p++)
		;
	for (; p < line + len && *p >= '0' && *p <= '9' && v < 1000000000; p++, digits++)
		v = v * 10 + (*p - '0');
	return digits ? v : -1;
}

void ks_sanitize_parse(const char *text, struct ks_sanitize_report *out)
{
	unsigned lines = 0;
	long summary = -1;

	memset(out, 0, sizeof(*out));
	for (const char *p = text; p && *p;) {
		const char *end = strchr(p, '\n');
		size_t len = end ? (size_t)(end - p) : strlen(p), tl = strlen(TAG);
		const char *line = p + tl;

		if (len && p[len - 1] == '\r')
			len--;
		p = end ? end + 1 : NULL;
		if (len < tl || memcmp(line - tl, TAG, tl))
			continue; /* not the sanitizer's own line */
		len -= tl;
		if (!len || line[0] == ' ')
			continue; /* the details of the line above */
		if (!strncmp(line, "ERROR SUMMARY:", 14) && len >= 14) {
			long n = number_after(line, len, "ERROR SUMMARY:");

			out->summary = 1;
			if (n > summary)
				summary = n;
			continue;
		}
		if (!strncmp(line, "RACECHECK SUMMARY:", 18) && len >= 18) {
			/* "RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)" */
			long n = number_after(line, len, "(");

			out->summary = 1;
			if (n > summary)
				summary = n;
			continue;
		}
		if (holds_any(line, len, unavailable_marks,
			      sizeof(unavailable_marks) / sizeof(*unavailable_marks)) &&
		    !starts_with_any(line, len, error_starts, 3)) {
			if (!out->unavailable)
				printable(line, len, out->unavailable_why, sizeof(out->unavailable_why));
			out->unavailable = 1;
			continue;
		}
		if (starts_with_any(line, len, error_starts, sizeof(error_starts) / sizeof(*error_starts))) {
			if (!lines++)
				printable(line, len, out->first, sizeof(out->first));
		}
	}
	/* a tool that could not start counts that as an error of its own: not the candidate's */
	if (out->unavailable && !lines)
		summary = 0;
	out->errors = summary > (long)lines ? (unsigned)summary : lines;
	if (out->errors && !out->first[0])
		snprintf(out->first, sizeof(out->first), "%u error%s in the sanitizer's summary", out->errors,
			 out->errors == 1 ? "" : "s");
}

/* ---- running it ---- */

char *ks_sanitize_find(const char *given)
{
	const char *env = getenv("KSEARCH_COMPUTE_SANITIZER");
	char *path;

	if (given && *given)
		return ks_proc_which(given);
	if (env && *env)
		return ks_proc_which(env);
	if ((path = ks_proc_which("compute-sanitizer")))
		return path;
	return ks_proc_which("/usr/local/cuda/bin/compute-sanitizer");
}

static int64_t workload_bytes(const struct ks_op *op, const struct ks_workload *w)
{
	struct ks_error err;
	int64_t bytes = 0;

	if (ks_expr_eval(op->min_bytes, &w->axes, &bytes, &err) < 0)
		return 0;
	return bytes;
}

/* The workloads of each tool (sanitize.h says which and why); ids borrowed from op. */
static void pick_workloads(const struct ks_op *op, const char *only, const char **memcheck, size_t *n_mem,
			   const char **racecheck, size_t *n_race)
{
	const struct ks_workload *smallest = NULL;

	*n_mem = *n_race = 0;
	if (only) {
		memcheck[(*n_mem)++] = only;
		racecheck[(*n_race)++] = only;
		return;
	}
	for (size_t i = 0; i < op->n_check_workloads && *n_mem < KS_SANITIZE_MAX_WORKLOADS; i++) {
		memcheck[(*n_mem)++] = op->check_workloads[i].id;
		racecheck[(*n_race)++] = op->check_workloads[i].id;
	}
	for (size_t i = 0; i < op->n_workloads; i++) {
		if (*n_mem < KS_SANITIZE_MAX_WORKLOADS)
			memcheck[(*n_mem)++] = op->workloads[i].id;
		if (!smallest || workload_bytes(op, &op->workloads[i]) < workload_bytes(op, smallest))
			smallest = &op->workloads[i];
	}
	if (smallest && *n_race < KS_SANITIZE_MAX_WORKLOADS)
		racecheck[(*n_race)++] = smallest->id;
}

static char *slurp(const char *path)
{
	struct ks_error err;
	char *text = NULL;
	size_t len;

	if (ks_read_file_max(path, 16 << 20, &text, &len, &err) < 0)
		return ks_strdup("");
	return text;
}

struct tool_run {
	const char *tool;
	const char *const *workloads;
	size_t n_workloads;
};

/*
 * One tool over the runner: its report, the runner's result (NULL when it
 * wrote none) and the process's end.  -1 only when ksearch failed.
 */
static int run_tool(const struct ks_sanitize_request *req, const char *sanitizer, const char *dir,
		    const char *source_file, const struct tool_run *t, int timeout_ms,
		    struct ks_sanitize_report *rep, json_t **result, struct ks_proc_result *pr, char **raw,
		    struct ks_error *err)
{
	char *log_file = ks_asprintf("%s/%s.log", dir, t->tool),
	     *out_file = ks_asprintf("%s/%s.out", dir, t->tool);
	char *err_file = ks_asprintf("%s/%s.err", dir, t->tool),
	     *result_file = ks_path_join(dir, "result.json");
	char padding[32], deadline[32], gpu[16], error_exit[16];
	const char **argv = ks_calloc(48 + 2 * req->n_params + 2 * t->n_workloads, sizeof(*argv));
	char *log_text = NULL, *out_text = NULL, *err_text = NULL;
	struct ks_error why;
	size_t n = 0;
	int ret = -1;

	*result = NULL;
	snprintf(padding, sizeof(padding), "%d", KS_SANITIZE_PADDING);
	snprintf(error_exit, sizeof(error_exit), "%d", KS_SANITIZE_ERROR_EXIT);
	/* the runner ends itself a little before we would kill it, so that it can say why */
	snprintf(deadline, sizeof(deadline), "%d", timeout_ms / 1000 > 2 ? timeout_ms / 1000 - 1 : 1);
	snprintf(gpu, sizeof(gpu), "%d", req->gpu);
	argv[n++] = sanitizer;
	argv[n++] = "--tool";
	argv[n++] = t->tool;
	/* its words in a file of their own: nothing the candidate prints can reach it */
	argv[n++] = "--log-file";
	argv[n++] = log_file;
	argv[n++] = "--error-exitcode";
	argv[n++] = error_exit;
	argv[n++] = "--print-limit";
	argv[n++] = PRINT_LIMIT;
	/* the runner's own exit code says nothing about the kernels; its result file does */
	argv[n++] = "--check-exit-code";
	argv[n++] = "no";
	argv[n++] = "--show-backtrace";
	argv[n++] = "no";
	/* the runner alone: not the compiler child it starts */
	argv[n++] = "--target-processes";
	argv[n++] = "application-only";
	if (!strcmp(t->tool, "memcheck")) {
		/* an overflow into the next allocation would be an access inside one: pad them apart */
		argv[n++] = "--padding";
		argv[n++] = padding;
		argv[n++] = "--leak-check";
		argv[n++] = "no";
	}
	argv[n++] = ks_child_program();
	argv[n++] = "__profile_run";
	argv[n++] = "--plain";
	argv[n++] = "--op-dir";
	argv[n++] = req->op->dir;
	argv[n++] = "--source";
	argv[n++] = source_file;
	argv[n++] = "--path";
	argv[n++] = req->path ? req->path : "candidate.cu";
	for (size_t i = 0; i < t->n_workloads; i++) {
		argv[n++] = "--workload";
		argv[n++] = t->workloads[i];
	}
	argv[n++] = "--gpu";
	argv[n++] = gpu;
	argv[n++] = "--result";
	argv[n++] = result_file;
	argv[n++] = "--deadline";
	argv[n++] = deadline;
	for (size_t i = 0; i < req->n_params; i++) {
		argv[n++] = "--param";
		argv[n++] = req->params[i];
	}
	argv[n] = NULL;
	unlink(result_file);
	if (ks_proc_run(argv, out_file, err_file, timeout_ms, req->cancel, pr, &why) < 0) {
		/* it could not be started at all: as good as missing */
		memset(rep, 0, sizeof(*rep));
		rep->unavailable = 1;
		snprintf(rep->unavailable_why, sizeof(rep->unavailable_why), "%.500s", why.msg);
		ret = 0;
		goto cleanup;
	}
	log_text = slurp(log_file);
	out_text = slurp(out_file);
	err_text = slurp(err_file);
	{
		char *all = ks_asprintf("%s\n%s\n%s", log_text, out_text, err_text);

		ks_sanitize_parse(all, rep);
		if (raw) {
			char *more = ks_asprintf("%s==== %s ====\n%s", *raw ? *raw : "", t->tool, all);

			free(*raw);
			*raw = more;
		}
		free(all);
	}
	*result = json_load_file(result_file, 0, NULL);
	ret = 0;
cleanup:
	(void)err;
	unlink(log_file);
	unlink(out_file);
	unlink(err_file);
	unlink(result_file);
	free(log_text);
	free(out_text);
	free(err_text);
	free(log_file);
	free(out_file);
	free(err_file);
	free(result_file);
	free(argv);
	return ret;
}

static int write_text(const char *text, const char *path, struct ks_error *err)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return ks_fail(err, "%s: %s", path, strerror(errno));
	fputs(text, f);
	if (fclose(f) != 0)
		return ks_fail(err, "%s: %s", path, strerror(errno));
	return 0;
}

/*
 * What one tool's run says, into out; returns 1 when the check goes on
 * to the next tool, 0 when this outcome is final.
 */
static int judge(const char *tool, const struct ks_sanitize_report *rep, const json_t *result,
		 const struct ks_proc_result *pr, int timeout_ms, struct ks_sanitize_outcome *out)
{
	struct ks_sanitize *c = &out->check;
	char status[128];

	if (rep->errors) {
		/* an error it saw stands, whatever happened after it */
		out->status = KS_SANITIZE_FAILED;
		c->errors += rep->errors;
		if (!c->first[0]) {
			snprintf(c->first, sizeof(c->first), "%s", rep->first);
			snprintf(c->first_tool, sizeof(c->first_tool), "%s", tool);
		}
		snprintf(out->why, sizeof(out->why), "%s: %u error%s, the first: %s", tool, rep->errors,
			 rep->errors == 1 ? "" : "s", rep->first);
		return 1;
	}
	if (rep->unavailable) {
		out->status = KS_SANITIZE_UNAVAILABLE;
		snprintf(out->why, sizeof(out->why), "compute-sanitizer cannot check on this machine: %s",
			 rep->unavailable_why);
		return 0;
	}
	if (pr->timed_out || pr->cancelled || !json_is_true(json_object_get(result, "ok"))) {
		out->status = KS_SANITIZE_INCOMPLETE;
		if (pr->timed_out)
			snprintf(out->why, sizeof(out->why), "%s did not finish within %d s (killed)", tool,
				 timeout_ms / 1000);
		else if (pr->cancelled)
			snprintf(out->why, sizeof(out->why), "stopped before it finished");
		else if (json_is_false(json_object_get(result, "ok")))
			snprintf(out->why, sizeof(out->why), "%s, workload %s: %s", tool,
				 json_string_value(json_object_get(result, "workload")) ?: "?",
				 json_string_value(json_object_get(result, "error")) ?: "the runner failed");
		else {
			ks_child_describe_status(pr->status, status, sizeof(status));
			snprintf(out->why, sizeof(out->why), "%s: the checked run %s without a result", tool,
				 status);
		}
		return 0;
	}
	if (WIFEXITED(pr->status) && WEXITSTATUS(pr->status) == KS_SANITIZE_ERROR_EXIT) {
		/* it said there were errors, in words we could not read */
		out->status = KS_SANITIZE_FAILED;
		c->errors++;
		if (!c->first[0]) {
			snprintf(c->first, sizeof(c->first), "%s exited with its error code (%d)", tool,
				 KS_SANITIZE_ERROR_EXIT);
			snprintf(c->first_tool, sizeof(c->first_tool), "%s", tool);
		}
		return 1;
	}
	if (!rep->summary) {
		out->status = KS_SANITIZE_INCOMPLETE;
		snprintf(out->why, sizeof(out->why), "%s printed no summary: its output was not understood",
			 tool);
		return 0;
	}
	return 1;
}

int ks_sanitize_run(const struct ks_sanitize_request *req, struct ks_sanitize_outcome *out,
		    struct ks_error *err)
{
	int timeout_ms = req->timeout_ms > 0 ? req->timeout_ms : DEFAULT_TIMEOUT_MS;
	const char *mem_wl[KS_SANITIZE_MAX_WORKLOADS], *race_wl[KS_SANITIZE_MAX_WORKLOADS];
	char dir[] = "/tmp/ksearch-sanitize-XXXXXX", *sanitizer = NULL, *source_file = NULL, *raw = NULL;
	struct tool_run tools[2];
	size_t n_mem, n_race;
	int ret = -1, dir_made = 0;

	memset(out, 0, sizeof(*out));
	out->status = KS_SANITIZE_INCOMPLETE;
	if (req->workload && !ks_op_workload(req->op, req->workload)) {
		snprintf(out->why, sizeof(out->why), "no workload '%s' in %s", req->workload, req->op->key);
		return 0;
	}
	if (!(sanitizer = ks_sanitize_find(req->sanitizer))) {
		out->status = KS_SANITIZE_UNAVAILABLE;
		snprintf(out->why, sizeof(out->why),
			 "%s not found: the memory and race checks need NVIDIA's compute-sanitizer (on PATH, "
			 "or name it with KSEARCH_COMPUTE_SANITIZER)",
			 req->sanitizer			       ? req->sanitizer
			 : getenv("KSEARCH_COMPUTE_SANITIZER") ? getenv("KSEARCH_COMPUTE_SANITIZER")
							       : "compute-sanitizer");
		return 0;
	}
	if (!mkdtemp(dir)) {
		ks_fail(err, "cannot create a folder for the sanitizer under /tmp: %s", strerror(errno));
		goto cleanup;
	}
	dir_made = 1;
	source_file = ks_path_join(dir, "candidate.cu");
	if (write_text(req->source, source_file, err) < 0)
		goto cleanup;
	pick_workloads(req->op, req->workload, mem_wl, &n_mem, race_wl, &n_race);
	tools[0] = (struct tool_run){ "memcheck", mem_wl, n_mem };
	tools[1] = (struct tool_run){ "racecheck", race_wl, n_race };
	for (size_t i = 0; i < n_mem; i++)
		snprintf(out->check.workloads[i], sizeof(out->check.workloads[i]), "%s", mem_wl[i]);
	out->check.n_workloads = n_mem;
	out->status = KS_SANITIZE_CLEAN;
	for (int t = 0; t < 2; t++) {
		struct ks_sanitize_report rep;
		struct ks_proc_result pr;
		json_t *result = NULL;
		int go_on;

		if (run_tool(req, sanitizer, dir, source_file, &tools[t], timeout_ms, &rep, &result, &pr,
			     req->raw_path ? &raw : NULL, err) < 0)
			goto cleanup;
		out->check.seconds += pr.seconds;
		snprintf(out->check.tools[out->check.n_tools++], sizeof(out->check.tools[0]), "%s",
			 tools[t].tool);
		if (json_is_true(json_object_get(result, "ok")))
			out->check.smem_bytes = json_integer_value(json_object_get(result, "smem_bytes"));
		{
			enum ks_sanitize_status before = out->status;

			go_on = judge(tools[t].tool, &rep, result, &pr, timeout_ms, out);
			/* a failure found by memcheck is not undone by what racecheck could not do */
			if (before == KS_SANITIZE_FAILED && out->status != KS_SANITIZE_FAILED) {
				out->status = KS_SANITIZE_FAILED;
				go_on = 0;
			}
		}
		json_decref(result);
		if (!go_on || out->status == KS_SANITIZE_FAILED)
			break;
		/* races are in shared memory: a kernel that uses none has none */
		if (out->check.smem_bytes <= 0)
			break;
	}
	if (out->status == KS_SANITIZE_FAILED)
		snprintf(out->why, sizeof(out->why), "%u error%s, the first (%s): %s", out->check.errors,
			 out->check.errors == 1 ? "" : "s", out->check.first_tool, out->check.first);
	if (out->status == KS_SANITIZE_CLEAN || out->status == KS_SANITIZE_FAILED)
		ks_proc_tool_version(sanitizer, "compute-sanitizer", out->check.version,
				     sizeof(out->check.version));
	if (req->raw_path && write_text(raw ? raw : "", req->raw_path, err) < 0)
		goto cleanup;
	ret = 0;
cleanup:
	if (source_file)
		unlink(source_file);
	if (dir_made)
		rmdir(dir);
	free(source_file);
	free(sanitizer);
	free(raw);
	return ret;
}

/* ---- the record's form ---- */

json_t *ks_sanitize_to_json(const struct ks_sanitize_outcome *o)
{
	const struct ks_sanitize *c = &o->check;
	json_t *tools = json_array(), *workloads = json_array(), *obj;
	char now[32];
	time_t t = time(NULL);
	struct tm tm;

	for (size_t i = 0; i < c->n_tools; i++)
		json_array_append_new(tools, json_string(c->tools[i]));
	for (size_t i = 0; i < c->n_workloads; i++)
		json_array_append_new(workloads, json_string(c->workloads[i]));
	gmtime_r(&t, &tm);
	strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", &tm);
	obj = json_pack("{s:s, s:o, s:o, s:I, s:I, s:s, s:f, s:s}", "status",
			ks_sanitize_status_name(o->status), "tools", tools, "workloads", workloads, "errors",
			(json_int_t)c->errors, "smem_bytes", (json_int_t)c->smem_bytes, "version",
			c->version[0] ? c->version : "compute-sanitizer", "seconds", c->seconds, "checked",
			now);
	if (c->errors) {
		json_object_set_new(obj, "first", json_string(c->first));
		json_object_set_new(obj, "first_tool", json_string(c->first_tool));
	}
	return obj;
}

char *ks_sanitize_text(const json_t *s)
{
	const char *status = json_string_value(json_object_get(s, "status"));
	const json_t *tools = json_object_get(s, "tools"), *t;
	struct ks_strbuf sb;
	size_t i;

	if (!json_is_object(s))
		return NULL;
	ks_strbuf_init(&sb);
	if (status && !strcmp(status, "failed")) {
		json_int_t errors = json_integer_value(json_object_get(s, "errors"));

		ks_strbuf_addf(&sb, "FAILED: %lld error%s, the first (%s): %s", (long long)errors,
			       errors == 1 ? "" : "s",
			       json_string_value(json_object_get(s, "first_tool")) ?: "?",
			       json_string_value(json_object_get(s, "first")) ?: "?");
		return ks_strbuf_detach(&sb);
	}
	ks_strbuf_addf(&sb, "%s (", status ? status : "?");
	json_array_foreach(tools, i, t)
		ks_strbuf_addf(&sb, "%s%s", i ? ", " : "", json_string_value(t) ?: "?");
	ks_strbuf_addf(&sb, " on %zu workload%s, %s, %.1f s)",
		       json_array_size(json_object_get(s, "workloads")),
		       json_array_size(json_object_get(s, "workloads")) == 1 ? "" : "s",
		       json_string_value(json_object_get(s, "version")) ?: "compute-sanitizer",
		       json_number_value(json_object_get(s, "seconds")));
	return ks_strbuf_detach(&sb);
}

/* ---- the outcome's form, between the ranks of a job ---- */

#define MAX_TOOLS (sizeof(((struct ks_sanitize *)0)->tools) / sizeof(((struct ks_sanitize *)0)->tools[0]))

/* n names, each in a char array of width bytes; NULL when one is not UTF-8. */
static json_t *names_to_json(const char *names, size_t width, size_t n)
{
	json_t *list = json_array();

	for (size_t i = 0; i < n; i++) {
		if (json_array_append_new(list, json_string(names + i * width)) < 0) {
			json_decref(list);
			return NULL;
		}
	}
	return list;
}

json_t *ks_sanitize_outcome_to_json(const struct ks_sanitize_outcome *o)
{
	const struct ks_sanitize *c = &o->check;
	const char *status = ks_sanitize_status_name(o->status);

	if (!strcmp(status, "?") || c->n_tools > MAX_TOOLS || c->n_workloads > KS_SANITIZE_MAX_WORKLOADS ||
	    !isfinite(o->held_s) || o->held_s < 0)
		return NULL;
	return json_pack("{s:s, s:s, s:f, s:{s:s, s:o, s:o, s:I, s:s, s:s, s:I, s:f}}", "status", status,
			 "why", o->why, "held_s", o->held_s, "check", "version", c->version, "tools",
			 names_to_json(c->tools[0], sizeof(c->tools[0]), c->n_tools), "workloads",
			 names_to_json(c->workloads[0], sizeof(c->workloads[0]), c->n_workloads), "errors",
			 (json_int_t)c->errors, "first", c->first, "first_tool", c->first_tool, "smem_bytes",
			 (json_int_t)c->smem_bytes, "seconds", c->seconds);
}

/*
 * The readers below (with base/json.h's ks_json_field_*) refuse rather
 * than repair, and name the field by its path from the outcome
 * ("check.workloads[3]"), at being the path's start up to the key: "" or
 * "check.".  profile.c reads its outcome the same way.
 */

/* A list of at most max names into names (max arrays of width bytes). */
static int get_names(const json_t *obj, const char *at, const char *key, size_t max, char *names,
		     size_t width, size_t *n, struct ks_error *err)
{
	const json_t *v = ks_json_field(obj, at, key, err);
	char item[48];

	if (!v)
		return -1;
	if (!json_is_array(v))
		return ks_fail(err, "%s%s: expected a list, got %s", at, key, ks_json_type_word(v));
	if (json_array_size(v) > max)
		return ks_fail(err, "%s%s: %zu entries, more than the %zu kept", at, key, json_array_size(v),
			       max);
	for (*n = 0; *n < json_array_size(v); ++*n) {
		snprintf(item, sizeof(item), "%s[%zu]", key, *n);
		if (ks_json_text_into(json_array_get(v, *n), at, item, names + *n * width, width, err) < 0)
			return -1;
	}
	return 0;
}

static int get_status(const json_t *obj, enum ks_sanitize_status *out, struct ks_error *err)
{
	/* the statuses are 0, 1, ... up to the first that has no name */
	const char *names[8];
	int n = 0, status;

	while (n < 8 && strcmp(ks_sanitize_status_name(n), "?")) {
		names[n] = ks_sanitize_status_name(n);
		n++;
	}
	if (ks_json_field_word(obj, "", "status", names, n, &status, err) < 0)
		return -1;
	*out = status;
	return 0;
}

static int get_check(const json_t *obj, struct ks_sanitize *c, struct ks_error *err)
{
	const char *at = "check.";
	json_int_t errors = 0, smem_bytes = 0;

	if (ks_json_want_object(obj, "check", err) < 0 ||
	    ks_json_field_text(obj, at, "version", c->version, sizeof(c->version), err) < 0 ||
	    get_names(obj, at, "tools", MAX_TOOLS, c->tools[0], sizeof(c->tools[0]), &c->n_tools, err) < 0 ||
	    get_names(obj, at, "workloads", KS_SANITIZE_MAX_WORKLOADS, c->workloads[0],
		      sizeof(c->workloads[0]), &c->n_workloads, err) < 0 ||
	    ks_json_field_count(obj, at, "errors", UINT_MAX, &errors, err) < 0 ||
	    ks_json_field_text(obj, at, "first", c->first, sizeof(c->first), err) < 0 ||
	    ks_json_field_text(obj, at, "first_tool", c->first_tool, sizeof(c->first_tool), err) < 0 ||
	    ks_json_field_count(obj, at, "smem_bytes", LLONG_MAX, &smem_bytes, err) < 0 ||
	    ks_json_field_number(obj, at, "seconds", 1, &c->seconds, err) < 0)
		return -1;
	c->errors = (unsigned)errors;
	c->smem_bytes = smem_bytes;
	return 0;
}

int ks_sanitize_outcome_from_json(const json_t *obj, struct ks_sanitize_outcome *out, struct ks_error *err)
{
	memset(out, 0, sizeof(*out));
	if (ks_json_want_object(obj, "the sanitizer outcome", err) < 0 ||
	    get_status(obj, &out->status, err) < 0 ||
	    ks_json_field_text(obj, "", "why", out->why, sizeof(out->why), err) < 0 ||
	    get_check(json_object_get(obj, "check"), &out->check, err) < 0 ||
	    ks_json_field_number(obj, "", "held_s", 1, &out->held_s, err) < 0) {
		/* half an outcome is none: nothing read before the refusal is left */
		memset(out, 0, sizeof(*out));
		return -1;
	}
	return 0;
}
