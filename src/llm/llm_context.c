/*
 * llm_context.c - rendering the LLM mutator's prompts from the operator,
 * the GPU and archive records (see llm_context.h).
 */
#include "ksearch/llm/llm_context.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ksearch/llm/prompt.h"
#include "ksearch/archive/record.h"
#include "ksearch/base/util.h"
#include "ksearch/evaluate/profile.h"

#define STRATEGY_MAX_BYTES (16 * 1024)

int ks_prompts_dir_find(char **dir, struct ks_error *err)
{
	const char *env = getenv("KSEARCH_PROMPTS");
	char *exe_dir = ks_exe_dir();
	char *candidates[4];
	size_t n = 0;
	int ret = -1;

	*dir = NULL;
	if (env && *env)
		candidates[n++] = ks_strdup(env);
	candidates[n++] = ks_strdup("prompts");
	if (exe_dir) {
		candidates[n++] = ks_asprintf("%s/../prompts", exe_dir);
		candidates[n++] = ks_asprintf("%s/../share/ksearch/prompts", exe_dir);
		free(exe_dir);
	}
	for (size_t i = 0; i < n && ret < 0; i++) {
		char *system = ks_path_join(candidates[i], "system.md");

		if (access(system, R_OK) == 0) {
			*dir = ks_strdup(candidates[i]);
			ret = 0;
		}
		free(system);
	}
	if (ret < 0)
		ks_fail(err,
			"no prompts folder (looked for system.md in $KSEARCH_PROMPTS, ./prompts and beside "
			"the "
			"ksearch binary); set KSEARCH_PROMPTS to the prompts/ folder of the source tree");
	for (size_t i = 0; i < n; i++)
		free(candidates[i]);
	return ret;
}

static int render(const char *prompts_dir, const char *name, const struct ks_prompt_vars *vars, char **out,
		  struct ks_error *err)
{
	char *template = NULL;
	int ret;

	*out = NULL;
	if (ks_prompt_load(prompts_dir, name, &template, err) < 0)
		return -1;
	ret = ks_prompt_render(template, vars, out, err);
	if (ret < 0)
		ks_fail(err, "%s/%s.md: %s", prompts_dir, name, err->msg);
	free(template);
	return ret;
}

/* The FlashInfer-Bench part of op.json: everything but ksearch's own block. */
static char *op_definition(const struct ks_op *op)
{
	char *path = ks_path_join(op->dir, "op.json");
	json_t *doc = json_load_file(path, 0, NULL);
	char *text;

	free(path);
	if (!doc)
		return ks_asprintf("%s: %s", op->name, op->description ? op->description : "");
	json_object_del(doc, "ksearch");
	text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(doc);
	return text;
}

static void workload_lines(struct ks_strbuf *sb, const char *kind, const struct ks_workload *w, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		ks_strbuf_addf(sb, "- %s %s:", kind, w[i].id);
		for (size_t k = 0; k < w[i].axes.count; k++)
			ks_strbuf_addf(sb, " %s=%lld", w[i].axes.entries[k].name,
				       (long long)w[i].axes.entries[k].value);
		ks_strbuf_adds(sb, "\n");
	}
}

int ks_llm_system_prompt(const char *prompts_dir, const struct ks_op *op, const struct ks_device_profile *gpu,
			 char **out, struct ks_error *err)
{
	struct ks_prompt_vars vars;
	struct ks_strbuf sb;
	char *definition = op_definition(op);
	int ret;

	ks_prompt_vars_init(&vars);
	ks_prompt_vars_set(&vars, "op_name", op->name);
	ks_prompt_vars_set(&vars, "op_definition", definition ? definition : op->name);
	ks_strbuf_init(&sb);
	workload_lines(&sb, "benchmark", op->workloads, op->n_workloads);
	workload_lines(&sb, "check", op->check_workloads, op->n_check_workloads);
	ks_prompt_vars_set(&vars, "op_workloads", sb.buf);
	ks_strbuf_release(&sb);
	ks_strbuf_init(&sb);
	for (size_t i = 0; i < op->n_outputs; i++)
		ks_strbuf_addf(&sb, "- %s (%s): atol %g, rtol %g\n", op->outputs[i].name,
			       ks_dtype_name(op->outputs[i].dtype), op->outputs[i].atol, op->outputs[i].rtol);
	ks_prompt_vars_set(&vars, "op_tolerances", sb.buf);
	ks_strbuf_release(&sb);
	ks_prompt_vars_set(&vars, "gpu_name", gpu->name);
	ks_prompt_vars_set(&vars, "arch", gpu->arch);
	ks_prompt_vars_setf(&vars, "sm_count", "%d", gpu->sm_count);
	ks_prompt_vars_set(&vars, "max_threads_per_block", "1024");
	ks_prompt_vars_setf(&vars, "regs_per_sm", "%d", gpu->regs_per_sm);
	ks_prompt_vars_set(&vars, "max_regs_per_thread", "255");
	ks_prompt_vars_setf(&vars, "smem_per_sm", "%d", gpu->max_smem_per_sm);
	ks_prompt_vars_setf(&vars, "max_smem_per_block", "%d", gpu->max_smem_per_block_optin);
	ks_prompt_vars_setf(&vars, "l2_bytes", "%d", gpu->l2_bytes);
	ks_prompt_vars_setf(&vars, "dram_gbs", "%.0f", gpu->dram_gbps);
	ret = render(prompts_dir, "system", &vars, out, err);
	ks_prompt_vars_release(&vars);
	free(definition);
	return ret;
}

