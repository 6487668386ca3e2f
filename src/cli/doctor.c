/*
 * doctor.c - `ksearch doctor`: is everything in place, and if not, the fix.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "llm_options.h"
#include "ksearch/evaluate/cuda.h"
#include "ksearch/llm/llm.h"
#include "ksearch/compile/nvrtc.h"
#include "ksearch/op/op.h"
#include "ksearch/base/util.h"

enum { EXIT_NO_GPU = 3, EXIT_LLM = 4 };

/* The health check waits no longer than this, whatever --llm-timeout says. */
#define DOCTOR_TIMEOUT_S 120.0

static const struct ks_help help = {
	.usage = "ksearch doctor [--archive DIR] [--llm-url URL --llm-model NAME [--llm-provider "
		 "openai|anthropic] [LLM options]] [--json]",
	.description =
		"Check what ksearch needs, in the order it needs it: the CUDA toolkit's\n"
		"headers, NVRTC (with a trial compilation), the NVIDIA driver, each GPU\n"
		"(name, compute capability, memory, SMs), the operators, and the archive\n"
		"folder.  Every problem comes with the fix.\n"
		"\n"
		"With --llm-url and --llm-model (or KSEARCH_LLM_URL and KSEARCH_LLM_MODEL), it\n"
		"also sends the endpoint one small request with the settings `evolve` would\n"
		"use (the same LLM options and environment), and reports what a user needs\n"
		"to know before an 8-hour run: the answer time and token counts; the\n"
		"answer budget and the field it goes in; any parameter the endpoint refused\n"
		"and what ksearch changed for it (a reasoning model's temperature, an older\n"
		"server's max_tokens); whether the model reasons and how many tokens that\n"
		"took; cached prompt tokens; whether the answer was cut off at the budget\n"
		"(a problem: raise --max-tokens); the extra fields and headers (names only)\n"
		"and whether a key is sent.  Or what went wrong and how to fix it.  The key\n"
		"comes from KSEARCH_API_KEY, else OPENAI_API_KEY or ANTHROPIC_API_KEY, and\n"
		"is never printed; without one, no credentials are sent (local servers).\n"
		"The check waits at most 2 minutes for the answer.\n"
		"\n"
		"--json prints {\"checks\": [{\"check\", \"ok\", \"detail\" | \"problem\", \"fix\"}],\n"
		"\"problems\", \"exit_code\"}.",
	.examples = "  ksearch doctor\n"
		    "  ksearch doctor --archive /data/ksearch-archive\n"
		    "  ksearch doctor --llm-url http://127.0.0.1:8000/v1 --llm-model qwen3-coder\n"
		    "  ksearch doctor --llm-url https://api.openai.com/v1 --llm-model gpt-5 \\\n"
		    "      --llm-extra '{\"reasoning_effort\": \"high\"}'\n",
	.exit_codes = "  3  compilation works but no GPU can run kernels (no driver or no GPU):\n"
		      "     compile works; check and evolve need a GPU\n"
		      "  4  the LLM endpoint did not answer properly, or its answer was cut off at\n"
		      "     the budget (and nothing worse than 3)\n",
};

static int problems;
/* --json: the checks go here, printed as one document at the end; NULL for text */
static json_t *report;

