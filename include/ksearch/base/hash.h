/*
 * hash.h - the 64-bit mixers and string hash ksearch derives values from.
 *
 * Persisted and compared values come out of these (the seeds of an
 * operator's canonical structures, the profile runner's structural
 * inputs, the GPU fill's key), so their constants are fixed: a change
 * here changes what an archive measured against.  None is a
 * cryptographic hash; sha256.h is for content keys.
 */
#ifndef KSEARCH_HASH_H
#define KSEARCH_HASH_H

#include <stddef.h>
#include <stdint.h>

/* SplitMix64's finaliser: a bijection of 64-bit values, every bit mixing into every bit. */
uint64_t ks_mix64(uint64_t z);
/* a and b combined (boost's hash_combine step on the golden ratio), then ks_mix64(). */
uint64_t ks_mix64_pair(uint64_t a, uint64_t b);
/* FNV-1a's 64-bit offset basis, 14695981039346656037. */
#define KS_FNV1A_BASIS 0xcbf29ce484222325ull
/* 64-bit FNV-1a of len bytes. */
uint64_t ks_fnv1a(const void *data, size_t len);
/* FNV-1a of len more bytes, from h (a basis, or the hash of what came before). */
uint64_t ks_fnv1a_from(uint64_t h, const void *data, size_t len);

#endif