char *ks_llm_params_text(const json_t *params)
{
	struct ks_strbuf sb;
	const char *name;
	json_t *value;

	ks_strbuf_init(&sb);
	json_object_foreach((json_t *)params, name, value) ks_strbuf_addf(
		&sb, "%s%s=%lld", sb.len ? " " : "", name, (long long)json_integer_value(value));
	if (!sb.len)
		ks_strbuf_adds(&sb, "(no params)");
	return ks_strbuf_detach(&sb);
}

char *ks_llm_descriptors_text(const struct ks_record *rec)
{
	struct ks_strbuf sb;
	int profiled = rec->profile != NULL;

	ks_strbuf_init(&sb);
	for (int i = 0; i < KS_DESC_COUNT; i++) {
		enum ks_descriptor d = (enum ks_descriptor)i;

		if (!(rec->has_descriptor & (1u << i)))
			continue;
		ks_strbuf_addf(&sb, "%s%s=%g", sb.len ? " " : "", ks_descriptor_name(d),
			       rec->result.descriptors[i]);
		/* a measured descriptor of a kernel not profiled yet holds a stand-in: say which */
		if (!profiled && ks_descriptor_is_measured(d))
			ks_strbuf_addf(&sb, " (not profiled yet: %s)", ks_descriptor_stand_in(d));
	}
	if (!sb.len)
		ks_strbuf_adds(&sb, "(not measured)");
	return ks_strbuf_detach(&sb);
}

char *ks_llm_profile_text(const struct ks_record *rec)
{
	const json_t *profile = rec->profile;
	char *lines, *text;

	if (!json_is_object(profile))
		return ks_strdup("(not profiled yet)");
	lines = ks_profile_text(profile, "- ");
	text = ks_asprintf("Nsight Compute on workload %s, %s:\n%s",
			   json_string_value(json_object_get(profile, "workload")) ?: "?",
			   json_string_value(json_object_get(profile, "tool")) ?: "ncu", lines ? lines : "");
	free(lines);
	return text;
}

static const char *name_or_unknown(const char *name)
{
	return *name ? name : "?";
}

/* Compile report lines and the verdict's evidence. */
static char *evidence_text(const struct ks_record *rec)
{
	const struct ks_result *res = &rec->result;
	struct ks_strbuf sb;

	ks_strbuf_init(&sb);
	for (size_t i = 0; i < res->n_kernels; i++) {
		const struct ks_result_kernel *k = &res->kernels[i];

		ks_strbuf_addf(
			&sb,
			"- kernel %s: %lld registers, %lld B static + %lld B dynamic shared memory, "
			"%lld B stack, %lld spill stores, %lld threads, occupancy %.2f, tensor cores %s, "
			"async copy %s, widest load %lld B\n",
			name_or_unknown(k->kernel), (long long)k->registers, (long long)k->static_smem,
			(long long)k->dynamic_smem, (long long)k->stack_bytes, (long long)k->spill_stores,
			(long long)k->threads, k->occupancy, name_or_unknown(k->tensor_cores),
			name_or_unknown(k->async_copy), (long long)k->widest_load_bytes);
	}
	if (*res->evidence)
		ks_strbuf_addf(&sb, "%s\n", res->evidence);
	if (!sb.len)
		ks_strbuf_adds(&sb, "(none)");
	return ks_strbuf_detach(&sb);
}

