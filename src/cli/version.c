/*
 * version.c - `ksearch version`.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "ksearch/evaluate/cuda.h"
#include "ksearch/compile/nvrtc.h"

static const struct ks_help help = {
	.usage = "ksearch version",
	.description = "Print the version of ksearch, of the NVRTC it compiles with, of the\n"
		       "libraries built into it, and whether an NVIDIA driver was found.",
	.examples = "  ksearch version\n",
};

int cmd_version(int argc, char **argv)
{
	struct ks_option opts[] = { KS_OPT_END };
	const char **positional;
	size_t n_positional;
	const struct ks_cuda *cuda;
	struct ks_error err;
	int major, minor, driver, rc;

	rc = ks_opts_parse("version", opts, &help, argc, argv, &positional, &n_positional);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	free(positional);
	if (n_positional)
		return ks_cli_usage("version", "takes no arguments");

	printf("ksearch %s\n", KS_VERSION);
	if (ks_nvrtc_version(&major, &minor, &err) == 0)
		printf("nvrtc   %d.%d\n", major, minor);
	else
		printf("nvrtc   unavailable: %s\n", err.msg);
	if (ks_cuda_load(&cuda, &err) == 0 && ks_cuda_driver_version(&driver, &err) == 0)
		printf("driver  CUDA %d.%d (libcuda.so.1 found)\n", driver / 1000, driver % 1000 / 10);
	else
		printf("driver  not found: %s\n", err.msg);
	printf("libs    jansson %s, lmdb %s, %s\n", JANSSON_VERSION, mdb_version(NULL, NULL, NULL),
	       curl_version());
	return KS_EXIT_OK;
}
