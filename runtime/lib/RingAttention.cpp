//===- RingAttention.cpp - causal attention over a ring of ranks ----------===//
//
// Load balance: with contiguous chunks (ring rank i holding positions
// [i n, (i + 1) n)) the causal mask leaves rank i i + 1 blocks to compute
// and rank 0 one, and every ring step waits for the slowest rank. The model
// therefore runs the zigzag layout (zigzagLayout): rank r holds chunks r
// and 2 ring - 1 - r of 2 ring, so each rank computes the three quarters of
// its own block the causal mask leaves and half of every other block (all
// its queries against
// the earlier block's first chunk, or its later chunk's queries against the
// whole block), the same work on every rank, which is what the cost model
// prices. What a block computes follows from the positions alone
// (planBlocks: the pairs of spans the mask does not hide), so forward and
// backward pick the same rows, keys and masks.
//
//===----------------------------------------------------------------------===//

#include "RingBlocks.h"

#include "rlhf/runtime/Error.h"

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

using namespace rlhf;
using namespace rlhf::parallel;
using namespace rlhf::parallel::ring;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

//===----------------------------------------------------------------------===//
// What the kernels share (RingBlocks.h)
//===----------------------------------------------------------------------===//

std::atomic<int64_t> &ring::workCounter(bool backward) {
  static std::atomic<int64_t> forward{0}, backwardWork{0};
  return backward ? backwardWork : forward;
}

Shift::Shift(Communicator *ring, const at::Tensor &t) {
  const int r = ring->rank(), n = ring->size();
  sends = {{t.contiguous(), (r + 1) % n}};
  recvs = {{at::empty_like(sends[0].tensor), (r + n - 1) % n}};
  pending = ring->startExchange(sends, recvs);
}

at::Tensor Shift::arrived() {
  pending->wait();
  return recvs[0].tensor;
}

std::vector<Block> ring::planBlocks(const std::vector<Span> &qs,
                                    const std::vector<Span> &ks,
                                    bool keepDiagonals) {
  std::vector<Block> out;
  int64_t qo = 0;
  for (const Span &a : qs) {
    int64_t ko = 0;
    for (const Span &b : ks) {
      // Skip a pair whose every key comes after every query.
      if (a.size && b.size && b.first <= a.first + a.size - 1) {
        const bool masked = b.first + b.size - 1 > a.first;
        out.push_back({qo, a.size, ko, b.size, masked,
                       masked && a.first == b.first && a.size == b.size});
      }
      ko += b.size;
    }
    qo += a.size;
  }
  // A merged rectangle is masked if a part is (the mask, from the
  // positions, is right either way); under zigzag the rank's own block then
  // skips the quarter the mask hides (its first chunk's queries against its
  // second chunk's keys).
  auto merge = [&](auto joins) {
    std::vector<Block> merged;
    for (const Block &x : out) {
      const bool apart =
          keepDiagonals &&
          (x.masked || (!merged.empty() && merged.back().masked));
      if (!merged.empty() && !apart && joins(merged.back(), x)) {
        Block &m = merged.back();
        m.rows = x.row + x.rows - m.row;
        m.cols = x.col + x.cols - m.col;
        m.masked |= x.masked;
        m.diagonal = false;
      } else {
        merged.push_back(x);
      }
    }
    out = std::move(merged);
  };
  merge([](const Block &m, const Block &x) {
    return m.row == x.row && m.rows == x.rows && m.col + m.cols == x.col;
  });
  std::stable_sort(out.begin(), out.end(), [](const Block &x, const Block &y) {
    return std::tie(x.col, x.cols, x.row) < std::tie(y.col, y.cols, y.row);
  });
  merge([](const Block &m, const Block &x) {
    return m.col == x.col && m.cols == x.cols && m.row + m.rows == x.row;
  });
  return out;
}

bool ring::masksAreCausal(const RingLayout &layout, int i) {
  for (const std::vector<Span> &ks : layout)
    for (const Block &b : planBlocks(layout[size_t(i)], ks, true))
      if (b.masked && !b.diagonal)
        return false;
  return true;
}

std::vector<int64_t> ring::flatten(const RingLayout &layout) {
  std::vector<int64_t> flat;
  for (const std::vector<Span> &spans : layout) {
    flat.push_back(int64_t(spans.size()));
    for (const Span &s : spans) {
      flat.push_back(s.first);
      flat.push_back(s.size);
    }
  }
  return flat;
}

RingLayout ring::unflatten(const std::vector<int64_t> &flat) {
  RingLayout layout;
  for (size_t i = 0; i < flat.size();) {
    std::vector<Span> &spans = layout.emplace_back();
    for (int64_t c = flat[i++]; c > 0; --c, i += 2)
      spans.push_back({flat[i], flat[i + 1]});
  }
  return layout;
}

void ring::merge(at::Tensor o, at::Tensor l, const at::Tensor &blockOut,
                 const at::Tensor &blockLse) {
  at::Tensor merged = at::logaddexp(l, blockLse);
  o.mul_((l - merged).exp().unsqueeze(-1))
      .add_(blockOut * (blockLse - merged).exp().unsqueeze(-1));
  l.copy_(merged);
}

