/*
 * search_llm.c - the LLM mutator inside the search loop: requests, answers
 * turned into new families, repair turns, the tuner walk of new kernels,
 * strategy statistics and rewrites (see search.h, struct ks_search_llm).
 *
 * Runs on the search's calling thread only.  A task is one conversation:
 * the first request (parent + strategy), then up to max_repairs repair
 * turns, each after a failure of the previous answer; it lives until its
 * last child's result is in the archive (or its answer is unusable and no
 * repair is left).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/llm/answer.h"
#include "ksearch/llm/llm_context.h"
#include "ksearch/base/util.h"
#include "search_internal.h"

#define EVIDENCE_MAX 6000
#define UCB_C 0.5
/*
 * A model that keeps answering with nothing usable (no code, edits that
 * do not apply, kernels tried already) would otherwise be asked again at
 * the rate it answers, spending tokens for nothing: after STREAK_FREE such
 * answers in a row, new requests wait 1, 2, 4 ... up to BACKOFF_MAX_S
 * seconds (repair turns of open conversations still go).  A usable answer
 * ends the wait.
 */
#define STREAK_FREE 3
#define BACKOFF_MAX_S 60.0

enum task_kind { TASK_MUTATE, TASK_REWRITE };

struct llm_task {
	uint64_t tag;
	enum task_kind kind;
	int asking;	 /* a request is out */
	uint64_t parent; /* candidate the next answer descends from */
	uint64_t strategy;
	int repairs;	       /* repair turns sent */
	char *user;	       /* the first user message */
	char *answer;	       /* the latest answer */
	char *base;	       /* the source the latest answer's edits applied to */
	const char *operation; /* rewrite: ks_strategy_rewrite_names[] */
	struct llm_task *next;
};

/* ---- families the LLM wrote ---- */

/* A family for source; an unusable ksearch block makes a broken one (its children are contract errors). */
static struct ks_family *family_new(struct search *s, const char *name, const char *source, uint64_t strategy)
{
	struct ks_family *f = ks_calloc(1, sizeof(*f));
	struct ks_error why;

	f->name = ks_strdup(name);
	f->strategy = strategy;
	ks_error_clear(&why);
	if (ks_candidate_parse(name, source, &f->cand, &why) < 0 ||
	    ks_candidate_bind(&f->cand, s->op, &why) < 0 ||
	    (f->cand.n_params > MAX_PARAMS && ks_fail(&why, "%s: %zu params; the search handles at most %d",
						      name, f->cand.n_params, MAX_PARAMS))) {
		ks_candidate_release(&f->cand);
		memset(&f->cand, 0, sizeof(f->cand));
		f->cand.path = ks_strdup(name);
		f->cand.source = ks_strdup(source);
		f->broken = ks_strdup(why.msg[0] ? why.msg : "the ksearch block cannot be used");
	}
	return f;
}

int ks_search_load_families(struct search *s, struct ks_error *err)
{
	for (size_t i = 0;; i++) {
		char key[64];
		void *data = NULL;
		size_t size = 0;
		json_t *obj;
		const char *name, *source;
		json_int_t strategy = 0;

		snprintf(key, sizeof(key), "search/family/%08zu", i);
		if (ks_archive_state_get(s->ar, key, &data, &size, err) < 0)
			return -1;
		if (!data)
			return 0;
		obj = json_loadb(data, size, 0, NULL);
		free(data);
		if (!obj || json_unpack(obj, "{s:s, s:s, s?:I}", "name", &name, "source", &source, "strategy",
					&strategy)) {
			json_decref(obj);
			return ks_fail(err, "archive: saved family %zu is malformed (state %s)", i, key);
		}
		ks_search_add_family(s, family_new(s, name, source, (uint64_t)strategy), 0);
		json_decref(obj);
	}
}

/* The family holding source: an existing one, or a new one saved in the archive. */
static int family_for(struct search *s, const char *source, uint64_t strategy, uint64_t parent, size_t *fam,
		      int *is_new, struct ks_error *err)
{
	size_t index = s->n_fams - s->n_seeds;
	char name[32], key[64];
	json_t *obj;
	char *text;
	int ret;

	*is_new = 0;
	for (size_t i = 0; i < s->n_fams; i++)
		if (!strcmp(s->fams[i]->cand.source, source)) {
			*fam = i;
			return 0;
		}
	snprintf(name, sizeof(name), "llm-%zu", index + 1);
	snprintf(key, sizeof(key), "search/family/%08zu", index);
	obj = json_pack("{s:s, s:s, s:I, s:I}", "name", name, "source", source, "strategy",
			(json_int_t)strategy, "parent", (json_int_t)parent);
	if (!obj)
		return ks_fail(err, "the answer's source is not UTF-8 text");
	text = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	ret = ks_archive_state_put(s->ar, key, text, strlen(text), err);
	free(text);
	if (ret < 0)
		return -1;
	*fam = ks_search_add_family(s, family_new(s, name, source, strategy), 0);
	*is_new = 1;
	return 0;
}