static void ok(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ok(const char *what, const char *fmt, ...)
{
	va_list ap;
	char *detail;

	va_start(ap, fmt);
	detail = ks_vasprintf(fmt, ap);
	va_end(ap);
	if (report)
		json_array_append_new(report,
				      json_pack("{s:s, s:b, s:s}", "check", what, "ok", 1, "detail", detail));
	else
		printf("  ok    %-10s %s\n", what, detail);
	free(detail);
}

/* A finding that is not a problem, under the line it belongs to. */
static void note(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const char *what, const char *fmt, ...)
{
	va_list ap;
	char *text;

	va_start(ap, fmt);
	text = ks_vasprintf(fmt, ap);
	va_end(ap);
	if (report) {
		/* --json: with the check it belongs to, the last one */
		json_t *last = json_array_get(report, json_array_size(report) - 1), *notes;

		if (last) {
			if (!(notes = json_object_get(last, "notes")))
				json_object_set_new(last, "notes", notes = json_array());
			json_array_append_new(notes, json_string(text));
		}
	} else {
		printf("        %-10s %s\n", what, text);
	}
	free(text);
}

static void bad(const char *what, const char *problem, const char *fix)
{
	problems++;
	if (report)
		json_array_append_new(report, json_pack("{s:s, s:b, s:s, s:s}", "check", what, "ok", 0,
							"problem", problem, "fix", fix));
	else
		printf("  FAIL  %-10s %s\n        fix: %s\n", what, problem, fix);
}

static const char *cuda_root(void)
{
	const char *env = getenv("CUDA_PATH");

	return env && *env ? env : "/usr/local/cuda";
}

static int check_toolkit(void)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/include/cuda_bf16.h", cuda_root());
	if (access(path, R_OK)) {
		char problem[4400];

		snprintf(problem, sizeof(problem), "%s not found (%s)", path, strerror(errno));
		bad("toolkit", problem, "install the CUDA toolkit, or set CUDA_PATH to where it is");
		return -1;
	}
	ok("toolkit", "%s", cuda_root());
	return 0;
}

static int check_nvrtc(void)
{
	static const char source[] = "#include <cuda_bf16.h>\n"
				     "extern \"C\" __global__ void probe(__nv_bfloat16 *x) { x[threadIdx.x] "
				     "= __float2bfloat16(1.0f); }\n";
	struct ks_compile_request req = { .source = source,
					  .source_name = "doctor-probe.cu",
					  .arch = "sm_90a" };
	struct ks_compile_result res = { 0 };
	struct ks_error err;
	int major, minor;

	if (ks_nvrtc_version(&major, &minor, &err) < 0) {
		bad("nvrtc", err.msg, "install the CUDA toolkit's NVRTC (libnvrtc) and rebuild ksearch");
		return -1;
	}
	if (ks_nvrtc_compile(&req, &res, &err) < 0) {
		bad("nvrtc", err.msg,
		    "the toolkit's headers and NVRTC must match: reinstall the CUDA toolkit");
		ks_compile_result_release(&res);
		return -1;
	}
	ok("nvrtc", "%d.%d, a trial kernel compiled for sm_90a (%zu bytes of cubin)", major, minor,
	   res.cubin_size);
	ks_compile_result_release(&res);
	return 0;
}

static int check_gpus(void)
{
	const struct ks_cuda *cuda;
	struct ks_error err;
	int driver, count;

	if (ks_cuda_load(&cuda, &err) < 0) {
		bad("driver", err.msg,
		    "install the NVIDIA driver (libcuda.so.1) on a machine with an NVIDIA GPU; "
		    "`ksearch compile` works without one");
		return -1;
	}
	if (ks_cuda_driver_version(&driver, &err) == 0)
		ok("driver", "CUDA %d.%d", driver / 1000, driver % 1000 / 10);
	if (ks_cuda_device_count(&count, &err) < 0 || count == 0) {
		bad("gpu", count == 0 ? "the driver sees no GPU" : err.msg,
		    "check `nvidia-smi`; in a container, pass the GPUs through (e.g. --gpus all)");
		return -1;
	}
	for (int i = 0; i < count; i++) {
		struct ks_gpu_info info;
		char arch[16], what[16];

		snprintf(what, sizeof(what), "gpu %d", i);
		if (ks_cuda_device_info(i, &info, &err) < 0) {
			bad(what, err.msg, "check `nvidia-smi`");
			continue;
		}
		ks_gpu_arch(&info, arch, sizeof(arch));
		if (info.cc_major < 7) {
			char problem[512];

			snprintf(problem, sizeof(problem),
				 "%s has compute capability %d.%d; ksearch needs 7.0 or newer", info.name,
				 info.cc_major, info.cc_minor);
			bad(what, problem, "use a Volta or newer GPU");
			continue;
		}
		ok(what, "%s, compute capability %d.%d (%s), %.1f GiB, %d SMs, L2 %d MiB", info.name,
		   info.cc_major, info.cc_minor, arch, (double)info.total_mem / (1024.0 * 1024 * 1024),
		   info.sm_count, info.l2_bytes >> 20);
	}
	return 0;
}

