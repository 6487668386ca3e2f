#include "ksearch/base/random.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

void ks_os_random(void *buf, size_t size)
{
	size_t got = 0;

	while (got < size) {
		ssize_t n = getrandom((char *)buf + got, size - got, 0);

		if (n > 0) {
			got += (size_t)n;
		} else if (n < 0 && errno != EINTR) {
			/*
			 * No weaker fallback: a secret a kernel could guess (a clock, a
			 * pid) would forge a verification.  getrandom exists since Linux 3.17.
			 */
			fprintf(stderr, "ksearch: the kernel's random source failed (getrandom: %s)\n",
				strerror(errno));
			abort();
		}
	}
}

uint64_t ks_os_random64(void)
{
	uint64_t value;

	ks_os_random(&value, sizeof(value));
	return value;
}
