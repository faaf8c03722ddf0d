//===- SeqParallelTest.cpp - USP sequence parallelism equivalence ---------===//
//
// Ulysses sp = 2 and 4, ring attention with ring 2 and 4, and sp 4 = 2
// ulysses x 2 ring, alone and with tp = 2 or dp = 2, give the
// single-process (sp = 1) forward logits, gradients and train steps within
// fp32 tolerance (SeqParallelWorker.cpp); with ring > 1 in the zigzag
// layout, which gives every ring rank the same attention work (counted),
// also for 13 tokens, which sp pads.
// With RLHF_DEVICE=cuda (the gpu label) the workers share the GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaGate.h"
#include "ProcessHarness.h"

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace rlhf::testing;

namespace {

void expectEquivalent(int world, int sp, int tp, bool valueHead = false,
                      int ring = 1, int seqLen = 16) {
  std::vector<std::string> env{"RLHF_SP=" + std::to_string(sp),
                               "RLHF_TP=" + std::to_string(tp),
                               "RLHF_RING=" + std::to_string(ring),
                               "RLHF_SEQ_LEN=" + std::to_string(seqLen)};
  if (valueHead)
    env.push_back("RLHF_VALUE_HEAD=1");
  auto ps = launch(RLHF_SEQ_PARALLEL_WORKER, world, env);
  ASSERT_TRUE(waitAll(ps, std::chrono::seconds(120))) << "workers hung";
  for (int r = 0; r < world; ++r) {
    std::string out = ps[r].output();
    EXPECT_TRUE(exitedOk(ps[r])) << "rank " << r << ":\n" << out;
    EXPECT_NE(out.find("forward max relative diff"), std::string::npos) << out;
    if (ring > 1) {
      EXPECT_NE(out.find("zigzag balanced"), std::string::npos) << out;
      // The CPU's flash kernel (the fp32 one) reads grouped KV heads itself.
      if (out.find("; fused fp32") != std::string::npos)
        EXPECT_NE(out.find("; fused fp32 gqa native"), std::string::npos)
            << out;
    }
    if (sp > 1) {
      EXPECT_NE(out.find("moments sliced"), std::string::npos) << out;
    }
    std::printf("%s", out.c_str());
  }
}

TEST(SeqParallel, Sp2) { expectEquivalent(2, 2, 1); }
TEST(SeqParallel, Sp4) { expectEquivalent(4, 4, 1); }
TEST(SeqParallel, Sp2Tp2) { expectEquivalent(4, 2, 2); }
TEST(SeqParallel, Sp2Dp2) { expectEquivalent(4, 2, 1); }
// The critic: values gathered over sp, the value loss.
TEST(SeqParallel, ValueHeadSp2) { expectEquivalent(2, 2, 1, true); }
// Ring attention (USP): pure ring, ulysses x ring, with tp and dp.
TEST(SeqParallel, Ring2) { expectEquivalent(2, 2, 1, false, 2); }
TEST(SeqParallel, Ring4) { expectEquivalent(4, 4, 1, false, 4); }
TEST(SeqParallel, Ulysses2Ring2) { expectEquivalent(4, 4, 1, false, 2); }
TEST(SeqParallel, Ring2Tp2) { expectEquivalent(4, 2, 2, false, 2); }
TEST(SeqParallel, Ring2Dp2) { expectEquivalent(4, 2, 1, false, 2); }
TEST(SeqParallel, ValueHeadRing2) { expectEquivalent(2, 2, 1, true, 2); }
// Sequences sp does not divide: padded at their end, after every real
// position, so causal attention leaves the real outputs as they were.
TEST(SeqParallel, Sp4Of13Tokens) { expectEquivalent(4, 4, 1, false, 1, 13); }
TEST(SeqParallel, Ulysses2Ring2Of13Tokens) {
  expectEquivalent(4, 4, 1, false, 2, 13);
}

} // namespace
