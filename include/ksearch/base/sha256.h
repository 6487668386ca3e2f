/*
 * sha256.h - SHA-256 (libcrypto) and hex: the archive's content keys and
 * a build's binary fingerprint.
 */
#ifndef KSEARCH_SHA256_H
#define KSEARCH_SHA256_H

#include <stddef.h>

#define KS_SHA256_LEN 32
#define KS_SHA256_HEX_LEN 64

void ks_sha256(const void *data, size_t len, unsigned char out[KS_SHA256_LEN]);
void ks_hex(const unsigned char *bytes, size_t n, char *out); /* out: 2n + 1 */
/* 64 hex digits -> 32 bytes; -1 when text is not that. */
int ks_unhex_sha256(const char *text, unsigned char out[KS_SHA256_LEN]);

#endif
