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
#include "ksearch/cuda.h"
#include "ksearch/nvrtc.h"
#include "ksearch/op.h"
#include "ksearch/util.h"

enum { EXIT_NO_GPU = 3 };

static const struct ks_help help = {
	.usage = "ksearch doctor [--archive DIR]",
	.description =
		"Check what ksearch needs, in the order it needs it: the CUDA toolkit's\n"
		"headers, NVRTC (with a trial compilation), the NVIDIA driver, each GPU\n"
		"(name, compute capability, memory, SMs), the operators, and the archive\n"
		"folder.  Every problem comes with the fix.",
	.examples =
		"  ksearch doctor\n"
		"  ksearch doctor --archive /data/ksearch-archive\n",
	.exit_codes =
		"  3  compilation works but no GPU can run kernels (no driver or no GPU):\n"
		"     compile works; check and evolve need a GPU\n",
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
	static const char source[] =
		"#include <cuda_bf16.h>\n"
		"extern \"C\" __global__ void probe(__nv_bfloat16 *x) { x[threadIdx.x] = __float2bfloat16(1.0f); }\n";
	struct ks_compile_request req = { .source = source, .source_name = "doctor-probe.cu", .arch = "sm_90a" };
	struct ks_compile_result res = { 0 };
	struct ks_error err;
	int major, minor;

	if (ks_nvrtc_version(&major, &minor, &err) < 0) {
		bad("nvrtc", err.msg, "install the CUDA toolkit's NVRTC (libnvrtc) and rebuild ksearch");
		return -1;
	}
	if (ks_nvrtc_compile(&req, &res, &err) < 0) {
		bad("nvrtc", err.msg, "the toolkit's headers and NVRTC must match: reinstall the CUDA toolkit");
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

			snprintf(problem, sizeof(problem), "%s has compute capability %d.%d; ksearch needs 7.0 or newer",
				 info.name, info.cc_major, info.cc_minor);
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
		ok("operators", "%s (%s): %zu workloads, %zu seeds", op.key, op.dir, op.n_workloads, op.n_seeds);
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

int cmd_doctor(int argc, char **argv)
{
	struct ks_opt opts[] = {
		{ "archive", 0, KS_OPT_VALUE, "DIR", "archive folder to check (default: archive)", 0, 0, 0, 0 },
		{ 0 },
	};
	const char **positional;
	size_t n_positional;
	int rc, gpu_problems;

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
	check_archive(opts[0].set ? opts[0].value : "archive");
	ks_opts_release(opts);
	if (!problems) {
		printf("\nall good\n");
		return KS_EXIT_OK;
	}
	printf("\n%d problem%s\n", problems, problems == 1 ? "" : "s");
	if (problems == gpu_problems)
		return EXIT_NO_GPU;
	return KS_EXIT_FAILED;
}
