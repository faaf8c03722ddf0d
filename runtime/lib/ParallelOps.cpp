//===- ParallelOps.cpp - differentiable collectives of the model ----------===//

#include "ParallelOps.h"

#include <torch/torch.h>

#include <numeric>
#include <optional>
#include <stdexcept>

using namespace rlhf;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

namespace {

// Autograd functions take the communicator as an integer handle.
int64_t handle(Communicator *c) { return reinterpret_cast<int64_t>(c); }
Communicator *comm(AutogradContext *ctx) {
  return reinterpret_cast<Communicator *>(ctx->saved_data["comm"].toInt());
}

struct CopyToGroup : torch::autograd::Function<CopyToGroup> {
  static at::Tensor forward(AutogradContext *ctx, at::Tensor x, int64_t c) {
    ctx->saved_data["comm"] = c;
    return x.view_as(x);
  }
  static tensor_list backward(AutogradContext *ctx, tensor_list g) {
    at::Tensor grad = g[0].contiguous().clone();
    comm(ctx)->allReduceSum(grad);
    return {grad, at::Tensor()};
  }
};

struct ReduceFromGroup : torch::autograd::Function<ReduceFromGroup> {
  static at::Tensor forward(AutogradContext *, at::Tensor x, int64_t c) {
    at::Tensor y = x.contiguous().clone();
    reinterpret_cast<Communicator *>(c)->allReduceSum(y);
    return y;
  }
  static tensor_list backward(AutogradContext *, tensor_list g) {
    return {g[0], at::Tensor()};
  }
};

/// Every rank's rows `x` [n, h], in rank order: [k n, h]. The chunks are
/// contiguous, so the collective writes them in place (no transposes).
at::Tensor allGatherRows(const at::Tensor &x, Communicator *c) {
  return c->allGather(x.contiguous());
}

struct GatherDim : torch::autograd::Function<GatherDim> {
  static at::Tensor forward(AutogradContext *ctx, at::Tensor x, int64_t c,
                            int64_t dim) {
    auto *cm = reinterpret_cast<Communicator *>(c);
    ctx->saved_data["rank"] = int64_t(cm->rank());
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["width"] = x.size(dim);
    if (dim == 0) // rank order is row order: the gathered block as it is
      return allGatherRows(x, cm);
    at::Tensor all = cm->allGather(x.unsqueeze(0)); // [k, ...]
    return at::cat(all.unbind(0), dim);
  }
  static tensor_list backward(AutogradContext *ctx, tensor_list g) {
    int64_t rank = ctx->saved_data["rank"].toInt();
    int64_t dim = ctx->saved_data["dim"].toInt();
    int64_t width = ctx->saved_data["width"].toInt();
    return {g[0].narrow(dim, rank * width, width).contiguous(), at::Tensor(),
            at::Tensor()};
  }
};

/// Part j of dim 0 to rank j, forward; the same exchange of the gradient
/// backward, which sends every part back where it came from.
struct AllToAll : torch::autograd::Function<AllToAll> {
  static at::Tensor forward(AutogradContext *ctx, at::Tensor x, int64_t c) {
    ctx->saved_data["comm"] = c;
    return reinterpret_cast<Communicator *>(c)->allToAll(x.contiguous());
  }
  static tensor_list backward(AutogradContext *ctx, tensor_list g) {
    return {comm(ctx)->allToAll(g[0].contiguous()), at::Tensor()};
  }
};

/// This rank's k-th of the rows of the sum of every rank's `x` [..., h],
/// its leading dimensions flattened: [T/k, h].
at::Tensor reduceScatterRows(const at::Tensor &x, Communicator *c) {
  return c->reduceScatterSum(x.reshape({-1, x.size(-1)}).contiguous());
}

struct GatherSeq : torch::autograd::Function<GatherSeq> {
  static at::Tensor forward(AutogradContext *ctx, at::Tensor x, int64_t c) {
    ctx->saved_data["comm"] = c;
    return allGatherRows(x, reinterpret_cast<Communicator *>(c));
  }
  static tensor_list backward(AutogradContext *ctx, tensor_list g) {
    return {reduceScatterRows(g[0], comm(ctx)), at::Tensor()};
  }
};

struct ScatterSeq : torch::autograd::Function<ScatterSeq> {
  static at::Tensor forward(AutogradContext *ctx, at::Tensor x, int64_t c) {
    ctx->saved_data["comm"] = c;
    ctx->saved_data["shape"] = x.sizes().vec();
    return reduceScatterRows(x, reinterpret_cast<Communicator *>(c));
  }
  static tensor_list backward(AutogradContext *ctx, tensor_list g) {
    return {allGatherRows(g[0], comm(ctx))
                .view(ctx->saved_data["shape"].toIntVector()),
            at::Tensor()};
  }
};

/// Up to three projections of one gathered input (q, k, v or gate, up),
/// with one all-gather each way for all of them.
struct GatheredLinears : torch::autograd::Function<GatheredLinears> {
  static constexpr int kMax = 3;
  // Absent weights and biases are empty optionals: autograd takes no
  // undefined tensor as an input.
  using Opt = std::optional<at::Tensor>;
  static tensor_list forward(AutogradContext *ctx, at::Tensor x, at::Tensor w0,
                             Opt w1, Opt w2, Opt b0, Opt b1, Opt b2,
                             int64_t c) {
    ctx->saved_data["comm"] = c;
    auto get = [](const Opt &t) { return t ? *t : at::Tensor(); };
    const at::Tensor ws[kMax] = {w0, get(w1), get(w2)},
                     bs[kMax] = {get(b0), get(b1), get(b2)};
    ctx->save_for_backward({x, ws[0], ws[1], ws[2], bs[0], bs[1], bs[2]});
    at::Tensor whole = allGatherRows(x, reinterpret_cast<Communicator *>(c));
    tensor_list out;
    for (int i = 0; i < kMax && ws[i].defined(); ++i)
      out.push_back(at::linear(whole, ws[i], bs[i]));
    return out;
  }
  static tensor_list backward(AutogradContext *ctx, tensor_list g) {
    tensor_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0];
    // The input again, rather than kept whole since forward.
    at::Tensor whole = allGatherRows(x, comm(ctx));
    tensor_list grads(2 * kMax + 2);
    at::Tensor gx;
    for (int i = 0; i < kMax && i < int(g.size()); ++i) {
      const at::Tensor &w = saved[size_t(1 + i)], &b = saved[size_t(4 + i)];
      if (!g[size_t(i)].defined())
        continue;
      at::Tensor gi = g[size_t(i)].reshape({-1, w.size(0)});
      // (needs_input_grad counts tensor inputs only, not these positions.)
      if (w.requires_grad())
        grads[size_t(1 + i)] = gi.t().mm(whole);
      if (b.defined() && b.requires_grad())
        grads[size_t(4 + i)] = gi.sum(0);
      gx = gx.defined() ? gx.addmm_(gi, w) : gi.mm(w);
    }
    if (gx.defined() && x.requires_grad())
      grads[0] = reduceScatterRows(gx, comm(ctx));
    return grads;
  }
};

} // namespace

