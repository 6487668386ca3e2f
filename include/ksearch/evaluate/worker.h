/*
 * worker.h - the GPU evaluator process ("ksearch __worker --gpu N").
 *
 * One worker per GPU, started by the coordinator (eval.h) and spoken to
 * with frames (frame.h) over its stdin and stdout.  The worker holds the
 * only CUDA context that ever runs a candidate, so a candidate that
 * crashes the context costs this process, never the search.
 *
 * Conversation:
 *   worker -> {"type": "hello", "ok": true, "profile": {...}}      (or ok false + "error")
 *   coord  -> {"type": "eval", ...job...} + blob: the candidate's cubin
 *   worker -> {"type": "deadline", "ms": N}    zero or more: "answer within N ms from now"
 *   worker -> {"type": "result", ...}          the result's JSON form (result.h)
 * after a result with verdict "crash" the worker exits (its context is
 * gone); the coordinator starts a fresh one for the next job.
 *
 * The evaluation protocol is docs/design.md's (Evaluation): the reference runs first on
 * fresh inputs from a secret seed and its device outputs are freed before
 * the candidate runs; candidate outputs and scratch are poisoned with NaN
 * bytes before every run; inputs are checksummed before and after; every
 * check workload runs on two input sets; timed runs flush the L2 first,
 * rotate input sets, and their outputs are checked again afterwards; a
 * time under the speed-of-light floor is refused as implausible.
 */
#ifndef KSEARCH_WORKER_H
#define KSEARCH_WORKER_H

/* The worker's main loop; returns the process exit code. */
int ks_worker_main(int in_fd, int out_fd, int gpu);

#endif
