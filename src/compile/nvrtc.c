/*
 * nvrtc.c - compile one candidate with NVRTC and read ptxas's report.
 *
 * NVRTC 13 passes --ptxas-options=-v through to the ptxas it embeds and
 * appends ptxas's "info" lines to the program log, after the front end's
 * diagnostics, so registers, shared memory, stack and spills come from
 * the log; no cubin parsing is needed.
 */
#include "ksearch/compile/nvrtc.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <nvrtc.h>

#include "ksearch/base/util.h"

/* Room left in struct ks_error for the log, after "compilation failed:\n". */
#define LOG_EXCERPT_MAX (KS_ERROR_MAX - 512)

#define DEFAULT_SOURCE_NAME "candidate.cu"

static int is_directory(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/* $CUDA_PATH/include, else /usr/local/cuda/include; malloc'd. */
static char *cuda_include_dir(void)
{
	const char *root = getenv("CUDA_PATH");
	char *dir = NULL;

	if (!root || !*root)
		root = "/usr/local/cuda";
	if (asprintf(&dir, "%s/include", root) < 0)
		return NULL;
	return dir;
}

static int is_identifier(const char *name)
{
	if (!name || !(isalpha((unsigned char)*name) || *name == '_'))
		return 0;
	for (; *name; name++)
		if (!(isalnum((unsigned char)*name) || *name == '_'))
			return 0;
	return 1;
}

/* "sm_" digits, then at most one of the suffixes 'a' or 'f'. */
static int is_sm_arch(const char *arch)
{
	const char *p;

	if (!arch || strncmp(arch, "sm_", 3) || !isdigit((unsigned char)arch[3]))
		return 0;
	for (p = arch + 3; isdigit((unsigned char)*p); p++)
		;
	if (*p == 'a' || *p == 'f')
		p++;
	return *p == '\0';
}

/* "sm_75, sm_80, ..." as this NVRTC reports them, into buf. */
static void supported_archs(char *buf, size_t size)
{
	int n = 0, *archs = NULL;
	size_t used = 0;

	buf[0] = '\0';
	if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0)
		return;
	archs = calloc((size_t)n, sizeof(*archs));
	if (!archs || nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS) {
		free(archs);
		return;
	}
	for (int i = 0; i < n && used < size; i++) {
		int w = snprintf(buf + used, size - used, "%ssm_%d", i ? ", " : "", archs[i]);

		if (w < 0)
			break;
		used += (size_t)w;
	}
	free(archs);
}

static int line_is_error(const char *line, size_t len)
{
	static const char *const markers[] = { ": error", ": catastrophic error", "ptxas error",
					       "ptxas fatal", "nvrtc: error" };

	for (size_t i = 0; i < sizeof(markers) / sizeof(markers[0]); i++) {
		size_t m = strlen(markers[i]);

		for (size_t j = 0; j + m <= len; j++)
			if (!memcmp(line + j, markers[i], m))
				return 1;
	}
	return 0;
}

/*
 * The log's closing paragraph, after its last blank line: "100 errors
 * detected in the compilation of ...", "Compilation terminated.".
 */
static void closing_paragraph(const char *log, const char **text, int *len)
{
	const char *end = log + strlen(log), *start;

	while (end > log && isspace((unsigned char)end[-1]))
		end--;
	start = end;
	while (start > log && !(start[-1] == '\n' && start - 1 > log && start[-2] == '\n'))
		start--;
	*text = start;
	*len = (int)(end - start);
}

/*
 * The part of a long log worth putting in an error message: from the first
 * error on (warnings before it are dropped first), cut at a line end, and
 * the log's closing lines.
 */