static void check_ops(void)
{
	char **dirs;
	size_t count;
	struct ks_error err;

	ks_op_dirs(&dirs, &count, &err);
	if (!count) {
		bad("operators", "no operator folders found",
		    "run ksearch from its source folder, or set KSEARCH_OPERATORS to a folder of operators");
		return;
	}
	for (size_t i = 0; i < count; i++) {
		struct ks_op op;

		if (ks_op_load(dirs[i], &op, &err) < 0) {
			bad("operators", err.msg, "fix the op.json named above (see operators/README.md)");
			continue;
		}
		ok("operators", "%s (%s): %zu workloads, %zu seeds", op.key, op.dir, op.n_workloads,
		   op.n_seeds);
		ks_op_release(&op);
	}
	ks_op_dirs_free(dirs, count);
}

/*
 * Whether a folder can be made under its nearest existing ancestor: a trial
 * folder is made there and removed (access(2) says yes to root on a
 * read-only or virtual file system).  0, or -1 with the reason in problem.
 */
static int can_create(const char *dir, char *problem, size_t size)
{
	char *ancestor = ks_strdup(dir), *probe = NULL, *slash;
	struct stat st;
	int ret = -1;

	for (;;) {
		while ((slash = strrchr(ancestor, '/')) && slash[1] == '\0' && slash != ancestor)
			*slash = '\0'; /* trailing slashes */
		slash = strrchr(ancestor, '/');
		if (!slash) {
			snprintf(ancestor, strlen(ancestor) + 1, ".");
			break;
		}
		slash[slash == ancestor ? 1 : 0] = '\0';
		if (stat(ancestor, &st) == 0 || errno != ENOENT)
			break;
	}
	if (stat(ancestor, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(problem, size, "%s does not exist and cannot be created: %s is not a folder", dir,
			 ancestor);
		goto cleanup;
	}
	probe = ks_asprintf("%s/.ksearch-doctor-%ld", ancestor, (long)getpid());
	if (mkdir(probe, 0700) < 0) {
		snprintf(problem, size, "%s does not exist and cannot be created in %s: %s", dir, ancestor,
			 strerror(errno));
		goto cleanup;
	}
	rmdir(probe);
	ret = 0;
cleanup:
	free(probe);
	free(ancestor);
	return ret;
}

static void check_archive(const char *dir)
{
	char problem[4400];
	struct stat st;

	if (stat(dir, &st) < 0) {
		int missing = errno == ENOENT;

		if (!missing)
			snprintf(problem, sizeof(problem), "%s: %s", dir, strerror(errno));
		else if (can_create(dir, problem, sizeof(problem)) == 0) {
			ok("archive", "%s (will be created on the first search)", dir);
			return;
		}
		bad("archive", problem, "pass --archive DIR with a folder you can write");
		return;
	}
	if (!S_ISDIR(st.st_mode) || access(dir, W_OK)) {
		snprintf(problem, sizeof(problem), "%s is not a writable folder", dir);
		bad("archive", problem, "pass --archive DIR with a folder you can write");
		return;
	}
	ok("archive", "%s", dir);
}

/* The fix for what a failed request says, in the words a user can act on. */
static const char *llm_fix(const struct ks_llm_response *r, const struct ks_llm_config *cfg)
{
	const char *error = r->error ? r->error : "";

	if (r->http_status == 401 || r->http_status == 403)
		return cfg->provider == KS_LLM_ANTHROPIC ? "set KSEARCH_API_KEY or ANTHROPIC_API_KEY to a "
							   "valid key (or give the header "
							   "the endpoint wants with --llm-header)"
							 : "set KSEARCH_API_KEY or OPENAI_API_KEY to a valid "
							   "key (or give the header the "
							   "endpoint wants with --llm-header)";
	if (r->http_status == 404)
		return "check --llm-model (the server does not know it) and that --llm-url ends with the API "
		       "version, e.g. /v1";
	if (r->http_status == 429)
		return "the endpoint is rate-limiting: wait, or lower --llm-concurrency";
	if (r->http_status >= 500)
		return "the endpoint failed on its side: try again later";
	if (r->http_status == 0)
		return "is the server running and reachable at --llm-url? (connection failed or timed out)";
	if (r->http_status == 400 || r->http_status == 422) {
		if (strstr(error, "--llm-extra"))
			return "drop that field from --llm-extra (or KSEARCH_LLM_EXTRA) for this endpoint";
		if (strstr(error, "max_tokens") || strstr(error, "max_completion_tokens"))
			return "set --max-tokens to what the model allows (ksearch asks for 32768 by "
			       "default)";
		return "the endpoint refused the request: the message above names the field";
	}
	return "the answer is not an OpenAI/Anthropic reply: check --llm-provider and --llm-url";
}

/* The fix for settings the client refused: only what is missing or wrong, never what was given right. */
static const char *llm_settings_fix(const struct ks_llm_config *cfg)
{
	if (!cfg->base_url || !*cfg->base_url)
		return "give --llm-url URL (or set KSEARCH_LLM_URL)";
	if (strncasecmp(cfg->base_url, "http://", 7) && strncasecmp(cfg->base_url, "https://", 8))
		return "give --llm-url the endpoint's base URL, up to the API version: "
		       "https://api.openai.com/v1, or http://127.0.0.1:8000/v1 for a local server";
	if (!cfg->model || !*cfg->model)
		return "give --llm-model NAME (or set KSEARCH_LLM_MODEL)";
	return "correct the setting named above";
}

/* Where the model's reasoning showed, for a person; NULL for a field (named by the caller). */
static const char *reasoning_where(const char *where)
{
	if (!strcmp(where, "hidden"))
		return "as the endpoint reports them; the reasoning itself is not shown";
	if (!strcmp(where, "<think>"))
		return "in <think> blocks of the answer text, removed before the answer is read";
	if (!strcmp(where, "thinking blocks"))
		return "in thinking blocks, never read as the answer";
	return NULL;
}

/* The first words of an answer on one line: control characters as spaces, cut at a UTF-8 boundary. */
static void reply_start(char *buf, size_t size, const char *text)
{
	size_t n = strlen(text), keep = n < size - 4 ? n : size - 4;

	while (keep < n && keep && ((unsigned char)text[keep] & 0xc0) == 0x80)
		keep--;
	for (size_t i = 0; i < keep; i++)
		buf[i] = (unsigned char)text[i] < 0x20 || text[i] == 0x7f ? ' ' : text[i];
	strcpy(buf + keep, keep < n ? "..." : "");
}

static int check_llm(struct ks_llm_config *cfg)
{
	struct ks_llm_request req = { .system = "You are a health check. Answer with one word.",
				      .user = "Reply with OK." };
	struct ks_llm_response resp = { 0 };
	struct ks_llm *llm = NULL;
	struct ks_error err;
	double timeout_s = cfg->total_timeout_s;
	char settings[2048], *notice;
	int got = 0, ret = -1;

	if (ks_llm_config_validate(cfg, &err) < 0) {
		bad("llm", err.msg, llm_settings_fix(cfg));
		goto cleanup;
	}
	cfg->max_retries = 0;
	if (cfg->total_timeout_s > DOCTOR_TIMEOUT_S)
		cfg->total_timeout_s = DOCTOR_TIMEOUT_S;
	if (ks_llm_open(&llm, cfg, &err) < 0 || ks_llm_submit(llm, &req, 1, &err) < 0) {
		bad("llm", err.msg, "check the LLM settings");
		goto cleanup;
	}
	cfg->total_timeout_s = timeout_s; /* what a run would wait */
	while (!got)
		if (ks_llm_poll(llm, -1, &resp, &got, &err) < 0) {
			bad("llm", err.msg, "libcurl failed: check the URL");
			goto cleanup;
		}
	if (!resp.ok) {
		bad("llm", resp.error ? resp.error : "the request failed", llm_fix(&resp, cfg));
		while ((notice = ks_llm_take_notice(llm))) {
			note("adapted", "%s", notice);
			free(notice);
		}
		goto cleanup;
	}
	ok("llm", "%s at %s (%s) answered in %.2f s: %llu prompt + %llu completion tokens%s", cfg->model,
	   cfg->base_url, ks_llm_provider_name(cfg->provider), resp.elapsed_s,
	   (unsigned long long)resp.prompt_tokens, (unsigned long long)resp.completion_tokens,
	   resp.usage_estimated ? " (estimated: the server reported no usage)" : "");
	ks_cli_llm_describe(cfg, llm, settings, sizeof(settings));
	note("settings", "%s", settings);
	while ((notice = ks_llm_take_notice(llm))) {
		note("adapted", "%s", notice);
		free(notice);
	}
	if (resp.reasoning) {
		const char *where = reasoning_where(resp.reasoning);

		if (where)
			note("reasoning", "%llu tokens%s, %s", (unsigned long long)resp.reasoning_tokens,
			     resp.reasoning_estimated ? " (estimated from its length)" : "", where);
		else
			note("reasoning", "%llu tokens%s, in the \"%s\" field, never read as the answer",
			     (unsigned long long)resp.reasoning_tokens,
			     resp.reasoning_estimated ? " (estimated from its length)" : "", resp.reasoning);
	} else {
		note("reasoning", "none seen");
	}
	if (resp.cached_tokens + resp.cache_write_tokens)
		note("cache", "%llu prompt tokens read from the cache, %llu written to it",
		     (unsigned long long)resp.cached_tokens, (unsigned long long)resp.cache_write_tokens);
	if (resp.cut_off) {
		char problem[512];

		snprintf(problem, sizeof(problem),
			 "the answer to a one-word question was cut off at %llu tokens (stop reason %s%s): "
			 "kernels need far more",
			 (unsigned long long)resp.completion_tokens,
			 resp.stop_reason ? resp.stop_reason : "?",
			 resp.text && !*resp.text ? ", while still reasoning" : "");
		bad("llm", problem, "raise --max-tokens (the budget counts the reasoning too)");
		goto cleanup;
	}
	note("answer", "not cut off (stop reason %s), so a run's answers come whole up to the budget above",
	     resp.stop_reason ? resp.stop_reason : "none");
	if (resp.text && *resp.text) {
		char start[64];

		/* the model's own words, which may read like anything: say what they answer */
		reply_start(start, sizeof(start), resp.text);
		note("reply",
		     "\"%s\": its words to the check's one-word question (a run asks for kernels and reads "
		     "each answer for one)",
		     start);
	} else {
		note("reply",
		     "no text: the answer was empty, and a run would find no kernel in answers like it");
	}
	ret = 0;
cleanup:
	ks_llm_response_release(&resp);
	ks_llm_close(llm);
	return ret;
}

/* The option rows that only make sense with an LLM endpoint. */
enum { GROUP_LLM = 1 };

int cmd_doctor(int argc, char **argv)
{
	const char *archive = "archive";
	struct ks_cli_llm llm = { 0 };
	struct ks_llm_config cfg;
	int json = 0;
	struct ks_option opts[] = {
		KS_OPT_STRING(0, "archive", &archive, "DIR", "archive folder to check (default: archive)"),
		KS_OPT_STRING(0, "llm-url", &llm.url, "URL",
			      "also check this LLM endpoint (base URL, e.g. .../v1)"),
		KS_OPT_STRING(0, "llm-model", &llm.model, "NAME", "the model to ask"),
		KS_OPT_GROUP(GROUP_LLM),
		KS_OPT_STRING(0, "llm-provider", &llm.provider, "P", "openai (default) or anthropic"),
		KS_OPT_DOUBLE(0, "temperature", &cfg.temperature, "T", 0, 2, "a temperature from 0 to 2",
			      "sampling temperature, as evolve would send it (default: none)"),
		KS_OPT_INT(0, "max-tokens", &cfg.max_tokens, "N", 1, 1000000,
			   "a number of tokens from 1 to 1000000",
			   "answer budget, reasoning included (default 32768)"),
		KS_OPT_DURATION(0, "llm-timeout", &llm.timeout_s, "DURATION",
				"a duration such as 15m, 900s or 1h",
				"longest wait for one answer in a run (default 15m)"),
		KS_OPT_STRING(0, "llm-extra", &llm.extra, "JSON", "fields merged into every request body"),
		KS_OPT_LIST(0, "llm-header", &llm.headers, "'NAME: VALUE'",
			    "a header for every request, repeatable"),
		KS_OPT_GROUP(0),
		KS_OPT_BOOL(0, "json", &json, "print the checks as JSON"),
		KS_OPT_END,
	};
	const struct ks_option *needs;
	const char **positional;
	size_t n_positional;
	int rc, gpu_problems, llm_failed = 0, with_llm;

	ks_llm_config_init(&cfg);
	rc = ks_opts_parse("doctor", opts, &help, argc, argv, &positional, &n_positional);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	free(positional);
	with_llm = llm.url || llm.model || getenv("KSEARCH_LLM_URL");
	if (n_positional) {
		rc = ks_cli_usage("doctor", "takes no arguments");
		goto cleanup;
	}
	if (!with_llm && (needs = ks_opts_given_in_group(opts, GROUP_LLM))) {
		rc = ks_cli_usage("doctor", "--%s needs an LLM endpoint: give --llm-url and --llm-model",
				  needs->long_name);
		goto cleanup;
	}
	/* a bad LLM option is a usage error, found before anything is checked */
	if (with_llm && (rc = ks_cli_llm_configure("doctor", opts, &llm, &cfg)))
		goto cleanup;
	problems = 0;
	report = json ? json_array() : NULL;
	if (!report)
		printf("ksearch doctor\n");
	check_toolkit();
	check_nvrtc();
	gpu_problems = problems;
	check_gpus();
	gpu_problems = problems - gpu_problems;
	check_ops();
	check_archive(archive);
	if (with_llm) {
		int before = problems;

		check_llm(&cfg);
		llm_failed = problems - before;
	}
	if (!problems)
		rc = KS_EXIT_OK;
	else
		rc = problems > gpu_problems + llm_failed ? KS_EXIT_FAILED
		     : llm_failed			  ? EXIT_LLM
							  : EXIT_NO_GPU;
	if (report) {
		json_t *doc =
			json_pack("{s:o, s:i, s:i}", "checks", report, "problems", problems, "exit_code", rc);

		ks_cli_json_print(doc, JSON_INDENT(2));
		json_decref(doc);
		report = NULL;
	} else if (!problems) {
		printf("\nall good\n");
	} else {
		printf("\n%d problem%s\n", problems, problems == 1 ? "" : "s");
	}
cleanup:
	ks_llm_config_release(&cfg);
	ks_opts_release(opts);
	return rc;
}
