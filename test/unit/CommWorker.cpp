//===- CommWorker.cpp - worker process for the communicator tests ---------===//
//
// Joins the world from the rendezvous env vars and all-reduces a tensor
// holding rank+1, twice, then reduce-scatters rows that differ per rank (and
// refuses rows that do not split evenly), then reduces gradients of mixed
// shapes and dtypes in buckets of a few bytes. RLHF_TEST_STALL_RANK=r makes
// rank r print "stalled" and sleep after the first all-reduce, so a test can
// kill it while the others wait in the second one. Last, with two ranks,
// an exchange posted by startExchange completes after a barrier.
// RLHF_TEST_IDENTITIES=a,b,... instead has rank r claim device identity r of
// the list, compare it with the others' over the store (as Device.cpp does
// to pick a backend), then build the world on that same store, and gather
// the identities over it as a program's start does to weigh the ranks that
// share a GPU (PlanHardware.h), rank r planning r+1 GiB.
//
//===----------------------------------------------------------------------===//

#include "PlanHardware.h"
#include "rlhf/runtime/Communicator.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Store.h"
#include "rlhf/runtime/Train.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <unistd.h>

namespace {

int compareDevices(const std::string &list) {
  std::vector<std::string> ids;
  for (size_t at = 0;;) {
    size_t comma = list.find(',', at);
    ids.push_back(list.substr(at, comma - at));
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  int rank = -1;
  try {
    rlhf::RendezvousConfig cfg = rlhf::RendezvousConfig::fromEnv();
    rank = cfg.rank;
    auto store = rlhf::openStore(cfg);
    bool distinct =
        rlhf::ranksHaveDistinctDevices(*store, cfg, ids.at(size_t(rank)));
    auto world = rlhf::createGlooCommunicator(cfg, store);
    at::Tensor t = at::ones({1}, at::kFloat);
    world->allReduceSum(t);
    std::printf("rank %d: distinct devices %s, all-reduce over the same "
                "store %g\n",
                rank, distinct ? "yes" : "no", t.item<double>());
    std::vector<double> planned;
    for (size_t r = 0; r < ids.size(); ++r)
      planned.push_back(double(r + 1) * (1 << 30));
    rlhf::GpuShare share = rlhf::gpuShare(
        rank,
        rlhf::gatherDevices(*world, rlhf::deviceIdOf(ids.at(size_t(rank)))),
        planned);
    std::string ranks;
    for (int r : share.ranks)
      ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    std::printf("rank %d: on its GPU ranks %s, planned %.0f GiB\n", rank,
                ranks.c_str(), share.plannedBytes / (1 << 30));
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
    return 1;
  }
}

} // namespace

int main() {
  if (const char *ids = std::getenv("RLHF_TEST_IDENTITIES"))
    return compareDevices(ids);
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
    // Rows that do not split evenly fail on every rank before anything is
    // posted, so no rank is left waiting.
    try {
      comm.reduceScatterSum(at::zeros({3 * n + 1}, at::kFloat));
      std::fprintf(stderr, "rank %d: uneven reduce-scatter did not fail\n",
                   rank);
      return 1;
    } catch (const rlhf::Error &e) {
      std::printf("rank %d/%d: uneven reduce-scatter refused: %s\n", rank, n,
                  e.what());
    }
    // Gradients of mixed sizes (some not divisible by n) and dtypes, in
    // buckets of 40 bytes: several per bucket, buckets split by dtype, and
    // tensors larger than a bucket. Element j of rank r's tensor t is
    // 1000 t + j + r, so the sum is n (1000 t + j) + expect - n.
    const std::vector<std::vector<int64_t>> shapes = {
        {5}, {3, 4}, {7}, {1}, {2, 9}};
    std::vector<at::Tensor> grads;
    for (size_t t = 0; t < shapes.size(); ++t) {
      auto dtype = t == 2 ? at::kDouble : at::kFloat;
      int64_t numel = 1;
      for (int64_t d : shapes[t])
        numel *= d;
      grads.push_back(
          (at::arange(numel, dtype) + 1000.0 * t + rank).view(shapes[t]));
    }
    for (bool zero : {false, true}) {
      std::vector<at::Tensor> sums =
          rlhf::reduceGradients(comm, grads, zero, /*bucketBytes=*/40);
      for (size_t t = 0; t < grads.size(); ++t) {
        at::Tensor want =
            (at::arange(grads[t].numel(), grads[t].options()) + 1000.0 * t) *
                n +
            expect - n;
        if (zero) { // this rank's slice of the flat sum
          int64_t chunk = (want.numel() + n - 1) / n;
          int64_t lo = std::min<int64_t>(want.numel(), rank * chunk);
          want = want.narrow(0, lo, std::min(chunk, want.numel() - lo));
        } else {
          want = want.view(shapes[t]);
        }
        if (!sums[t].sizes().equals(want.sizes()) ||
            !at::equal(sums[t], want)) {
          std::ostringstream got;
          got << sums[t];
          std::fprintf(
              stderr, "rank %d: bucketed %s of gradient %zu gave\n%s\n", rank,
              zero ? "reduce-scatter" : "all-reduce", t, got.str().c_str());
          return 1;
        }
      }
      std::printf("rank %d/%d: bucketed %s ok\n", rank, n,
                  zero ? "reduce-scatter" : "all-reduce");
    }
    // A posted exchange returns before its peer takes part: rank 0 posts
    // one and passes a barrier that rank 1 must pass before it posts the
    // matching one (were startExchange blocking, rank 0 would wait for rank
    // 1 in it, rank 1 for rank 0 in the barrier, and the timeout would
    // fail the test). Then both complete and swap their tensors.
    if (n == 2) {
      const int peer = 1 - rank;
      std::vector<rlhf::Communicator::Peer> sends{
          {at::full({4}, double(10 + rank), at::kFloat), peer}},
          recvs{{at::zeros({4}, at::kFloat), peer}};
      if (rank == 0) {
        auto posted = comm.startExchange(sends, recvs);
        comm.barrier();
        posted->wait();
      } else {
        comm.barrier();
        comm.exchange(sends, recvs);
      }
      if (!at::equal(recvs[0].tensor,
                     at::full({4}, double(10 + peer), at::kFloat))) {
        std::fprintf(stderr, "rank %d: posted exchange received %f\n", rank,
                     recvs[0].tensor[0].item<double>());
        return 1;
      }
      std::printf("rank %d/%d: posted exchange ok\n", rank, n);
    }
    comm.barrier();
    return 0;
  });
}
