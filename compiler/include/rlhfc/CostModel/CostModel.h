//===- CostModel.h - analytic time and memory of RLHF calls -----*- C++ -*-===//
//
// Estimates, without a GPU, the time and per-device peak memory of generate,
// inference and train calls, of collectives, of parameter reallocation and of
// batch transfers, from an architecture, a hardware preset, a device mesh and
// a parallel strategy. Efficiency factors per hardware preset turn peak rates
// into achievable ones; a calibration file of measured runs overrides them.
// The formulas and their validation are in docs/cost-model.md.
//
// Everything here is plain arithmetic on precomputed constants: the planner
// calls it millions of times.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_COSTMODEL_COSTMODEL_H
#define RLHFC_COSTMODEL_COSTMODEL_H

#include "rlhf/runtime/ReallocPlan.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>

namespace rlhfc::cost {

/// Achievable fractions of peak and link latencies of one hardware preset.
struct Efficiency {
  double matmul = 0.60;     ///< of peak bf16 FLOP/s in large GEMMs
  /// Of peak bf16 FLOP/s in FlashAttention kernels, counting causal
  /// attention's FLOPs as half of the full square (FlashAttention-2 on an
  /// H100, arXiv 2407.08608; docs/cost-model.md)
  double attention = 0.34;
  double hbm = 0.80;        ///< of peak HBM bandwidth in streaming reads
  double nvlink = 0.80;     ///< of per-GPU NVLink bandwidth in collectives
  double network = 0.80;    ///< of per-GPU network bandwidth in collectives
  double nvls = 0.0;        ///< NVLink SHARP all-reduce bus bandwidth as a
                            ///< fraction of NVLink bandwidth (0: no NVLS)
  double nvlinkLatency = 3e-6;   ///< seconds per collective step in a node
  double networkLatency = 10e-6; ///< seconds per step across nodes
  double dpOverlap = 0.5;   ///< fraction of the dp gradient all-reduce hidden
                            ///< behind the backward pass
  double kernelOverhead = 25e-6; ///< fixed seconds per layer per decode step
  /// A GEMM with M x N outputs and depth K runs at
  /// (1 - exp(-M N / gemmFill)) * K / (K + gemmDepth) of its large-size
  /// rate: too few output tiles leave SMs idle, a shallow K loop spends its
  /// time in prologue and epilogue. Fitted to a cuBLAS sweep on an H100
  /// (docs/cost-model.md); scaled by SM count for other GPUs.
  double gemmFill = 1.2e6;
  double gemmDepth = 512;
  /// Of the per-GPU host link (PCIe) bandwidth in pinned host-to-device
  /// copies. An assumption (PCIe encoding and packet headers), not a fit.
  double host = 0.80;
};

struct Hardware {
  std::string name;
  double flops = 0;      ///< peak dense bf16 FLOP/s
  double hbmBytes = 0;   ///< capacity
  double hbmBw = 0;      ///< bytes/s
  double nvlinkBw = 0;   ///< bytes/s per GPU, one direction
  double networkBw = 0;  ///< bytes/s per GPU, one direction
  double hostBw = 0;     ///< bytes/s per GPU from host memory; 0: unknown
  int64_t gpusPerNode = 8;
  Efficiency eff;
};

/// Per-architecture constants, computed once.
struct Arch {
  rlhf::ModelShape shape;
  int64_t maxSeq = 4096;
  double layerParams = 0;   ///< parameters of one decoder layer
  double embedParams = 0;   ///< input embedding
  double headParams = 0;    ///< lm head (0 if tied) or value head
  /// The head's GEMM per token, over the embedding's rows when tied.
  double headGemmParams = 0;
  double totalParams = 0;
  double kvBytesPerToken = 0; ///< K and V of one token in all layers, bf16

