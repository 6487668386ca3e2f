/*
 * strategy.c - strategy prompts in the archive: seeding, the bandit,
 * statistics and rewrites (see strategy.h).
 */
#include "ksearch/llm/strategy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/llm/prompt.h"
#include "ksearch/base/util.h"

const char *const ks_strategy_rewrite_names[KS_STRATEGY_REWRITES] = { "improve", "specialise", "generalise",
								      "simplify" };

static const char *const stat_names[] = { "uses",     "answers", "answer_errors", "cut_off",
					  "children", "ok",	 "improvements" };

static json_t *new_stats(void)
{
	json_t *stats = json_object();

	for (size_t i = 0; i < sizeof(stat_names) / sizeof(stat_names[0]); i++)
		json_object_set_new(stats, stat_names[i], json_integer(0));
	json_object_set_new(stats, "best_fitness", json_real(0));
	json_object_set_new(stats, "best_child", json_null());
	json_object_set_new(stats, "last_error", json_null());
	return stats;
}

static json_t *stats_of(const struct ks_strategy *s)
{
	json_t *stats = json_object_get(s->obj, "stats");

	if (!json_is_object(stats)) {
		stats = new_stats();
		json_object_set_new(s->obj, "stats", stats);
	}
	return stats;
}

static int64_t stat(const struct ks_strategy *s, const char *name)
{
	return json_integer_value(json_object_get(json_object_get(s->obj, "stats"), name));
}

static int is_active(const struct ks_strategy *s)
{
	return json_is_true(json_object_get(s->obj, "active"));
}

static void push(struct ks_strategies *pop, json_t *obj)
{
	uint64_t id = (uint64_t)json_integer_value(json_object_get(obj, "id"));

	KS_ALLOC_GROW(pop->items, pop->n + 1, pop->alloc);
	pop->items[pop->n++] = (struct ks_strategy){ .id = id, .obj = obj };
	if (id >= pop->next_id)
		pop->next_id = id + 1;
}

static int seed(struct ks_archive *ar, const char *prompts_dir, struct ks_strategies *pop,
		struct ks_error *err)
{
	char **names = NULL;
	size_t n = 0;
	int ret = -1;

	if (ks_prompt_list(prompts_dir, "strategies", &names, &n, err) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char *text = NULL;
		json_t *obj;

		if (ks_prompt_load(prompts_dir, names[i], &text, err) < 0)
			goto cleanup;
		obj = json_pack("{s:I, s:s, s:s, s:s, s:n, s:i, s:b, s:o}", "id", (json_int_t)(i + 1), "name",
				ks_basename(names[i]), "text", text, "origin", "seed", "parent", "created_at",
				0, "active", 1, "stats", new_stats());
		free(text);
		if (!obj) {
			ks_fail(err, "%s/%s.md is not UTF-8 text", prompts_dir, names[i]);
			goto cleanup;
		}
		push(pop, obj);
		if (ks_strategy_save(ar, &pop->items[pop->n - 1], err) < 0)
			goto cleanup;
	}
	ret = 0;
cleanup:
	ks_prompt_list_free(names, n);
	return ret;
}

int ks_strategies_load(struct ks_archive *ar, const char *prompts_dir, struct ks_strategies *pop,
		       struct ks_error *err)
{
	json_t *all = NULL, *obj;
	size_t i;

	memset(pop, 0, sizeof(*pop));
	pop->next_id = 1;
	if (ks_archive_prompts(ar, &all, err) < 0)
		return -1;
	json_array_foreach(all, i, obj)
	{
		if (!json_is_integer(json_object_get(obj, "id")) ||
		    !json_is_string(json_object_get(obj, "text"))) {
			json_decref(all);
			ks_strategies_release(pop);
			return ks_fail(err,
				       "archive: stored prompt %zu has no id or text: the archive is damaged",
				       i);
		}
		push(pop, json_incref(obj));
	}
	json_decref(all);
	if (!pop->n && seed(ar, prompts_dir, pop, err) < 0) {
		ks_strategies_release(pop);
		return -1;
	}
	if (!pop->n)
		return ks_fail(err, "%s/strategies holds no strategy prompts", prompts_dir);
	return 0;
}

void ks_strategies_release(struct ks_strategies *pop)
{
	for (size_t i = 0; i < pop->n; i++)
		json_decref(pop->items[i].obj);
	free(pop->items);
	memset(pop, 0, sizeof(*pop));
}

