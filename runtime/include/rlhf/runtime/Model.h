//===- Model.h - a tensor-parallel LLaMA decoder in LibTorch ----*- C++ -*-===//
//
// RMSNorm, rotary embeddings, SwiGLU, grouped-query attention, an lm or a
// value head. Parameters carry Hugging Face LLaMA names and hold this rank's
// shard: q/k/v/gate/up and the vocabulary are split by rows
// (column-parallel), o/down by columns (row-parallel), norms are replicated
// (the same layout rlhf::llamaParams and the reallocation planner use).
// Tensor-parallel collectives are autograd functions, so a backward pass
// through a sharded model gives the sharded gradients. Sequence parallelism
// (Ulysses and ring attention) splits positions instead, with replicated
// weights.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_MODEL_H
#define RLHF_RUNTIME_MODEL_H

#include "rlhf/runtime/Communicator.h"
#include "rlhf/runtime/HfConfig.h"
#include "rlhf/runtime/ReallocPlan.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rlhf {

struct ModelConfig {
  ModelShape shape;
  int64_t maxSeq = 256;
  double ropeTheta = 10000.0;
  double normEps = 1e-5;
  RopeScaling rope; ///< LLaMA-3's long-context frequencies
};

/// The config of a Hugging Face checkpoint's architecture.
ModelConfig modelConfigOf(const HfArch &arch, int64_t maxSeq);

/// This rank's tensor-parallel group; `comm` is null when size == 1.
///
/// `shardSequence`: Megatron-LM's sequence parallelism (Korthikanti et al.
/// 2022). A whole-sequence pass (training, inference; not generation's
/// cached steps) with size > 1 keeps the residual stream, the norms and the
/// layers' saved inputs on 1/size of its tokens each (a contiguous block of
/// the flattened [B, S] rows): an all-gather before the column-parallel
/// projections and a reduce-scatter after the row-parallel ones replace
/// the all-reduces, moving the same bytes. A sequence is padded at its end
/// to a multiple of size (causal attention leaves the real positions
/// unchanged). With Ulysses or ring sp, each sp
/// rank's positions are sharded over tp in turn.
struct TensorParallel {
  Communicator *comm = nullptr;
  int rank = 0, size = 1;
  bool shardSequence = true;
};

using ParamMap = std::map<std::string, at::Tensor>;

/// The least temperature sampling divides logits by (a temperature of 0
/// would divide by zero); the log-probs read at a temperature floor it alike.
constexpr double kMinTemperature = 1e-6;

struct GenerateOptions {
  int64_t maxNewTokens = 16;
  bool greedy = false;
  double temperature = 1.0;
  double topP = 1.0;
  int64_t eosToken = -1; ///< -1: never stop early
  int64_t padToken = 0;
  uint64_t seed = 0; ///< identical on every tensor-parallel rank
  /// When set, one random stream per row (by inverse-CDF sampling) instead
  /// of `seed`: a row's sample then does not depend on how the batch is
  /// split over data-parallel ranks.
  std::vector<uint64_t> rowSeeds;
  /// On a CUDA device with tp = pp = 1, replay decode steps as CUDA graphs
  /// (RLHF_CUDA_GRAPHS=0 turns them off everywhere).
  bool cudaGraphs = true;
};

struct Generation {
  at::Tensor seq;      ///< [B, P + G] int64, prompts left-padded to P
  at::Tensor logprobs; ///< [B, G] log-probability of each sampled token
  at::Tensor mask;     ///< [B, P + G] 1 for real (non-pad) tokens
  int64_t promptLen = 0;
};

/// Per-layer keys and values of the sequences so far, for decoding: one
/// buffer per layer of the whole generation's length, allocated at the first
/// step and filled in place (no copy of the cache per token).
struct KvCache {
  int64_t capacity = 0; ///< positions each buffer holds (prompt + new tokens)
  int64_t length = 0;   ///< positions filled so far, in every layer
  std::vector<at::Tensor> keys,
      values; ///< [B, kv heads/tp, capacity, head dim], zero-filled
  /// Decode steps of fixed shape (graph-safe): when defined, a one-token
  /// step writes its keys at position `slot` (a device tensor [1]) and
  /// attends to the first `window` positions under the caller's mask, and
  /// `length` is left to the caller.
  at::Tensor slot;
  int64_t window = 0;
};

