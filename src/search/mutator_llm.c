/*
 * mutator_llm.c - the LLM mutator (mutator_llm.h): requests, answers
 * turned into new families, repair turns, the tuner walk of new kernels,
 * strategy statistics and rewrites.
 *
 * It talks to the search only through mutator.h, and keeps every piece
 * of its state here.  A task is one conversation: the first request
 * (parent + strategy), then up to max_repairs repair turns, each after a
 * failure of the previous answer; it lives until its last child's result
 * is in the archive (or its answer is unusable and no repair is left).
 */
#include "ksearch/search/mutator_llm.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/util.h"
#include "ksearch/llm/answer.h"
#include "ksearch/llm/llm_context.h"
#include "ksearch/llm/strategy.h"

#define EVIDENCE_MAX 6000
#define UCB_C 0.5
#define ATTEMPTS_KEPT 32
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
/*
 * When nothing but the LLM is left to propose, the search waits on it
 * (may_produce), which it must not do for ever: after give_up_after
 * replies in a row that brought nothing usable (answers with no usable
 * kernel, cut-off ones included, and failed requests), it says it may
 * produce nothing more and the search ends, "exhausted".  Until then it
 * is asked as usual; a usable answer starts the count again.  The default
 * is four whole conversations (an answer and two repair turns each); with
 * the backoff above, the waits between their requests add up to a minute
 * or so at most, besides the time the answers take.
 */
#define GIVE_UP_AFTER 12

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

/* Proposals waiting for their turn: LLM children, tuner variants (a ring). */
struct pending_queue {
	struct ks_proposal *items;
	size_t head, count, cap;
};

struct llm_mutator {
	struct ks_mutator iface; /* iface.ctx is this */
	struct ks_llm_mutator_config cfg;
	struct ks_llm_mutator_stats stats;
	struct ks_mutator_host *h; /* during a run */
	struct ks_archive *ar;	   /* h's archive */
	struct ks_strategies strategies;
	struct ks_pcg32 rng;
	struct llm_task *tasks;
	uint64_t next_tag;
	size_t asking; /* requests out */
	int rewriting;
	uint64_t since_rewrite; /* LLM children since the last rewrite */
	struct pending_queue children, tunes;
	char attempts[ATTEMPTS_KEPT][200];
	uint64_t attempt_parent[ATTEMPTS_KEPT];
	size_t n_attempts;
	int pause_reported;
	int no_parent;	       /* the last request found no elite to start from */
	unsigned error_streak; /* unusable answers in a row */
	unsigned barren;       /* replies in a row with nothing usable, failed requests too (give_up_after) */
	double ask_after;      /* no new request before this time (ks_now_s()) */
	json_t *usage;	       /* totals over the archive's life (state "llm/usage") */
	size_t *tuned;	       /* families whose params were walked */
	size_t n_tuned, alloc_tuned;
};

/* ---- queues of waiting proposals ---- */

static void pending_push(struct pending_queue *q, const struct ks_proposal *p)
{
	if (q->count == q->cap) {
		struct ks_proposal *items = ks_calloc(q->cap ? 2 * q->cap : 16, sizeof(*items));

		for (size_t i = 0; i < q->count; i++)
			items[i] = q->items[(q->head + i) % q->cap];
		free(q->items);
		q->items = items;
		q->head = 0;
		q->cap = q->cap ? 2 * q->cap : 16;
	}
	q->items[(q->head + q->count++) % q->cap] = *p;
}

static int pending_pop(struct pending_queue *q, struct ks_proposal *p)
{
	if (!q->count)
		return 0;
	*p = q->items[q->head];
	q->head = (q->head + 1) % q->cap;
	q->count--;
	return 1;
}

static void pending_release(struct pending_queue *q)
{
	struct ks_proposal p;

	while (pending_pop(q, &p))
		json_decref(p.llm);
	free(q->items);
	memset(q, 0, sizeof(*q));
}

static int was_tuned(const struct llm_mutator *m, size_t fam)
{
	for (size_t i = 0; i < m->n_tuned; i++)
		if (m->tuned[i] == fam)
			return 1;
	return 0;
}

/* ---- tasks ---- */

static struct llm_task *task_find(struct llm_mutator *m, uint64_t tag)
{
	for (struct llm_task *t = m->tasks; t; t = t->next)
		if (t->tag == tag)
			return t;
	return NULL;
}

static void task_free(struct llm_mutator *m, struct llm_task *task)
{
	for (struct llm_task **p = &m->tasks; *p; p = &(*p)->next)
		if (*p == task) {
			*p = task->next;
			break;
		}
	if (task->kind == TASK_REWRITE)
		m->rewriting = 0;
	free(task->user);
	free(task->answer);
	free(task->base);
	free(task);
}

static struct llm_task *task_new(struct llm_mutator *m, enum task_kind kind)
{
	struct llm_task *task = ks_calloc(1, sizeof(*task));

	task->tag = ++m->next_tag;
	task->kind = kind;
	task->next = m->tasks;
	m->tasks = task;
	return task;
}