static char *timings_text(const struct ks_record *rec)
{
	const struct ks_result *res = &rec->result;
	struct ks_strbuf sb;

	ks_strbuf_init(&sb);
	for (size_t i = 0; i < res->n_workloads; i++) {
		const struct ks_result_workload *w = &res->workloads[i];

		ks_strbuf_addf(&sb,
			       "- %s: %.2f us (p10 %.2f, p90 %.2f), reference %.2f us, floor %.2f us, "
			       "%.0f%% of the speed of light\n",
			       name_or_unknown(w->id), w->median_us, w->p10_us, w->p90_us, w->ref_median_us,
			       w->floor_us, 100.0 * w->sol_fraction);
	}
	if (!sb.len)
		ks_strbuf_adds(&sb, "(not timed)");
	return ks_strbuf_detach(&sb);
}

static char *elites_text(const struct ks_record *elites, size_t n_elites)
{
	struct ks_strbuf sb;

	ks_strbuf_init(&sb);
	for (size_t i = 0; i < n_elites; i++) {
		const struct ks_record *e = &elites[i];
		char *params = ks_llm_params_text(e->params);
		char *desc = ks_llm_descriptors_text(e);

		ks_strbuf_addf(&sb,
			       "- candidate %lld, family %s, %s: fitness %.3f, %.0f%% of the speed of light; "
			       "descriptors %s",
			       (long long)e->id, name_or_unknown(e->family), params, e->result.fitness,
			       100.0 * e->result.sol_fraction, desc);
		if (e->profile)
			ks_strbuf_addf(&sb, "; profiled: DRAM %.0f%% of peak, achieved occupancy %.2f",
				       100 * json_number_value(json_object_get(e->profile, "dram_fraction")),
				       json_number_value(json_object_get(e->profile, "achieved_occupancy")));
		ks_strbuf_adds(&sb, "\n");
		free(params);
		free(desc);
	}
	if (!sb.len)
		ks_strbuf_adds(&sb, "(none yet)");
	return ks_strbuf_detach(&sb);
}

int ks_llm_mutate_prompt(const char *prompts_dir, const struct ks_llm_mutate_input *in, char **out,
			 struct ks_error *err)
{
	struct ks_prompt_vars vars;
	char *params = ks_llm_params_text(in->parent->params);
	char *evidence = evidence_text(in->parent);
	char *timings = timings_text(in->parent);
	char *desc = ks_llm_descriptors_text(in->parent);
	char *profile = ks_llm_profile_text(in->parent);
	char *elites = elites_text(in->elites, in->n_elites);
	int ret;

	ks_prompt_vars_init(&vars);
	ks_prompt_vars_set(&vars, "target", in->target);
	ks_prompt_vars_set(&vars, "strategy", in->strategy);
	ks_prompt_vars_setf(&vars, "parent_fitness", "%.3f", in->parent->result.fitness);
	ks_prompt_vars_setf(&vars, "parent_sol", "%.0f%%", 100.0 * in->parent->result.sol_fraction);
	ks_prompt_vars_set(&vars, "parent_params", params);
	ks_prompt_vars_set(&vars, "parent_verdict", ks_verdict_name(in->parent->result.verdict));
	ks_prompt_vars_set(&vars, "parent_evidence", evidence);
	ks_prompt_vars_set(&vars, "parent_timings", timings);
	ks_prompt_vars_set(&vars, "parent_descriptors", desc);
	ks_prompt_vars_set(&vars, "parent_profile", profile);
	ks_prompt_vars_set(&vars, "parent_source", in->parent_source);
	ks_prompt_vars_set(&vars, "elites", elites);
	ks_prompt_vars_set(&vars, "recent_attempts",
			   in->recent_attempts && *in->recent_attempts ? in->recent_attempts : "(none)");
	ret = render(prompts_dir, "mutate", &vars, out, err);
	ks_prompt_vars_release(&vars);
	free(params);
	free(evidence);
	free(timings);
	free(desc);
	free(profile);
	free(elites);
	return ret;
}

int ks_llm_repair_prompt(const char *prompts_dir, int attempt, int max_attempts, const char *verdict,
			 const char *evidence, const char *params, const char *child_source, char **out,
			 struct ks_error *err)
{
	struct ks_prompt_vars vars;
	int ret;

	ks_prompt_vars_init(&vars);
	ks_prompt_vars_setf(&vars, "attempt", "%d", attempt);
	ks_prompt_vars_setf(&vars, "max_attempts", "%d", max_attempts);
	ks_prompt_vars_set(&vars, "child_verdict", verdict);
	ks_prompt_vars_set(&vars, "child_evidence", evidence && *evidence ? evidence : "(none)");
	ks_prompt_vars_set(&vars, "child_params", params && *params ? params : "(no params)");
	ks_prompt_vars_set(&vars, "child_source", child_source);
	ret = render(prompts_dir, "repair", &vars, out, err);
	ks_prompt_vars_release(&vars);
	return ret;
}

