//===- SeqParallelWorker.cpp - USP sequence parallelism, one rank ---------===//
//
// Every rank builds the same tiny model and runs it in one process as the
// reference (sp = 1), then joins its groups (RLHF_SP and RLHF_TP; the
// remaining factor is dp; rank = (dp_rank * sp + sp_rank) * tp + tp_rank;
// RLHF_RING splits sp into ulysses x ring, sp_rank = ring_rank * ulysses +
// ulysses_rank) and checks, against the reference: the forward logits (or
// values), every parameter gradient summed over sp and dp, and the
// parameters and loss after a train step of 2 minibatches with Adam for
// each of the stdlib's losses (one of them with recomputed layers); the
// forward of a sequence one token shorter (padded where sp divided S).
// Also that generation and bad ulysses x ring layouts are rejected. With ring >
// 1: the forward of a sequence that the zigzag layout pads (S/ring odd) where
// sp divides it, that every ring rank computed as many attention scores in the
// model's forward and backward, and ring attention alone (the explicit kernel
// in fp32, the fused one in fp32 on the CPU, bf16 on CUDA) against causal
// attention of the whole sequence with zigzag (balanced) and contiguous chunks
// (unbalanced). Prints one line (ring ranks' work on another); exits 1 on a
// mismatch.
//
// RLHF_PRECISION=bf16 runs reference and layouts alike with bf16 weights
// (fp32 masters in training) within the bf16 tolerances below.
//
//===----------------------------------------------------------------------===//

#include "LossBatches.h"
#include "RingAttention.h"
#include "StdlibFns.h"

#include "rlhf/runtime/Communicator.h"
#include "rlhf/runtime/Device.h"
#include "rlhf/runtime/Model.h"
#include "rlhf/runtime/Train.h"

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

using namespace rlhf;

