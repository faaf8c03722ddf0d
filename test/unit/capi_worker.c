/*===- capi_worker.c - the runtime's C ABI, from C ------------------------===//
 *
 * Creates a tiny model laid out data-parallel over the job, reallocates it to
 * tensor parallel and to a pipeline, and checks that the parameter checksum
 * (every element once) never changes. Prints "capi ok" on success.
 *
 *===----------------------------------------------------------------------===*/

#include "rlhf/runtime/rlhf_runtime.h"

#include <math.h>
#include <stdio.h>

int main(void) {
  rlhf_ctx *ctx = rlhf_init();
  if (!ctx) {
    fprintf(stderr, "error: %s\n", rlhf_last_error());
    return 1;
  }
  int n = rlhf_world_size(ctx);
  rlhf_arch arch = {2, 64, 4, 2, 176, 512, 64, 0, 0};
  rlhf_layout dp = {0, n, 1, 1}, tp = {0, 1, n, 1}, pp = {0, 1, 1, n};
  rlhf_model *m = rlhf_model_create(ctx, &arch, &dp, 42, NULL);
  if (!m) {
    fprintf(stderr, "error: %s\n", rlhf_last_error());
    return 1;
  }
  double before = rlhf_model_checksum(m);
  long full = (long)rlhf_model_local_params(m);
  if (!rlhf_model_realloc(m, &tp) || fabs(rlhf_model_checksum(m) - before) > 1e-9 ||
      !rlhf_model_realloc(m, &pp) || fabs(rlhf_model_checksum(m) - before) > 1e-9) {
    fprintf(stderr, "error: %s\n", rlhf_last_error());
    return 1;
  }
  long shard = (long)rlhf_model_local_params(m);
  rlhf_layout tooBig = {0, 2 * n, 1, 1};
  if (rlhf_model_realloc(m, &tooBig) || rlhf_last_error()[0] == 0) {
    fprintf(stderr, "error: an impossible layout was accepted\n");
    return 1;
  }
  printf("rank %d: capi ok (abi %d, %ld params replicated, %ld after pp, checksum %.6f)\n",
         rlhf_rank(ctx), rlhf_abi_version(), full, shard, before);
  rlhf_barrier(ctx);
  rlhf_model_destroy(m);
  rlhf_finalize(ctx);
  return 0;
}