/* ---- tasks ---- */

static struct llm_task *task_find(struct search *s, uint64_t tag)
{
	for (struct llm_task *t = s->tasks; t; t = t->next)
		if (t->tag == tag)
			return t;
	return NULL;
}

static void task_free(struct search *s, struct llm_task *task)
{
	for (struct llm_task **p = &s->tasks; *p; p = &(*p)->next)
		if (*p == task) {
			*p = task->next;
			break;
		}
	if (task->kind == TASK_REWRITE)
		s->rewriting = 0;
	free(task->user);
	free(task->answer);
	free(task->base);
	free(task);
}

static struct llm_task *task_new(struct search *s, enum task_kind kind)
{
	struct llm_task *task = ks_calloc(1, sizeof(*task));

	task->tag = ++s->next_tag;
	task->kind = kind;
	task->next = s->tasks;
	s->tasks = task;
	return task;
}

static int save_strategy(struct search *s, uint64_t id, struct ks_error *err)
{
	struct ks_strategy *st = ks_strategy_find(&s->strategies, id);

	return st ? ks_strategy_save(s->ar, st, err) : 0;
}

static int send_request(struct search *s, struct llm_task *task, const char *followup, struct ks_error *why)
{
	struct ks_llm_request req = { .system = s->llm->system_prompt, .user = task->user };

	if (followup) {
		req.assistant = task->answer;
		req.followup = followup;
	}
	if (ks_llm_submit(s->llm->client, &req, task->tag, why) < 0)
		return -1;
	task->asking = 1;
	s->asking++;
	return 0;
}

/* Note what became of a child, for the next request about the same parent. */
static void remember_attempt(struct search *s, uint64_t parent, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void remember_attempt(struct search *s, uint64_t parent, const char *fmt, ...)
{
	size_t slot = s->n_attempts++ % ATTEMPTS_KEPT;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->attempts[slot], sizeof(s->attempts[slot]), fmt, ap);
	va_end(ap);
	s->attempt_parent[slot] = parent;
}

static char *attempts_of(struct search *s, uint64_t parent)
{
	struct ks_strbuf sb;
	size_t n = s->n_attempts < ATTEMPTS_KEPT ? s->n_attempts : ATTEMPTS_KEPT;

	ks_strbuf_init(&sb);
	for (size_t k = 0; k < n; k++) {
		size_t slot = (s->n_attempts - 1 - k) % ATTEMPTS_KEPT;

		if (s->attempt_parent[slot] == parent)
			ks_strbuf_addf(&sb, "- %s\n", s->attempts[slot]);
	}
	return ks_strbuf_detach(&sb);
}

/* ---- asking ---- */

/*
 * The task, in one or two sentences: improve the parent's cell, or (a
 * move_share of the time) reach a neighbouring cell of the map, one bin
 * away along one axis, preferring cells no kernel fills yet.
 */
static const char improve_task[] = "Improve the parent: make it faster on the benchmark workloads (a higher "
				   "fitness, a larger fraction of "
				   "the speed of light) while keeping every output within tolerance. A "
				   "faster kernel in the parent's cell "
				   "of the map replaces it.";

static char *target_text(struct search *s, const struct pick *pk, const json_t *parent)
{
	size_t n_axes, coords[8], moves[16][2], n_moves = 0, n_empty = 0;
	const struct ks_grid_axis *grid = ks_archive_grid(s->ar, &n_axes);
	const json_t *desc = json_object_get(parent, "descriptors");
	uint64_t cell;
	char why[160];

	if (!n_axes || n_axes > 8 || ks_pcg32_double(&s->llm_rng) >= s->llm->move_share ||
	    ks_archive_cell_of(s->ar, desc, &cell, why, sizeof(why)) != 0)
		return ks_strdup(improve_task);
	ks_archive_cell_coords(s->ar, cell, coords);
	/* every neighbour (axis, bin), empty ones first */
	for (int pass = 0; pass < 2; pass++)
		for (size_t a = 0; a < n_axes; a++)
			for (int d = -1; d <= 1; d += 2) {
				size_t bin = coords[a] + (size_t)d, bins = grid[a].n_edges - 1;
				uint64_t to = 0;
				int filled = 0;

				if ((d < 0 && coords[a] == 0) || bin >= bins || n_moves == 16)
					continue;
				for (size_t k = 0; k < n_axes; k++)
					to = to * (grid[k].n_edges - 1) + (k == a ? bin : coords[k]);
				for (size_t i = 0; i < pk->n; i++)
					filled |= pk->elites[i].cell == to;
				if (filled != pass)
					continue;
				moves[n_moves][0] = a;
				moves[n_moves++][1] = bin;
				n_empty += !filled;
			}
	if (!n_moves)
		return ks_strdup(improve_task);
	{
		size_t k = ks_pcg32_bounded(&s->llm_rng, (uint32_t)(n_empty ? n_empty : n_moves));
		const struct ks_grid_axis *axis = &grid[moves[k][0]];
		size_t bin = moves[k][1], from = coords[moves[k][0]];
		const char *name = ks_descriptor_name(axis->descriptor);

		return ks_asprintf(
			"Reach %s cell of the map of kernel designs: write a correct kernel whose %s is in "
			"[%g, %g) (the parent's is %g, in [%g, %g)), as fast as such a design can be. The "
			"other descriptors may stay as they are.",
			n_empty ? "an empty" : "a neighbouring", name, axis->edges[bin], axis->edges[bin + 1],
			json_number_value(json_object_get(desc, name)), axis->edges[from],
			axis->edges[from + 1]);
	}
}

