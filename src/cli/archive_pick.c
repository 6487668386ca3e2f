/*
 * archive_pick.c - picking one verified candidate of an archive for a
 * command that runs it again (`ksearch profile`, `ksearch sanitize`), its
 * chain of first parents (`export-best`, `archive show`), and the commands
 * that take the best home (`evolve`, `archive stats`).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive_cli.h"
#include "ksearch/base/fs.h"
#include "ksearch/op/candidate.h"

/* A lineage longer than this is a cycle in damaged data, not a search. */
#define MAX_LINEAGE 100000

int ks_archive_cli_pick_verified(const char *cmd, const char *verb, const struct ks_archive_pick *pick,
				 uint64_t id, int best, struct ks_record *rec, char **source, char **op_key,
				 char **gpu, char **origin)
{
	struct ks_archive *ar = NULL;
	struct ks_archive_cli_lineage lineage = { 0 };
	struct ks_error err;
	const char *seed;
	int ret = KS_EXIT_FAILED;

	if (ks_archive_cli_open(cmd, pick, &ar))
		return KS_EXIT_FAILED;
	if (best) {
		if (ks_archive_best_record(ar, rec, source, &err) < 0) {
			ks_cli_error(cmd, "%s", err.msg);
			goto cleanup;
		}
		if (!rec->id) {
			ks_cli_error(cmd, "%s holds no verified candidate yet", ks_archive_path(ar));
			goto cleanup;
		}
	} else if (ks_archive_cli_get_record(cmd, ar, id, rec, source) < 0) {
		goto cleanup;
	}
	if (!ks_record_ok(rec)) {
		ks_cli_error(cmd, "candidate #%llu is %s: only verified candidates are %s",
			     (unsigned long long)rec->id, ks_verdict_name(rec->result.verdict), verb);
		goto cleanup;
	}
	*op_key = ks_strdup(ks_archive_op(ar));
	*gpu = ks_strdup(ks_archive_gpu(ar));
	/* a knob or LLM child is a family of its own: the seed it came from, when the chain is whole */
	*origin = NULL;
	if (ks_archive_cli_lineage_build(ar, rec, &lineage, &err) == 0 &&
	    (seed = ks_export_origin(rec, &lineage.chain)))
		*origin = ks_strdup(seed);
	ks_archive_cli_lineage_release(&lineage);
	ret = 0;
cleanup:
	ks_archive_close(ar);
	return ret;
}

char **ks_archive_cli_record_params(const struct ks_record *rec, size_t *n)
{
	const json_t *params = rec->params, *v;
	char **out = ks_calloc(json_object_size(params) + 1, sizeof(*out));
	const char *name;

	*n = 0;
	json_object_foreach((json_t *)params, name, v) out[(*n)++] =
		ks_asprintf("%s=%lld", name, (long long)json_integer_value(v));
	return out;
}

void ks_archive_cli_params_free(char **params, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(params[i]);
	free(params);
}

/*
 * A FILE's --param, checked before any tool is looked for or started: a
 * name the candidate lacks, a value off its list or params its constraints
 * rule out is a usage error, as in `check` and `compile`; a block that
 * does not parse fails here, naming the problem.
 */