struct ks_strategy *ks_strategy_find(struct ks_strategies *pop, uint64_t id)
{
	for (size_t i = 0; i < pop->n; i++)
		if (pop->items[i].id == id)
			return &pop->items[i];
	return NULL;
}

const char *ks_strategy_name(const struct ks_strategy *s)
{
	return json_string_value(json_object_get(s->obj, "name")) ?: "?";
}

const char *ks_strategy_text(const struct ks_strategy *s)
{
	return json_string_value(json_object_get(s->obj, "text")) ?: "";
}

double ks_strategy_reward(const struct ks_strategy *s)
{
	int64_t uses = stat(s, "uses");

	if (uses <= 0)
		return 0;
	return ((double)stat(s, "improvements") + 0.25 * (double)stat(s, "ok")) / (double)uses;
}

struct ks_strategy *ks_strategy_pick(struct ks_strategies *pop, double c)
{
	struct ks_strategy *best = NULL;
	double best_score = -1, total = 0;

	for (size_t i = 0; i < pop->n; i++) {
		if (!is_active(&pop->items[i]))
			continue;
		if (stat(&pop->items[i], "uses") <= 0)
			return &pop->items[i];
		total += (double)stat(&pop->items[i], "uses");
	}
	for (size_t i = 0; i < pop->n; i++) {
		struct ks_strategy *s = &pop->items[i];
		double score;

		if (!is_active(s))
			continue;
		score = ks_strategy_reward(s) + c * sqrt(log(total) / (double)stat(s, "uses"));
		if (score > best_score) {
			best_score = score;
			best = s;
		}
	}
	return best;
}

void ks_strategy_count(struct ks_strategy *s, const char *name, int64_t n)
{
	json_t *stats = stats_of(s);

	json_object_set_new(stats, name, json_integer(json_integer_value(json_object_get(stats, name)) + n));
}

void ks_strategy_child(struct ks_strategy *s, uint64_t child_id, int ok, int improved, double fitness)
{
	json_t *stats = stats_of(s);

	ks_strategy_count(s, "children", 1);
	if (ok)
		ks_strategy_count(s, "ok", 1);
	if (improved)
		ks_strategy_count(s, "improvements", 1);
	if (ok && fitness > json_number_value(json_object_get(stats, "best_fitness"))) {
		json_object_set_new(stats, "best_fitness", json_real(fitness));
		json_object_set_new(stats, "best_child", json_integer((json_int_t)child_id));
	}
}

void ks_strategy_answer_error(struct ks_strategy *s, const char *reason)
{
	ks_strategy_count(s, "answer_errors", 1);
	json_object_set_new(stats_of(s), "last_error", json_string(reason));
}

int ks_strategy_save(struct ks_archive *ar, const struct ks_strategy *s, struct ks_error *err)
{
	return ks_archive_prompt_put(ar, s->id, s->obj, err);
}

int ks_strategy_add(struct ks_archive *ar, struct ks_strategies *pop, const char *name, const char *text,
		    const char *origin, uint64_t parent, uint64_t created_at, size_t cap, uint64_t min_uses,
		    struct ks_strategy **added, struct ks_error *err)
{
	json_t *obj = json_pack("{s:I, s:s, s:s, s:s, s:I, s:I, s:b, s:o}", "id", (json_int_t)pop->next_id,
				"name", name, "text", text, "origin", origin, "parent", (json_int_t)parent,
				"created_at", (json_int_t)created_at, "active", 1, "stats", new_stats());
	uint64_t id;
	size_t active = 0;

	if (!obj)
		return ks_fail(err, "the rewritten strategy is not UTF-8 text");
	push(pop, obj);
	id = pop->items[pop->n - 1].id;
	if (ks_strategy_save(ar, &pop->items[pop->n - 1], err) < 0)
		return -1;
	for (size_t i = 0; i < pop->n; i++)
		active += is_active(&pop->items[i]);
	while (active > cap) {
		struct ks_strategy *worst = NULL;

		for (size_t i = 0; i < pop->n; i++) {
			struct ks_strategy *s = &pop->items[i];

			if (!is_active(s) || s->id == id || (uint64_t)stat(s, "uses") < min_uses)
				continue;
			if (!worst || ks_strategy_reward(s) < ks_strategy_reward(worst))
				worst = s;
		}
		if (!worst)
			break;
		json_object_set_new(worst->obj, "active", json_false());
		if (ks_strategy_save(ar, worst, err) < 0)
			return -1;
		active--;
	}
	*added = ks_strategy_find(pop, id);
	return 0;
}