static int save_strategy(struct llm_mutator *m, uint64_t id, struct ks_error *err)
{
	struct ks_strategy *st = ks_strategy_find(&m->strategies, id);

	return st ? ks_strategy_save(m->ar, st, err) : 0;
}

static int send_request(struct llm_mutator *m, struct llm_task *task, const char *followup,
			struct ks_error *why)
{
	struct ks_llm_request req = { .system = m->cfg.system_prompt, .user = task->user };

	if (followup) {
		req.assistant = task->answer;
		req.followup = followup;
	}
	if (ks_llm_submit(m->cfg.client, &req, task->tag, why) < 0)
		return -1;
	task->asking = 1;
	m->asking++;
	return 0;
}

/* Note what became of a child, for the next request about the same parent. */
static void remember_attempt(struct llm_mutator *m, uint64_t parent, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void remember_attempt(struct llm_mutator *m, uint64_t parent, const char *fmt, ...)
{
	size_t slot = m->n_attempts++ % ATTEMPTS_KEPT;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m->attempts[slot], sizeof(m->attempts[slot]), fmt, ap);
	va_end(ap);
	m->attempt_parent[slot] = parent;
}

static char *attempts_of(struct llm_mutator *m, uint64_t parent)
{
	struct ks_strbuf sb;
	size_t n = m->n_attempts < ATTEMPTS_KEPT ? m->n_attempts : ATTEMPTS_KEPT;

	ks_strbuf_init(&sb);
	for (size_t k = 0; k < n; k++) {
		size_t slot = (m->n_attempts - 1 - k) % ATTEMPTS_KEPT;

		if (m->attempt_parent[slot] == parent)
			ks_strbuf_addf(&sb, "- %s\n", m->attempts[slot]);
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

/* parent: the record of the elite of cell */
static char *target_text(struct llm_mutator *m, const struct ks_parents *pk, const struct ks_record *parent,
			 uint64_t cell)
{
	size_t n_axes, coords[8], moves[16][2], n_moves = 0, n_empty = 0;
	const struct ks_grid_axis *grid = ks_archive_grid(m->ar, &n_axes);

	if (!n_axes || n_axes > 8 || ks_pcg32_double(&m->rng) >= m->cfg.move_share)
		return ks_strdup(improve_task);
	ks_archive_cell_coords(m->ar, cell, coords);
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
		size_t k = ks_pcg32_bounded(&m->rng, (uint32_t)(n_empty ? n_empty : n_moves));
		const struct ks_grid_axis *axis = &grid[moves[k][0]];
		size_t bin = moves[k][1], from = coords[moves[k][0]];
		const char *name = ks_descriptor_name(axis->descriptor);

		return ks_asprintf(
			"Reach %s cell of the map of kernel designs: write a correct kernel whose %s is in "
			"[%g, %g) (the parent's is %g, in [%g, %g)), as fast as such a design can be. The "
			"other descriptors may stay as they are.",
			n_empty ? "an empty" : "a neighbouring", name, axis->edges[bin], axis->edges[bin + 1],
			parent->result.descriptors[axis->descriptor], axis->edges[from],
			axis->edges[from + 1]);
	}
}

/* Up to three elites of other cells, best first, as records. */
static size_t other_elites(struct llm_mutator *m, const struct ks_parents *pk, size_t parent,
			   struct ks_record out[3])
{
	size_t taken[3], n = 0, n_out = 0;

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
			struct ks_error err;

			if (ks_archive_get_record(m->ar, pk->elites[best].id, &out[n_out], NULL, &err) == 0 &&
			    out[n_out].id)
				n_out++;
		}
	}
	return n_out;
}

/* Send one new request, if there is a parent to send; 1 when nothing was sent. */
static int ask(struct llm_mutator *m, struct ks_error *err)
{
	struct ks_parents pk;
	struct ks_strategy *st;
	struct ks_record parent, elites[3];
	size_t n_elites = 0;
	char *source = NULL, *target = NULL, *recent = NULL, *user = NULL;
	struct ks_llm_mutate_input in;
	struct llm_task *task;
	struct ks_error why;
	size_t a;
	int ret = 1;

	ks_record_init(&parent);
	for (size_t i = 0; i < 3; i++)
		ks_record_init(&elites[i]);
	ks_mutator_host_parents(m->h, &pk);
	m->no_parent = !pk.usable;
	if (!pk.usable || !(st = ks_strategy_pick(&m->strategies, UCB_C)))
		goto cleanup;
	a = ks_mutator_host_pick_parent(m->h, &m->rng, &pk);
	if (ks_archive_get_record(m->ar, pk.elites[a].id, &parent, &source, &why) < 0 || !parent.id ||
	    !source)
		goto cleanup;
	target = target_text(m, &pk, &parent, pk.elites[a].cell);
	n_elites = other_elites(m, &pk, a, elites);
	recent = attempts_of(m, pk.elites[a].id);
	in = (struct ks_llm_mutate_input){ .target = target,
					   .strategy = ks_strategy_text(st),
					   .parent = &parent,
					   .parent_source = source,
					   .elites = elites,
					   .n_elites = n_elites,
					   .recent_attempts = recent };
	if (ks_llm_mutate_prompt(m->cfg.prompts_dir, &in, &user, err) < 0) {
		ret = -1;
		goto cleanup;
	}
	task = task_new(m, TASK_MUTATE);
	task->parent = pk.elites[a].id;
	task->strategy = st->id;
	task->user = user;
	task->base = source;
	source = NULL;
	if (send_request(m, task, NULL, &why) < 0) {
		task_free(m, task);
		goto cleanup;
	}
	ks_strategy_count(st, "uses", 1);
	if (ks_strategy_save(m->ar, st, err) < 0) {
		ret = -1;
		goto cleanup;
	}
	ks_mutator_host_log(m->h, json_pack("{s:s, s:I, s:I, s:I, s:s, s:s}", "event", "llm_request", "tag",
					    (json_int_t)task->tag, "parent", (json_int_t)task->parent,
					    "strategy", (json_int_t)st->id, "strategy_name",
					    ks_strategy_name(st), "target", target));
	ret = 0;
cleanup:
	ks_parents_release(&pk);
	ks_record_release(&parent);
	for (size_t i = 0; i < 3; i++)
		ks_record_release(&elites[i]);
	free(source);
	free(target);
	free(recent);
	return ret;
}