static void log_excerpt(const char *log, char *buf, size_t size)
{
	size_t len = strlen(log), start = 0, end, room = size - 256;
	const char *summary;
	int summary_len;

	if (len < size) {
		memcpy(buf, log, len + 1);
		return;
	}
	for (const char *line = log; *line;) {
		const char *nl = strchr(line, '\n');
		size_t line_len = nl ? (size_t)(nl - line) : strlen(line);

		if (line_is_error(line, line_len)) {
			start = (size_t)(line - log);
			break;
		}
		line += line_len + (nl ? 1 : 0);
	}
	end = start + room < len ? start + room : len;
	while (end > start && log[end - 1] != '\n')
		end--;
	if (end == start) /* one enormous line */
		end = start + room < len ? start + room : len;
	closing_paragraph(log, &summary, &summary_len);
	if (summary_len > 200 || summary < log + end)
		summary_len = 0;
	snprintf(buf, size, "%s%.*s[... log trimmed: %zu of %zu bytes shown]\n%.*s", start ? "[...]\n" : "",
		 (int)(end - start), log + start, end - start, len, summary_len, summary);
}

static char *copy_log(nvrtcProgram prog)
{
	size_t size = 0;
	char *log;

	if (nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size == 0)
		return calloc(1, 1);
	log = malloc(size);
	if (!log)
		return NULL;
	if (nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
		log[0] = '\0';
	log[size - 1] = '\0';
	return log;
}

/* The file a diagnostic line names ("FILE(LINE): error: ..."), or 0. */
static size_t diagnostic_file(const char *line, size_t len)
{
	for (size_t i = 1; i < len; i++) {
		size_t j = i + 1;

		if (line[i] != '(' || !isdigit((unsigned char)line[j]))
			continue;
		while (j < len && isdigit((unsigned char)line[j]))
			j++;
		if (j + 2 < len && line[j] == ')' && line[j + 1] == ':' && line[j + 2] == ' ')
			return i;
	}
	return 0;
}

/*
 * The log without the text of diagnostics located in a file other than the
 * candidate, the toolkit's headers or NVRTC's built-in ones: NVRTC quotes
 * the lines it complains about, and those of a file a candidate should
 * never have reached (a secret) must not reach the log.  includes.h
 * refuses such sources before they are compiled; this is the layer behind.
 * Takes `log` (malloc'd) and returns its replacement.
 */
static char *withhold_foreign(char *log, const char *source_name, const char *include_dir)
{
	size_t dir_len = strlen(include_dir);
	struct ks_strbuf sb;
	int foreign = 0;

	ks_strbuf_init(&sb);
	ks_strbuf_adds(&sb, "");
	for (const char *line = log; *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);
		size_t file = diagnostic_file(line, len);

		if (file) {
			foreign = !(file == strlen(source_name) && !strncmp(line, source_name, file)) &&
				  !(file > dir_len && !strncmp(line, include_dir, dir_len) &&
				    line[dir_len] == '/') &&
				  strncmp(line, "__nv", 4);
			if (foreign) {
				ks_strbuf_add(&sb, line, (size_t)(strchr(line + file, ')') - line) + 1);
				ks_strbuf_adds(&sb,
					       ": (a diagnostic in a file outside the candidate and the CUDA "
					       "headers; its text is withheld)\n");
			}
		} else if (len <= 1 || !isspace((unsigned char)line[0])) {
			foreign = 0; /* a blank line or a new paragraph ends the diagnostic */
		}
		if (!foreign)
			ks_strbuf_add(&sb, line, len);
		line += len;
	}
	free(log);
	return ks_strbuf_detach(&sb);
}

static int fail_nvrtc(struct ks_error *err, const char *what, nvrtcResult rc)
{
	if (rc == NVRTC_ERROR_BUILTIN_OPERATION_FAILURE)
		return ks_fail(err,
			       "%s: %s; NVRTC could not load its builtins library: install "
			       "libnvrtc-builtins from the same CUDA version as libnvrtc and "
			       "put its directory (e.g. /usr/local/cuda/lib64) on LD_LIBRARY_PATH",
			       what, nvrtcGetErrorString(rc));
	return ks_fail(err, "%s: %s", what, nvrtcGetErrorString(rc));
}

