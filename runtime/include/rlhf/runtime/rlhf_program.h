/*===- rlhf_program.h - what compiled .rlhf programs call ---------*- C -*-===//
 *
 * The executor interface code generation targets. A generated `main` builds a
 * program from constants (models, datasets, the plan's layouts), starts it,
 * then runs `rlhf_step_begin`, the iteration's calls and `rlhf_step_end` for
 * every step. Values are opaque handles that live until the end of the step.
 *
 * Every entry point is collective: all ranks make the same calls in the same
 * order (a rank outside a call's mesh returns at once). None of them returns
 * on failure: the rank prints `rank R: error: ...` and exits with status 1,
 * which makes `rlhf-run` end the whole job.
 *
 * Layouts are int64_t[7] {first_gpu, dp, tp, pp, micro_batches, sp, ring};
 * GPU (rank) = first + ((d * sp + q) * pp + s) * tp + t for dp rank d,
 * sequence-parallel rank q, stage s and tensor rank t, as in the planner.
 * sp > 1 needs pp = 1; its ring size divides it (USP: sp / ring Ulysses
 * ranks, ring attention across rings; 1 for plain Ulysses).
 *
 *===----------------------------------------------------------------------===*/

#ifndef RLHF_PROGRAM_C_H
#define RLHF_PROGRAM_C_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rlhf_prog rlhf_prog;
typedef struct rlhf_value rlhf_value;

/* The rlhf dialect's ComputeKind for the host functions written in C++
 * (its `fn` kind runs through rlhf_apply). */
enum { RLHF_COMPUTE_EXACT_MATCH = 1, RLHF_COMPUTE_SCRIPT_REWARD = 2 };

/* arch: {layers, hidden, heads, kv_heads, ffn, vocab, max_seq, value_head,
 *        tie_embeddings, qkv_bias}; the Adam settings matter for trainable
 * models; checkpoint: a safetensors file, a Hugging Face checkpoint directory,
 * or NULL (random init from the seed). */
/* The entry points' version: programs call rlhf_prog_create_vN, so an
 * object that rlhfc compiled for other parameters fails to link (undefined
 * rlhf_prog_create_vN) instead of passing arguments the runtime misreads.
 * Bump it whenever a parameter of any entry point changes. */
#define RLHF_PROGRAM_ABI 2
#define rlhf_prog_create rlhf_prog_create_v2
#define RLHF_PROG_CREATE_SYMBOL "rlhf_prog_create_v2"
rlhf_prog *rlhf_prog_create(int argc, char **argv, const char *name,
                            int64_t steps, int64_t seed, int64_t save_interval,
                            int64_t gpus, double predicted_iteration_s);
void rlhf_prog_add_model(rlhf_prog *p, const char *name, const int64_t *arch,
                         int64_t trainable, double lr, double beta1,
                         double beta2, double eps, double weight_decay,
                         double grad_clip, const char *checkpoint,
                         const int64_t *layout);
/* The numerics of model `name` (added before): rope base, RMSNorm epsilon,
   and LLaMA-3 rope scaling (factor 0: none). */
void rlhf_prog_set_model_rope(rlhf_prog *p, const char *name, double theta,
                              double norm_eps, double factor,
                              double low_freq_factor, double high_freq_factor,
                              int64_t original_max_seq);
/* The learning-rate schedule of model `name` (added before): "constant",
   "linear" or "cosine", warming up over `warmup_steps` iterations and
   decaying to `min_lr` at iteration `decay_steps` (#rlhf.optimizer). */
void rlhf_prog_set_model_schedule(rlhf_prog *p, const char *name,
                                  const char *schedule, int64_t warmup_steps,
                                  int64_t decay_steps, double min_lr);
/* fields: comma-separated column names, e.g. "prompt,answer". */
void rlhf_prog_add_dataset(rlhf_prog *p, const char *name, const char *path,
                           int64_t batch, int64_t max_prompt_len,
                           int64_t max_response_len, const char *fields);
/* Dataset `name` (added before) renders each row's prompt from this template:
 * `{column}` placeholders filled from the row, `{{` and `}}` for braces. */
void rlhf_prog_set_dataset_template(rlhf_prog *p, const char *name,
                                    const char *tmpl);
/* A sentencepiece .model file for every model and dataset; without one the
 * program uses the datasets' character vocabulary. */