/* Up to three elites of other cells, best first, as records. */
static json_t *other_elites(struct search *s, const struct pick *pk, size_t parent)
{
	json_t *out = json_array();
	size_t taken[3], n = 0;

	while (n < 3) {
		size_t best = SIZE_MAX;

		for (size_t i = 0; i < pk->n; i++) {
			int used = i == parent;

			for (size_t k = 0; k < n; k++)
				used |= taken[k] == i;
			if (!used && (best == SIZE_MAX || pk->elites[i].fitness > pk->elites[best].fitness))
				best = i;
		}
		if (best == SIZE_MAX)
			break;
		taken[n++] = best;
		{
			json_t *record = NULL;
			struct ks_error err;

			if (ks_archive_get(s->ar, pk->elites[best].id, &record, NULL, &err) == 0 && record)
				json_array_append_new(out, record);
		}
	}
	return out;
}

/* Send one new request, if there is a parent to send; 1 when nothing was sent. */
static int ask(struct search *s, struct ks_error *err)
{
	struct pick pk;
	struct ks_strategy *st;
	json_t *parent = NULL, *elites = NULL;
	char *source = NULL, *target = NULL, *recent = NULL, *user = NULL;
	struct ks_llm_mutate_input in;
	struct llm_task *task;
	struct ks_error why;
	size_t a;
	int ret = 1;

	ks_search_pick_load(s, &pk);
	s->no_parent = !pk.usable;
	if (!pk.usable || !(st = ks_strategy_pick(&s->strategies, UCB_C)))
		goto cleanup;
	a = ks_search_pick_parent(s, &s->llm_rng, &pk);
	if (ks_archive_get(s->ar, pk.elites[a].id, &parent, &source, &why) < 0 || !parent || !source)
		goto cleanup;
	target = target_text(s, &pk, parent);
	elites = other_elites(s, &pk, a);
	recent = attempts_of(s, pk.elites[a].id);
	in = (struct ks_llm_mutate_input){ .target = target,
					   .strategy = ks_strategy_text(st),
					   .parent = parent,
					   .parent_source = source,
					   .elites = elites,
					   .recent_attempts = recent };
	if (ks_llm_mutate_prompt(s->llm->prompts_dir, &in, &user, err) < 0) {
		ret = -1;
		goto cleanup;
	}
	task = task_new(s, TASK_MUTATE);
	task->parent = pk.elites[a].id;
	task->strategy = st->id;
	task->user = user;
	task->base = source;
	source = NULL;
	if (send_request(s, task, NULL, &why) < 0) {
		task_free(s, task);
		goto cleanup;
	}
	ks_strategy_count(st, "uses", 1);
	if (ks_strategy_save(s->ar, st, err) < 0) {
		ret = -1;
		goto cleanup;
	}
	ks_search_log(s,
		      json_pack("{s:s, s:I, s:I, s:I, s:s, s:s}", "event", "llm_request", "tag",
				(json_int_t)task->tag, "parent", (json_int_t)task->parent, "strategy",
				(json_int_t)st->id, "strategy_name", ks_strategy_name(st), "target", target));
	ret = 0;
cleanup:
	ks_search_pick_release(&pk);
	json_decref(parent);
	json_decref(elites);
	free(source);
	free(target);
	free(recent);
	return ret;
}

