/*
 * map.h - a hash map from byte-string keys to 64-bit values: the one
 * table ksearch looks things up in (the search's binaries by fingerprint,
 * the GPU fill's drawn pages).
 *
 * Keys are any bytes of any length (a string without its NUL, a SHA-256,
 * an integer's bytes) and are copied into the map; a value is a uint64_t
 * the caller gives its meaning (an index into an array of its own, an
 * id).  Open addressing with linear probing over at least twice as many
 * slots as entries, so a lookup is a few probes whatever was inserted;
 * entries keep their insertion order (ks_map_key()/ks_map_value() by
 * index).  There is no deletion: no user needs one.
 *
 * Not thread-safe: a caller that shares a map holds its own lock.
 */
#ifndef KSEARCH_MAP_H
#define KSEARCH_MAP_H

#include <stddef.h>
#include <stdint.h>

struct ks_map {
	struct ks_map_entry {
		uint64_t hash;
		size_t key_at, key_len; /* in keys */
		uint64_t value;
	} * entries;	 /* in insertion order */
	size_t n, alloc; /* entries */
	char *keys;	 /* every key's bytes, one after the other */
	size_t keys_len, keys_alloc;
	uint32_t *slots; /* entry index + 1; 0: empty */
	size_t n_slots;	 /* 0, or a power of two at least 2 * n */
};

#define KS_MAP_INIT                                                                                          \
	{                                                                                                    \
		NULL, 0, 0, NULL, 0, 0, NULL, 0                                                              \
	}

/* An empty map; allocates nothing (KS_MAP_INIT does the same). */
void ks_map_init(struct ks_map *map);
/* Frees what the map holds and leaves it empty, ready for use again. */
void ks_map_release(struct ks_map *map);

/*
 * The value of key[0, len), or NULL when the map has no such key.  The
 * pointer is valid until the next ks_map_put() or ks_map_release().
 */
uint64_t *ks_map_get(const struct ks_map *map, const void *key, size_t len);
/*
 * The value of key[0, len): the one there (*added 0), or a new entry with
 * value 0 (*added 1; added may be NULL).  Valid as ks_map_get()'s.  Aborts
 * on running out of memory, as ks_malloc() does, or past UINT32_MAX - 1
 * entries.
 */
uint64_t *ks_map_put(struct ks_map *map, const void *key, size_t len, int *added);

/* The hash a key is placed by (its home slot is its low bits). */
uint64_t ks_map_hash(const void *key, size_t len);

/* The number of entries. */
static inline size_t ks_map_count(const struct ks_map *map)
{
	return map->n;
}
/* The index-th entry's key (index < ks_map_count()), valid as ks_map_get()'s; *len its length. */
const void *ks_map_key(const struct ks_map *map, size_t index, size_t *len);
/* The index-th entry's value, valid as ks_map_get()'s. */
uint64_t *ks_map_value(const struct ks_map *map, size_t index);

#endif