/* Send a repair turn for task; frees the task when none is left or it cannot go. */
static int repair(struct llm_mutator *m, struct llm_task *task, const char *verdict, const char *evidence,
		  const char *params, struct ks_error *err)
{
	char *followup = NULL;
	struct ks_error why;
	char cut[EVIDENCE_MAX + 64];

	if (task->repairs >= m->cfg.max_repairs) {
		task_free(m, task);
		return 0;
	}
	if (evidence && strlen(evidence) > EVIDENCE_MAX) {
		snprintf(cut, sizeof(cut), "%.*s\n[... cut at %d bytes]", EVIDENCE_MAX, evidence,
			 EVIDENCE_MAX);
		evidence = cut;
	}
	if (ks_llm_repair_prompt(m->cfg.prompts_dir, task->repairs + 1, m->cfg.max_repairs, verdict, evidence,
				 params, task->base, &followup, err) < 0) {
		task_free(m, task);
		return -1;
	}
	if (send_request(m, task, followup, &why) < 0) {
		ks_mutator_host_log(m->h, json_pack("{s:s, s:I, s:s}", "event", "repair_not_sent", "tag",
						    (json_int_t)task->tag, "why", why.msg));
		task_free(m, task);
	} else {
		task->repairs++;
		m->stats.repairs++;
		ks_mutator_host_log(m->h, json_pack("{s:s, s:I, s:i, s:s}", "event", "repair", "tag",
						    (json_int_t)task->tag, "turn", task->repairs, "verdict",
						    verdict));
	}
	free(followup);
	return 0;
}

/* Every rewrite_every LLM children: the most rewarding strategy with a verified child is rewritten. */
static int maybe_rewrite(struct llm_mutator *m, struct ks_error *err)
{
	struct ks_strategy *best = NULL;
	struct ks_record child;
	char *source = NULL, *user = NULL;
	struct llm_task *task;
	struct ks_error why;
	const char *operation;
	int ret = 0;

	if (!m->cfg.rewrite_every || m->rewriting || m->since_rewrite < (uint64_t)m->cfg.rewrite_every)
		return 0;
	for (size_t i = 0; i < m->strategies.n; i++) {
		struct ks_strategy *st = &m->strategies.items[i];
		json_t *stats = json_object_get(st->obj, "stats");

		if (json_is_true(json_object_get(st->obj, "active")) &&
		    json_is_integer(json_object_get(stats, "best_child")) &&
		    (!best || ks_strategy_reward(st) > ks_strategy_reward(best)))
			best = st;
	}
	if (!best)
		return 0;
	m->since_rewrite = 0;
	ks_record_init(&child);
	if (ks_archive_get_record(m->ar,
				  (uint64_t)json_integer_value(
					  json_object_get(json_object_get(best->obj, "stats"), "best_child")),
				  &child, &source, &why) < 0 ||
	    !child.id)
		goto cleanup;
	operation = ks_strategy_rewrite_names[ks_pcg32_bounded(&m->rng, KS_STRATEGY_REWRITES)];
	if (ks_llm_rewrite_prompt(m->cfg.prompts_dir, operation, best->obj, &child, source, &user, err) < 0) {
		ret = -1;
		goto cleanup;
	}
	task = task_new(m, TASK_REWRITE);
	task->strategy = best->id;
	task->operation = operation;
	task->user = user;
	if (send_request(m, task, NULL, &why) < 0) {
		task_free(m, task);
		goto cleanup;
	}
	m->rewriting = 1;
	ks_mutator_host_log(m->h, json_pack("{s:s, s:I, s:I, s:s}", "event", "rewrite_request", "tag",
					    (json_int_t)task->tag, "strategy", (json_int_t)best->id,
					    "operation", operation));
cleanup:
	ks_record_release(&child);
	free(source);
	return ret;
}

/* ---- answers ---- */

