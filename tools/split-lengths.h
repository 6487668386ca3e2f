// split-lengths.h - request lengths for the timing tools (tools/mla-timeline.cu,
// tools/gqa-ws-timeline.cu): n tokens over `batch` requests, evenly (longest 0) or with one
// request holding the share `longest` of them (ksearch's skewed split: 0.608 of 16 requests,
// 0.300 of 64, 0.2 of 128) and the rest split at random; every request has a token at least.
#pragma once
#include <algorithm>
#include <random>
#include <vector>

static std::vector<int> lengths(int batch, int n, double longest, std::mt19937 &g)
{
	std::vector<double> w(batch);
	std::exponential_distribution<double> ex(1.0);
	for (auto &x : w)
		x = ex(g);
	if (longest > 0) { /* request 0 holds that share, the rest split the remainder by w */
		double rest = 0;
		for (int i = 1; i < batch; i++)
			rest += w[i];
		for (int i = 1; i < batch; i++)
			w[i] *= (1 - longest) / rest;
		w[0] = longest;
	} else {
		std::fill(w.begin(), w.end(), 1.0);
	}
	double s = 0;
	for (double x : w)
		s += x;
	std::vector<int> len(batch);
	int used = 0;
	for (int i = 0; i < batch; i++) {
		len[i] = std::max(1, (int)(w[i] / s * n));
		used += len[i];
	}
	len[0] += n - used; /* the remainder to the first */
	std::shuffle(len.begin(), len.end(), g);
	return len;
}
