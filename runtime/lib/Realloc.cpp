//===- Realloc.cpp - executing parameter reallocation plans ---------------===//

#include "rlhf/runtime/Realloc.h"
#include "CudaIpc.h"
#include "FusedOps.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/HfCheckpoint.h"
#include "rlhf/runtime/SafeTensors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>

using namespace rlhf;

namespace {

int dimOf(Shard s) { return s == Shard::Dim1 ? 1 : 0; }

/// Element range [lo, hi) of the full parameter's sharded dimension for the
/// fractions of a move.
std::pair<int64_t, int64_t> elems(const ParamSpec &p, double lo, double hi) {
  int64_t full = p.shard == Shard::Dim1 ? p.cols : p.rows;
  return {int64_t(std::llround(lo * full)), int64_t(std::llround(hi * full))};
}

/// The view of `shard` (held by tensor rank `t` of `tp`) covering full-param
/// elements [a, b) of the sharded dimension.
at::Tensor slice(const ParamSpec &p, const at::Tensor &shard, int64_t t,
                 int64_t tp, int64_t a, int64_t b) {
  if (p.shard == Shard::Replicated)
    return shard;
  int64_t full = p.shard == Shard::Dim1 ? p.cols : p.rows;
  int64_t start = t * (full / tp);
  return shard.narrow(dimOf(p.shard), a - start, b - a);
}

} // namespace

ParamMap rlhf::layoutShard(const ModelConfig &cfg, const ParamMap &full,
                           const Layout &layout, int64_t gpu) {
  auto c = layout.coordsOf(gpu);
  if (!c)
    return {};
  std::vector<std::pair<std::string, at::Tensor>> pieces;
  for (const ParamSpec &p : llamaParams(cfg.shape)) {
    if (stageOf(p.layer, cfg.shape.layers, layout.pp) != c->s)
      continue;
    const at::Tensor &t = full.at(p.name);
    if (p.shard == Shard::Replicated) {
      pieces.emplace_back(p.name, t);
      continue;
    }
    int d = dimOf(p.shard);
    int64_t n = t.size(d) / layout.tp;
    pieces.emplace_back(p.name, t.narrow(d, c->t * n, n));
  }
  if (pieces.empty())
    return {};
  // A model of mixed dtypes or devices is kept as separate tensors.
  const at::Tensor &first = pieces[0].second;
  for (const auto &[name, t] : pieces)
    if (t.scalar_type() != first.scalar_type() ||
        t.device() != first.device()) {
      ParamMap out;
      for (const auto &[n, x] : pieces)
        out[n] = x.clone(at::MemoryFormat::Contiguous);
      return out;
    }
  return packShard(pieces, first.options());
}

namespace {

/// Every rank checks the same layouts, so a bad one fails everywhere at once
/// instead of leaving some ranks waiting for peers that do not exist.
void checkLayout(const Layout &l, const Communicator &world, const char *what) {
  if (l.dp < 1 || l.tp < 1 || l.pp < 1 || l.firstGpu < 0)
    throw Error(std::string(what) +
                " layout needs dp, tp, pp >= 1 and a first GPU >= 0");
  if (l.firstGpu + l.size() > world.size())
    throw Error(std::string(what) + " layout spans GPUs " +
                std::to_string(l.firstGpu) + ".." +
                std::to_string(l.firstGpu + l.size() - 1) +
                ", but the job has " + std::to_string(world.size()) + " ranks");
}

} // namespace

ParamMap rlhf::initialShard(const ModelConfig &cfg, const Layout &layout,
                            Communicator &world, uint64_t seed,
                            const std::string &path) {
  if (path.empty())
    return layoutShard(cfg, initParams(cfg, seed), layout, world.rank());
  // A Hugging Face directory (config.json and shards), one of our
  // checkpoints' model directories (OUT/checkpoints/step-N/MODEL), or a
  // safetensors file; rank 0 reads, the reallocation scatters.
  ParamMap full;
  if (world.rank() == 0) {
    std::error_code ec;
    const std::filesystem::path own =
        std::filesystem::path(path) / "model.safetensors";
    if (isHfCheckpoint(path))
      full = loadHfWeights(path, cfg.shape);
    else if (!std::filesystem::is_directory(path, ec))
      full = loadSafetensors(path);
    else if (std::filesystem::exists(own, ec))
      full = loadSafetensors(own.string());
    else
      throw Error("checkpoint '" + path +
                  "' is a directory with neither config.json (a Hugging Face "
                  "checkpoint) nor model.safetensors (a model of an rlhfc "
                  "checkpoint, OUT/checkpoints/step-N/MODEL)");
  }
  for (auto &[n, t] : full) // a bf16 or fp16 file becomes fp32 weights
    t = t.to(at::kFloat);
  return reallocate(cfg, std::move(full), {0, 1, 1, 1}, layout, world);
}