static void add_usage(struct llm_mutator *m, const struct ks_llm_response *resp, struct ks_error *err)
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
		json_object_set_new(m->usage, fields[i],
				    json_integer(json_integer_value(json_object_get(m->usage, fields[i])) +
						 (json_int_t)add[i]));
	json_object_set_new(
		m->usage, "cost_usd",
		json_real(json_number_value(json_object_get(m->usage, "cost_usd")) + resp->cost_usd));
	text = json_dumps(m->usage, JSON_COMPACT);
	ks_archive_state_put(m->ar, "llm/usage", text, strlen(text), err);
	free(text);
}

static int rewrite_answer(struct llm_mutator *m, struct llm_task *task, const struct ks_llm_response *resp,
			  struct ks_error *err)
{
	/* parent points into the population, which ks_strategy_add() may move: use it before */
	struct ks_strategy *parent = ks_strategy_find(&m->strategies, task->strategy), *added;
	uint64_t parent_id;
	struct ks_archive_metrics metrics;
	struct ks_error why;
	char *text = NULL, name[256];
	int ret = 0;

	if (!parent)
		return 0;
	if (ks_llm_strategy_extract(resp->text, &text, &why) < 0) {
		ks_mutator_host_log(m->h, json_pack("{s:s, s:I, s:s}", "event", "rewrite_error", "strategy",
						    (json_int_t)task->strategy, "why", why.msg));
		return 0;
	}
	if (ks_archive_metrics(m->ar, &metrics, err) < 0) {
		free(text);
		return -1;
	}
	snprintf(name, sizeof(name), "%.*s.%s", 200, ks_strategy_name(parent), task->operation);
	parent_id = parent->id;
	parent = NULL;
	if (ks_strategy_add(m->ar, &m->strategies, name, text, task->operation, parent_id, metrics.candidates,
			    m->cfg.population_cap, 3, &added, err) < 0) {
		ret = -1;
	} else {
		m->stats.rewrites++;
		ks_mutator_host_log(m->h, json_pack("{s:s, s:I, s:s, s:I, s:s}", "event", "strategy_rewrite",
						    "id", (json_int_t)added->id, "name", name, "parent",
						    (json_int_t)parent_id, "operation", task->operation));
	}
	free(text);
	return ret;
}

/* The "llm" field of a child's record. */
static json_t *llm_field(struct llm_mutator *m, const struct llm_task *task,
			 const struct ks_llm_response *resp, const struct ks_answer_info *info)
{
	struct ks_strategy *st = ks_strategy_find(&m->strategies, task->strategy);

	return json_pack("{s:s, s:I, s:I, s:I, s:I, s:f, s:f, s:i, s:s, s:I, s:i, s:s, s:I}", "model",
			 m->cfg.model ? m->cfg.model : "", "prompt_tokens", (json_int_t)resp->prompt_tokens,
			 "completion_tokens", (json_int_t)resp->completion_tokens, "reasoning_tokens",
			 (json_int_t)resp->reasoning_tokens, "cached_tokens",
			 (json_int_t)(resp->cached_tokens + resp->cache_write_tokens), "cost_usd",
			 resp->cost_usd, "latency_s", resp->latency_s, "attempts", resp->attempts,
			 "answer_form", ks_answer_form_name(info->form), "edits", (json_int_t)info->n_edits,
			 "repair", task->repairs, "strategy", st ? ks_strategy_name(st) : "", "tag",
			 (json_int_t)task->tag);
}

static int answer_error(struct llm_mutator *m, struct llm_task *task, const char *reason,
			struct ks_error *err)
{
	struct ks_strategy *st = ks_strategy_find(&m->strategies, task->strategy);

	m->stats.answer_errors++;
	m->barren++;
	if (++m->error_streak >= STREAK_FREE) {
		double wait = ldexp(1.0, (int)(m->error_streak < 20 ? m->error_streak - STREAK_FREE : 20));

		m->ask_after = ks_now_s() + (wait < BACKOFF_MAX_S ? wait : BACKOFF_MAX_S);
	}
	if (st) {
		ks_strategy_answer_error(st, reason);
		if (ks_strategy_save(m->ar, st, err) < 0)
			return -1;
	}
	remember_attempt(m, task->parent, "an answer that could not be used: %s", reason);
	ks_mutator_host_log(m->h, json_pack("{s:s, s:I, s:I, s:i, s:s}", "event", "answer_error", "tag",
					    (json_int_t)task->tag, "strategy", (json_int_t)task->strategy,
					    "repair", task->repairs, "why", reason));
	return repair(m, task, "answer_error", reason, "(not evaluated)", err);
}

/*
 * An answer that stopped at the budget is never used, even when it parses:
 * the model meant more (more edits, the rest of a file).  Asking again can
 * only help when the answer itself ran long: the repair turn asks for short
 * edits instead.  When the budget went to reasoning (nothing of the answer
 * came), the same question spends it the same way, so the conversation
 * ends; only a larger --max-tokens helps.
 */