//===----------------------------------------------------------------------===//
// Explicit scores
//===----------------------------------------------------------------------===//

namespace {

/// The shapes of one rank's attention. Queries are handled grouped by KV
/// head and position-major, [B, Hkv, n g, D] (row p g + gi is query head
/// kv g + gi at local position p), so GQA needs no repeated keys (a block's
/// key gradient sums over the group by the matmul itself) and a range of
/// positions is a range of rows.
struct Dims {
  int64_t B, H, n, D, Hkv, g;
  explicit Dims(const at::Tensor &q, const at::Tensor &k)
      : B(q.size(0)), H(q.size(1)), n(q.size(2)), D(q.size(3)), Hkv(k.size(1)),
        g(q.size(1) / k.size(1)) {}
  at::Tensor grouped(const at::Tensor &t) const {
    return t.to(at::kFloat)
        .reshape({B, Hkv, g, n, D})
        .transpose(2, 3)
        .reshape({B, Hkv, n * g, D});
  }
  at::Tensor ungrouped(const at::Tensor &t) const {
    return t.reshape({B, Hkv, n, g, D}).transpose(2, 3).reshape({B, H, n, D});
  }
};

at::Tensor positionsOf(const std::vector<Span> &spans,
                       const at::TensorOptions &o) {
  std::vector<at::Tensor> parts;
  for (const Span &s : spans)
    parts.push_back(at::arange(s.first, s.first + s.size, o));
  return at::cat(parts);
}

/// One rank's side of the ring: its grouped, pre-scaled queries, every
/// rank's positions, the plan of each block and the scores of a block.
struct Ring {
  Communicator *comm;
  const Dims &d;
  RingLayout layout;
  int i;
  at::Tensor qg;
  std::vector<at::Tensor> pos; ///< each ring rank's positions

  Ring(Communicator *c, const Dims &dims, RingLayout l, const at::Tensor &q)
      : comm(c), d(dims), layout(std::move(l)), i(c->rank()),
        qg(d.grouped(q) / std::sqrt(double(d.D))) {
    for (const std::vector<Span> &spans : layout)
      pos.push_back(positionsOf(spans, q.options().dtype(at::kLong)));
  }

  /// ring::circulate over explicit blocks (masked rectangles merged).
  template <typename Visit, typename Moved>
  void circulate(at::Tensor kv, const Visit &visit, const Moved &moved) const {
    ring::circulate(comm, layout, /*keepDiagonals=*/false, std::move(kv), visit,
                    moved);
  }
  /// `t`'s rows of the block's query positions.
  at::Tensor rows(const at::Tensor &t, const Block &b) const {
    return t.narrow(2, b.row * d.g, b.rows * d.g);
  }
  /// Scores of block j's keys k, masked where a key comes after its query.
  at::Tensor scores(const at::Tensor &k, int j, const Block &b,
                    std::atomic<int64_t> &work) const {
    at::Tensor s =
        at::matmul(rows(qg, b), colsOf(k, b).to(at::kFloat).transpose(-1, -2));
    if (b.masked) {
      at::Tensor after = pos[size_t(j)].narrow(0, b.col, b.cols).unsqueeze(0) >
                         pos[size_t(i)]
                             .narrow(0, b.row, b.rows)
                             .repeat_interleave(d.g)
                             .unsqueeze(-1); // [rows g, cols]
      s.masked_fill_(after, -std::numeric_limits<float>::infinity());
    }
    work += d.B * d.H * b.rows * b.cols;
    return s;
  }
};

// Autograd functions take the communicator as an integer handle.
struct RingAttention : torch::autograd::Function<RingAttention> {
  static at::Tensor forward(AutogradContext *ctx, at::Tensor q, at::Tensor k,
                            at::Tensor v, int64_t c,
                            std::vector<int64_t> layout) {
    const Dims d(q, k);
    Ring ring(reinterpret_cast<Communicator *>(c), d, unflatten(layout), q);
    // Keys and values travel together, in the compute dtype.
    at::Tensor kv = at::stack({k, v}).contiguous();
    const auto fp32 = ring.qg.options();
    at::Tensor out = at::zeros({d.B, d.Hkv, d.n * d.g, d.D}, fp32);
    at::Tensor lse = at::full({d.B, d.Hkv, d.n * d.g},
                              -std::numeric_limits<float>::infinity(), fp32);
    // Step 0 is the rank's own block, where every query sees itself, so
    // every row's log-sum-exp is finite from then on.
    auto visit = [&](int j, const at::Tensor &kv, const Block &b) {
      at::Tensor sc = ring.scores(kv[0], j, b, workCounter(false));
      at::Tensor blockLse = sc.logsumexp(-1);
      // A row with no key in this block: probabilities 0, not NaN.
      at::Tensor by = blockLse.masked_fill(blockLse.isneginf(), 0);
      at::Tensor blockOut = at::matmul((sc - by.unsqueeze(-1)).exp(),
                                       colsOf(kv[1], b).to(at::kFloat));
      ring::merge(ring.rows(out, b), ring.rows(lse, b), blockOut, blockLse);
    };
    ring.circulate(kv, visit, [] {});
    at::Tensor result = d.ungrouped(out).to(q.scalar_type()).contiguous();
    ctx->saved_data["comm"] = c;
    ctx->saved_data["layout"] = layout;
    ctx->save_for_backward({q, k, v, result, lse});
    return result;
  }