/* Send a repair turn for task; frees the task when none is left or it cannot go. */
static int repair(struct search *s, struct llm_task *task, const char *verdict, const char *evidence,
		  const char *params, struct ks_error *err)
{
	char *followup = NULL;
	struct ks_error why;
	char cut[EVIDENCE_MAX + 64];

	if (task->repairs >= s->llm->max_repairs) {
		task_free(s, task);
		return 0;
	}
	if (evidence && strlen(evidence) > EVIDENCE_MAX) {
		snprintf(cut, sizeof(cut), "%.*s\n[... cut at %d bytes]", EVIDENCE_MAX, evidence,
			 EVIDENCE_MAX);
		evidence = cut;
	}
	if (ks_llm_repair_prompt(s->llm->prompts_dir, task->repairs + 1, s->llm->max_repairs, verdict,
				 evidence, params, task->base, &followup, err) < 0) {
		task_free(s, task);
		return -1;
	}
	if (send_request(s, task, followup, &why) < 0) {
		ks_search_log(s, json_pack("{s:s, s:I, s:s}", "event", "repair_not_sent", "tag",
					   (json_int_t)task->tag, "why", why.msg));
		task_free(s, task);
	} else {
		task->repairs++;
		s->summary->repairs++;
		ks_search_log(s, json_pack("{s:s, s:I, s:i, s:s}", "event", "repair", "tag",
					   (json_int_t)task->tag, "turn", task->repairs, "verdict", verdict));
	}
	free(followup);
	return 0;
}

/* Every rewrite_every LLM children: the most rewarding strategy with a verified child is rewritten. */
static int maybe_rewrite(struct search *s, struct ks_error *err)
{
	struct ks_strategy *best = NULL;
	json_t *child = NULL;
	char *source = NULL, *user = NULL;
	struct llm_task *task;
	struct ks_error why;
	const char *operation;
	int ret = 0;

	if (!s->llm->rewrite_every || s->rewriting || s->since_rewrite < (uint64_t)s->llm->rewrite_every)
		return 0;
	for (size_t i = 0; i < s->strategies.n; i++) {
		struct ks_strategy *st = &s->strategies.items[i];
		json_t *stats = json_object_get(st->obj, "stats");

		if (json_is_true(json_object_get(st->obj, "active")) &&
		    json_is_integer(json_object_get(stats, "best_child")) &&
		    (!best || ks_strategy_reward(st) > ks_strategy_reward(best)))
			best = st;
	}
	if (!best)
		return 0;
	s->since_rewrite = 0;
	if (ks_archive_get(s->ar,
			   (uint64_t)json_integer_value(
				   json_object_get(json_object_get(best->obj, "stats"), "best_child")),
			   &child, &source, &why) < 0 ||
	    !child)
		goto cleanup;
	operation = ks_strategy_rewrite_names[ks_pcg32_bounded(&s->llm_rng, KS_STRATEGY_REWRITES)];
	if (ks_llm_rewrite_prompt(s->llm->prompts_dir, operation, best->obj, child, source, &user, err) < 0) {
		ret = -1;
		goto cleanup;
	}
	task = task_new(s, TASK_REWRITE);
	task->strategy = best->id;
	task->operation = operation;
	task->user = user;
	if (send_request(s, task, NULL, &why) < 0) {
		task_free(s, task);
		goto cleanup;
	}
	s->rewriting = 1;
	ks_search_log(s, json_pack("{s:s, s:I, s:I, s:s}", "event", "rewrite_request", "tag",
				   (json_int_t)task->tag, "strategy", (json_int_t)best->id, "operation",
				   operation));
cleanup:
	json_decref(child);
	free(source);
	return ret;
}

/* ---- answers ---- */

static void add_usage(struct search *s, const struct ks_llm_response *resp, struct ks_error *err)
{
	const char *fields[] = { "requests",	     "failed",	      "prompt_tokens", "completion_tokens",
				 "reasoning_tokens", "cached_tokens", "cut_off" };
	uint64_t add[] = { 1,
			   resp->ok ? 0 : 1,
			   resp->prompt_tokens,
			   resp->completion_tokens,
			   resp->reasoning_tokens,
			   resp->cached_tokens + resp->cache_write_tokens,
			   (uint64_t)(resp->ok && resp->cut_off) };
	char *text;

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		json_object_set_new(s->usage, fields[i],
				    json_integer(json_integer_value(json_object_get(s->usage, fields[i])) +
						 (json_int_t)add[i]));
	json_object_set_new(
		s->usage, "cost_usd",
		json_real(json_number_value(json_object_get(s->usage, "cost_usd")) + resp->cost_usd));
	text = json_dumps(s->usage, JSON_COMPACT);
	ks_archive_state_put(s->ar, "llm/usage", text, strlen(text), err);
	free(text);
}