static int cut_off_answer(struct llm_mutator *m, struct llm_task *task, const struct ks_llm_response *resp,
			  struct ks_error *err)
{
	struct ks_strategy *st = ks_strategy_find(&m->strategies, task->strategy);
	char reason[200], evidence[600];
	int in_reasoning = !resp->text || !*resp->text;

	snprintf(reason, sizeof(reason), "cut off at %llu tokens: raise --max-tokens%s",
		 (unsigned long long)resp->completion_tokens,
		 in_reasoning ? " (it was still reasoning)" : "");
	m->stats.answer_errors++;
	m->stats.cut_off++;
	m->barren++;
	if (++m->error_streak >= STREAK_FREE) {
		double wait = ldexp(1.0, (int)(m->error_streak < 20 ? m->error_streak - STREAK_FREE : 20));

		m->ask_after = ks_now_s() + (wait < BACKOFF_MAX_S ? wait : BACKOFF_MAX_S);
	}
	if (st) {
		ks_strategy_answer_error(st, reason);
		ks_strategy_count(st, "cut_off", 1);
		if (ks_strategy_save(m->ar, st, err) < 0)
			return -1;
	}
	remember_attempt(m, task->parent, "an answer that could not be used: %s", reason);
	ks_mutator_host_log(m->h, json_pack("{s:s, s:I, s:I, s:i, s:s, s:b, s:b}", "event", "answer_error",
					    "tag", (json_int_t)task->tag, "strategy",
					    (json_int_t)task->strategy, "repair", task->repairs, "why",
					    reason, "cut_off", 1, "in_reasoning", in_reasoning));
	if (in_reasoning) {
		task_free(m, task);
		return 0;
	}
	free(task->answer);
	task->answer = ks_strdup(resp->text);
	snprintf(evidence, sizeof(evidence),
		 "Your answer was cut off at %llu tokens, the answer budget, before it was complete, so none "
		 "of it was used. Answer within the budget: send SEARCH/REPLACE edits of only the lines that "
		 "change, not the whole file, and keep the explanation to a sentence.",
		 (unsigned long long)resp->completion_tokens);
	return repair(m, task, "cut_off", evidence, "(not evaluated)", err);
}

static int mutate_answer(struct llm_mutator *m, struct llm_task *task, const struct ks_llm_response *resp,
			 struct ks_error *err)
{
	struct ks_answer_info info;
	struct ks_error why;
	char *source = NULL;
	size_t fam = 0;
	int is_new = 0, ret;
	struct ks_proposal p = { 0 };
	struct ks_strategy *st = ks_strategy_find(&m->strategies, task->strategy);
	const struct ks_family *f;

	free(task->answer);
	task->answer = ks_strdup(resp->text);
	ks_error_clear(&why);
	if (ks_answer_extract(resp->text, task->base, &source, &info, &why) < 0)
		return answer_error(m, task, why.msg, err);
	if (info.unchanged) {
		free(source);
		return answer_error(m, task, "the answer leaves the source exactly as it was", err);
	}
	ret = ks_mutator_host_add_family(m->h, "llm", source, task->strategy, task->parent, &fam, &is_new,
					 err);
	free(source);
	if (ret < 0)
		return -1;
	f = ks_mutator_host_family(m->h, fam);
	ks_params_first(&f->cand, p.params);
	if (!is_new && ks_mutator_host_seen(m->h, fam, p.params)) {
		char reason[160];

		snprintf(reason, sizeof(reason), "the answer is a kernel evaluated already (family %s)",
			 f->name);
		return answer_error(m, task, reason, err);
	}
	m->error_streak = 0;
	m->barren = 0;
	m->ask_after = 0;
	if (st) {
		ks_strategy_count(st, "answers", 1);
		if (ks_strategy_save(m->ar, st, err) < 0)
			return -1;
	}
	free(task->base);
	task->base = ks_strdup(f->cand.source);
	p.family = fam;
	p.parents[0] = task->parent;
	p.n_parents = task->parent ? 1 : 0;
	p.strategy = task->strategy;
	p.tag = task->tag;
	p.llm = llm_field(m, task, resp, &info);
	snprintf(p.mutation, sizeof(p.mutation), "%s", task->repairs ? "repair" : "llm");
	pending_push(&m->children, &p);
	ks_mutator_host_wake(m->h);
	ks_mutator_host_log(m->h, json_pack("{s:s, s:I, s:s, s:s, s:I, s:b, s:s?}", "event", "llm_child",
					    "tag", (json_int_t)task->tag, "family", f->name, "form",
					    ks_answer_form_name(info.form), "edits", (json_int_t)info.n_edits,
					    "new", is_new, "broken", f->broken));
	return 0;
}

