//===- Train.h - losses, Adam and the train step ----------------*- C++ -*-===//
//
// One train call: the batch is split into minibatches (one optimizer step
// each) and every minibatch into micro-batches whose gradients accumulate.
// The loss is a function written in the language (fn code), whose batch
// reductions are normalised over the minibatch across all data-parallel
// ranks, so any dp x micro-batch split gives the gradient of the whole
// minibatch; gradients are then summed over dp (and over the model's
// sequence-parallel group, whose ranks evaluate the same rows), clipped by
// the global norm (tensor-parallel shards counted once), and applied with
// Adam.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_TRAIN_H
#define RLHF_RUNTIME_TRAIN_H

#include "rlhf/runtime/FnProgram.h"
#include "rlhf/runtime/Model.h"

#include <optional>

namespace rlhf {

class FnProgram;

/// A train call's batch: the loss function's inputs in order (rows first),
/// and the masks they carry, for mask_of (undefined: none; a token input
/// then masks its non-pad predicted tokens). Per-token tensors are aligned
/// with the predicted tokens: index t is the prediction of token t+1 of the
/// sequence, so they have S-1 columns.
struct TrainBatch {
  std::vector<at::Tensor> inputs, masks;
  /// Each row's weight in the loss's reductions (FnInputs::rowWeights);
  /// undefined: 1 each.
  at::Tensor rowWeights;
};

/// The learning rate per iteration, as #rlhf.optimizer describes it:
/// `warmupSteps` iterations rising linearly to the peak (Megatron's
/// warmup: iteration i at lr * i / warmupSteps), then constant, or falling
/// in a line or half a cosine to `minLr` at iteration `decaySteps`, and
/// `minLr` after. For 1 <= i <= decaySteps it equals transformers'
/// get_{constant,linear,cosine_with_min_lr}_schedule_with_warmup at step i
/// (linear with minLr 0).
struct LrSchedule {
  enum class Kind { Constant, Linear, Cosine } kind = Kind::Constant;
  int64_t warmupSteps = 0, decaySteps = 0;
  double minLr = 0.0;
  /// Whether the rate ever differs from the peak.
  bool active() const { return warmupSteps > 0 || kind != Kind::Constant; }
  /// The rate at iteration `step` (1-based) for the peak rate `lr`.
  double at(double lr, int64_t step) const;
  /// "constant", "linear" or "cosine"; nullopt for another name.
  static std::optional<Kind> parse(const std::string &name);
};

struct AdamSettings {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weightDecay = 0.0,
         gradClip = 1.0;
  /// The rate per iteration; `lr` is its peak.
  LrSchedule schedule;
  /// ATen's fused multi-tensor AdamW kernel, as torch.optim's `fused=True`;
  /// false runs the same update as separate ops per parameter
  /// (rlhf-bench-adam compares the two).
  bool fused = true;
};

/// Adam with decoupled weight decay; state per parameter of this shard.
///
/// With a ZeRO group (stage 1), each member keeps the moments of and updates
/// only its 1/size slice of every parameter, then the members all-gather the
/// updated slices: the same update, with 1/size of the moments per rank.
class Adam {
public:
  explicit Adam(AdamSettings s) : s(s) {}
  /// One update of every parameter with a gradient. `zero`, if it has more
  /// than one rank, is the data-parallel group that shards the moments; the
  /// gradients are then this rank's slices (reduceGradients), else whole.
  /// `gradScale` multiplies every gradient (clipping); the gradients may be
  /// left scaled, as `clip_grad_norm_` leaves them.
  void step(ParamMap &params, const std::map<std::string, at::Tensor> &grads,
            Communicator *zero = nullptr, double gradScale = 1.0);
  /// Gathers moments sharded by a ZeRO step back into whole tensors
  /// (collective over that group; a no-op when they are whole). Call it
  /// before moving or saving the moments.
  void unshard();
  const AdamSettings &settings() const { return s; }
  /// The rate the following steps use (a schedule's, per iteration).
  void setLearningRate(double lr) { s.lr = lr; }
  std::map<std::string, at::Tensor> &moments1() { return m; }
  std::map<std::string, at::Tensor> &moments2() { return v; }
  /// fp32 master copies of low-precision (bf16) weights; empty for fp32 ones,
  /// which Adam updates in place.
  std::map<std::string, at::Tensor> &masterWeights() { return master; }
  const std::map<std::string, at::Tensor> &moments1() const { return m; }
  const std::map<std::string, at::Tensor> &moments2() const { return v; }
  const std::map<std::string, at::Tensor> &masterWeights() const {
    return master;
  }
  int64_t steps() const { return t; }
  /// Restores state from a checkpoint.
  void restore(std::map<std::string, at::Tensor> m1,
               std::map<std::string, at::Tensor> m2, int64_t steps,
               std::map<std::string, at::Tensor> masterWeights = {}) {
    m = std::move(m1);
    v = std::move(m2);
    master = std::move(masterWeights);
    t = steps;
    zeroGroup = nullptr;
    shapes.clear();
  }

private:
  AdamSettings s;
  std::map<std::string, at::Tensor> m, v, master;
  int64_t t = 0;
  /// The group whose slices m and v hold (null: all whole), and the
  /// shapes of the parameters whose moments are slices.
  Communicator *zeroGroup = nullptr;
  std::map<std::string, std::vector<int64_t>> shapes;
};

constexpr int64_t kGradientBucketBytes = int64_t(32) << 20;

/// The sums over `group` of every member's `grads` (the same shapes, in the
/// same order on every member), one collective per bucket of about
/// `bucketBytes`. With `zero`, a reduce-scatter, which moves half an
/// all-reduce's bytes: each member receives only its ZeRO slice (flat) of
/// each sum. `wire`, if given, is the dtype the buckets travel in (bf16
/// gradients of fp32 accumulators, as the plans price them); the sums come
/// back in the gradients' own dtype. `grads` are left unchanged.
std::vector<at::Tensor>
reduceGradients(Communicator &group, const std::vector<at::Tensor> &grads,
                bool zero, int64_t bucketBytes = kGradientBucketBytes,
                std::optional<at::ScalarType> wire = std::nullopt);

/// The same sums without ZeRO, written over `grads` in place: no copy of
/// the gradients beyond one bucket at a time.
void sumGradientsInPlace(Communicator &group,
                         const std::vector<at::Tensor> &grads,
                         std::optional<at::ScalarType> wire = std::nullopt,
                         int64_t bucketBytes = kGradientBucketBytes);

struct TrainOptions {
  /// The loss, in fn code (FnProgram.h; required): it reads batch.inputs,
  /// and its batch reductions are normalised over the minibatch on every dp
  /// rank, so any dp x micro-batch split gives the minibatch's gradient.
  const FnProgram *loss = nullptr;
  int64_t minibatches = 1;
  int64_t microBatches = 1; ///< per minibatch on this rank
  /// Data-parallel group (null: dp = 1): the ranks that split the rows.
  /// Sequence-parallel ranks pass the same rows; their group is the model's
  /// (LlamaModel::spComm).
  Communicator *dp = nullptr;
  /// Under sp > 1, every rank holding this rank's weights: dp x sp, the
  /// dp group of the weights' layout. Gradients are summed over it in one
  /// collective and ZeRO slices over it, as the cost model prices. Null:
  /// gradients are summed over sp, then dp, and ZeRO slices over dp.
  Communicator *replicas = nullptr;
  bool recompute = false; ///< recompute decoder layers in backward
  /// With pipeline stages, run each micro-batch's forward and backward
  /// through every stage before the next (the order before 1F1B; for
  /// side-by-side measurement: RLHF_PIPELINE_SCHEDULE=sequential).
  bool sequentialPipeline = false;
  /// Shard Adam's moments (ZeRO-1) over the replicas (dp, or dp x sp).
  bool zero = false;
  int64_t pad = 0; ///< the pad id, for the masks of token inputs
  /// The values of the loss's adaptive coefficients (FnInputs::coefs).
  FnCoefs coefs;
  /// Leave the last minibatch's gradients of fp32 weights in their .grad
  /// (as reduced, before clipping), for inspection. Otherwise the call frees
  /// them, as it frees bf16 weights' fp32 accumulators: a model holds gradients
  /// only while it trains, which is what the plans count.
  bool keepGradients = false;
};

struct TrainStats {
  double loss = 0;     ///< mean over minibatches
  double gradNorm = 0; ///< of the last minibatch, before clipping
  /// The global gradient norm before clipping, mean over minibatches (as
  /// verl logs actor/grad_norm): above the optimizer's grad_clip, steps
  /// were clipped.
  double gradNormMean = 0;
  /// The loss's metrics (its outputs after the loss), means over
  /// minibatches like `loss`.
  std::vector<double> metrics;
};

/// Per-token log-probabilities [N, S-1] of `seq` under `logits` [N, S, V].
at::Tensor tokenLogprobs(const at::Tensor &logits, const at::Tensor &seq);

/// Runs one train call on this rank's rows of `batch`.
TrainStats trainStep(LlamaModel &model, Adam &opt, const TrainBatch &batch,
                     const TrainOptions &o);

/// The loss and metrics a train call would compute on `batch`, forward
/// only (a validation loss): the whole batch as one minibatch of
/// `o.microBatches` micro-batches per rank, with pipeline stages each
/// micro-batch passed on stage by stage. The weights are not touched and
/// no gradient is kept; every rank of the call gets the values.
TrainStats evalLoss(LlamaModel &model, const TrainBatch &batch,
                    const TrainOptions &o);

/// evalLoss under each of `weightSets` (row weights of this rank's rows,
/// [N]; undefined: 1 each) in place of the batch's own, from one forward
/// pass: the model's outputs are read once per micro-batch and every
/// weighting's reductions run on them. Every rank of the call passes as
/// many sets, in the same order.
std::vector<TrainStats> evalLosses(LlamaModel &model, const TrainBatch &batch,
                                   const TrainOptions &o,
                                   const std::vector<at::Tensor> &weightSets);

} // namespace rlhf

#endif // RLHF_RUNTIME_TRAIN_H