/* Append one printf-formatted option; opts has room for it. */
static int add_option(char **opts, int *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int add_option(char **opts, int *n, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vasprintf(&opts[*n], fmt, ap);
	va_end(ap);
	if (rc < 0) {
		opts[*n] = NULL; /* vasprintf leaves it undefined */
		return -1;
	}
	(*n)++;
	return 0;
}

/* The options the header promises, in a malloc'd array of malloc'd strings. */
static int build_options(const struct ks_compile_request *req, const char *include_dir, char ***options,
			 int *n_options, struct ks_error *err)
{
	char **opts = calloc(7 + req->n_defines, sizeof(*opts));
	char *cccl = NULL;
	int ret = -1, major = 0, minor = 0;

	*options = opts;
	*n_options = 0;
	if (!opts || add_option(opts, n_options, "--gpu-architecture=%s", req->arch) ||
	    add_option(opts, n_options, "-std=c++17") || add_option(opts, n_options, "--ptxas-options=-v") ||
	    add_option(opts, n_options, "-I%s", include_dir) || asprintf(&cccl, "%s/cccl", include_dir) < 0) {
		cccl = NULL;
		ks_fail(err, "out of memory building NVRTC options");
		goto cleanup;
	}
	/* a cached compile comes back without ptxas's report (nvrtc.h) */
	if (nvrtcVersion(&major, &minor) == NVRTC_SUCCESS && (major > 12 || (major == 12 && minor >= 9)) &&
	    add_option(opts, n_options, "--no-cache")) {
		ks_fail(err, "out of memory building NVRTC options");
		goto cleanup;
	}
	/* CUDA 13 moved <cuda/std/...>, <cuda/pipeline> and CUB under include/cccl. */
	if (is_directory(cccl) && add_option(opts, n_options, "-I%s", cccl)) {
		ks_fail(err, "out of memory building NVRTC options");
		goto cleanup;
	}
	for (size_t i = 0; i < req->n_defines; i++) {
		if (add_option(opts, n_options, "-D%s=%" PRId64, req->defines[i].name,
			       req->defines[i].value)) {
			ks_fail(err, "out of memory building NVRTC options");
			goto cleanup;
		}
	}
	ret = 0;
cleanup:
	free(cccl);
	return ret;
}

static int check_request(const struct ks_compile_request *req, struct ks_error *err)
{
	if (!req->source)
		return ks_fail(err, "no source to compile");
	if (!is_sm_arch(req->arch))
		return ks_fail(err,
			       "architecture '%s' is not of the form sm_XY (e.g. sm_80, sm_90a); "
			       "a cubin needs a real GPU architecture",
			       req->arch ? req->arch : "(none)");
	for (size_t i = 0; i < req->n_defines; i++)
		if (!is_identifier(req->defines[i].name))
			return ks_fail(err, "define #%zu: '%s' is not a C identifier", i + 1,
				       req->defines[i].name ? req->defines[i].name : "(null)");
	return 0;
}

/*
 * A compile that got past the front end: explain a rejected option
 * (in practice the architecture) or hand back the log.
 */
static int fail_compile(const struct ks_compile_request *req, nvrtcResult rc, const char *log,
			const char *include_dir, struct ks_error *err)
{
	char excerpt[LOG_EXCERPT_MAX];
	const char *hint = "";

	if (rc == NVRTC_ERROR_INVALID_OPTION) {
		char archs[512];
		int major = 0, minor = 0;

		const char *why = *log ? log : nvrtcGetErrorString(rc);
		int why_len = (int)strlen(why);

		while (why_len > 0 && isspace((unsigned char)why[why_len - 1]))
			why_len--;
		supported_archs(archs, sizeof(archs));
		nvrtcVersion(&major, &minor);
		return ks_fail(err,
			       "NVRTC %d.%d cannot compile for '%s' (%.*s); it knows %s, "
			       "and 'a'/'f' variants such as sm_90a from sm_90 on",
			       major, minor, req->arch, why_len, why, archs);
	}
	if (rc != NVRTC_ERROR_COMPILATION)
		return fail_nvrtc(err, "NVRTC failed", rc);
	log_excerpt(log, excerpt, sizeof(excerpt));
	if (!is_directory(include_dir) &&
	    (strstr(log, "could not open source file") || strstr(log, "cannot open source file")))
		hint = "\n(the CUDA headers were looked for in a directory that does not "
		       "exist; set CUDA_PATH to the CUDA toolkit)";
	return ks_fail(err, "compilation failed:\n%s%s", excerpt, hint);
}

int ks_nvrtc_compile(const struct ks_compile_request *req, struct ks_compile_result *out,
		     struct ks_error *err)
{
	nvrtcProgram prog = NULL;
	nvrtcResult rc;
	char **options = NULL;
	int n_options = 0;
	char *include_dir = NULL;
	int ret = -1;

	memset(out, 0, sizeof(*out));
	if (check_request(req, err))
		goto cleanup;
	include_dir = cuda_include_dir();
	if (!include_dir) {
		ks_fail(err, "out of memory");
		goto cleanup;
	}
	/* a toolkit that is not there is ksearch's problem, not the candidate's: no log */
	if (!is_directory(include_dir)) {
		ks_fail(err,
			"the CUDA toolkit's headers are not at %s; set CUDA_PATH to the CUDA toolkit "
			"(NVRTC needs its include folder for <cuda_bf16.h> and friends)",
			include_dir);
		goto cleanup;
	}
	if (build_options(req, include_dir, &options, &n_options, err))
		goto cleanup;

	rc = nvrtcCreateProgram(&prog, req->source, req->source_name ? req->source_name : DEFAULT_SOURCE_NAME,
				0, NULL, NULL);
	if (rc != NVRTC_SUCCESS) {
		fail_nvrtc(err, "NVRTC could not create a program", rc);
		goto cleanup;
	}
	rc = nvrtcCompileProgram(prog, n_options, (const char *const *)options);
	out->log = copy_log(prog);
	if (!out->log) {
		ks_fail(err, "out of memory reading the NVRTC log");
		goto cleanup;
	}
	out->log = withhold_foreign(out->log, req->source_name ? req->source_name : DEFAULT_SOURCE_NAME,
				    include_dir);

	if (rc != NVRTC_SUCCESS) {
		fail_compile(req, rc, out->log, include_dir, err);
		goto cleanup;
	}

	if ((rc = nvrtcGetPTXSize(prog, &out->ptx_size)) != NVRTC_SUCCESS ||
	    !(out->ptx = malloc(out->ptx_size + 1)) || (rc = nvrtcGetPTX(prog, out->ptx)) != NVRTC_SUCCESS) {
		fail_nvrtc(err, "reading the PTX", rc);
		goto cleanup;
	}
	out->ptx[out->ptx_size] = '\0';
	out->ptx_size = strlen(out->ptx);

	if ((rc = nvrtcGetCUBINSize(prog, &out->cubin_size)) != NVRTC_SUCCESS) {
		fail_nvrtc(err, "reading the cubin", rc);
		goto cleanup;
	}
	if (!out->cubin_size) {
		ks_fail(err, "NVRTC produced no cubin for '%s'", req->arch);
		goto cleanup;
	}
	if (!(out->cubin = malloc(out->cubin_size)) ||
	    (rc = nvrtcGetCUBIN(prog, (char *)out->cubin)) != NVRTC_SUCCESS) {
		fail_nvrtc(err, "reading the cubin", rc);
		goto cleanup;
	}

	if (ks_ptxas_log_parse(out->log, &out->kernels, &out->n_kernels, err))
		goto cleanup;
	/* Kernels without a report would silently get zero registers. */
	if (!out->n_kernels && strstr(out->ptx, ".entry") && !req->resources_optional) {
		ks_fail(err,
			"the NVRTC log has no ptxas resource report although the PTX "
			"has kernels; was --ptxas-options=-v ignored? The log: \"%.600s\"",
			out->log);
		goto cleanup;
	}
	ret = 0;

cleanup:
	if (ret) {
		/* Only the log survives a failure, for the candidate's record. */
		char *log = out->log;

		out->log = NULL;
		ks_compile_result_release(out);
		out->log = log;
	}
	if (prog)
		nvrtcDestroyProgram(&prog);
	for (int i = 0; i < n_options; i++)
		free(options[i]);
	free(options);
	free(include_dir);
	return ret;
}

void ks_compile_result_release(struct ks_compile_result *res)
{
	if (!res)
		return;
	free(res->ptx);
	free(res->cubin);
	free(res->log);
	free(res->kernels);
	memset(res, 0, sizeof(*res));
}

const struct ks_kernel_resources *ks_compile_result_kernel(const struct ks_compile_result *res,
							   const char *name)
{
	for (size_t i = 0; i < res->n_kernels; i++)
		if (!strcmp(res->kernels[i].name, name))
			return &res->kernels[i];
	return NULL;
}

int ks_nvrtc_version(int *major, int *minor, struct ks_error *err)
{
	nvrtcResult rc = nvrtcVersion(major, minor);

	if (rc != NVRTC_SUCCESS)
		return fail_nvrtc(err, "asking NVRTC for its version", rc);
	return 0;
}

/* ---- the ptxas -v report ---- */

/* Stack and spills are printed per function, entries or not. */
struct function_properties {
	char name[sizeof(((struct ks_kernel_resources *)0)->name)];
	int stack_bytes, spill_stores, spill_loads;
};

struct log_parse {
	struct ks_kernel_resources *kernels;
	size_t n_kernels, alloc_kernels;
	struct function_properties *props;
	size_t n_props, alloc_props;
	long current;	/* kernel the next "Used ..." line belongs to, or -1 */
	long props_for; /* properties the next stack line belongs to, or -1 */
};

/* Copy the quoted or trailing name at p (up to quote or line end) into dst. */
static void copy_name(char *dst, size_t size, const char *p, const char *end, char stop)
{
	size_t len = 0;

	while (p + len < end && p[len] != stop && p[len] != '\n' && p[len] != '\r')
		len++;
	while (len && isspace((unsigned char)p[len - 1]))
		len--;
	if (len >= size)
		len = size - 1; /* longer than any extern "C" kernel name; kept truncated */
	memcpy(dst, p, len);
	dst[len] = '\0';
}

/*
 * One comma-separated item of a ptxas line: "Used 40 registers",
 * "used 1 barriers", "1024 bytes smem", "4096+0 bytes smem",
 * "372 bytes cmem[0]", "0 bytes stack frame".  Returns the number and
 * points *unit at the words after it.
 */
static long item_value(const char *item, const char *end, const char **unit)
{
	const char *p = item;
	long value = 0;

	while (p < end && isspace((unsigned char)*p))
		p++;
	if (end - p >= 4 && (!strncmp(p, "Used", 4) || !strncmp(p, "used", 4)))
		p += 4;
	while (p < end && isspace((unsigned char)*p))
		p++;
	if (p >= end || !isdigit((unsigned char)*p)) {
		*unit = NULL;
		return 0;
	}
	while (p < end && isdigit((unsigned char)*p))
		value = value * 10 + (*p++ - '0');
	/* Old ptxas: "N+M bytes smem", the second part reserved by the system. */
	while (p < end && *p == '+') {
		long extra = 0;

		for (p++; p < end && isdigit((unsigned char)*p); p++)
			extra = extra * 10 + (*p - '0');
		value += extra;
	}
	while (p < end && isspace((unsigned char)*p))
		p++;
	*unit = p;
	return value;
}

static int unit_is(const char *unit, const char *end, const char *word)
{
	size_t n = strlen(word);

	return unit && (size_t)(end - unit) >= n && !strncmp(unit, word, n);
}

static void parse_usage(struct ks_kernel_resources *k, const char *line, const char *end)
{
	const char *item = line;

	while (item < end) {
		const char *comma = memchr(item, ',', (size_t)(end - item));
		const char *item_end = comma ? comma : end;
		const char *unit;
		long value = item_value(item, item_end, &unit);

		if (unit_is(unit, item_end, "registers"))
			k->registers = (int)value;
		else if (unit_is(unit, item_end, "barriers"))
			k->barriers = (int)value;
		else if (unit_is(unit, item_end, "bytes smem"))
			k->static_smem = (int)value;
		else if (unit_is(unit, item_end, "bytes cmem[0]"))
			k->const_bytes = (int)value;
		else if ((unit_is(unit, item_end, "bytes cumulative stack size") ||
			  unit_is(unit, item_end, "bytes lmem")) &&
			 value > k->stack_bytes)
			k->stack_bytes = (int)value;
		item = item_end + 1;
	}
}

static void parse_stack(struct function_properties *f, const char *line, const char *end)
{
	const char *item = line;

	while (item < end) {
		const char *comma = memchr(item, ',', (size_t)(end - item));
		const char *item_end = comma ? comma : end;
		const char *unit;
		long value = item_value(item, item_end, &unit);

		if (unit_is(unit, item_end, "bytes stack frame"))
			f->stack_bytes = (int)value;
		else if (unit_is(unit, item_end, "bytes spill stores"))
			f->spill_stores = (int)value;
		else if (unit_is(unit, item_end, "bytes spill loads"))
			f->spill_loads = (int)value;
		item = item_end + 1;
	}
}

static const char *find_in_line(const char *line, const char *end, const char *needle)
{
	size_t n = strlen(needle);

	for (const char *p = line; p + n <= end; p++)
		if (!memcmp(p, needle, n))
			return p;
	return NULL;
}

static int parse_line(struct log_parse *lp, const char *line, const char *end)
{
	const char *at;

	/* Front-end diagnostics quote user source; only ptxas's lines count. */
	if (strncmp(line, "ptxas", 5) && !find_in_line(line, end, "bytes stack frame"))
		return 0;
	if ((at = find_in_line(line, end, "Compiling entry function '"))) {
		struct ks_kernel_resources *k;

		if (KS_ALLOC_TRY_GROW(lp->kernels, lp->n_kernels + 1, lp->alloc_kernels))
			return -1;
		k = &lp->kernels[lp->n_kernels];
		memset(k, 0, sizeof(*k));
		at += strlen("Compiling entry function '");
		copy_name(k->name, sizeof(k->name), at, end, '\'');
		lp->current = (long)lp->n_kernels++;
	} else if (find_in_line(line, end, "Compiling function '")) {
		lp->current = -1; /* a .func compiled on its own has its own "Used" line */
	} else if ((at = find_in_line(line, end, "Function properties for "))) {
		struct function_properties *f;

		if (KS_ALLOC_TRY_GROW(lp->props, lp->n_props + 1, lp->alloc_props))
			return -1;
		f = &lp->props[lp->n_props];
		memset(f, 0, sizeof(*f));
		at += strlen("Function properties for ");
		copy_name(f->name, sizeof(f->name), at, end, '\n');
		lp->props_for = (long)lp->n_props++;
	} else if (find_in_line(line, end, "bytes stack frame")) {
		if (lp->props_for >= 0)
			parse_stack(&lp->props[lp->props_for], line, end);
	} else if ((at = find_in_line(line, end, "Used "))) {
		if (lp->current >= 0)
			parse_usage(&lp->kernels[lp->current], at, end);
	}
	return 0;
}

int ks_ptxas_log_parse(const char *log, struct ks_kernel_resources **kernels, size_t *n_kernels,
		       struct ks_error *err)
{
	struct log_parse lp = { NULL, 0, 0, NULL, 0, 0, -1, -1 };
	int ret = -1;

	*kernels = NULL;
	*n_kernels = 0;
	if (!log) {
		ks_fail(err, "no ptxas log to read");
		goto cleanup;
	}
	for (const char *line = log; *line;) {
		const char *nl = strchr(line, '\n');
		const char *end = nl ? nl : line + strlen(line);

		if (parse_line(&lp, line, end)) {
			ks_fail(err, "out of memory reading the ptxas log");
			goto cleanup;
		}
		line = nl ? nl + 1 : end;
	}
	/* Stack frame and spills come from the kernel's "Function properties". */
	for (size_t i = 0; i < lp.n_kernels; i++) {
		struct ks_kernel_resources *k = &lp.kernels[i];

		for (size_t j = 0; j < lp.n_props; j++) {
			const struct function_properties *f = &lp.props[j];

			if (strcmp(f->name, k->name))
				continue;
			if (f->stack_bytes > k->stack_bytes)
				k->stack_bytes = f->stack_bytes;
			k->spill_stores = f->spill_stores;
			k->spill_loads = f->spill_loads;
			break;
		}
	}
	*kernels = lp.kernels;
	*n_kernels = lp.n_kernels;
	lp.kernels = NULL;
	ret = 0;
cleanup:
	free(lp.kernels);
	free(lp.props);
	return ret;
}
