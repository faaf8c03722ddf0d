//===- CApi.cpp - the C ABI of the rlhf runtime ---------------------------===//
//
// Exceptions stop here: every entry point catches, records the message and
// returns a failure value, since the caller is C (generated code).
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/rlhf_runtime.h"

#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Groups.h"
#include "rlhf/runtime/Model.h"
#include "rlhf/runtime/Realloc.h"

#include <ATen/ATen.h>

#include <string>

using namespace rlhf;

struct rlhf_ctx {
  RendezvousConfig cfg;
  std::unique_ptr<Communicator> world;
};

struct rlhf_model {
  rlhf_ctx *ctx;
  ModelConfig cfg;
  Layout layout;
  ParamMap params;
  ParallelGroups groups;
};

namespace {

thread_local std::string lastError;

template <typename T, typename F> T guard(T onError, F &&f) {
  try {
    lastError.clear();
    return f();
  } catch (const std::exception &e) {
    lastError = e.what();
  } catch (...) {
    lastError = "unknown error";
  }
  return onError;
}

Layout toLayout(const rlhf_layout *l) { return {l->first_gpu, l->dp, l->tp, l->pp}; }

} // namespace

extern "C" {

int rlhf_abi_version(void) { return RLHF_ABI_VERSION; }
const char *rlhf_last_error(void) { return lastError.c_str(); }

rlhf_ctx *rlhf_init(void) {
  return guard<rlhf_ctx *>(nullptr, [] {
    auto *c = new rlhf_ctx;
    c->cfg = RendezvousConfig::fromEnv();
    c->world = createGlooCommunicator(c->cfg);
    return c;
  });
}

int rlhf_rank(const rlhf_ctx *ctx) { return ctx->world->rank(); }
int rlhf_world_size(const rlhf_ctx *ctx) { return ctx->world->size(); }

int rlhf_barrier(rlhf_ctx *ctx) {
  return guard(0, [&] {
    ctx->world->barrier();
    return 1;
  });
}

void rlhf_finalize(rlhf_ctx *ctx) { delete ctx; }

rlhf_model *rlhf_model_create(rlhf_ctx *ctx, const rlhf_arch *a, const rlhf_layout *l,
                              uint64_t seed, const char *safetensors) {
  return guard<rlhf_model *>(nullptr, [&] {
    auto *m = new rlhf_model{ctx, {}, toLayout(l), {}, {}};
    m->cfg.shape = ModelShape{a->layers, a->hidden, a->heads, a->kv_heads, a->ffn,
                              a->vocab, a->tie_embeddings != 0, a->value_head != 0};
    m->cfg.maxSeq = a->max_seq;
    if (m->layout.firstGpu + m->layout.size() > ctx->world->size())
      throw Error("layout needs " + std::to_string(m->layout.firstGpu + m->layout.size()) +
                  " ranks, the job has " + std::to_string(ctx->world->size()));
    m->params = initialShard(m->cfg, m->layout, *ctx->world, seed,
                             safetensors ? safetensors : "");
    m->groups = makeGroups(*ctx->world, m->layout);
    return m;
  });
}

int rlhf_model_realloc(rlhf_model *m, const rlhf_layout *to) {
  return guard(0, [&] {
    Layout next = toLayout(to);
    m->params = reallocate(m->cfg, std::move(m->params), m->layout, next, *m->ctx->world);
    m->layout = next;
    m->groups = makeGroups(*m->ctx->world, next);
    return 1;
  });
}

int64_t rlhf_model_local_params(const rlhf_model *m) {
  int64_t n = 0;
  for (auto &[name, t] : m->params)
    n += t.numel();
  return n;
}

double rlhf_model_checksum(rlhf_model *m) {
  return guard(0.0, [&] {
    // Each parameter element counted once: replicated tensors only on tp
    // rank 0 of dp replica 0, shards only on dp replica 0.
    double local = 0;
    if (m->groups.member && m->groups.dpRank == 0)
      for (const ParamSpec &p : llamaParams(m->cfg.shape)) {
        auto it = m->params.find(p.name);
        if (it == m->params.end())
          continue;
        if (p.shard == Shard::Replicated && m->groups.tpRank != 0)
          continue;
        local += it->second.to(at::kDouble).sum().item<double>();
      }
    at::Tensor t = at::full({1}, local, at::kDouble);
    m->ctx->world->allReduceSum(t);
    return t.item<double>();
  });
}

void rlhf_model_destroy(rlhf_model *m) { delete m; }

} // extern "C"