ParamMap rlhf::reallocate(const ModelConfig &cfg, ParamMap mine,
                          const Layout &from, const Layout &to,
                          Communicator &world, ReallocStats *stats,
                          const at::TensorOptions &opts) {
  const int64_t me = world.rank();
  checkLayout(from, world, "source");
  checkLayout(to, world, "target");
  for (const auto &[name, t] : mine)
    if (t.scalar_type() != opts.dtype())
      throw Error("rank " + std::to_string(me) + ": reallocation of '" + name +
                  "': the shard holds " +
                  std::string(at::toString(t.scalar_type())) +
                  " but the target is " + std::string(opts.dtype().name()));
  const int64_t elemBytes = int64_t(opts.dtype().itemsize());
  std::vector<ParamSpec> params = llamaParams(cfg.shape);
  // Every rank computes the same plan; GPUs are world ranks, all on one
  // "node" for planning purposes (the execution does not depend on it).
  ReallocPlan plan = planRealloc(params, from, to, cfg.shape.layers,
                                 std::max<int64_t>(world.size(), 1), elemBytes);
  ReallocStats local;
  ReallocStats &st = stats ? *stats : local;

  // Allocate the target shard, in one block (flatShard).
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  auto myTo = to.coordsOf(me);
  if (myTo)
    for (const ParamSpec &p : params) {
      if (stageOf(p.layer, cfg.shape.layers, to.pp) != myTo->s)
        continue;
      int64_t rows = p.rows, cols = p.cols;
      if (p.shard == Shard::Dim0)
        rows /= to.tp;
      if (p.shard == Shard::Dim1)
        cols /= to.tp;
      shapes.emplace_back(p.name, p.vector()
                                      ? std::vector<int64_t>{rows}
                                      : std::vector<int64_t>{rows, cols});
    }
  ParamMap out = flatShard(shapes, opts);
  auto myFrom = from.coordsOf(me);

  // Bucket the moves by (src, dst); walk pairs in one global order.
  std::map<std::pair<int64_t, int64_t>, std::vector<const SliceMove *>> buckets;
  for (const SliceMove &mv : plan.moves)
    buckets[{mv.src, mv.dst}].push_back(&mv);

  // This rank's whole source shard of parameter `i`.
  auto shardOf = [&](int64_t i) -> const at::Tensor & {
    const ParamSpec &p = params[size_t(i)];
    auto it = mine.find(p.name);
    if (it == mine.end() || !myFrom)
      throw Error("rank " + std::to_string(me) +
                  ": reallocation plan expects '" + p.name +
                  "' here, but this rank does not hold it");
    return it->second;
  };
  auto srcView = [&](const SliceMove &mv) {
    const ParamSpec &p = params[mv.param];
    auto [a, b] = elems(p, mv.lo, mv.hi);
    return slice(p, shardOf(mv.param), myFrom->t, from.tp, a, b);
  };
  auto dstView = [&](const SliceMove &mv) {
    const ParamSpec &p = params[mv.param];
    auto [a, b] = elems(p, mv.lo, mv.hi);
    return slice(p, out.at(p.name), myTo->t, to.tp, a, b);
  };

  // Pack one buffer per peer, post every send and receive together, then
  // unpack: a batch of async point-to-point operations cannot deadlock.
  auto bucketNumel = [&](const std::vector<const SliceMove *> &moves) {
    int64_t numel = 0;
    for (const SliceMove *mv : moves) {
      const ParamSpec &p = params[mv->param];
      auto [a, b] = elems(p, mv->lo, mv->hi);
      int64_t other = p.shard == Shard::Dim1 ? p.rows : p.cols;
      numel += p.shard == Shard::Replicated ? p.numel() : (b - a) * other;
    }
    return numel;
  };
  // Ranks sharing this rank's GPU read each slice straight from the
  // source shard (CUDA IPC): the source sends only the records of the
  // parameters it exposes, and waits for the reader's word that it is done.
  const bool onGpu = opts.device().is_cuda();
  auto direct = [&](int64_t peer) {
    return onGpu && world.sharesDevice(int(peer));
  };
  // The parameters a bucket reads, in the order of their first move, and
  // a buffer for their records.
  auto paramsOf = [&](const std::vector<const SliceMove *> &moves) {
    std::vector<int64_t> ps;
    for (const SliceMove *mv : moves)
      if (std::find(ps.begin(), ps.end(), mv->param) == ps.end())
        ps.push_back(mv->param);
    return ps;
  };
  auto records = [](size_t n) {
    return at::empty({int64_t(n) * ipc::kRecordBytes},
                     at::TensorOptions().dtype(at::kByte));
  };
  // Slice copies go in batches where the fused kernels serve (one launch
  // per 48 slices on CUDA instead of one each), else one copy_ each.
  const bool batched = fused::enabled(opts.device());
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;
  auto copy = [&](at::Tensor dst, at::Tensor src) {
    if (batched)
      copies.emplace_back(std::move(dst), std::move(src));
    else
      dst.copy_(src);
  };
  auto flushCopies = [&] {
    fused::copySlices(copies);
    copies.clear();
  };
  std::vector<Communicator::Peer> sends, recvs;
  std::vector<const std::vector<const SliceMove *> *> recvMoves;
  std::vector<bool> recvDirect;
  std::vector<int> readers; // peers that read this rank's shard directly
  bool synced = false;
  for (auto &[pair, moves] : buckets) {
    auto [src, dst] = pair;
    if (src == me && dst == me) {
      for (const SliceMove *mv : moves) {
        copy(dstView(*mv), srcView(*mv));
        st.bytesLocal += mv->bytes;
      }
    } else if (src == me && direct(dst)) {
      if (!synced) { // the peer reads what this stream wrote
        ipc::synchronize(opts.device());
        synced = true;
      }
      std::vector<int64_t> ps = paramsOf(moves);
      at::Tensor rec = records(ps.size());
      for (size_t i = 0; i < ps.size(); ++i)
        ipc::exportTensor(shardOf(ps[i]),
                          rec.data_ptr<uint8_t>() + i * ipc::kRecordBytes);
      for (const SliceMove *mv : moves)
        st.bytesSent += mv->bytes;
      sends.push_back({rec, int(dst)});
      readers.push_back(int(dst));
    } else if (src == me) {
      at::Tensor buf = at::empty({bucketNumel(moves)}, opts);
      int64_t off = 0;
      for (const SliceMove *mv : moves) {
        at::Tensor v = srcView(*mv);
        copy(buf.narrow(0, off, v.numel()).view(v.sizes()), v);
        off += v.numel();
      }
      st.bytesSent += buf.numel() * elemBytes;
      sends.push_back({buf, int(dst)});
    } else if (dst == me) {
      const bool d = direct(src);
      recvs.push_back({d ? records(paramsOf(moves).size())
                         : at::empty({bucketNumel(moves)}, opts),
                       int(src)});
      recvMoves.push_back(&moves);
      recvDirect.push_back(d);
    }
  }
  flushCopies(); // the send buffers are packed before they go
  st.messages += int64_t(sends.size() + recvs.size());
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  auto t0 = Clock::now();
  world.exchange(sends, recvs);
  st.exchangeSeconds += since(t0);
  std::vector<Communicator::Peer> doneSends, doneRecvs;
  // Peers' shards mapped through IPC stay mapped until the copies out of
  // them have finished: closing a handle does not wait for queued work.
  std::vector<at::Tensor> mapped;
  for (size_t i = 0; i < recvs.size(); ++i) {
    const std::vector<const SliceMove *> &moves = *recvMoves[i];
    if (recvDirect[i]) {
      int src = recvs[i].rank;
      auto srcAt = from.coordsOf(src);
      std::vector<int64_t> ps = paramsOf(moves);
      std::map<int64_t, at::Tensor> theirs;
      auto tm = Clock::now();
      for (size_t k = 0; k < ps.size(); ++k)
        theirs[ps[k]] = ipc::importTensor(
            recvs[i].tensor.data_ptr<uint8_t>() + k * ipc::kRecordBytes, opts);
      st.mapSeconds += since(tm);
      for (const SliceMove *mv : moves) {
        const ParamSpec &p = params[mv->param];
        auto [a, b] = elems(p, mv->lo, mv->hi);
        copy(dstView(*mv), slice(p, theirs.at(mv->param), srcAt ? srcAt->t : 0,
                                 from.tp, a, b));
        st.bytesReceived += mv->bytes;
      }
      flushCopies(); // queued before the next peer is mapped
      for (auto &[param, t] : theirs)
        mapped.push_back(t);
      doneSends.push_back({at::ones({1}, at::kByte), src});
      continue;
    }
    int64_t off = 0;
    for (const SliceMove *mv : moves) {
      at::Tensor v = dstView(*mv);
      copy(v, recvs[i].tensor.narrow(0, off, v.numel()).view(v.sizes()));
      off += v.numel();
    }
    st.bytesReceived += recvs[i].tensor.numel() * elemBytes;
  }
  flushCopies();
  if (!doneSends.empty() || !readers.empty()) {
    // The reads are done before the readers say so; the shard may go after.
    if (!doneSends.empty())
      ipc::synchronize(opts.device());
    mapped.clear();
    for (int r : readers)
      doneRecvs.push_back({at::zeros({1}, at::kByte), r});
    t0 = Clock::now();
    world.exchange(doneSends, doneRecvs);
    st.exchangeSeconds += since(t0);
  }
  return out; // the source shard is dropped: no redundant copy remains
}

