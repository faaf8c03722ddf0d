//===- ParallelOps.cpp - differentiable collectives of the model ----------===//

#include "ParallelOps.h"

#include <torch/torch.h>

#include <numeric>

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

struct GatherDim : torch::autograd::Function<GatherDim> {
  static at::Tensor forward(AutogradContext *ctx, at::Tensor x, int64_t c,
                            int64_t dim) {
    auto *cm = reinterpret_cast<Communicator *>(c);
    ctx->saved_data["rank"] = int64_t(cm->rank());
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["width"] = x.size(dim);
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