at::Tensor parallel::copyToGroup(const at::Tensor &x, Communicator *c) {
  return CopyToGroup::apply(x, handle(c));
}

at::Tensor parallel::reduceFromGroup(const at::Tensor &x, Communicator *c) {
  return ReduceFromGroup::apply(x, handle(c));
}

at::Tensor parallel::gatherDim(const at::Tensor &x, Communicator *c,
                               int64_t dim) {
  return GatherDim::apply(x, handle(c), dim < 0 ? dim + x.dim() : dim);
}

at::Tensor parallel::gatherSeq(const at::Tensor &x, Communicator *c) {
  return GatherSeq::apply(x, handle(c));
}

at::Tensor parallel::scatterSeq(const at::Tensor &x, Communicator *c) {
  return ScatterSeq::apply(x, handle(c));
}

std::vector<at::Tensor>
parallel::gatheredLinears(const at::Tensor &x,
                          const std::vector<at::Tensor> &ws,
                          const std::vector<at::Tensor> &bs, Communicator *c) {
  if (ws.empty() || ws.size() > size_t(GatheredLinears::kMax))
    throw std::invalid_argument("gatheredLinears takes 1 to 3 weights");
  GatheredLinears::Opt w[GatheredLinears::kMax], b[GatheredLinears::kMax];
  for (size_t i = 0; i < ws.size(); ++i) {
    w[i] = ws[i];
    if (i < bs.size() && bs[i].defined())
      b[i] = bs[i];
  }
  return GatheredLinears::apply(x, *w[0], w[1], w[2], b[0], b[1], b[2],
                                handle(c));
}

at::Tensor parallel::seqToHeads(const at::Tensor &x, Communicator *c) {
  const int64_t k = c->size(), B = x.size(0), Sc = x.size(1), H = x.size(2),
                D = x.size(3);
  // Head group j to rank j; what arrives from rank i is position chunk i.
  at::Tensor parts =
      x.reshape({B, Sc, k, H / k, D}).permute({2, 0, 1, 3, 4}); // [k,B,Sc,..]
  return AllToAll::apply(parts, handle(c))
      .permute({1, 0, 2, 3, 4})
      .reshape({B, k * Sc, H / k, D});
}

at::Tensor parallel::headsToSeq(const at::Tensor &x, Communicator *c) {
  const int64_t k = c->size(), B = x.size(0), S = x.size(1), Hk = x.size(2),
                D = x.size(3);
  // Position chunk j to rank j; what arrives from rank i is head group i.
  at::Tensor parts =
      x.reshape({B, k, S / k, Hk, D}).permute({1, 0, 2, 3, 4}); // [k,B,S/k,..]
  return AllToAll::apply(parts, handle(c))
      .permute({1, 2, 0, 3, 4})
      .reshape({B, S / k, k * Hk, D});
}

void parallel::ulyssesToHeads(at::Tensor &q, at::Tensor &k, at::Tensor &v,
                              Communicator *c) {
  const int64_t sp = c->size();
  // sp divides the query heads, hence their multiple of the KV heads, so
  // repeating each KV head f times keeps it next to its query heads.
  if (int64_t f = sp / std::gcd(k.size(1), sp); f > 1) {
    k = k.repeat_interleave(f, 1);
    v = v.repeat_interleave(f, 1);
  }
  for (at::Tensor *t : {&q, &k, &v})
    *t = seqToHeads(t->transpose(1, 2), c).transpose(1, 2);
}