/// This rank's sequence-parallel group, in USP's unified form (arXiv
/// 2405.07719): size = ulysses x ring. Its ranks hold the same weights
/// (replicated, as over dp) and the same rows, and each runs S/size
/// positions of every sequence. Rank order: r = ringRank * ulysses +
/// ulyssesRank. With ring = 1 sp rank r runs positions [r S/size,
/// (r+1) S/size). With ring > 1 the sequence is cut into 2 ring equal
/// chunks and ring rank i holds chunks i and 2 ring - 1 - i (zigzag, so
/// that causal ring attention gives every ring rank the same work), its
/// ulysses ranks taking consecutive S/size positions of those two chunks
/// in turn; a sequence S/ring odd is padded at its end to fit. Attention
/// first trades positions by all-to-all within the `ulysses` ranks of a
/// ring rank (DeepSpeed-Ulysses), leaving each with a 1/ulysses share of
/// the heads over the ring rank's positions; ring attention then runs
/// across the `ring` ranks of an ulysses rank (same heads). Outputs are
/// gathered back in sequence order.
///
/// `comm` spans the whole group in rank order and is null when size == 1.
/// `ulysses` spans sp ranks ringRank * ulysses + 0..ulysses-1 and `ring`
/// sp ranks 0..ring-1 times ulysses plus ulyssesRank, both in that order;
/// each is null when its size is 1 and may be left null when it is the
/// whole group, so {comm, rank, size} alone is plain Ulysses and adding
/// ringSize = size pure ring attention.
struct SequenceParallel {
  Communicator *comm = nullptr;
  int rank = 0, size = 1;
  Communicator *ulysses = nullptr, *ring = nullptr;
  int ringSize = 1; ///< must divide size; size / ringSize is the Ulysses one
  int ulyssesSize() const { return size / ringSize; }
  int ulyssesRank() const { return rank % ulyssesSize(); }
  int ringRank() const { return rank / ulyssesSize(); }
};

/// This rank's pipeline stage; `comm` spans the stages of its pipeline in
/// stage order (rank == stage) and is null when stages == 1.
struct PipelineParallel {
  Communicator *comm = nullptr;
  int stage = 0, stages = 1;
};

/// What one pipeline stage did in a forward pass, for the backward pass:
/// `input` is the activation received from the previous stage (a leaf that
/// collects its gradient; undefined on the first stage), `output` what this
/// stage produced (sent on; on the last stage the logits/values, or the
/// normed hidden states when stageForward ran without its head).
struct StageActivations {
  at::Tensor input, output;
};

/// Per-token statistics of an lm head, [B, S-1] each (LlamaModel::
/// tokenStats); a statistic not asked for is undefined.
struct TokenStats {
  at::Tensor logprobs, entropy;
};

/// Full (unsharded) parameters with a deterministic random init: every
/// parameter draws from a generator seeded by `seed` and its name, so any
/// layout can be built from the same numbers. On the CPU they are drawn in
/// fp32 and cast to `options`' dtype. On another device its default
/// generator, reseeded per parameter, draws them there in that dtype: no
/// host copy, so a 7B model takes milliseconds rather than seconds (the GPU
/// benchmarks), but the numbers differ from the CPU's, and the device's
/// default generator is left reseeded (no other thread may draw from it
/// meanwhile).
ParamMap initParams(const ModelConfig &cfg, uint64_t seed,
                    at::TensorOptions options = at::kFloat);

/// Uninitialised tensors of `shapes`, views of one allocation (each view
/// 256-byte aligned), which is how a rank holds a shard: as Megatron's and
/// ReaLHF's contiguous parameter buffers, so that a move maps one CUDA IPC
/// segment per peer instead of one per separately allocated parameter.
ParamMap flatShard(
    const std::vector<std::pair<std::string, std::vector<int64_t>>> &shapes,
    const at::TensorOptions &opts);

/// Copies of `pieces` in one block (flatShard) of `opts`, laid out in their
/// order: what layoutShard and toDevice hand out.
ParamMap
packShard(const std::vector<std::pair<std::string, at::Tensor>> &pieces,
          const at::TensorOptions &opts);

/// `params` with every tensor on `device`, and of `dtype` when given: the
/// same tensors when they already are (unless `copy`), else a copy in one
/// block (flatShard).
ParamMap toDevice(ParamMap params, c10::Device device,
                  std::optional<at::ScalarType> dtype = std::nullopt,
                  bool copy = false);