static int rewrite_answer(struct search *s, struct llm_task *task, const struct ks_llm_response *resp,
			  struct ks_error *err)
{
	/* parent points into the population, which ks_strategy_add() may move: use it before */
	struct ks_strategy *parent = ks_strategy_find(&s->strategies, task->strategy), *added;
	uint64_t parent_id;
	struct ks_archive_metrics m;
	struct ks_error why;
	char *text = NULL, name[256];
	int ret = 0;

	if (!parent)
		return 0;
	if (ks_llm_strategy_extract(resp->text, &text, &why) < 0) {
		ks_search_log(s, json_pack("{s:s, s:I, s:s}", "event", "rewrite_error", "strategy",
					   (json_int_t)task->strategy, "why", why.msg));
		return 0;
	}
	if (ks_archive_metrics(s->ar, &m, err) < 0) {
		free(text);
		return -1;
	}
	snprintf(name, sizeof(name), "%.*s.%s", 200, ks_strategy_name(parent), task->operation);
	parent_id = parent->id;
	parent = NULL;
	if (ks_strategy_add(s->ar, &s->strategies, name, text, task->operation, parent_id, m.candidates,
			    s->llm->population_cap, 3, &added, err) < 0) {
		ret = -1;
	} else {
		s->summary->rewrites++;
		ks_search_log(s, json_pack("{s:s, s:I, s:s, s:I, s:s}", "event", "strategy_rewrite", "id",
					   (json_int_t)added->id, "name", name, "parent",
					   (json_int_t)parent_id, "operation", task->operation));
	}
	free(text);
	return ret;
}

/* The "llm" field of a child's record. */
static json_t *llm_field(struct search *s, const struct llm_task *task, const struct ks_llm_response *resp,
			 const struct ks_answer_info *info)
{
	struct ks_strategy *st = ks_strategy_find(&s->strategies, task->strategy);

	return json_pack("{s:s, s:I, s:I, s:I, s:I, s:f, s:f, s:i, s:s, s:I, s:i, s:s, s:I}", "model",
			 s->llm->model ? s->llm->model : "", "prompt_tokens", (json_int_t)resp->prompt_tokens,
			 "completion_tokens", (json_int_t)resp->completion_tokens, "reasoning_tokens",
			 (json_int_t)resp->reasoning_tokens, "cached_tokens",
			 (json_int_t)(resp->cached_tokens + resp->cache_write_tokens), "cost_usd",
			 resp->cost_usd, "latency_s", resp->latency_s, "attempts", resp->attempts,
			 "answer_form", ks_answer_form_name(info->form), "edits", (json_int_t)info->n_edits,
			 "repair", task->repairs, "strategy", st ? ks_strategy_name(st) : "", "tag",
			 (json_int_t)task->tag);
}

static int answer_error(struct search *s, struct llm_task *task, const char *reason, struct ks_error *err)
{
	struct ks_strategy *st = ks_strategy_find(&s->strategies, task->strategy);

	s->summary->answer_errors++;
	if (++s->error_streak >= STREAK_FREE) {
		double wait = ldexp(1.0, (int)(s->error_streak < 20 ? s->error_streak - STREAK_FREE : 20));

		s->ask_after = ks_search_now() + (wait < BACKOFF_MAX_S ? wait : BACKOFF_MAX_S);
	}
	if (st) {
		ks_strategy_answer_error(st, reason);
		if (ks_strategy_save(s->ar, st, err) < 0)
			return -1;
	}
	remember_attempt(s, task->parent, "an answer that could not be used: %s", reason);
	ks_search_log(s, json_pack("{s:s, s:I, s:I, s:i, s:s}", "event", "answer_error", "tag",
				   (json_int_t)task->tag, "strategy", (json_int_t)task->strategy, "repair",
				   task->repairs, "why", reason));
	return repair(s, task, "answer_error", reason, "(not evaluated)", err);
}

/*
 * An answer that stopped at the budget is never used, even when it parses:
 * the model meant more (more edits, the rest of a file).  Asking again can
 * only help when the answer itself ran long: the repair turn asks for short
 * edits instead.  When the budget went to reasoning (nothing of the answer
 * came), the same question spends it the same way, so the conversation
 * ends; only a larger --max-tokens helps.
 */
static int cut_off_answer(struct search *s, struct llm_task *task, const struct ks_llm_response *resp,
			  struct ks_error *err)
{
	struct ks_strategy *st = ks_strategy_find(&s->strategies, task->strategy);
	char reason[200], evidence[600];
	int in_reasoning = !resp->text || !*resp->text;

