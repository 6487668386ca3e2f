/*
 * verdict.h - the one word every evaluated candidate ends with.
 *
 * Each verdict carries its evidence elsewhere (a compile log, a mismatch,
 * a CUDA error string); this header only names them, in the order a
 * candidate meets the stages that can fail it.
 */
#ifndef KSEARCH_VERDICT_H
#define KSEARCH_VERDICT_H

enum ks_verdict {
	KS_VERDICT_OK,
	KS_VERDICT_COMPILE_ERROR,  /* NVRTC refused the source */
	KS_VERDICT_CONTRACT_ERROR, /* the ksearch block or launch plan breaks the contract */
	KS_VERDICT_REFUSED,	   /* static checks: mutable globals, impossible resources */
	KS_VERDICT_WRONG,	   /* outputs differ from the reference */
	KS_VERDICT_CRASH,	   /* a CUDA error */
	KS_VERDICT_TIMEOUT,	   /* ran past its deadline */
	KS_VERDICT_IMPLAUSIBLE,	   /* faster than the speed of light */
	KS_VERDICT_COUNT
};

const char *ks_verdict_name(enum ks_verdict verdict);
/* Returns -1 for an unknown name. */
int ks_verdict_parse(const char *name, enum ks_verdict *out);

#endif