static int handle(struct llm_mutator *m, const struct ks_llm_response *resp, struct ks_error *err)
{
	struct llm_task *task = task_find(m, resp->tag);

	add_usage(m, resp, err);
	if (!task)
		return 0;
	task->asking = 0;
	m->asking--;
	if (!resp->ok) {
		m->stats.failed++;
		if (task->kind == TASK_MUTATE)
			m->barren++;
		ks_mutator_host_log(m->h, json_pack("{s:s, s:I, s:I, s:i, s:s}", "event", "llm_error", "tag",
						    (json_int_t)task->tag, "http_status",
						    (json_int_t)resp->http_status, "attempts", resp->attempts,
						    "error", resp->error ? resp->error : "?"));
		task_free(m, task);
		return 0;
	}
	m->stats.requests++;
	ks_mutator_host_log(
		m->h,
		json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:i, s:s?, s:s?, s:b}", "event", "llm_answer",
			  "tag", (json_int_t)task->tag, "prompt_tokens", (json_int_t)resp->prompt_tokens,
			  "completion_tokens", (json_int_t)resp->completion_tokens, "reasoning_tokens",
			  (json_int_t)resp->reasoning_tokens, "cached_tokens",
			  (json_int_t)(resp->cached_tokens + resp->cache_write_tokens), "latency_s",
			  resp->latency_s, "attempts", resp->attempts, "stop_reason", resp->stop_reason,
			  "reasoning", resp->reasoning, "cut_off", resp->cut_off));
	if (task->kind == TASK_REWRITE) {
		int ret = 0;

		if (resp->cut_off) {
			m->stats.cut_off++;
			ks_mutator_host_log(m->h,
					    json_pack("{s:s, s:I, s:s}", "event", "rewrite_error", "strategy",
						      (json_int_t)task->strategy, "why",
						      "cut off at the answer budget: raise --max-tokens"));
		} else {
			ret = rewrite_answer(m, task, resp, err);
		}
		task_free(m, task);
		return ret;
	}
	if (resp->cut_off)
		return cut_off_answer(m, task, resp, err);
	return mutate_answer(m, task, resp, err);
}

/* ---- what the search calls (mutator.h) ---- */

static int llm_start(void *ctx, struct ks_mutator_host *h, struct ks_error *err)
{
	struct llm_mutator *m = ctx;
	void *data = NULL;
	size_t size = 0;

	m->h = h;
	m->ar = ks_mutator_host_archive(h);
	memset(&m->stats, 0, sizeof(m->stats));
	ks_pcg32_seed(&m->rng, ks_mutator_host_seed(h), 0x6c6c6d2d6d7574ull);
	if (ks_strategies_load(m->ar, m->cfg.prompts_dir, &m->strategies, err) < 0)
		return -1;
	if (ks_archive_state_get(m->ar, "llm/usage", &data, &size, err) < 0)
		return -1;
	m->usage = data ? json_loadb(data, size, 0, NULL) : NULL;
	free(data);
	if (!json_is_object(m->usage)) {
		json_decref(m->usage);
		m->usage = json_object();
	}
	return 0;
}

/* Everything the run held; the settings and statistics stay. */
static void llm_stop(void *ctx, struct ks_mutator_host *h)
{
	struct llm_mutator *m = ctx;

	(void)h;
	while (m->tasks)
		task_free(m, m->tasks);
	pending_release(&m->children);
	pending_release(&m->tunes);
	ks_strategies_release(&m->strategies);
	json_decref(m->usage);
	m->usage = NULL;
	free(m->tuned);
	m->tuned = NULL;
	m->n_tuned = m->alloc_tuned = 0;
	m->next_tag = m->asking = m->since_rewrite = m->n_attempts = 0;
	m->rewriting = m->pause_reported = m->no_parent = 0;
	m->error_streak = 0;
	m->barren = 0;
	m->ask_after = 0;
	m->h = NULL;
	m->ar = NULL;
}

/* Hand back answers (waiting up to timeout_ms for one) and send new requests unless stopping. */
static int llm_step(void *ctx, struct ks_mutator_host *h, int timeout_ms, int stopping, struct ks_error *err)
{
	struct llm_mutator *m = ctx;
	struct ks_error why;

	(void)h;
	for (;;) {
		struct ks_llm_response resp;
		int got = 0, ret;
		char *notice;

		if (ks_llm_poll(m->cfg.client, timeout_ms, &resp, &got, err) < 0)
			return -1;
		/* how the client adapted to the endpoint: said once, in the log and the output */
		while ((notice = ks_llm_take_notice(m->cfg.client))) {
			ks_mutator_host_say(m->h, "LLM: %s", notice);
			ks_mutator_host_log(
				m->h, json_pack("{s:s, s:s}", "event", "llm_adapted", "notice", notice));
			free(notice);
		}
		if (!got)
			break;
		timeout_ms = 0;
		ret = handle(m, &resp, err);
		ks_llm_response_release(&resp);
		if (ret < 0)
			return -1;
	}
	if (stopping)
		return 0;
	if (ks_llm_available(m->cfg.client, &why) < 0) {
		if (!m->pause_reported) {
			ks_mutator_host_say(m->h, "LLM: %s; the built-in mutator carries on", why.msg);
			ks_mutator_host_log(
				m->h, json_pack("{s:s, s:s}", "event", "llm_unavailable", "why", why.msg));
		}
		m->pause_reported = 1;
		return 0;
	}
	m->pause_reported = 0;
	if (maybe_rewrite(m, err) < 0)
		return -1;
	while (m->asking < (size_t)m->cfg.concurrency && m->children.count < ks_mutator_host_depth(m->h) &&
	       ks_now_s() >= m->ask_after) {
		int rc = ask(m, err);

		if (rc < 0)
			return -1;
		if (rc > 0)
			break;
	}
	return 0;
}

