#include "ksearch/base/hash.h"

#define FNV_PRIME 0x100000001b3ull /* 1099511628211 */

uint64_t ks_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t ks_mix64_pair(uint64_t a, uint64_t b)
{
	return ks_mix64(a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2)));
}

uint64_t ks_fnv1a_from(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * FNV_PRIME;
	return h;
}

uint64_t ks_fnv1a(const void *data, size_t len)
{
	return ks_fnv1a_from(KS_FNV1A_BASIS, data, len);
}