/// The slice of `full` that tensor rank `tp.rank` of `tp.size` holds.
ParamMap shardParams(const ModelConfig &cfg, const ParamMap &full, int tpRank,
                     int tpSize);

class LlamaModel {
public:
  /// With sp > 1: the heads of a tp rank must be a multiple of sp's ulysses
  /// factor (KV heads that are not are repeated up to the next multiple),
  /// and pp must be 1.
  LlamaModel(ModelConfig cfg, ParamMap shard, TensorParallel tp,
             PipelineParallel pp = {}, SequenceParallel sp = {});

  /// Logits [B, S, vocab] (lm head, gathered over tp) or values [B, S]
  /// (value head) for token ids [B, S]. `positions` [B, S] default to 0..S-1.
  /// With pipeline stages, every stage calls it with the same tokens; the
  /// result is defined on the last stage only. With sp > 1, every sp rank
  /// calls it with the same tokens (S a multiple of sp), runs its share of
  /// positions (SequenceParallel) and returns the whole result, gathered
  /// over sp in sequence order.
  at::Tensor forward(const at::Tensor &tokens,
                     const c10::optional<at::Tensor> &positions = c10::nullopt);

  /// Both of tokenStat's statistics from one forward pass, each only if
  /// asked for (else undefined). Without `entropyGrad` the entropy is a
  /// metric, and backward takes no gradient through it.
  TokenStats tokenStats(const at::Tensor &tokens, bool logprobs, bool entropy,
                        bool entropyGrad = true);

  /// What an lm head predicts at each position of `tokens`, [B, S-1]
  /// (column j for token j+1): the log-prob of the next token, or with
  /// `entropy` the entropy of the distribution, in fp32. With sp > 1 each
  /// rank computes its positions' columns and only those are gathered, and
  /// with tp > 1 the vocabulary stays sharded (vocabulary-parallel
  /// log-softmax), so the logits' memory divides by sp x tp. With pp > 1
  /// every stage calls it with the same tokens and the last stage's result
  /// is defined (the others' undefined).
  at::Tensor tokenStat(const at::Tensor &tokens, bool entropy);

  /// Samples up to `opts.maxNewTokens` tokens after each prompt (prompts
  /// of different lengths are left-padded), reusing a KV cache. Needs
  /// sp = 1 (an error otherwise).
  Generation generate(const std::vector<std::vector<int64_t>> &prompts,
                      const GenerateOptions &opts);

  /// One stage's share of a pipelined forward pass (activations received
  /// from the previous stage, sent to the next). Without `head` the last
  /// stage's output is its normed hidden states, for headStats: an lm head's
  /// losses then never hold [B, S, V] logits.
  StageActivations stageForward(const at::Tensor &tokens, bool head = true);
  /// tokenStats from the last stage's hidden states [B, S, h] (stageForward
  /// without its head) of `tokens`: the fused head, sharded under tp.
  TokenStats headStats(const at::Tensor &hidden, const at::Tensor &tokens,
                       bool logprobs, bool entropy, bool entropyGrad = true);
  /// The whole output (logits gathered over tp, or values) of hidden
  /// states from stageForward without its head.
  at::Tensor headOf(const at::Tensor &hidden) { return head(hidden); }
  /// Its backward: the last stage passes the loss's gradient seed (an
  /// undefined tensor means the caller already ran backward from the loss);
  /// other stages receive their output's gradient from the next stage. Each
  /// stage then sends its input's gradient to the previous one.
  void stageBackward(const StageActivations &acts);
  /// stageForward and stageBackward without their messages, for a schedule
  /// that moves them itself (runOneFOneB pairs each send with a receive):
  /// the tensor this stage receives for `tokens` (undefined on the first
  /// stage); the stage's pass from it; and backward from `gradOutput`
  /// (undefined on the last stage, whose caller ran backward from the
  /// loss), returning the gradient for the previous stage (undefined on the
  /// first).
  at::Tensor stageInputFor(const at::Tensor &tokens);
  StageActivations stageRun(const at::Tensor &tokens, at::Tensor input,
                            bool head = true);
  at::Tensor stageGrad(const StageActivations &acts,
                       const at::Tensor &gradOutput);

  bool firstStage() const { return pp.stage == 0; }
  bool lastStage() const { return pp.stage == pp.stages - 1; }
  int stages() const { return pp.stages; }
  int stage() const { return pp.stage; }
  Communicator *ppComm() const { return pp.comm; }