	snprintf(reason, sizeof(reason), "cut off at %llu tokens: raise --max-tokens%s",
		 (unsigned long long)resp->completion_tokens,
		 in_reasoning ? " (it was still reasoning)" : "");
	s->summary->answer_errors++;
	s->summary->cut_off++;
	if (++s->error_streak >= STREAK_FREE) {
		double wait = ldexp(1.0, (int)(s->error_streak < 20 ? s->error_streak - STREAK_FREE : 20));

		s->ask_after = ks_search_now() + (wait < BACKOFF_MAX_S ? wait : BACKOFF_MAX_S);
	}
	if (st) {
		ks_strategy_answer_error(st, reason);
		ks_strategy_count(st, "cut_off", 1);
		if (ks_strategy_save(s->ar, st, err) < 0)
			return -1;
	}
	remember_attempt(s, task->parent, "an answer that could not be used: %s", reason);
	ks_search_log(s, json_pack("{s:s, s:I, s:I, s:i, s:s, s:b, s:b}", "event", "answer_error", "tag",
				   (json_int_t)task->tag, "strategy", (json_int_t)task->strategy, "repair",
				   task->repairs, "why", reason, "cut_off", 1, "in_reasoning", in_reasoning));
	if (in_reasoning) {
		task_free(s, task);
		return 0;
	}
	free(task->answer);
	task->answer = ks_strdup(resp->text);
	snprintf(evidence, sizeof(evidence),
		 "Your answer was cut off at %llu tokens, the answer budget, before it was complete, so none "
		 "of it was used. Answer within the budget: send SEARCH/REPLACE edits of only the lines that "
		 "change, not the whole file, and keep the explanation to a sentence.",
		 (unsigned long long)resp->completion_tokens);
	return repair(s, task, "cut_off", evidence, "(not evaluated)", err);
}

static int mutate_answer(struct search *s, struct llm_task *task, const struct ks_llm_response *resp,
			 struct ks_error *err)
{
	struct ks_answer_info info;
	struct ks_error why;
	char *source = NULL;
	size_t fam = 0;
	int is_new = 0, ret;
	struct pending p = { 0 };
	struct ks_strategy *st = ks_strategy_find(&s->strategies, task->strategy);

	free(task->answer);
	task->answer = ks_strdup(resp->text);
	ks_error_clear(&why);
	if (ks_answer_extract(resp->text, task->base, &source, &info, &why) < 0)
		return answer_error(s, task, why.msg, err);
	if (info.unchanged) {
		free(source);
		return answer_error(s, task, "the answer leaves the source exactly as it was", err);
	}
	ret = family_for(s, source, task->strategy, task->parent, &fam, &is_new, err);
	free(source);
	if (ret < 0)
		return -1;
	ks_params_first(&s->fams[fam]->cand, p.params);
	if (!is_new && ks_search_already_seen(s, fam, p.params)) {
		char reason[160];

		snprintf(reason, sizeof(reason), "the answer is a kernel evaluated already (family %s)",
			 s->fams[fam]->name);
		return answer_error(s, task, reason, err);
	}
	s->error_streak = 0;
	s->ask_after = 0;
	if (st) {
		ks_strategy_count(st, "answers", 1);
		if (ks_strategy_save(s->ar, st, err) < 0)
			return -1;
	}
	free(task->base);
	task->base = ks_strdup(s->fams[fam]->cand.source);
	p.family = fam;
	p.parent = task->parent;
	p.strategy = task->strategy;
	p.task = task->tag;
	p.llm = llm_field(s, task, resp, &info);
	snprintf(p.mutation, sizeof(p.mutation), "%s", task->repairs ? "repair" : "llm");
	ks_pending_push(&s->children, &p);
	s->exhausted = 0;
	ks_search_log(s, json_pack("{s:s, s:I, s:s, s:s, s:I, s:b, s:s?}", "event", "llm_child", "tag",
				   (json_int_t)task->tag, "family", s->fams[fam]->name, "form",
				   ks_answer_form_name(info.form), "edits", (json_int_t)info.n_edits, "new",
				   is_new, "broken", s->fams[fam]->broken));
	return 0;
}