void rlhf_prog_set_tokenizer(rlhf_prog *p, const char *path);
/* The hardware the plan priced: the cluster's preset (H100_SXM, ...) or the
 * program's own `hardware` block. A run on another GPU says so. */
void rlhf_prog_set_hardware(rlhf_prog *p, const char *name);
/* The plan's predicted peak bytes on `gpu`, printed beside measured RSS. */
void rlhf_prog_set_predicted_memory(rlhf_prog *p, int64_t gpu, double bytes);
/* Held-out evaluation (#rlhf.algorithm's eval): `body(p, b)` runs the
 * iteration's scoring ops on batch b of `dataset`, read with rlhf_eval_load,
 * and reports each reward with rlhf_eval_score. The runtime runs it over
 * every row of the dataset before the first step, every `interval` steps
 * (0: never between) and after the last, and writes the means to
 * OUT/eval.jsonl as val/<label>. With `samples` k > 1 the generates draw
 * k samples of each prompt (seeded apart from training's), and each score
 * also gets val/<label>/best@k, the mean of each prompt's best.
 * `batch_seconds` is the plan's time for one batch, printed beside the
 * measured time. */
void rlhf_prog_set_eval(rlhf_prog *p, int64_t dataset, int64_t interval,
                        int64_t samples, double batch_seconds,
                        void (*body)(rlhf_prog *, int64_t));
/* Joins the job, builds the models (or resumes) and returns the first step. */
int64_t rlhf_prog_start(rlhf_prog *p);
int64_t rlhf_prog_steps(const rlhf_prog *p);
void rlhf_step_begin(rlhf_prog *p, int64_t step);
/* Metrics, progress line, checkpoint at the save interval; frees the step's
 * values. */
void rlhf_step_end(rlhf_prog *p, int64_t step);
/* The exit status of a run stopped on request (SIGUSR1: a checkpoint after
   the step in progress, then the end), as EX_TEMPFAIL: continue it with
   --resume. */
#define RLHF_EXIT_STOPPED 75
/* Prints the memory summary and leaves the job; returns main's exit status. */
int rlhf_prog_finish(rlhf_prog *p);

/* Step `step`'s `rows` rows of a dataset: a batch, or a round of dynamic
 * sampling (gen_batch), which reads on from where the last round stopped. */
rlhf_value *rlhf_load(rlhf_prog *p, int64_t dataset, int64_t step,
                      int64_t rows);
rlhf_value *rlhf_field(rlhf_prog *p, rlhf_value *record, const char *name);
/* Batch b of an eval dataset in file order: `batch` rows, a last short one
 * filled from the start (rlhf_eval_score counts only the real rows). */
rlhf_value *rlhf_eval_load(rlhf_prog *p, int64_t dataset, int64_t b);
/* Adds a score tensor's real rows to the evaluation's mean `label`. */
void rlhf_eval_score(rlhf_prog *p, rlhf_value *score, const char *label);
/* A validation loss: what rlhf_train's `loss` gives on the eval batch's real
 * rows, forward only, in the train call's layout (its micro-batches of
 * rows, `minibatches` x its micro-batch count per batch), the weights left
 * as they are. The loss and each metric join the evaluation's means as
 * loss/MODEL and NAME/MODEL, weighted by the batch's real rows. */
void rlhf_eval_loss(rlhf_prog *p, int64_t model, const char *loss, int64_t nin,
                    rlhf_value *const *inputs, const int64_t *layout,
                    int64_t minibatches, const char *settings,
                    const char *label);
void rlhf_realloc(rlhf_prog *p, int64_t model, const int64_t *from,
                  const int64_t *to);
rlhf_value *rlhf_transfer(rlhf_prog *p, rlhf_value *v, const int64_t *to);
/* A frozen model whose weights rest in host memory: rlhf_offload keeps a host
 * copy of each rank's shard (made once; pinned for GPU tensors) and frees the
 * working copy; rlhf_onload copies the shard back. Onloading a resident
 * model does nothing. */
void rlhf_offload(rlhf_prog *p, int64_t model, const int64_t *layout);
void rlhf_onload(rlhf_prog *p, int64_t model, const int64_t *layout);
rlhf_value *rlhf_generate(rlhf_prog *p, int64_t model, rlhf_value *prompt,
                          const int64_t *layout, int64_t max_new_tokens,
                          int64_t n, double temperature, double top_p,
                          int64_t greedy, const char *label);
