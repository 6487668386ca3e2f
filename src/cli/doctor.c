/*
 * doctor.c - `ksearch doctor`: is everything in place, and if not, the fix.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "ksearch/evaluate/cuda.h"
#include "ksearch/llm/llm.h"
#include "ksearch/compile/nvrtc.h"
#include "ksearch/op/op.h"
#include "ksearch/base/util.h"

enum { EXIT_NO_GPU = 3, EXIT_LLM = 4 };

static const struct ks_help help = {
	.usage = "ksearch doctor [--archive DIR] [--llm-url URL --llm-model NAME [--llm-provider "
		 "openai|anthropic]]",
	.description = "Check what ksearch needs, in the order it needs it: the CUDA toolkit's\n"
		       "headers, NVRTC (with a trial compilation), the NVIDIA driver, each GPU\n"
		       "(name, compute capability, memory, SMs), the operators, and the archive\n"
		       "folder.  Every problem comes with the fix.\n"
		       "\n"
		       "With --llm-url and --llm-model (or KSEARCH_LLM_URL and KSEARCH_LLM_MODEL), it\n"
		       "also sends the endpoint one small request and reports the answer time and\n"
		       "token counts, or what went wrong and how to fix it.  The key comes from\n"
		       "KSEARCH_API_KEY, else OPENAI_API_KEY or ANTHROPIC_API_KEY; it is never\n"
		       "printed.",
	.examples = "  ksearch doctor\n"
		    "  ksearch doctor --archive /data/ksearch-archive\n"
		    "  ksearch doctor --llm-url http://127.0.0.1:8000/v1 --llm-model qwen3-coder\n",
	.exit_codes = "  3  compilation works but no GPU can run kernels (no driver or no GPU):\n"
		      "     compile works; check and evolve need a GPU\n"
		      "  4  the LLM endpoint did not answer properly (and nothing worse than 3)\n",
};

static int problems;

static void ok(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ok(const char *what, const char *fmt, ...)
{
	va_list ap;

	printf("  ok    %-10s ", what);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static void bad(const char *what, const char *problem, const char *fix)
{
	problems++;
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

static void check_archive(const char *dir)
{
	struct stat st;

	if (stat(dir, &st) < 0) {
		if (errno == ENOENT) {
			ok("archive", "%s (will be created on the first search)", dir);
			return;
		}
		{
			char problem[4400];

			snprintf(problem, sizeof(problem), "%s: %s", dir, strerror(errno));
			bad("archive", problem, "pass --archive DIR with a folder you can write");
		}
		return;
	}
	if (!S_ISDIR(st.st_mode) || access(dir, W_OK)) {
		char problem[4400];

		snprintf(problem, sizeof(problem), "%s is not a writable folder", dir);
		bad("archive", problem, "pass --archive DIR with a folder you can write");
		return;
	}
	ok("archive", "%s", dir);
}

/* The fix for what a failed request says, in the words a user can act on. */
static const char *llm_fix(const struct ks_llm_response *r, const struct ks_llm_config *cfg)
{
	if (r->http_status == 401 || r->http_status == 403)
		return cfg->provider == KS_LLM_ANTHROPIC
			       ? "set KSEARCH_API_KEY or ANTHROPIC_API_KEY to a valid key"
			       : "set KSEARCH_API_KEY or OPENAI_API_KEY to a valid key";
	if (r->http_status == 404)
		return "check --llm-model (the server does not know it) and that --llm-url ends with the API "
		       "version, e.g. /v1";
	if (r->http_status == 429)
		return "the endpoint is rate-limiting: wait, or lower --llm-concurrency";
	if (r->http_status >= 500)
		return "the endpoint failed on its side: try again later";
	if (r->http_status == 0)
		return "is the server running and reachable at --llm-url? (connection failed or timed out)";
	return "the answer is not an OpenAI/Anthropic reply: check --llm-provider and --llm-url";
}