static int file_params_usable(const char *cmd, const struct ks_archive_target *t)
{
	struct ks_candidate cand;
	struct ks_error err;
	int64_t *values;
	int ret = 0;

	if (ks_candidate_parse(t->path, t->source, &cand, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		return KS_EXIT_FAILED;
	}
	if (ks_candidate_bind(&cand, &t->op, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		ks_candidate_release(&cand);
		return KS_EXIT_FAILED;
	}
	values = ks_calloc(cand.n_params ? cand.n_params : 1, sizeof(*values));
	ks_params_first(&cand, values);
	if (ks_params_assign(&cand, t->params, t->n_params, values, &err) < 0)
		ret = ks_cli_usage(cmd, "%s", err.msg);
	else if (t->n_params && !ks_params_allowed(&cand, values, err.msg, sizeof(err.msg)))
		ret = ks_cli_usage(cmd, "%s: %s: the candidate's constraints rule these params out", t->path,
				   err.msg);
	free(values);
	ks_candidate_release(&cand);
	return ret;
}

int ks_archive_cli_target_pick(const char *cmd, const char *verb, const struct ks_archive_target_args *a,
			       struct ks_archive_target *t)
{
	struct ks_error err;
	char *origin = NULL;
	int ret;

	memset(t, 0, sizeof(*t));
	ks_record_init(&t->record);
	if (!a->pick->op)
		return ks_cli_usage(cmd, "--op NAME is required (see `ksearch ops`)");
	if ((a->id_given || a->best) + (a->n_files > 0) != 1 || a->n_files > 1 || (a->id_given && a->best))
		return ks_cli_usage(cmd, "expected one candidate: --id ID, --best, or one FILE.cu");
	if (a->n_files && (a->root_given || a->pick->gpu))
		return ks_cli_usage(cmd, "--archive and --gpu pick an archive's candidate, not a FILE's");
	if (!a->n_files && a->params->n)
		return ks_cli_usage(cmd, "--param goes with a FILE: a record's params are its own");
	if (!a->n_files) {
		if ((ret = ks_archive_cli_pick_verified(cmd, verb, a->pick, a->id, a->best, &t->record,
							&t->source, &t->op_key, &t->gpu, &origin)))
			return ret;
		t->id = t->record.id;
		t->record_params = ks_archive_cli_record_params(&t->record, &t->n_record_params);
		t->params = (const char *const *)t->record_params;
		t->n_params = t->n_record_params;
		t->path = *t->record.path ? t->record.path : "candidate.cu";
		snprintf(t->what, sizeof(t->what), "#%llu (%s%s%s)", (unsigned long long)t->id,
			 *t->record.family ? t->record.family : "?", origin ? ", from " : "",
			 origin ? origin : "");
		free(origin);
	} else {
		size_t len;

		if (ks_read_file(a->files[0], &t->source, &len, &err) < 0) {
			ks_cli_error(cmd, "%s", err.msg);
			return KS_EXIT_FAILED;
		}
		t->op_key = ks_strdup(a->pick->op);
		t->params = a->params->items;
		t->n_params = a->params->n;
		t->path = a->files[0];
		snprintf(t->what, sizeof(t->what), "%s", a->files[0]);
	}
	if (ks_op_find(t->op_key, &t->op, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		return KS_EXIT_FAILED;
	}
	if (a->workload && !ks_op_workload(&t->op, a->workload))
		return ks_cli_usage(cmd, "--workload %s: %s has no such workload (see `ksearch ops`)",
				    a->workload, t->op.key);
	return a->n_files ? file_params_usable(cmd, t) : 0;
}

void ks_archive_cli_target_release(struct ks_archive_target *t)
{
	ks_record_release(&t->record);
	ks_archive_cli_params_free(t->record_params, t->n_record_params);
	free(t->source);
	free(t->op_key);
	free(t->gpu);
	ks_op_release(&t->op);
	memset(t, 0, sizeof(*t));
	ks_record_init(&t->record);
}

void ks_archive_cli_take_home(struct ks_archive *ar, const char *op, const char *root, const char *gpu,
			      uint64_t best_id)
{
	json_t *bests = NULL, *b;
	const char *workload;
	uint64_t ids[64];
	size_t n_ids = 0, others = 0;
	struct ks_error err;

	printf("take it home:  ksearch export-best --op %s --archive %s%s%s --id %llu\n", op, root,
	       gpu ? " --gpu " : "", gpu ? gpu : "", (unsigned long long)best_id);
	if (ks_archive_workload_bests(ar, &bests, &err) < 0)
		return;
	json_object_foreach(bests, workload, b)
	{
		uint64_t id = (uint64_t)json_integer_value(json_object_get(b, "id"));
		size_t k = 0;

		while (k < n_ids && ids[k] != id)
			k++;
		if (k == n_ids && n_ids < sizeof(ids) / sizeof(*ids))
			ids[n_ids++] = id;
		others += id != best_id;
	}
	if (others)
		printf("               ksearch export-best --op %s --archive %s%s%s --dispatch\n"
		       "               (the fastest kernel of each benchmark workload, %zu kernels behind "
		       "one "
		       "launcher: fitness %.3f)\n",
		       op, root, gpu ? " --gpu " : "", gpu ? gpu : "", n_ids,
		       ks_archive_dispatch_fitness(bests));
	json_decref(bests);
}

void ks_archive_cli_lineage_release(struct ks_archive_cli_lineage *lin)
{
	for (size_t i = 0; i < lin->n_ancestors; i++) {
		ks_record_release(lin->ancestors[i]);
		free(lin->ancestors[i]);
	}
	free(lin->ancestors);
	free(lin->steps);
	memset(lin, 0, sizeof(*lin));
}

static int in_chain(const struct ks_record *rec, const struct ks_archive_cli_lineage *lin, uint64_t id)
{
	if (rec->id == id)
		return 1;
	for (size_t i = 0; i < lin->n_ancestors; i++)
		if (lin->ancestors[i]->id == id)
			return 1;
	return 0;
}

int ks_archive_cli_lineage_build(struct ks_archive *ar, const struct ks_record *rec,
				 struct ks_archive_cli_lineage *lin, struct ks_error *err)
{
	const struct ks_record *current = rec;
	size_t n_steps;

	for (n_steps = 1; current->n_parents; n_steps++) {
		uint64_t pid = current->parents[0];
		struct ks_record *parent;

		if (in_chain(rec, lin, pid))
			break;
		parent = ks_calloc(1, sizeof(*parent));
		ks_record_init(parent);
		KS_ALLOC_GROW(lin->ancestors, lin->n_ancestors + 1, lin->alloc);
		lin->ancestors[lin->n_ancestors++] = parent;
		if (ks_archive_get_record(ar, pid, parent, NULL, err) < 0)
			return -1;
		if (!parent->id)
			lin->chain.missing = pid;
		if (!parent->id || n_steps == MAX_LINEAGE) {
			ks_record_release(parent);
			free(parent);
			lin->n_ancestors--;
			break;
		}
		current = parent;
	}
	lin->steps = ks_calloc(lin->n_ancestors + 1, sizeof(*lin->steps));
	for (size_t i = 0; i < lin->n_ancestors; i++)
		lin->steps[i] = lin->ancestors[lin->n_ancestors - 1 - i];
	lin->steps[lin->n_ancestors] = rec;
	lin->chain.steps = lin->steps;
	lin->chain.n_steps = lin->n_ancestors + 1;
	return 0;
}

void ks_archive_cli_format_where(const struct ks_result_place *w, struct ks_strbuf *sb)
{
	ks_strbuf_addf(sb, "GPU %d", w->gpu);
	if (*w->gpu_uuid)
		ks_strbuf_addf(sb, " (%s)", w->gpu_uuid);
	ks_strbuf_addf(sb, " of host %s", *w->host ? w->host : "?");
	if (w->rank >= 0)
		ks_strbuf_addf(sb, " (MPI rank %d)", w->rank);
	if (w->host_cpus || *w->cpu_model || w->host_gpus)
		ks_strbuf_addf(sb, ":");
	if (w->host_cpus)
		ks_strbuf_addf(sb, " %d CPUs", w->host_cpus);
	if (*w->cpu_model)
		ks_strbuf_addf(sb, " (%s)", w->cpu_model);
	if (w->host_gpus)
		ks_strbuf_addf(sb, "%s %d GPU%s", w->host_cpus || *w->cpu_model ? "," : "", w->host_gpus,
			       w->host_gpus == 1 ? "" : "s");
}