static int llm_busy(void *ctx)
{
	struct llm_mutator *m = ctx;

	return ks_llm_pending(m->cfg.client);
}

/*
 * Whether the LLM side may still bring proposals (so an exhausted
 * built-in mutator must wait): not after give_up_after barren replies in
 * a row, whatever is still out.
 */
static int llm_may_produce(void *ctx, struct ks_mutator_host *h)
{
	struct llm_mutator *m = ctx;
	struct ks_error why;

	if (m->children.count || m->tunes.count)
		return 1;
	if (m->barren >= (unsigned)m->cfg.give_up_after) {
		if (!m->stats.gave_up) {
			m->stats.gave_up = (int)m->barren;
			ks_mutator_host_say(
				h,
				"LLM: its last %u replies brought nothing usable (no code, edits "
				"that do not apply, kernels tried already, cut-off answers or "
				"failed requests), and nothing else is left to propose: the search "
				"ends (`ksearch archive prompts` shows how each strategy fared)",
				m->barren);
			ks_mutator_host_log(h, json_pack("{s:s, s:I, s:I}", "event", "llm_gave_up", "replies",
							 (json_int_t)m->barren, "answer_errors",
							 (json_int_t)m->stats.answer_errors));
		}
		return 0;
	}
	if (m->asking || m->tasks)
		return 1;
	if (ks_llm_paused(m->cfg.client) || ks_now_s() < m->ask_after)
		return 1;
	return ks_llm_available(m->cfg.client, &why) == 0 && !m->no_parent;
}

/* The first waiting proposal not evaluated yet; 0 when none. */
static int take_pending(struct llm_mutator *m, struct pending_queue *q, struct ks_proposal *p)
{
	while (pending_pop(q, p)) {
		if (!ks_mutator_host_seen(m->h, p->family, p->params))
			return 1;
		/* a twin of this kernel got there first: its conversation ends here */
		if (p->tag) {
			struct llm_task *task = task_find(m, p->tag);

			if (task)
				task_free(m, task);
		}
		json_decref(p->llm);
	}
	memset(p, 0, sizeof(*p));
	return 0;
}

/* A child of an answer first, then a tuner variant of a new kernel. */
static int llm_propose(void *ctx, struct ks_mutator_host *h, struct ks_proposal *p, struct ks_error *err)
{
	struct llm_mutator *m = ctx;

	(void)h;
	(void)err;
	return take_pending(m, &m->children, p) || take_pending(m, &m->tunes, p) ? 0 : 1;
}

/* Queue up to tune_budget unevaluated param combinations of a new kernel: neighbours first. */
static void tune(struct llm_mutator *m, size_t fam, const int64_t *first, uint64_t child)
{
	const struct ks_family *f = ks_mutator_host_family(m->h, fam);
	size_t queued = 0, count = ks_params_count(&f->cand);
	struct ks_proposal p = { 0 };

	KS_ALLOC_GROW(m->tuned, m->n_tuned + 1, m->alloc_tuned);
	m->tuned[m->n_tuned++] = fam;
	p.family = fam;
	p.parents[0] = child;
	p.n_parents = child ? 1 : 0;
	p.strategy = f->strategy;
	snprintf(p.mutation, sizeof(p.mutation), "tune");
	for (size_t k = 0; k < f->cand.n_params && queued < (size_t)m->cfg.tune_budget; k++) {
		const struct ks_param *param = &f->cand.params[k];

		for (size_t v = 0; v < param->n_values && queued < (size_t)m->cfg.tune_budget; v++) {
			memcpy(p.params, first, sizeof(p.params));
			if (param->values[v] == first[k])
				continue;
			p.params[k] = param->values[v];
			pending_push(&m->tunes, &p);
			queued++;
		}
	}
	if (count == SIZE_MAX || count > 1000000)
		count = 1000000;
	for (size_t tries = 0; queued < (size_t)m->cfg.tune_budget && tries < 4 * (size_t)m->cfg.tune_budget;
	     tries++) {
		ks_params_nth(&f->cand, ks_pcg32_bounded(&m->rng, (uint32_t)count), p.params);
		if (!ks_mutator_host_seen(m->h, fam, p.params)) {
			pending_push(&m->tunes, &p);
			queued++;
		}
	}
	ks_mutator_host_wake(m->h);
}

/* A result of an LLM-made kernel was inserted: statistics, repair, tuning. */
static int llm_told(void *ctx, struct ks_mutator_host *h, const struct ks_proposal *p,
		    const struct ks_result *result, const struct ks_archive_insert_result *res,
		    struct ks_error *err)
{
	struct llm_mutator *m = ctx;
	const struct ks_family *f = ks_mutator_host_family(h, p->family);
	const char *verdict = ks_verdict_name(result->verdict);
	int ok = result->verdict == KS_VERDICT_OK;
	int improved = res->outcome == KS_ARCHIVE_NEW_CELL || res->outcome == KS_ARCHIVE_IMPROVED;
	double fitness = result->fitness;
	int from_llm = !strcmp(p->mutation, "llm") || !strcmp(p->mutation, "repair");
	struct ks_strategy *st = p->strategy ? ks_strategy_find(&m->strategies, p->strategy) : NULL;
	struct llm_task *task = p->tag ? task_find(m, p->tag) : NULL;

