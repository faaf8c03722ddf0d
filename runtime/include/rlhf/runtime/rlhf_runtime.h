/*===- rlhf_runtime.h - the C ABI of the rlhf runtime ------------*- C -*-===//
 *
 * The small, stable interface compiled programs call. Every function that can
 * fail returns 0 (or NULL) on failure and leaves a message, naming the rank,
 * in rlhf_last_error(). Collective functions (marked) must be called by every
 * rank in the same order.
 *
 *===----------------------------------------------------------------------===*/

#ifndef RLHF_RUNTIME_C_H
#define RLHF_RUNTIME_C_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RLHF_ABI_VERSION 1

typedef struct rlhf_ctx rlhf_ctx;
typedef struct rlhf_model rlhf_model;

typedef struct {
  int64_t layers, hidden, heads, kv_heads, ffn, vocab, max_seq;
  int32_t value_head, tie_embeddings;
} rlhf_arch;

typedef struct {
  int64_t first_gpu, dp, tp, pp;
} rlhf_layout;

int rlhf_abi_version(void);
const char *rlhf_last_error(void);

/* Joins the job from MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE (collective). */
rlhf_ctx *rlhf_init(void);
int rlhf_rank(const rlhf_ctx *ctx);
int rlhf_world_size(const rlhf_ctx *ctx);
int rlhf_barrier(rlhf_ctx *ctx); /* collective */
void rlhf_finalize(rlhf_ctx *ctx);

/* A model laid out as `layout`, with random weights from `seed`, or the
 * weights of `safetensors_path` when it is not NULL (collective). */
rlhf_model *rlhf_model_create(rlhf_ctx *ctx, const rlhf_arch *arch,
                              const rlhf_layout *layout, uint64_t seed,
                              const char *safetensors_path);
/* Moves the model's parameters to another layout (collective). */
int rlhf_model_realloc(rlhf_model *model, const rlhf_layout *to);
/* Parameters this rank holds, and their sum (a cheap fingerprint). */
int64_t rlhf_model_local_params(const rlhf_model *model);
double rlhf_model_checksum(rlhf_model *model); /* collective */
void rlhf_model_destroy(rlhf_model *model);

#ifdef __cplusplus
}
#endif

#endif /* RLHF_RUNTIME_C_H */
