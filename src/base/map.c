#include "ksearch/base/map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/hash.h"
#include "ksearch/base/util.h"

#define MIN_SLOTS 16

void ks_map_init(struct ks_map *map)
{
	memset(map, 0, sizeof(*map));
}

void ks_map_release(struct ks_map *map)
{
	free(map->entries);
	free(map->keys);
	free(map->slots);
	ks_map_init(map);
}

uint64_t ks_map_hash(const void *key, size_t len)
{
	/* FNV-1a's low bits follow the last bytes; the mixer spreads every byte over the mask */
	return ks_mix64(ks_fnv1a(key, len));
}

/* The slot holding key, or the empty slot where it would go; the map has slots. */
static size_t find_slot(const struct ks_map *map, const void *key, size_t len, uint64_t hash)
{
	size_t mask = map->n_slots - 1, at = (size_t)hash & mask;

	for (; map->slots[at]; at = (at + 1) & mask) {
		const struct ks_map_entry *e = &map->entries[map->slots[at] - 1];

		if (e->hash == hash && e->key_len == len &&
		    (!len || !memcmp(map->keys + e->key_at, key, len)))
			break;
	}
	return at;
}

static void grow_slots(struct ks_map *map)
{
	size_t n = map->n_slots ? 2 * map->n_slots : MIN_SLOTS;

	free(map->slots);
	map->slots = ks_calloc(n, sizeof(*map->slots));
	map->n_slots = n;
	for (size_t i = 0; i < map->n; i++) {
		size_t at = (size_t)map->entries[i].hash & (n - 1);

		while (map->slots[at])
			at = (at + 1) & (n - 1);
		map->slots[at] = (uint32_t)(i + 1);
	}
}

uint64_t *ks_map_get(const struct ks_map *map, const void *key, size_t len)
{
	size_t at;

	if (!map->n)
		return NULL;
	at = find_slot(map, key, len, ks_map_hash(key, len));
	return map->slots[at] ? &map->entries[map->slots[at] - 1].value : NULL;
}

uint64_t *ks_map_put(struct ks_map *map, const void *key, size_t len, int *added)
{
	uint64_t hash = ks_map_hash(key, len);
	struct ks_map_entry *e;
	size_t at;

	if (2 * (map->n + 1) > map->n_slots)
		grow_slots(map);
	at = find_slot(map, key, len, hash);
	if (map->slots[at]) {
		if (added)
			*added = 0;
		return &map->entries[map->slots[at] - 1].value;
	}
	if (map->n >= UINT32_MAX - 1) {
		fprintf(stderr, "ksearch: a map of more than %u entries\n", UINT32_MAX - 1);
		abort();
	}
	KS_ALLOC_GROW(map->entries, map->n + 1, map->alloc);
	KS_ALLOC_GROW(map->keys, map->keys_len + len, map->keys_alloc);
	if (len)
		memcpy(map->keys + map->keys_len, key, len);
	e = &map->entries[map->n];
	e->hash = hash;
	e->key_at = map->keys_len;
	e->key_len = len;
	e->value = 0;
	map->keys_len += len;
	map->slots[at] = (uint32_t)++map->n;
	if (added)
		*added = 1;
	return &e->value;
}

const void *ks_map_key(const struct ks_map *map, size_t index, size_t *len)
{
	*len = map->entries[index].key_len;
	return *len ? map->keys + map->entries[index].key_at : "";
}

uint64_t *ks_map_value(const struct ks_map *map, size_t index)
{
	return &map->entries[index].value;
}