  static tensor_list backward(AutogradContext *ctx, tensor_list grads) {
    const tensor_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2],
                     &lse = saved[4];
    const Dims d(q, k);
    Ring ring(reinterpret_cast<Communicator *>(ctx->saved_data["comm"].toInt()),
              d, unflatten(ctx->saved_data["layout"].toIntVector()), q);
    at::Tensor dOut = d.grouped(grads[0]);
    // The softmax backward's row term, sum_k P dP = dOut . out.
    at::Tensor delta = (dOut * d.grouped(saved[3])).sum(-1, /*keepdim=*/true);
    at::Tensor dq = at::zeros_like(ring.qg);
    auto visit = [&](int j, const at::Tensor &kv, at::Tensor &dkv,
                     const Block &b) {
      at::Tensor p = (ring.scores(kv[0], j, b, workCounter(true)) -
                      ring.rows(lse, b).unsqueeze(-1))
                         .exp();
      at::Tensor dO = ring.rows(dOut, b);
      at::Tensor kf = colsOf(kv[0], b).to(at::kFloat),
                 vf = colsOf(kv[1], b).to(at::kFloat);
      colsOf(dkv[1], b).add_(at::matmul(p.transpose(-1, -2), dO));
      at::Tensor ds =
          p * (at::matmul(dO, vf.transpose(-1, -2)) - ring.rows(delta, b));
      ring.rows(dq, b).add_(at::matmul(ds, kf));
      colsOf(dkv[0], b).add_(
          at::matmul(ds.transpose(-1, -2), ring.rows(ring.qg, b)));
    };
    const at::Tensor dkv =
        circulateGradients(ring.comm, ring.layout, /*keepDiagonals=*/false,
                           at::stack({k, v}).contiguous(), visit);
    const double scale = 1.0 / std::sqrt(double(d.D));
    return {d.ungrouped(dq * scale).to(q.scalar_type()),
            dkv[0].to(k.scalar_type()), dkv[1].to(v.scalar_type()),
            at::Tensor(), at::Tensor()};
  }
};

} // namespace

RingLayout parallel::zigzagLayout(int64_t S, int ring) {
  if (ring == 1)
    return {{{0, S}}};
  if (S % (2 * ring))
    throw Error("a sequence of " + std::to_string(S) +
                " positions does not split into the 2 x ring = " +
                std::to_string(2 * ring) +
                " equal chunks of the zigzag "
                "layout; pad it to a multiple of " +
                std::to_string(2 * ring));
  const int64_t c = S / (2 * ring);
  RingLayout layout;
  for (int r = 0; r < ring; ++r)
    layout.push_back({{r * c, c}, {(2 * ring - 1 - r) * c, c}});
  return layout;
}

at::Tensor parallel::ringAttention(const at::Tensor &q, const at::Tensor &k,
                                   const at::Tensor &v, Communicator *ring,
                                   const RingLayout &layout,
                                   RingKernel kernel) {
  if (q.dim() != 4 || k.dim() != 4 || k.sizes() != v.sizes() ||
      k.size(1) == 0 || q.size(1) % k.size(1) || q.size(2) != k.size(2))
    throw Error("ring attention needs q [B, H, n, D] and k, v [B, Hkv, n, D] "
                "with H a multiple of Hkv; got q " +
                c10::str(q.sizes()) + ", k " + c10::str(k.sizes()));
  bool fits = int(layout.size()) == ring->size();
  for (size_t r = 0; fits && r < layout.size(); ++r) {
    int64_t n = 0;
    for (const Span &s : layout[r])
      n += s.size;
    fits = n == q.size(2);
  }
  if (!fits)
    throw Error("ring attention's layout must give each of the " +
                std::to_string(ring->size()) + " ring ranks " +
                std::to_string(q.size(2)) +
                " positions, as many as q holds; build it with zigzagLayout");
  const bool fused = kernel != RingKernel::Explicit &&
                     fusedRingApplies(q, k, v, layout, ring->rank());
  if (kernel == RingKernel::Fused && !fused)
    throw Error("ring attention's fused kernel does not apply to " +
                std::string(q.is_cuda() ? "CUDA" : "CPU") + " " +
                std::string(c10::toString(q.scalar_type())) +
                " tensors of head size " + std::to_string(q.size(3)) +
                " at this layout; use RingKernel::Auto");
  if (fused)
    return detail::ringAttentionFused(q, k, v, ring, layout);
  return RingAttention::apply(q, k, v, reinterpret_cast<int64_t>(ring),
                              flatten(layout));
}

RingWork parallel::ringWork() {
  return {workCounter(false), workCounter(true)};
}
