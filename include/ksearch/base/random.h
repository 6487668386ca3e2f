/*
 * random.h - secrets from the operating system's CSPRNG (getrandom).
 *
 * Every secret the evaluator keeps from a candidate (job tokens, checksum
 * keys, guard contents, the draws that pick verified runs, input and
 * structure seeds) is its own draw from here, so that learning one tells
 * nothing about another (docs/design.md, "Secrets").
 */
#ifndef KSEARCH_RANDOM_H
#define KSEARCH_RANDOM_H

#include <stddef.h>
#include <stdint.h>

/* Fill buf with size bytes from getrandom(2); aborts with a message if the kernel cannot give them. */
void ks_os_random(void *buf, size_t size);

/* One 64-bit draw of ks_os_random(). */
uint64_t ks_os_random64(void);

#endif