int ks_llm_rewrite_prompt(const char *prompts_dir, const char *operation, const json_t *strategy,
			  const struct ks_record *best_child, const char *best_source, char **out,
			  struct ks_error *err)
{
	struct ks_prompt_vars vars;
	const json_t *stats = json_object_get(strategy, "stats");
	char *desc = ks_llm_descriptors_text(best_child);
	char *timings = timings_text(best_child);
	char *params = ks_llm_params_text(best_child->params);
	int ret;

	ks_prompt_vars_init(&vars);
	ks_prompt_vars_set(&vars, "operation", operation);
	ks_prompt_vars_set(&vars, "strategy_name",
			   json_string_value(json_object_get(strategy, "name")) ?: "?");
	ks_prompt_vars_set(&vars, "strategy_text",
			   json_string_value(json_object_get(strategy, "text")) ?: "");
	ks_prompt_vars_setf(
		&vars, "strategy_stats",
		"used %lld times; %lld answers gave a kernel, %lld did not; %lld kernels evaluated, "
		"%lld verified, %lld filled or improved a cell of the map",
		(long long)json_integer_value(json_object_get(stats, "uses")),
		(long long)json_integer_value(json_object_get(stats, "answers")),
		(long long)json_integer_value(json_object_get(stats, "answer_errors")),
		(long long)json_integer_value(json_object_get(stats, "children")),
		(long long)json_integer_value(json_object_get(stats, "ok")),
		(long long)json_integer_value(json_object_get(stats, "improvements")));
	ks_prompt_vars_setf(&vars, "best_fitness", "%.3f", best_child->result.fitness);
	ks_prompt_vars_setf(&vars, "best_sol", "%.0f%%", 100.0 * best_child->result.sol_fraction);
	ks_prompt_vars_set(&vars, "best_params", params);
	ks_prompt_vars_set(&vars, "best_descriptors", desc);
	ks_prompt_vars_set(&vars, "best_timings", timings);
	ks_prompt_vars_set(&vars, "best_source", best_source ? best_source : "(not available)");
	ret = render(prompts_dir, "rewrite", &vars, out, err);
	ks_prompt_vars_release(&vars);
	free(desc);
	free(timings);
	free(params);
	return ret;
}

/* Start of the line "<tag>" (blanks around it allowed) at or after from, or NULL. */
static const char *find_tag_line(const char *from, const char *tag, const char **after)
{
	size_t len = strlen(tag);

	for (const char *p = from; p && *p;) {
		const char *line = p, *end = strchr(p, '\n'), *q = line;

		while (*q == ' ' || *q == '\t')
			q++;
		if (!strncmp(q, tag, len)) {
			const char *r = q + len;

			while (*r == ' ' || *r == '\t' || *r == '\r')
				r++;
			if (*r == '\n' || *r == '\0') {
				*after = *r ? r + 1 : r;
				return line;
			}
		}
		p = end ? end + 1 : NULL;
	}
	return NULL;
}

int ks_llm_strategy_extract(const char *answer, char **text, struct ks_error *err)
{
	const char *open = NULL, *body = NULL, *at = answer, *after, *line;
	const char *close = NULL;
	size_t len;
	unsigned code;
	long bad;

	*text = NULL;
	while ((line = find_tag_line(at, "<strategy>", &after))) {
		const char *c_after, *c = find_tag_line(after, "</strategy>", &c_after);

		if (!c)
			break;
		open = line;
		body = after;
		close = c;
		at = c_after;
	}
	if (!open)
		return ks_fail(err,
			       "no new strategy in the answer (expected it between a line <strategy> and a "
			       "line </strategy>)");
	while (body < close && (*body == '\n' || *body == '\r' || *body == ' '))
		body++;
	len = (size_t)(close - body);
	while (len && (body[len - 1] == '\n' || body[len - 1] == '\r' || body[len - 1] == ' '))
		len--;
	if (!len)
		return ks_fail(err, "the new strategy in the answer is empty");
	if (len > STRATEGY_MAX_BYTES)
		return ks_fail(err, "the new strategy is %zu bytes; at most %d are kept", len,
			       STRATEGY_MAX_BYTES);
	*text = ks_strndup(body, len);
	/* `ksearch archive prompts` prints strategies to terminals */
	if ((bad = ks_text_control(*text, &code)) >= 0) {
		free(*text);
		*text = NULL;
		return ks_fail(err, "the new strategy has a control character (U+%04X) on its line %d", code,
			       ks_line_of(body, (size_t)bad));
	}
	return 0;
}