	if (st && (from_llm || !strcmp(p->mutation, "tune"))) {
		ks_strategy_child(st, res->id, ok, improved, fitness);
		if (save_strategy(m, st->id, err) < 0)
			return -1;
	}
	if (!strcmp(p->mutation, "tune"))
		m->stats.tuned++;
	if (!from_llm)
		return 0;
	m->stats.children++;
	m->stats.ok += ok;
	m->since_rewrite++;
	if (ok)
		remember_attempt(m, p->parents[0], "candidate %llu (%s): ok, fitness %.3f%s",
				 (unsigned long long)res->id, f->name, fitness,
				 improved ? ", a new elite" : ", not better than its cell's elite");
	else
		remember_attempt(m, p->parents[0], "candidate %llu (%s): %s: %.120s",
				 (unsigned long long)res->id, f->name, verdict, result->evidence);
	if (ok && !was_tuned(m, p->family) && m->cfg.tune_budget > 0)
		tune(m, p->family, p->params, res->id);
	if (!task)
		return 0;
	if (ok) {
		task_free(m, task);
		return 0;
	}
	{
		char params[512];

		ks_params_format(&f->cand, p->params, params, sizeof(params));
		task->parent = res->id;
		return repair(m, task, verdict, result->evidence, params, err);
	}
}

static void llm_status(void *ctx, char *buf, size_t size)
{
	struct llm_mutator *m = ctx;
	struct ks_llm_usage u;

	ks_llm_usage(m->cfg.client, &u);
	snprintf(buf, size, "  LLM %llu answers, %llu kernels (%llu ok), %llu tok%s%s%s",
		 (unsigned long long)u.succeeded, (unsigned long long)m->stats.children,
		 (unsigned long long)m->stats.ok, (unsigned long long)(u.prompt_tokens + u.completion_tokens),
		 u.cut_off ? ", some cut off (--max-tokens)" : "",
		 ks_llm_paused(m->cfg.client) ? ", paused" : "",
		 u.tokens_exhausted || u.usd_exhausted ? ", budget spent" : "");
}

static void llm_summary(void *ctx, FILE *out)
{
	const struct ks_llm_mutator_stats *st = &((struct llm_mutator *)ctx)->stats;

	if (st->requests || st->failed)
		fprintf(out,
			"LLM: %llu answers (%llu requests failed), %llu kernels evaluated from them (%llu "
			"verified), "
			"%llu unusable answers, %llu repair turns, %llu tuned variants, %llu strategies "
			"rewritten\n",
			(unsigned long long)st->requests, (unsigned long long)st->failed,
			(unsigned long long)st->children, (unsigned long long)st->ok,
			(unsigned long long)st->answer_errors, (unsigned long long)st->repairs,
			(unsigned long long)st->tuned, (unsigned long long)st->rewrites);
	if (st->cut_off)
		fprintf(out,
			"LLM: %llu answer%s cut off at the answer budget and not used: raise --max-tokens "
			"(reasoning counts against it)\n",
			(unsigned long long)st->cut_off, st->cut_off == 1 ? " was" : "s were");
	if (st->gave_up)
		fprintf(out,
			"LLM: the search ended because its last %d replies brought nothing usable; `ksearch "
			"archive prompts` shows what each strategy got back\n",
			st->gave_up);
}

static void llm_free(void *ctx)
{
	struct llm_mutator *m = ctx;

	if (m->h)
		llm_stop(m, m->h);
	free(m);
}

static const char *const mutations[] = { "llm", "repair", "tune", NULL };

struct ks_mutator *ks_llm_mutator_new(const struct ks_llm_mutator_config *cfg)
{
	struct llm_mutator *m = ks_calloc(1, sizeof(*m));

	m->cfg = *cfg;
	if (m->cfg.give_up_after <= 0)
		m->cfg.give_up_after = GIVE_UP_AFTER;
	m->iface = (struct ks_mutator){
		.name = "llm",
		.mutations = mutations,
		.ctx = m,
		.start = llm_start,
		.propose = llm_propose,
		.told = llm_told,
		.step = llm_step,
		.busy = llm_busy,
		.may_produce = llm_may_produce,
		.status = llm_status,
		.summary = llm_summary,
		.stop = llm_stop,
		.free = llm_free,
	};
	return &m->iface;
}

void ks_llm_mutator_stats(const struct ks_mutator *mutator, struct ks_llm_mutator_stats *stats)
{
	const struct llm_mutator *m = mutator->ctx;

	*stats = m->stats;
}

/* when an endpoint is configured: its kernels are asked for first */
const struct ks_mutator *ks_mutator_make_llm(const struct ks_mutator_settings *settings)
{
	return settings->llm ? ks_llm_mutator_new(settings->llm) : NULL;
}