  /// Activation recomputation: while on, a forward pass that records
  /// gradients keeps only each decoder layer's input and recomputes the
  /// layer in backward (less memory, one more forward pass).
  void setRecompute(bool on) { recompute = on; }
  /// Token log-probs and entropies (tokenStat(s), the fused head) of the
  /// distribution that sampling at temperature `t` draws from: logits / t,
  /// so that a loss and a reference see what generation recorded.
  void setTemperature(double t) {
    invTemperature = 1.0 / std::max(t, kMinTemperature);
  }
  /// The layer the recomputation replays (public for its autograd node).
  at::Tensor layer(int l, const at::Tensor &x, const at::Tensor &cos,
                   const at::Tensor &sin, const at::Tensor &mask,
                   KvCache *cache);

  ParamMap &params() { return params_; }
  const ModelConfig &config() const { return cfg; }
  /// Where the parameters live; inputs are moved there and outputs (logits,
  /// values, generations) are returned there.
  c10::Device device() const { return device_; }
  /// The weights' dtype, which activations and the KV cache share (bf16 in
  /// mixed precision); norms, softmax, logits and losses run in fp32.
  at::ScalarType dtype() const { return dtype_; }
  int tpSize() const { return tp.size; }
  Communicator *tpComm() const { return tp.comm; }
  int spSize() const { return sp.size; }
  Communicator *spComm() const { return sp.comm; }

private:
  /// Hidden states [B, S, h] of `tokens` at `positions`, attending to the
  /// cached keys plus these (mask [B, 1, S, T] additive). Appends to `cache`.
  at::Tensor hidden(const at::Tensor &tokens, const at::Tensor &positions,
                    const at::Tensor &mask, KvCache *cache);
  /// Normed hidden states [B, S, h] of whole causal sequences, the same on
  /// every tp rank (padded and sharded by position inside, under
  /// shardsSequence).
  at::Tensor wholeHidden(const at::Tensor &tokens, const at::Tensor &positions);
  at::Tensor head(const at::Tensor &x);
  /// The fused head's statistics of hidden states `x` [B, S', h] for the
  /// next tokens `next` [B, S'], each [B, S'] (no column dropped).
  TokenStats fusedStats(const at::Tensor &x, const at::Tensor &next,
                        bool logprobs, bool entropy, bool entropyGrad = true);
  /// This tp rank's vocabulary shard of the logits, in fp32.
  at::Tensor logitsShard(const at::Tensor &x);
  /// The lm head's weight (this rank's vocabulary rows): lm_head.weight, or
  /// the embedding's when tied.
  const at::Tensor &headWeight() const;
  /// Token embeddings, summed over tp's vocabulary shards; with `shard`,
  /// only this rank's positions of the sum (shardsSequence).
  at::Tensor embed(const at::Tensor &tokens, bool shard = false);
  /// Whether whole sequences run sharded by position over tp.
  bool shardsSequence() const;
  /// Whether a pass with this cache and mask runs sharded: a whole causal
  /// sequence (no cache, no mask) under shardsSequence().
  bool shardsPass(const KvCache *cache, const at::Tensor &mask) const;
  /// `t` [B, S] padded with zeros at its end to a multiple of tp when
  /// shardsSequence(); else `t`.
  at::Tensor padForShards(const at::Tensor &t) const;
  /// The length padForShards gives a sequence of length S.
  int64_t paddedLength(int64_t S) const;
  at::Tensor layers(at::Tensor x, const at::Tensor &positions,
                    const at::Tensor &mask, KvCache *cache, bool finalNorm);
  const at::Tensor &p(const std::string &name) const;
  /// Checks sp's communicators against its rank order and fills in the
  /// sub-groups left out (the whole group, or null for size 1).
  void checkSpGroups();

  ModelConfig cfg;
  ParamMap params_;
  TensorParallel tp;
  PipelineParallel pp;
  SequenceParallel sp;
  int layerBegin = 0, layerEnd = 0; ///< this stage's decoder layers
  c10::Device device_ = c10::kCPU;
  at::ScalarType dtype_ = at::kFloat; ///< the compute dtype: the weights'
  at::Tensor ropeInv;                 ///< rotary inverse frequencies on device_

  at::TensorOptions on(at::ScalarType t) const {
    return at::TensorOptions().dtype(t).device(device_);
  }
  bool recompute = false;
  double invTemperature = 1.0;
};

} // namespace rlhf

#endif // RLHF_RUNTIME_MODEL_H