static int handle(struct search *s, const struct ks_llm_response *resp, struct ks_error *err)
{
	struct llm_task *task = task_find(s, resp->tag);

	add_usage(s, resp, err);
	if (!task)
		return 0;
	task->asking = 0;
	s->asking--;
	if (!resp->ok) {
		s->summary->llm_failed++;
		ks_search_log(s, json_pack("{s:s, s:I, s:I, s:i, s:s}", "event", "llm_error", "tag",
					   (json_int_t)task->tag, "http_status",
					   (json_int_t)resp->http_status, "attempts", resp->attempts, "error",
					   resp->error ? resp->error : "?"));
		task_free(s, task);
		return 0;
	}
	s->summary->llm_requests++;
	ks_search_log(s,
		      json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:i, s:s?, s:s?, s:b}", "event",
				"llm_answer", "tag", (json_int_t)task->tag, "prompt_tokens",
				(json_int_t)resp->prompt_tokens, "completion_tokens",
				(json_int_t)resp->completion_tokens, "reasoning_tokens",
				(json_int_t)resp->reasoning_tokens, "cached_tokens",
				(json_int_t)(resp->cached_tokens + resp->cache_write_tokens), "latency_s",
				resp->latency_s, "attempts", resp->attempts, "stop_reason", resp->stop_reason,
				"reasoning", resp->reasoning, "cut_off", resp->cut_off));
	if (task->kind == TASK_REWRITE) {
		int ret = 0;

		if (resp->cut_off) {
			s->summary->cut_off++;
			ks_search_log(s, json_pack("{s:s, s:I, s:s}", "event", "rewrite_error", "strategy",
						   (json_int_t)task->strategy, "why",
						   "cut off at the answer budget: raise --max-tokens"));
		} else {
			ret = rewrite_answer(s, task, resp, err);
		}
		task_free(s, task);
		return ret;
	}
	if (resp->cut_off)
		return cut_off_answer(s, task, resp, err);
	return mutate_answer(s, task, resp, err);
}

/* ---- what the search calls ---- */

int ks_search_llm_start(struct search *s, struct ks_error *err)
{
	void *data = NULL;
	size_t size = 0;

	ks_pcg32_seed(&s->llm_rng, s->cfg->seed, 0x6c6c6d2d6d7574ull);
	if (ks_strategies_load(s->ar, s->llm->prompts_dir, &s->strategies, err) < 0)
		return -1;
	if (ks_archive_state_get(s->ar, "llm/usage", &data, &size, err) < 0)
		return -1;
	s->usage = data ? json_loadb(data, size, 0, NULL) : NULL;
	free(data);
	if (!json_is_object(s->usage)) {
		json_decref(s->usage);
		s->usage = json_object();
	}
	return 0;
}

void ks_search_llm_stop(struct search *s)
{
	while (s->tasks)
		task_free(s, s->tasks);
	ks_pending_release(&s->children);
	ks_pending_release(&s->tunes);
	ks_strategies_release(&s->strategies);
	json_decref(s->usage);
	s->usage = NULL;
}

int ks_search_llm_step(struct search *s, int timeout_ms, int stopping, struct ks_error *err)
{
	struct ks_error why;

	for (;;) {
		struct ks_llm_response resp;
		int got = 0, ret;
		char *notice;

		if (ks_llm_poll(s->llm->client, timeout_ms, &resp, &got, err) < 0)
			return -1;
		/* how the client adapted to the endpoint: said once, in the log and the output */
		while ((notice = ks_llm_take_notice(s->llm->client))) {
			if (s->cfg->out) {
				fprintf(s->cfg->out, "%sLLM: %s\n", s->cfg->status_tty ? "\r\033[K" : "",
					notice);
				fflush(s->cfg->out);
			}
			ks_search_log(s, json_pack("{s:s, s:s}", "event", "llm_adapted", "notice", notice));
			free(notice);
		}
		if (!got)
			break;
		timeout_ms = 0;
		ret = handle(s, &resp, err);
		ks_llm_response_release(&resp);
		if (ret < 0)
			return -1;
	}
	if (stopping)
		return 0;
	if (ks_llm_available(s->llm->client, &why) < 0) {
		if (!s->pause_reported && s->cfg->out) {
			fprintf(s->cfg->out, "%sLLM: %s; the built-in mutator carries on\n",
				s->cfg->status_tty ? "\r\033[K" : "", why.msg);
			fflush(s->cfg->out);
		}
		if (!s->pause_reported)
			ks_search_log(s, json_pack("{s:s, s:s}", "event", "llm_unavailable", "why", why.msg));
		s->pause_reported = 1;
		return 0;
	}
	s->pause_reported = 0;
	if (maybe_rewrite(s, err) < 0)
		return -1;
	while (s->asking < (size_t)s->llm->concurrency && s->children.count < s->depth &&
	       ks_search_now() >= s->ask_after) {
		int rc = ask(s, err);

		if (rc < 0)
			return -1;
		if (rc > 0)
			break;
	}
	return 0;
}

int ks_search_llm_may_produce(struct search *s)
{
	struct ks_error why;

	if (s->children.count || s->tunes.count || s->asking || s->tasks)
		return 1;
	if (ks_llm_paused(s->llm->client) || ks_search_now() < s->ask_after)
		return 1;
	return ks_llm_available(s->llm->client, &why) == 0 && !s->no_parent;
}