namespace {

int envInt(const char *name, int dflt) {
  const char *v = std::getenv(name);
  return v ? std::atoi(v) : dflt;
}

/// max |a - b| / max |b|: relative to the tensor's scale.
double relDiff(const at::Tensor &a, const at::Tensor &b) {
  at::Tensor ad = a.detach().to(at::kDouble), bd = b.detach().to(at::kDouble);
  return (ad - bd).abs().max().item<double>() /
         (bd.abs().max().item<double>() + 1e-12);
}

/// ||a - b|| / ||b||, for bf16, where single elements flip by an ulp.
double relNorm(const at::Tensor &a, const at::Tensor &b) {
  at::Tensor ad = a.detach().to(at::kDouble), bd = b.detach().to(at::kDouble);
  return ((ad - bd).norm() / (bd.norm() + 1e-12)).item<double>();
}

/// The largest differences from sp = 1: forward and gradients (relDiff),
/// parameters after train steps (fp32: absolute; bf16: relNorm of the fp32
/// masters) and the loss (relative). fp32: sums in another order (the
/// all-to-alls change no arithmetic; the gradient sums over sp do). bf16:
/// ModelWorker.cpp's tolerances for tp and dp layouts (measured here on CPU
/// at most 0.005, 0.014, 0.006 and 3e-4, with sp 2 x tp 2).
struct Tolerance {
  double forward, gradient, train, loss;
};
constexpr Tolerance kFp32{1e-5, 1e-5, 1e-5, 1e-5};
constexpr Tolerance kBf16{2e-2, 7e-2, 2e-2, 2e-3};

/// True when `f` throws an rlhf::Error whose message contains `what`.
template <typename F> bool rejects(F f, const std::string &what) {
  try {
    f();
  } catch (const Error &e) {
    return std::string(e.what()).find(what) != std::string::npos;
  }
  return false;
}

/// Every ring rank's (forward, backward) since `from`, [ring, 2].
at::Tensor ringWorkSince(const parallel::RingWork &from, Communicator &ring,
                         c10::Device dev) {
  parallel::RingWork now = parallel::ringWork();
  return ring
      .allGather(
          at::tensor({now.forward - from.forward, now.backward - from.backward},
                     at::kLong)
              .unsqueeze(0)
              .to(dev))
      .cpu();
}

std::string workStr(const at::Tensor &work) {
  std::string out;
  for (int64_t i = 0; i < work.size(0); ++i)
    out += " (" + std::to_string(work[i][0].item<int64_t>()) + ", " +
           std::to_string(work[i][1].item<int64_t>()) + ")";
  return out;
}

bool allEqual(const at::Tensor &work) {
  return (work == work[0]).all().item<bool>() && work.min().item<int64_t>() > 0;
}

/// Ring attention alone (GQA) with `kernel` on inputs in `dtype`, against
/// causal attention of the whole sequence in fp32, with the zigzag layout
/// and with contiguous chunks: the largest difference of output and q, k,
/// v gradients (relDiff; relNorm in bf16, where single elements flip by an
/// ulp). `balanced`: zigzag gave every ring rank the same number of scores,
/// forward and backward, and contiguous chunks did not.
double checkRingAttention(Communicator &ring, c10::Device dev,
                          parallel::RingKernel kernel, at::ScalarType dtype,
                          bool &balanced, std::string &report) {
  const int R = ring.size(), r = ring.rank();
  const int64_t B = 2, H = 4, Hkv = 2, S = 8 * R, D = 8;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  auto leaf = [&](int64_t heads) {
    return at::randn({B, heads, S, D}, gen, at::kFloat).to(dev);
  };
  at::Tensor q = leaf(H), k = leaf(Hkv), v = leaf(Hkv), dOut = leaf(H);
  std::vector<at::Tensor> ref{q.clone().requires_grad_(true),
                              k.clone().requires_grad_(true),
                              v.clone().requires_grad_(true)};
  at::Tensor refOut = at::scaled_dot_product_attention(
      ref[0], ref[1].repeat_interleave(H / Hkv, 1),
      ref[2].repeat_interleave(H / Hkv, 1), {}, 0.0, /*is_causal=*/true);
  refOut.backward(dOut);
  parallel::RingLayout contiguous;
  for (int i = 0; i < R; ++i)
    contiguous.push_back({{i * S / R, S / R}});
  const bool fp32 = dtype == at::kFloat;
  auto differ = [&](const at::Tensor &a, const at::Tensor &b) {
    return fp32 ? relDiff(a, b) : relNorm(a, b);
  };
  double diff = 0;
  balanced = true;
  for (bool zigzag : {true, false}) {
    const parallel::RingLayout layout =
        zigzag ? parallel::zigzagLayout(S, R) : contiguous;
    auto mine = [&](const at::Tensor &t) {
      std::vector<at::Tensor> parts;
      for (const parallel::Span &s : layout[size_t(r)])
        parts.push_back(t.narrow(2, s.first, s.size));
      return at::cat(parts, 2);
    };
    std::vector<at::Tensor> in;
    for (const at::Tensor &t : {q, k, v})
      in.push_back(mine(t).to(dtype).requires_grad_(true));
    const parallel::RingWork before = parallel::ringWork();
    at::Tensor out =
        parallel::ringAttention(in[0], in[1], in[2], &ring, layout, kernel);
    out.backward(mine(dOut).to(dtype));
    at::Tensor work = ringWorkSince(before, ring, dev);
    diff = std::max(diff, differ(out, mine(refOut)));
    for (size_t i = 0; i < in.size(); ++i)
      diff = std::max(diff, differ(in[i].grad(), mine(ref[i].grad())));
    balanced &= allEqual(work.select(1, 0)) == zigzag &&
                allEqual(work.select(1, 1)) == zigzag;
    report += std::string(zigzag ? " zigzag" : ", contiguous") + workStr(work);
  }
  return diff;
}

/// The dtype the fused ring kernel takes on `dev`: fp32 where LibTorch's
/// flash kernel does (the CPU), else bf16 (CUDA); nullopt where neither.
std::optional<at::ScalarType> fusedRingType(Communicator &ring,
                                            c10::Device dev) {
  const int R = ring.size();
  for (at::ScalarType t : {at::kFloat, at::kBFloat16}) {
    at::Tensor q = at::zeros({1, 4, 8, 8}, at::TensorOptions(dev).dtype(t));
    at::Tensor k = at::zeros({1, 2, 8, 8}, q.options());
    if (parallel::fusedRingApplies(q, k, k, parallel::zigzagLayout(8 * R, R),
                                   ring.rank()))
      return t;
  }
  return std::nullopt;
}

} // namespace

