//===- ReallocWorker.cpp - exhaustive reallocation round trips, one rank --===//
//
// For every ordered pair (A, B) of layouts of a 4-rank world (every mesh of
// 1, 2 or 4 aligned GPUs, every dp x tp x pp filling it), moves a tiny
// model's parameters A -> B -> A and checks, bit for bit, that each rank
// holds exactly its shard of B and then of A again: fp32 weights (master
// weights, Adam's moments) and bf16 ones (what calls compute with), which
// move half the bytes. RLHF_DEVICE=cuda keeps the shards on the GPU.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/Device.h"
#include "rlhf/runtime/Realloc.h"

#include <ATen/ATen.h>

#include <cstdio>

using namespace rlhf;

namespace {

bool same(const ParamMap &a, const ParamMap &b) {
  if (a.size() != b.size())
    return false;
  for (auto &[n, t] : a) {
    auto it = b.find(n);
    if (it == b.end() || !at::equal(t, it->second))
      return false;
  }
  return true;
}

} // namespace

int main() {
  return runWorker([](Communicator &world, c10::Device dev) {
    const int rank = world.rank();
    ModelConfig cfg;
    cfg.shape = ModelShape{4, 64, 4, 4, 176, 512, false, false};
    ParamMap full32 = toDevice(initParams(cfg, 3), dev), full16;
    for (auto &[n, t] : full32)
      full16[n] = t.to(at::kBFloat16);

    std::vector<Layout> layouts;
    for (int64_t size : {1, 2, 4})
      for (int64_t first = 0; first + size <= 4; first += size)
        for (int64_t tp = 1; tp <= size; tp *= 2)
          for (int64_t pp = 1; tp * pp <= size; pp *= 2)
            layouts.push_back({first, size / (tp * pp), tp, pp});
    int pairs = 0, bad = 0;
    ReallocStats stats, stats16;
    for (const Layout &a : layouts)
      for (const Layout &b : layouts) {
        for (bool half : {false, true}) {
          const ParamMap &full = half ? full16 : full32;
          auto opts = at::TensorOptions()
                          .dtype(half ? at::kBFloat16 : at::kFloat)
                          .device(dev);
          ReallocStats &st = half ? stats16 : stats;
          ParamMap mine = layoutShard(cfg, full, a, rank);
          ParamMap there = reallocate(cfg, mine, a, b, world, &st, opts);
          ParamMap back = reallocate(cfg, there, b, a, world, &st, opts);
          bool ok = same(there, layoutShard(cfg, full, b, rank)) &&
                    same(back, layoutShard(cfg, full, a, rank));
          if (!ok) {
            ++bad;
            std::printf(
                "rank %d: %s MISMATCH %ldx%ldx%ld@%ld -> %ldx%ldx%ld@%ld\n",
                rank, half ? "bf16" : "fp32", long(a.dp), long(a.tp),
                long(a.pp), long(a.firstGpu), long(b.dp), long(b.tp),
                long(b.pp), long(b.firstGpu));
          }
        }
        // The same pair as producer and consumer meshes of a batch.
        const int64_t rows = 8;
        at::Tensor global = at::arange(rows * 3, at::kFloat).view({rows, 3});
        at::Tensor held;
        for (int64_t d = 0; d < a.dp; ++d)
          if (a.gpu(d, a.pp - 1, 0) == rank)
            held = global.narrow(0, d * rows / a.dp, rows / a.dp).clone();
        at::Tensor got = transferBatch(held, rows, global, a, b, world);
        for (int64_t d = 0; d < b.dp; ++d)
          for (int64_t t = 0; t < b.tp; ++t)
            if (b.gpu(d, 0, t) == rank &&
                !at::equal(got,
                           global.narrow(0, d * rows / b.dp, rows / b.dp))) {
              ++bad;
              std::printf("rank %d: TRANSFER MISMATCH\n", rank);
            }
        ++pairs;
      }
    // bf16 moves exactly half the bytes of fp32 (the plans price 2 bytes).
    if (stats16.bytesSent * 2 != stats.bytesSent) {
      ++bad;
      std::printf("rank %d: bf16 sent %ld bytes, fp32 %ld\n", rank,
                  long(stats16.bytesSent), long(stats.bytesSent));
    }
    std::printf(
        "rank %d: %d ordered pairs of %zu layouts (parameters in fp32 and "
        "bf16, and batches), "
        "%d mismatches; sent %ld "
        "bytes in %ld messages, copied %ld locally\n",
        rank, pairs, layouts.size(), bad, long(stats.bytesSent),
        long(stats.messages), long(stats.bytesLocal));
    world.barrier();
    return bad ? 1 : 0;
  });
}