at::Tensor rlhf::transferBatch(const at::Tensor &mine, int64_t rows,
                               const at::Tensor &like, const Layout &from,
                               const Layout &to, Communicator &world) {
  const int64_t me = world.rank();
  checkLayout(from, world, "producer");
  checkLayout(to, world, "consumer");
  auto head = [&](int64_t d) { return from.gpu(d, from.pp - 1, 0); };
  auto slice = [&](int64_t d, int64_t dp) {
    return std::make_pair(d * rows / dp, (d + 1) * rows / dp);
  };
  std::vector<int64_t> rowShape = like.sizes().vec();
  auto rowsTensor = [&](int64_t n) {
    std::vector<int64_t> shape = rowShape;
    shape[0] = n;
    return at::empty(shape, like.options());
  };
  auto myTo = to.coordsOf(me);
  at::Tensor out;
  if (myTo && myTo->s == 0) {
    auto [a, b] = slice(myTo->d, to.dp);
    out = rowsTensor(b - a);
  }
  std::vector<Communicator::Peer> sends, recvs;
  struct Pending {
    int64_t dstOff, n;
  };
  std::vector<Pending> pending;
  for (int64_t d = 0; d < from.dp; ++d) {
    auto [pa, pb] = slice(d, from.dp);
    int64_t src = head(d);
    for (int64_t d2 = 0; d2 < to.dp; ++d2) {
      auto [ca, cb] = slice(d2, to.dp);
      int64_t lo = std::max(pa, ca), hi = std::min(pb, cb);
      if (lo >= hi)
        continue;
      for (int64_t t = 0; t < to.tp; ++t) {
        int64_t dst = to.gpu(d2, 0, t);
        if (src == me && dst == me) {
          out.narrow(0, lo - ca, hi - lo)
              .copy_(mine.narrow(0, lo - pa, hi - lo));
        } else if (src == me) {
          sends.push_back(
              {mine.narrow(0, lo - pa, hi - lo).contiguous(), int(dst)});
        } else if (dst == me) {
          recvs.push_back({rowsTensor(hi - lo), int(src)});
          pending.push_back({lo - ca, hi - lo});
        }
      }
    }
  }
  world.exchange(sends, recvs);
  for (size_t i = 0; i < recvs.size(); ++i)
    out.narrow(0, pending[i].dstOff, pending[i].n).copy_(recvs[i].tensor);
  return out;
}
