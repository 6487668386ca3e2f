/*
 * version.c - `ksearch version`.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "evolve_cluster.h"
#include "ksearch/evaluate/cuda.h"
#include "ksearch/compile/nvrtc.h"

static const struct ks_help help = {
	.usage = "ksearch version [--json]",
	.description = "Print the version of ksearch, of the NVRTC it compiles with, of the\n"
		       "libraries built into it, and whether an NVIDIA driver was found.  --json\n"
		       "prints {\"ksearch\", \"nvrtc\", \"driver\", \"libs\"}; a part that is missing\n"
		       "is null, with the reason beside it (\"nvrtc_error\", \"driver_error\").",
	.examples = "  ksearch version\n"
		    "  ksearch version --json | jq -r .nvrtc\n",
};

int cmd_version(int argc, char **argv)
{
	int json = 0;
	struct ks_option opts[] = {
		KS_OPT_BOOL(0, "json", &json, "print JSON instead of text"),
		KS_OPT_END,
	};
	const char **positional;
	size_t n_positional;
	const struct ks_cuda *cuda;
	struct ks_error nvrtc_err, driver_err;
	char nvrtc[32] = "", driver[32] = "", mpi[256];
	int major, minor, version, rc;

	rc = ks_opts_parse("version", opts, &help, argc, argv, &positional, &n_positional);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	free(positional);
	if (n_positional)
		return ks_cli_usage("version", "takes no arguments");

	if (ks_nvrtc_version(&major, &minor, &nvrtc_err) == 0)
		snprintf(nvrtc, sizeof(nvrtc), "%d.%d", major, minor);
	if (ks_cuda_load(&cuda, &driver_err) == 0 && ks_cuda_driver_version(&version, &driver_err) == 0)
		snprintf(driver, sizeof(driver), "%d.%d", version / 1000, version % 1000 / 10);
	evolve_cluster_library(mpi, sizeof(mpi));
	if (json) {
		json_t *doc = json_pack("{s:s, s:s?, s:s?, s:{s:s, s:s, s:s}}", "ksearch", KS_VERSION,
					"nvrtc", *nvrtc ? nvrtc : NULL, "driver", *driver ? driver : NULL,
					"libs", "jansson", JANSSON_VERSION, "lmdb",
					mdb_version(NULL, NULL, NULL), "curl", curl_version());

		json_object_set_new(doc, "mpi", *mpi ? json_string(mpi) : json_null());
		if (!*nvrtc)
			json_object_set_new(doc, "nvrtc_error", json_string(nvrtc_err.msg));
		if (!*driver)
			json_object_set_new(doc, "driver_error", json_string(driver_err.msg));
		ks_cli_json_print(doc, JSON_INDENT(2));
		json_decref(doc);
		return KS_EXIT_OK;
	}
	printf("ksearch %s\n", KS_VERSION);
	if (*nvrtc)
		printf("nvrtc   %s\n", nvrtc);
	else
		printf("nvrtc   unavailable: %s\n", nvrtc_err.msg);
	if (*driver)
		printf("driver  CUDA %s (libcuda.so.1 found)\n", driver);
	else
		printf("driver  not found: %s\n", driver_err.msg);
	printf("libs    jansson %s, lmdb %s, %s\n", JANSSON_VERSION, mdb_version(NULL, NULL, NULL),
	       curl_version());
	printf("mpi     %s\n",
	       *mpi ? mpi : "none: built without MPI (one search per host; README, \"Many hosts\")");
	return KS_EXIT_OK;
}
