//===- CommWorker.cpp - worker process for the communicator tests ---------===//
//
// Joins the world from the rendezvous env vars and all-reduces a tensor
// holding rank+1, twice, then reduce-scatters rows that differ per rank.
// RLHF_TEST_STALL_RANK=r makes rank r print "stalled" and sleep after the first
// all-reduce, so a test can kill it while the others wait in the second one.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/Communicator.h"
#include "rlhf/runtime/Error.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
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
    // Row i of rank r's [3n, 2] input holds (100 r + i, -i): this rank's
    // rows of the sum are those of its third of dim 0.
    at::Tensor i = at::arange(3 * n, at::kFloat).unsqueeze(1);
    at::Tensor in = at::cat({i + 100 * rank, -i}, 1);
    at::Tensor mine = comm.reduceScatterSum(in);
    at::Tensor rows = i.narrow(0, 3 * rank, 3);
    at::Tensor expected =
        at::cat({n * rows + 100 * expect - 100 * n, -n * rows}, 1);
    if (!mine.sizes().equals({3, 2}) || !at::equal(mine, expected)) {
      std::ostringstream got;
      got << mine;
      std::fprintf(stderr, "rank %d: reduce-scatter gave\n%s\n", rank,
                   got.str().c_str());
      return 1;
    }
    std::printf("rank %d/%d: reduce-scatter ok (first %g)\n", rank, n,
                mine[0][0].item<double>());
    comm.barrier();
    return 0;
  });
}