int main() {
  return runWorker([](Communicator &world, c10::Device dev) {
    const int rank = world.rank(), spSize = envInt("RLHF_SP", 1),
              tpSize = envInt("RLHF_TP", 1), ring = envInt("RLHF_RING", 1),
              ulysses = spSize / ring;
    const int dp = world.size() / (spSize * tpSize);
    const bool valueHead = std::getenv("RLHF_VALUE_HEAD") != nullptr;
    const char *precision = std::getenv("RLHF_PRECISION");
    const bool bf16 = precision && std::string(precision) == "bf16";
    const Tolerance tol = bf16 ? kBf16 : kFp32;
    const int tpRank = rank % tpSize, spRank = rank / tpSize % spSize,
              dpRank = rank / (tpSize * spSize);

    // Every rank creates every group in the same order (the backends need
    // it); groups of one rank are left out.
    std::unique_ptr<Communicator> tpComm, spComm, dpComm;
    auto groups = [&](int size, auto member, std::unique_ptr<Communicator> &c) {
      if (size == 1)
        return;
      for (int g = 0; g < world.size() / size; ++g) {
        std::vector<int> ranks;
        for (int i = 0; i < size; ++i)
          ranks.push_back(member(g, i));
        if (auto sub = world.subgroup(ranks))
          c = std::move(sub);
      }
    };
    groups(
        tpSize, [&](int g, int i) { return g * tpSize + i; }, tpComm);
    groups(
        spSize,
        [&](int g, int i) {
          int d = g / tpSize, t = g % tpSize;
          return (d * spSize + i) * tpSize + t;
        },
        spComm);
    groups(
        dp, [&](int g, int i) { return i * spSize * tpSize + g; }, dpComm);
    // Every rank holding the same weight shard (dp x sp, one per tp rank):
    // gradients and ZeRO slices go over it.
    std::unique_ptr<Communicator> replicasComm;
    groups(
        dp * spSize, [&](int g, int i) { return i * tpSize + g; },
        replicasComm);
    // USP's sub-groups when neither is the whole sp group; g counts the
    // (dp, other factor, tp) triples.
    std::unique_ptr<Communicator> ulyssesComm, ringComm;
    auto spMember = [&](int g, int other, int s) {
      return (g / tpSize / other * spSize + s) * tpSize + g % tpSize;
    };
    if (ring > 1 && ulysses > 1) {
      groups(
          ulysses,
          [&](int g, int i) {
            return spMember(g, ring, g / tpSize % ring * ulysses + i);
          },
          ulyssesComm);
      groups(
          ring,
          [&](int g, int i) {
            return spMember(g, ulysses, i * ulysses + g / tpSize % ulysses);
          },
          ringComm);
    }

    // GQA: 4 heads, 2 KV heads, so sp 4 and sp 2 x tp 2 repeat KV heads.
    ModelConfig cfg;
    cfg.shape = ModelShape{2, 64, 4, 2, 176, 128, false, valueHead};
    ParamMap full =
        toDevice(initParams(cfg, 7), dev, bf16 ? at::kBFloat16 : at::kFloat);
    const int64_t B = 4 * dp, S = envInt("RLHF_SEQ_LEN", 16), rows = B / dp,
                  lo = dpRank * rows;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
    at::Tensor tokens =
        at::randint(0, cfg.shape.vocab, {B, S}, gen, at::kLong).to(dev);
    at::Tensor weights =
        at::randn(valueHead ? std::vector<int64_t>{B, S}
                            : std::vector<int64_t>{B, S, cfg.shape.vocab},
                  gen, at::kFloat)
            .to(dev);

    auto makeModel = [&](const ParamMap &from) {
      ParamMap shard = shardParams(cfg, from, tpRank, tpSize);
      for (auto &[n, t] : shard)
        t.set_requires_grad(true);
      return LlamaModel(cfg, shard, {tpComm.get(), tpRank, tpSize}, {},
                        {spComm.get(), spRank, spSize, ulyssesComm.get(),
                         ringComm.get(), ring});
    };
    auto leaves = [](const ParamMap &from) {
      ParamMap r;
      for (auto &[n, t] : from)
        r[n] = t.clone().set_requires_grad(true);
      return r;
    };

    // Reference: one process, gradients of a fixed linear loss.
    LlamaModel single(cfg, leaves(full), {});
    at::Tensor refOut = single.forward(tokens);
    (refOut * weights).sum().backward();

    LlamaModel model = makeModel(full);
    const parallel::RingWork before = parallel::ringWork();
    at::Tensor out = model.forward(tokens.narrow(0, lo, rows));
    double fwd = relDiff(out, refOut.narrow(0, lo, rows));
    if (!valueHead) {
      // Per-token log-probs and entropies, gathered without whole logits.
      at::NoGradGuard noGrad;
      at::Tensor mine = tokens.narrow(0, lo, rows);
      at::Tensor refLp = at::log_softmax(
          refOut.detach().narrow(0, lo, rows).narrow(1, 0, S - 1), -1);
      fwd = std::max(
          fwd,
          relDiff(model.tokenStat(mine, false),
                  tokenLogprobs(refOut.detach(), tokens).narrow(0, lo, rows)));
      fwd = std::max(fwd, relDiff(model.tokenStat(mine, true),
                                  -(refLp.exp() * refLp).sum(-1)));
    }
    (out * weights.narrow(0, lo, rows)).sum().backward();
    ParamMap refGrads;
    for (auto &[n, t] : single.params())
      refGrads[n] = t.grad();
    refGrads = shardParams(cfg, refGrads, tpRank, tpSize);
    double bwd = 0;
    for (auto &[n, t] : model.params()) {
      at::Tensor g = t.grad().clone();
      for (Communicator *c : {spComm.get(), dpComm.get()})
        if (c)
          c->allReduceSum(g);
      bwd = std::max(bwd, relDiff(g, refGrads.at(n)));
    }

    // The zigzag layout's balance, in the model and in ring attention
    // alone; and a sequence sp divides that zigzag pads (S/ring odd).
    bool balanced = true;
    double ringDiff = 0;
    std::string work;
    if (ring > 1) {
      Communicator *ringGroup = ulysses > 1 ? ringComm.get() : spComm.get();
      at::Tensor modelWork = ringWorkSince(before, *ringGroup, dev);
      balanced =
          allEqual(modelWork.select(1, 0)) && allEqual(modelWork.select(1, 1));
      work = "model" + workStr(modelWork) + ", ";
      // Both kernels alone: the explicit one in fp32, the fused one in the
      // dtype LibTorch's flash kernel takes here (on the CPU it must take
      // fp32, which the model then runs through it).
      bool alone = false;
      work += "ring attention alone: explicit fp32";
      ringDiff =
          checkRingAttention(*ringGroup, dev, parallel::RingKernel::Explicit,
                             at::kFloat, alone, work) /
          kFp32.forward;
      balanced &= alone;
      const std::optional<at::ScalarType> fused =
          fusedRingType(*ringGroup, dev);
      if (fused) {
        // GQA as checkRingAttention has it: 4 query heads over 2 KV heads.
        const auto opts = at::TensorOptions(dev).dtype(*fused);
        const bool native =
            parallel::fusedRingKvRepeat(at::empty({1, 4, 1, 8}, opts),
                                        at::empty({1, 2, 1, 8}, opts)) == 1;
        work += std::string("; fused ") +
                (*fused == at::kFloat ? "fp32" : "bf16") +
                (native ? " gqa native" : " kv repeated");
        ringDiff = std::max(
            ringDiff,
            checkRingAttention(*ringGroup, dev, parallel::RingKernel::Fused,
                               *fused, alone, work) /
                (*fused == at::kFloat ? kFp32.forward : kBf16.forward));
        balanced &= alone;
      } else {
        work += "; fused: NOT AVAILABLE";
        balanced &= dev.is_cuda(); // an old GPU may lack flash attention
      }
      if (const int64_t P = S - 2; P % spSize == 0 && P / ring % 2) {
        at::NoGradGuard noGrad;
        at::Tensor mine = tokens.narrow(0, lo, rows).narrow(1, 0, P);
        at::Tensor ref = single.forward(tokens.narrow(1, 0, P));
        fwd = std::max(fwd,
                       relDiff(model.forward(mine), ref.narrow(0, lo, rows)));
        if (!valueHead)
          fwd = std::max(fwd, relDiff(model.tokenStat(mine, false),
                                      tokenLogprobs(ref, tokens.narrow(1, 0, P))
                                          .narrow(0, lo, rows)));
      }
    }

    // A sequence whose sp chunks tp's position shards do not divide
    // (TensorParallel::shardSequence): padded at its end to fit.
    if (const int64_t P = S - spSize; tpSize > 1 && P / spSize % tpSize) {
      at::NoGradGuard noGrad;
      at::Tensor mine = tokens.narrow(0, lo, rows).narrow(1, 0, P);
      at::Tensor ref = single.forward(tokens.narrow(1, 0, P));
      fwd =
          std::max(fwd, relDiff(model.forward(mine), ref.narrow(0, lo, rows)));
      if (!valueHead)
        fwd = std::max(fwd, relDiff(model.tokenStat(mine, false),
                                    tokenLogprobs(ref, tokens.narrow(1, 0, P))
                                        .narrow(0, lo, rows)));
    }

    // A train step per loss: 2 minibatches, Adam with clipping; the last
    // loss with recomputed layers (which replays the all-to-alls).
    double trainDiff = 0, lossDiff = 0;
    const std::vector<std::string> losses =
        testfns::layoutTestLosses(valueHead);
    // Loss `name`'s step by one process and by this layout (options `lo`),
    // compared by `check(ref model, ref Adam, ref stats, model, Adam, stats)`.
    auto trainPair = [&](const std::string &name, TrainOptions lo,
                         const auto &check) {
      const int64_t M = 2; // minibatches
      FnProgram loss = testfns::stdlibFn(name);
      TrainBatch all = testfns::randomLossBatch(name, tokens);
      const AdamSettings as = testfns::layoutTestAdam();
      TrainOptions to;
      to.loss = lo.loss = &loss;
      to.minibatches = lo.minibatches = M;
      LlamaModel ref1(cfg, leaves(full), {});
      Adam refOpt(as);
      TrainStats refStats = trainStep(ref1, refOpt, all, to);
      LlamaModel m2 = makeModel(full);
      Adam opt(as);
      lo.dp = dpComm.get();
      // This rank's rows (every sp rank the same): its dp slice of every
      // minibatch.
      TrainStats st =
          trainStep(m2, opt, testfns::dpRows(all, M, dpRank, dp), lo);
      check(ref1, refOpt, refStats, m2, opt, st);
    };
    for (const std::string &name : losses) {
      TrainOptions lo;
      lo.recompute = &name == &losses.back();
      trainPair(
          name, lo,
          [&](LlamaModel &ref1, Adam &refOpt, const TrainStats &refStats,
              LlamaModel &m2, Adam &opt, const TrainStats &st) {
            if (bf16) { // the trained state is the fp32 masters
              ParamMap want =
                  shardParams(cfg, refOpt.masterWeights(), tpRank, tpSize);
              for (auto &[n, t] : opt.masterWeights())
                trainDiff = std::max(trainDiff, relNorm(t, want.at(n)));
            } else {
              ParamMap want = shardParams(cfg, ref1.params(), tpRank, tpSize);
              for (auto &[n, t] : m2.params())
                trainDiff =
                    std::max(trainDiff, (t.detach() - want.at(n).detach())
                                            .abs()
                                            .max()
                                            .item<double>());
            }
            lossDiff =
                std::max(lossDiff, std::fabs(st.loss - refStats.loss) /
                                       std::max(1.0, std::fabs(refStats.loss)));
          });
    }

    // ZeRO over the replicas: a train step as above, each rank keeping
    // 1/(dp x sp) of every Adam moment; gathered whole, the moments are
    // the single process's of this tp shard.
    std::string zeroNote;
    bool zeroOk = true;
    if (replicasComm && spSize > 1) {
      const int64_t R = replicasComm->size();
      TrainOptions lo;
      lo.replicas = replicasComm.get();
      lo.zero = true;
      trainPair(losses.front(), lo,
                [&](LlamaModel &ref1, Adam &refOpt, const TrainStats &,
                    LlamaModel &m2, Adam &opt, const TrainStats &) {
                  int64_t kept = 0, whole = 0;
                  for (auto &[n, t] : opt.moments1()) {
                    kept += t.numel();
                    whole += m2.params().at(n).numel();
                  }
                  // Slices are padded to equal length: at most one element
                  // more each.
                  const bool sliced =
                      kept * R <= whole + R * int64_t(opt.moments1().size());
                  opt.unshard();
                  double diff = 0;
                  auto worst = [&](const ParamMap &mine, const ParamMap &ref) {
                    ParamMap want = shardParams(cfg, ref, tpRank, tpSize);
                    for (auto &[n, t] : mine)
                      diff = std::max(diff,
                                      relNorm(t.detach(), want.at(n).detach()));
                  };
                  worst(bf16 ? opt.masterWeights() : m2.params(),
                        bf16 ? refOpt.masterWeights() : ref1.params());
                  if (!bf16) // in bf16 the moments carry the gradients' noise
                    for (auto [mine, ref] :
                         {std::pair(&opt.moments1(), &refOpt.moments1()),
                          std::pair(&opt.moments2(), &refOpt.moments2())})
                      worst(*mine, *ref);
                  zeroOk = sliced && diff < tol.train;
                  char buf[160];
                  std::snprintf(buf, sizeof buf,
                                "; ZeRO over dp x sp = %lld: moments %s, state "
                                "max relative norm diff %.3g",
                                static_cast<long long>(R),
                                sliced ? "sliced" : "NOT SLICED", diff);
                  zeroNote = buf;
                });
    }

    // A sequence one shorter, which sp does not divide where it divides S:
    // padded at its end, the same outputs.
    if (spSize > 1) {
      at::NoGradGuard noGrad;
      at::Tensor mine = tokens.narrow(0, lo, rows).narrow(1, 0, S - 1);
      at::Tensor ref = single.forward(tokens.narrow(1, 0, S - 1));
      fwd =
          std::max(fwd, relDiff(model.forward(mine), ref.narrow(0, lo, rows)));
    }

    // The constraints: generation with sp = 1 only, and USP layouts.
    bool rejected = true;
    if (spSize > 1) {
      if (!valueHead)
        rejected = rejects(
            [&] {
              GenerateOptions o;
              model.generate({{1, 2, 3}}, o);
            },
            "generation runs with sp = 1");
      // Bad USP layouts: ring not dividing sp, heads not divisible by the
      // ulysses factor, sub-groups swapped (wrong ranks where they differ).
      ParamMap shard = shardParams(cfg, full, tpRank, tpSize);
      auto rejectsSp = [&](const ModelConfig &c, const SequenceParallel &s,
                           const std::string &what) {
        return rejects(
            [&] {
              LlamaModel(c, shard, {tpComm.get(), tpRank, tpSize}, {}, s);
            },
            what);
      };
      const SequenceParallel usp{spComm.get(),      spRank,         spSize,
                                 ulyssesComm.get(), ringComm.get(), ring};
      SequenceParallel badRing = usp;
      badRing.ringSize = spSize + 1;
      rejected &= rejectsSp(cfg, badRing, "pick a ring size that divides sp");
      ModelConfig oneHead = cfg;
      oneHead.shape.heads = oneHead.shape.kvHeads = tpSize;
      if (ulysses > 1)
        rejected &= rejectsSp(oneHead, usp, "move the rest of sp to the ring");
      SequenceParallel swapped = usp;
      std::swap(swapped.ulysses, swapped.ring);
      if (ring > 1 && ulysses > 1 && usp.ringRank() != usp.ulyssesRank())
        rejected &= rejectsSp(cfg, swapped, "in that order");
    }

    std::printf(
        "rank %d sp %d/%d (ulysses %d x ring %d) tp %d/%d dp %d/%d %s: "
        "forward max relative diff %.3g, gradient max relative diff %.3g, "
        "parameters after train steps max %s %.3g, loss relative diff %.3g, "
        "constraints %s%s\n",
        rank, spRank, spSize, ulysses, ring, tpRank, tpSize, dpRank, dp,
        bf16 ? "bf16" : "fp32", fwd, bwd,
        bf16 ? "relative norm diff (masters)" : "diff", trainDiff, lossDiff,
        rejected ? "rejected" : "NOT REJECTED", zeroNote.c_str());
    if (ring > 1)
      std::printf("rank %d scores per ring rank (forward, backward): %s; ring "
                  "attention alone worst diff / tolerance %.3g, %s\n",
                  rank, work.c_str(), ringDiff,
                  balanced ? "zigzag balanced, contiguous not"
                           : "BALANCE NOT AS EXPECTED");
    world.barrier();
    return fwd < tol.forward && bwd < tol.gradient && trainDiff < tol.train &&
                   lossDiff < tol.loss && rejected && balanced && zeroOk &&
                   ringDiff < 1
               ? 0
               : 1;
  });
}