/* Asynchronous generation (staleness k > 0, runtime/lib/ProgramAsync.cpp):
 * rlhf_generate_stale returns the samples of iteration `step` for the
 * prompts of `field` of `dataset`, made by the model's generator in its own
 * layout, ahead of time with weights at most k versions old. After the
 * model's last train call, rlhf_weight_update lets the generator sample the
 * next k iterations with the weights it has, then copies the trainer's new
 * weights (layout `from`) into it (layout `to`). */
rlhf_value *rlhf_generate_stale(rlhf_prog *p, int64_t model, int64_t dataset,
                                const char *field, int64_t step,
                                const int64_t *layout, int64_t max_new_tokens,
                                int64_t n, double temperature, double top_p,
                                int64_t greedy, int64_t staleness,
                                const char *label);
void rlhf_weight_update(rlhf_prog *p, int64_t model, const int64_t *from,
                        const int64_t *to, int64_t lag);
/* temperature: that of the generate whose sequences `seq` holds (1 for
 * greedy ones and for data): log-probs of the distribution it sampled. */
rlhf_value *rlhf_inference(rlhf_prog *p, int64_t model, rlhf_value *seq,
                           const int64_t *layout, double temperature,
                           const char *label);
/* settings: "key=value,..." of numbers, or key="text" with '%', ',', '"'
 * and control bytes written %XX. RLHF_COMPUTE_SCRIPT_REWARD reads command,
 * cwd, workers, timeout and an optional default; rank 0 runs the worker
 * pool (rlhf/runtime/ExternalReward.h) and broadcasts the scores. */
rlhf_value *rlhf_compute(rlhf_prog *p, int64_t kind, int64_t ninputs,
                         rlhf_value *const *inputs, const char *settings,
                         const char *label);
void rlhf_ema(rlhf_prog *p, int64_t target, int64_t source, double decay);

/* Functions written in the language, as fn code (rlhf/runtime/FnProgram.h;
 * `code` is a constant string, parsed once per address). rlhf_apply runs a
 * `host` function on the inputs gathered on every rank and returns a record
 * of its outputs by name (per-token outputs carry the mask of the first
 * input that has one). rlhf_train runs `epochs` passes of the `loss`
 * function over the inputs, split into `minibatches` optimizer steps, and
 * returns {loss, metrics...}; settings: "recompute=1,zero=1,temperature=T"
 * or less (T as for rlhf_inference: the model's log-probs in the loss). */
rlhf_value *rlhf_apply(rlhf_prog *p, const char *code, int64_t ninputs,
                       rlhf_value *const *inputs, const char *label);
rlhf_value *rlhf_train(rlhf_prog *p, int64_t model, const char *code,
                       int64_t ninputs, rlhf_value *const *inputs,
                       const int64_t *layout, int64_t minibatches,
                       int64_t epochs, const char *settings, const char *label);

/* Dynamic sampling (DAPO; rlhf.filter_groups). rlhf_filter_round adds one
 * round's values to the iteration's kept rows: `metric` scores the samples,
 * `group` per prompt, and a prompt is kept when its group's scores vary
 * (their standard deviation exceeds min_std; any difference at 0). It
 * returns 1 once as many groups as a batch has prompts are kept, or after
 * max_rounds rounds (the rest then filled with groups that did not vary),
 * and 0 when the caller should run the round again: rlhf_load then reads
 * `dataset`'s next rows. A round draws the metric's rows over `group`
 * prompts, which may be more or fewer than a batch (gen_batch). Per-prompt
 * values keep their kept rows by prompt, per-sample ones by group.
 * rlhf_filter_take returns value i's kept rows after the last round. `expected`
 * is the rounds per iteration the plan priced, for the end-of-run report. */
int64_t rlhf_filter_round(rlhf_prog *p, rlhf_value *metric, int64_t nvalues,
                          rlhf_value *const *values, int64_t group,
                          int64_t max_rounds, double min_std, double expected,
                          int64_t dataset);
rlhf_value *rlhf_filter_take(rlhf_prog *p, int64_t i);

#ifdef __cplusplus
}
#endif

#endif /* RLHF_PROGRAM_C_H */