  static Arch get(const rlhf::ModelShape &shape, int64_t maxSeq);
};

/// Where a call runs and how it is split.
struct Strategy {
  int64_t firstGpu = 0;
  int64_t dp = 1, tp = 1, pp = 1;
  int64_t microBatches = 1; ///< per dp rank, per minibatch
  bool zero = false;        ///< shard optimizer state over dp
  bool recompute = false;   ///< activation checkpointing
  bool offload = false;     ///< weights rest in host memory between calls
  /// Under tp, whole-sequence passes shard positions between the layers'
  /// collectives (Megatron's sequence parallelism), as the runtime does.
  /// Off only to price a system that does not (published runs before it).
  bool shardSequence = true;
  /// Sequence parallelism (Ulysses): ranks split every sequence and hold
  /// the weights like data-parallel ranks.
  int64_t sp = 1;
  int64_t devices() const { return dp * sp * tp * pp; }
};

/// Whether two strategies hold a model's parameters alike (same mesh and
/// split), so moving between them is free. Weights are replicated over dp
/// and sp alike (ranks dp-major, then sp), so only their product counts.
inline bool sameLayout(const Strategy &a, const Strategy &b) {
  return a.firstGpu == b.firstGpu && a.dp * a.sp == b.dp * b.sp &&
         a.tp == b.tp && a.pp == b.pp;
}

enum class CallKind { Generate, Inference, Train };

struct CallShape {
  CallKind kind = CallKind::Inference;
  int64_t batch = 1;      ///< sequences (after n samples per prompt)
  int64_t promptLen = 0;  ///< generate: prompt tokens
  int64_t genLen = 0;     ///< generate: new tokens
  /// generate: the argmax of each step's logits instead of a top-p sample,
  /// whose sort and CDF hold several copies of them
  bool greedy = false;
  int64_t seqLen = 0;     ///< inference/train: tokens per sequence
  int64_t minibatches = 1; ///< train: optimizer steps per call
  int64_t epochs = 1;
  /// train: sequences per row the loss runs the model on (2 for pairwise
  /// losses such as DPO's chosen and rejected)
  int64_t forwards = 1;
  bool trainable = false; ///< the model keeps optimizer state between calls
  /// Runs per iteration: dynamic sampling repeats the calls before its
  /// filter (rlhf.filter_groups' expected_rounds); time scales, memory not.
  double repeats = 1;
};

struct Memory {
  double weights = 0, grads = 0, optimizer = 0, activations = 0, kvCache = 0;
  double total() const { return weights + grads + optimizer + activations + kvCache; }
  /// What the call holds only while it runs: activations, the KV cache and,
  /// in training, the fp32 gradient accumulators, which the runtime frees
  /// after the optimizer step. Weights and optimizer state stay.
  double working() const { return grads + activations + kvCache; }
};

struct Time {
  double compute = 0;  ///< math at achievable FLOP/s (incl. memory-bound decode)
  /// tensor-parallel all-reduces and sequence-parallel all-to-alls, the
  /// collectives inside each layer
  double tpComm = 0;
  double ppComm = 0;   ///< pipeline p2p and bubbles
  double dpComm = 0;   ///< exposed gradient all-reduce
  double optimizer = 0;
  double load = 0; ///< offloaded weights copied in from host memory
  double total() const {
    return compute + tpComm + ppComm + dpComm + optimizer + load;
  }
};

struct Estimate {
  Time time;
  Memory memory; ///< peak per device
  double flops = 0; ///< useful model FLOPs of the call (for MFU)
};

/// A host function on the controller: ATen ops over gathered batch tensors.
struct HostEstimate {
  double time = 0;  ///< seconds
  double bytes = 0; ///< peak controller memory of its values
};

/// The controller's elementwise rate: one core streaming fp32 through ATen
/// (bytes read and written per second), and the dispatch cost of one op.
/// Orders of magnitude, not calibrated; host functions are small next to
/// model calls.
constexpr double kHostBytesPerSecond = 10e9;
constexpr double kHostOpSeconds = 5e-6;

/// The fraction of its large-size rate a GEMM of M x N outputs and depth K
/// reaches (Efficiency::gemmFill, gemmDepth).
double gemmUtilization(double m, double n, double k, const Efficiency &e);

/// Time and peak memory of one call of a model with `arch` on `hw`.
Estimate estimateCall(const Arch &arch, const Hardware &hw, const Strategy &s,
                      const CallShape &c);

/// The fewest waves (`s.microBatches`, a divisor of the rows per dp rank)
/// a generate of shape `c` runs in under `s` for its memory per GPU to stay
/// within `limit` bytes, or 0 when none does (Waves.cpp).
int64_t fewestWaves(const Arch &arch, const Hardware &hw, Strategy s,
                    const CallShape &c, double limit);

// ---- collectives (seconds) -------------------------------------------------
/// The bandwidth a collective over a group of GPUs sees per GPU, and its
/// per-step latency. `nvlsBw` is the all-reduce bus bandwidth with NVLink
/// SHARP, when the group is one NVSwitch node that has it.
struct Link {
  double bw = 0, latency = 0, nvlsBw = 0;
};
/// A group of `n` GPUs, `perNode` of them on each node it touches. Inside a
/// node it runs over NVLink. Across nodes NCCL's rings and trees use every
/// GPU's NIC, so `perNode` NICs carry the group's traffic between nodes:
/// the group sees min(NVLink, perNode x NIC) per GPU.
Link groupLink(const Hardware &hw, int64_t n, int64_t perNode);
/// Members per node of the group {first + i*stride | i < n}: all of them
/// inside one node, else the fewest on any node it touches.
int64_t membersPerNode(int64_t first, int64_t n, int64_t stride, int64_t gpusPerNode);
double allReduce(double bytes, int64_t n, const Link &l);
double allGather(double bytesTotal, int64_t n, const Link &l);
/// Every member sends `bytesPerRank` split evenly over the group (pairwise
/// exchanges, each paying the link's latency).
double allToAll(double bytesPerRank, int64_t n, const Link &l);
double broadcast(double bytes, int64_t n, const Link &l);
double p2p(double bytes, const Link &l);
/// nccl-tests' "bus bandwidth" of an all-reduce of `bytes` over `n` GPUs.
double allReduceBusBw(double bytes, int64_t n, const Link &l);

// ---- long context (LongContext.cpp) -------------------------------------------
// How sp splits into Ulysses and ring degrees: mlir::rlhf::splitSp.
/// FlashAttention's forward FLOPs of `tokens` query tokens of causal
/// sequences of `ctx` positions: half of 4 tokens ctx hidden per layer
/// (its benchmarks' count); backward is 2.5 times this.
double causalAttentionFlops(double tokens, double ctx, double hidden,
                            double layers);
/// Seconds of FlashAttention for `flops` on one GPU.
double attentionTime(double flops, const Hardware &hw);
/// Exposed seconds of one ring pass in one layer: ring - 1 steps, each
/// sending `blockBytes` to the next ring rank while the step's blockwise
/// attention (`stepCompute` seconds) runs; only what the compute does not
/// cover shows, max(0, comm - compute) per step.
double ringExposed(double blockBytes, double stepCompute, int64_t ring,
                   const Link &l);

// ---- movement -----------------------------------------------------------------
struct MoveEstimate {
  double time = 0;
  double intraNodeBytes = 0, interNodeBytes = 0, localBytes = 0;
  /// What crosses between GPUs (local copies stay on their GPU).
  double movedBytes() const { return intraNodeBytes + interNodeBytes; }
};

/// Reallocation cost from the slice-level plan between two layouts.
MoveEstimate estimateRealloc(const Arch &arch, const Hardware &hw,
                             const Strategy &from, const Strategy &to);

/// The same estimate without building the plan: per destination GPU, the
/// bytes of its new shard it does not already hold, over NVLink if the
/// source mesh reaches its node and over the network otherwise. O(GPUs);
/// used inside the search loop (unit-tested against the exact plan).
MoveEstimate estimateReallocFast(const Arch &arch, const Hardware &hw,
                                 const Strategy &from, const Strategy &to);

/// Copying `bytesPerGpu` of offloaded weights from host memory onto every
/// GPU of a mesh at once, each over its own host link.
double hostLoadTime(double bytesPerGpu, const Hardware &hw);

/// The `ema` blend on each GPU of the target's layout `target`, once the
/// source's weights are there in that layout: per tensor of a shard of
/// `weightBytesPerGpu` bf16 weights, the copy widened to fp32, lerped into
/// the target's fp32 master weights and cast back, 12 bytes of HBM traffic
/// per weight byte; and a layer's fixed kernel cost per layer of its stage.
double emaUpdateTime(const Arch &arch, const Hardware &hw,
                     const Strategy &target, double weightBytesPerGpu);

/// Moving a batch of `bytes` from the dp heads of one mesh to another.
MoveEstimate estimateTransfer(double bytes, const Hardware &hw,
                              const Strategy &from, const Strategy &to);

// ---- calibration --------------------------------------------------------------
/// The stdlib's NVIDIA presets (stdlib/hardware/nvidia.rlhf) with 8 GPUs per
/// node and built-in efficiency factors, for tools and tests that price
/// without a program: A100_40GB, A100_80GB, H100_SXM, H200.
std::optional<Hardware> knownHardware(llvm::StringRef name);

/// Built-in efficiency factors of a hardware preset name (A100..., H100...).
Efficiency defaultEfficiency(llvm::StringRef hardwareName);

/// Efficiency factors per hardware preset name, from a calibration file.
using Calibration = std::map<std::string, Efficiency>;

/// The share of a GPU's HBM plans may fill: the rest is kept for the CUDA
/// context, the caching allocator's slack and communication buffers.
constexpr double kUsableHbmFraction = 0.9;

/// Reads a calibration file: a JSON object mapping hardware preset names to
/// partial Efficiency objects (see docs/cost-model.md).
llvm::Expected<Calibration> loadCalibration(llvm::StringRef path);

} // namespace rlhfc::cost

#endif // RLHFC_COSTMODEL_COSTMODEL_H
