//===- CommWorker.cpp - worker process for the communicator tests ---------===//
//
// Joins the world from the rendezvous env vars and all-reduces a tensor
// holding rank+1, twice. RLHF_TEST_STALL_RANK=r makes rank r print "stalled"
// and sleep after the first all-reduce, so a test can kill it while the
// others wait in the second one.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/Communicator.h"
#include "rlhf/runtime/Error.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

int main() {
  return rlhf::runGlooWorker([](rlhf::Communicator &comm) {
    const int rank = comm.rank();
    const int n = comm.size();
    const double expect = n * (n + 1) / 2.0;
    for (int round = 0; round < 2; ++round) {
      at::Tensor t = at::full({1024}, double(rank + 1), at::kFloat);
      comm.allReduceSum(t);
      if (!at::allclose(t, at::full({1024}, expect, at::kFloat))) {
        std::fprintf(stderr, "rank %d: all-reduce gave %f, expected %f\n", rank,
                     t[0].item<double>(), expect);
        return 1;
      }
      std::printf("rank %d/%d: all-reduce %d ok (sum %g)\n", rank, n, round,
                  t[0].item<double>());
      std::fflush(stdout);
      const char *stall = std::getenv("RLHF_TEST_STALL_RANK");
      if (round == 0 && stall && std::atoi(stall) == rank) {
        std::printf("stalled\n");
        std::fflush(stdout);
        for (;;)
          pause();
      }
    }
    comm.barrier();
    return 0;
  });
}