static int check_llm(const char *url, const char *model, const char *provider)
{
	struct ks_llm_config cfg;
	struct ks_llm_request req = { .system = "You are a health check. Answer with one word.",
				      .user = "Reply with OK." };
	struct ks_llm_response resp = { 0 };
	struct ks_llm *llm = NULL;
	struct ks_error err;
	int got = 0, ret = -1;

	ks_llm_config_init(&cfg);
	if (url)
		cfg.base_url = ks_strdup(url);
	if (model)
		cfg.model = ks_strdup(model);
	if (provider && ks_llm_provider_parse(provider, &cfg.provider, &err) < 0) {
		bad("llm", err.msg, "--llm-provider takes openai or anthropic");
		goto cleanup;
	}
	cfg.max_tokens = 16;
	cfg.max_retries = 0;
	cfg.total_timeout_s = 60;
	if (ks_llm_config_from_env(&cfg, &err) < 0 || ks_llm_config_validate(&cfg, &err) < 0) {
		bad("llm", err.msg,
		    "give --llm-url and --llm-model (or KSEARCH_LLM_URL and KSEARCH_LLM_MODEL)");
		goto cleanup;
	}
	if (ks_llm_open(&llm, &cfg, &err) < 0 || ks_llm_submit(llm, &req, 1, &err) < 0) {
		bad("llm", err.msg, "check the LLM settings");
		goto cleanup;
	}
	while (!got)
		if (ks_llm_poll(llm, -1, &resp, &got, &err) < 0) {
			bad("llm", err.msg, "libcurl failed: check the URL");
			goto cleanup;
		}
	if (!resp.ok) {
		bad("llm", resp.error ? resp.error : "the request failed", llm_fix(&resp, &cfg));
		goto cleanup;
	}
	ok("llm", "%s at %s (%s) answered in %.2f s: %llu prompt + %llu completion tokens%s", cfg.model,
	   cfg.base_url, ks_llm_provider_name(cfg.provider), resp.elapsed_s,
	   (unsigned long long)resp.prompt_tokens, (unsigned long long)resp.completion_tokens,
	   resp.usage_estimated ? " (estimated: the server reported no usage)" : "");
	ret = 0;
cleanup:
	ks_llm_response_release(&resp);
	ks_llm_close(llm);
	ks_llm_config_release(&cfg);
	return ret;
}

int cmd_doctor(int argc, char **argv)
{
	const char *archive = "archive", *llm_url = NULL, *llm_model = NULL, *llm_provider = NULL;
	struct ks_option opts[] = {
		KS_OPT_STRING(0, "archive", &archive, "DIR", "archive folder to check (default: archive)"),
		KS_OPT_STRING(0, "llm-url", &llm_url, "URL",
			      "also check this LLM endpoint (base URL, e.g. .../v1)"),
		KS_OPT_STRING(0, "llm-model", &llm_model, "NAME", "the model to ask"),
		KS_OPT_STRING(0, "llm-provider", &llm_provider, "P", "openai (default) or anthropic"),
		KS_OPT_END,
	};
	const char **positional;
	size_t n_positional;
	int rc, gpu_problems, llm_failed = 0;

	rc = ks_opts_parse("doctor", opts, &help, argc, argv, &positional, &n_positional);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	free(positional);
	if (n_positional) {
		ks_opts_release(opts);
		return ks_cli_usage("doctor", "takes no arguments");
	}
	problems = 0;
	printf("ksearch doctor\n");
	check_toolkit();
	check_nvrtc();
	gpu_problems = problems;
	check_gpus();
	gpu_problems = problems - gpu_problems;
	check_ops();
	check_archive(archive);
	if (llm_url || llm_model || getenv("KSEARCH_LLM_URL")) {
		int before = problems;

		check_llm(llm_url, llm_model, llm_provider);
		llm_failed = problems - before;
	}
	ks_opts_release(opts);
	if (!problems) {
		printf("\nall good\n");
		return KS_EXIT_OK;
	}
	printf("\n%d problem%s\n", problems, problems == 1 ? "" : "s");
	if (problems > gpu_problems + llm_failed)
		return KS_EXIT_FAILED;
	return llm_failed ? EXIT_LLM : EXIT_NO_GPU;
}
