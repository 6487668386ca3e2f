/*
 * sha256.c - SHA-256 through libcrypto, and hex.
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/sha256.h"

void ks_sha256(const void *data, size_t len, unsigned char out[KS_SHA256_LEN])
{
	unsigned int n = 0;

	/* EVP_Digest with SHA-256 only fails when out of memory */
	if (!EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) || n != KS_SHA256_LEN) {
		fprintf(stderr, "ksearch: SHA-256 failed (libcrypto)\n");
		abort();
	}
}

void ks_hex(const unsigned char *bytes, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[bytes[i] >> 4];
		out[2 * i + 1] = digits[bytes[i] & 15];
	}
	out[2 * n] = '\0';
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int ks_unhex_sha256(const char *text, unsigned char out[KS_SHA256_LEN])
{
	if (!text || strlen(text) != KS_SHA256_HEX_LEN)
		return -1;
	for (size_t i = 0; i < KS_SHA256_LEN; i++) {
		int hi = hex_digit(text[2 * i]), lo = hex_digit(text[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}