void ks_search_llm_drop(struct search *s, uint64_t tag)
{
	struct llm_task *task = task_find(s, tag);

	if (task)
		task_free(s, task);
}

/* Queue up to tune_budget unevaluated param combinations of a new kernel: neighbours first. */
static void tune(struct search *s, size_t fam, const int64_t *first, uint64_t child)
{
	const struct ks_family *f = s->fams[fam];
	size_t queued = 0, count = ks_params_count(&f->cand);
	struct pending p = { 0 };

	s->fam_tuned[fam] = 1;
	p.family = fam;
	p.parent = child;
	p.strategy = f->strategy;
	snprintf(p.mutation, sizeof(p.mutation), "tune");
	for (size_t k = 0; k < f->cand.n_params && queued < (size_t)s->llm->tune_budget; k++) {
		const struct ks_param *param = &f->cand.params[k];

		for (size_t v = 0; v < param->n_values && queued < (size_t)s->llm->tune_budget; v++) {
			memcpy(p.params, first, sizeof(p.params));
			if (param->values[v] == first[k])
				continue;
			p.params[k] = param->values[v];
			ks_pending_push(&s->tunes, &p);
			queued++;
		}
	}
	if (count == SIZE_MAX || count > 1000000)
		count = 1000000;
	for (size_t tries = 0;
	     queued < (size_t)s->llm->tune_budget && tries < 4 * (size_t)s->llm->tune_budget; tries++) {
		ks_params_nth(&f->cand, ks_pcg32_bounded(&s->llm_rng, (uint32_t)count), p.params);
		if (!ks_search_already_seen(s, fam, p.params)) {
			ks_pending_push(&s->tunes, &p);
			queued++;
		}
	}
	s->exhausted = 0;
}

int ks_search_llm_result(struct search *s, const struct job *job, const json_t *record,
			 const struct ks_archive_insert_result *res, struct ks_error *err)
{
	const char *verdict = json_string_value(json_object_get(record, "verdict")) ?: "crash";
	int ok = !strcmp(verdict, "ok");
	int improved = res->outcome == KS_ARCHIVE_NEW_CELL || res->outcome == KS_ARCHIVE_IMPROVED;
	double fitness = json_number_value(json_object_get(record, "fitness"));
	int from_llm = !strcmp(job->mutation, "llm") || !strcmp(job->mutation, "repair");
	struct ks_strategy *st = job->strategy ? ks_strategy_find(&s->strategies, job->strategy) : NULL;
	struct llm_task *task = job->task ? task_find(s, job->task) : NULL;

	if (st && (from_llm || !strcmp(job->mutation, "tune"))) {
		ks_strategy_child(st, res->id, ok, improved, fitness);
		if (save_strategy(s, st->id, err) < 0)
			return -1;
	}
	if (!strcmp(job->mutation, "tune"))
		s->summary->tuned++;
	if (!from_llm)
		return 0;
	s->summary->llm_children++;
	s->summary->llm_ok += ok;
	s->since_rewrite++;
	if (ok)
		remember_attempt(s, job->parents[0], "candidate %llu (%s): ok, fitness %.3f%s",
				 (unsigned long long)res->id, job->fam->name, fitness,
				 improved ? ", a new elite" : ", not better than its cell's elite");
	else
		remember_attempt(s, job->parents[0], "candidate %llu (%s): %s: %.120s",
				 (unsigned long long)res->id, job->fam->name, verdict,
				 json_string_value(json_object_get(record, "evidence")) ?: "");
	if (ok && !s->fam_tuned[job->family] && s->llm->tune_budget > 0)
		tune(s, job->family, job->params, res->id);
	if (!task)
		return 0;
	if (ok) {
		task_free(s, task);
		return 0;
	}
	{
		char params[512];

		ks_params_format(&job->fam->cand, job->params, params, sizeof(params));
		task->parent = res->id;
		return repair(s, task, verdict, json_string_value(json_object_get(record, "evidence")),
			      params, err);
	}
}

void ks_search_llm_status(struct search *s, char *buf, size_t size)
{
	struct ks_llm_usage u;

	ks_llm_usage(s->llm->client, &u);
	snprintf(buf, size, "  LLM %llu answers, %llu kernels (%llu ok), %llu tok%s%s%s",
		 (unsigned long long)u.succeeded, (unsigned long long)s->summary->llm_children,
		 (unsigned long long)s->summary->llm_ok,
		 (unsigned long long)(u.prompt_tokens + u.completion_tokens),
		 u.cut_off ? ", some cut off (--max-tokens)" : "",
		 ks_llm_paused(s->llm->client) ? ", paused" : "",
		 u.tokens_exhausted || u.usd_exhausted ? ", budget spent" : "");
}
