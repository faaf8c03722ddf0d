//===- ModelParams.cpp - a LLaMA's parameters and their shards ------------===//
//
// Drawing parameters, the config of a Hugging Face architecture, and the
// shards a rank holds: one aligned block per shard (flatShard), laid out
// from a full model or moved between devices and dtypes.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/Model.h"

#include "rlhf/runtime/Error.h"

#include <c10/util/accumulate.h>
#include <torch/torch.h>

#include <algorithm>
#include <mutex>

using namespace rlhf;

ParamMap rlhf::initParams(const ModelConfig &cfg, uint64_t seed,
                          at::TensorOptions options) {
  const bool host = options.device().is_cpu();
  at::Generator device =
      host ? at::Generator()
           : at::globalContext().defaultGenerator(options.device());
  ParamMap out;
  for (const ParamSpec &p : llamaParams(cfg.shape)) {
    const uint64_t s =
        seed ^ (std::hash<std::string>{}(p.name) * 0x9E3779B97F4A7C15ull);
    std::vector<int64_t> sizes{p.rows};
    if (!p.vector())
      sizes.push_back(p.cols);
    at::Tensor t;
    if (p.name.find("norm") != std::string::npos) {
      t = at::ones({p.rows}, options);
    } else if (host) {
      t = at::empty(sizes, at::kFloat)
              .normal_(0.0, 0.02, at::make_generator<at::CPUGeneratorImpl>(s))
              .to(options.dtype().toScalarType());
    } else {
      {
        std::lock_guard<std::mutex> lock(device.mutex());
        device.set_current_seed(s);
      }
      t = at::empty(sizes, options).normal_(0.0, 0.02, device);
    }
    out[p.name] = t;
  }
  return out;
}

ModelConfig rlhf::modelConfigOf(const HfArch &arch, int64_t maxSeq) {
  ModelConfig cfg;
  cfg.shape = arch.shape;
  cfg.maxSeq = maxSeq;
  cfg.ropeTheta = arch.ropeTheta;
  cfg.normEps = arch.normEps;
  cfg.rope = arch.rope;
  return cfg;
}

ParamMap rlhf::flatShard(
    const std::vector<std::pair<std::string, std::vector<int64_t>>> &shapes,
    const at::TensorOptions &opts) {
  ParamMap out;
  if (shapes.empty())
    return out;
  // 256 bytes: the alignment cudaMalloc gives, which GEMMs and vectorised
  // kernels expect of each tensor's start.
  const int64_t align = std::max<int64_t>(1, 256 / opts.dtype().itemsize());
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const auto &[name, shape] : shapes) {
    offsets.push_back(total);
    total += (c10::multiply_integers(shape) + align - 1) / align * align;
  }
  at::Tensor flat = at::empty({total}, opts);
  // Tensors on the block's storage, not autograd views of it: each may
  // become a leaf that requires grad and be updated in place, as separately
  // allocated parameters are.
  at::NoGradGuard plain;
  for (size_t i = 0; i < shapes.size(); ++i)
    out[shapes[i].first] =
        at::empty({0}, opts).set_(flat.storage(), offsets[i], shapes[i].second);
  return out;
}

ParamMap
rlhf::packShard(const std::vector<std::pair<std::string, at::Tensor>> &pieces,
                const at::TensorOptions &opts) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  for (const auto &[name, t] : pieces)
    shapes.emplace_back(name, t.sizes().vec());
  ParamMap out = flatShard(shapes, opts);
  for (const auto &[name, t] : pieces)
    out.at(name).copy_(t);
  return out;
}

ParamMap rlhf::toDevice(ParamMap params, c10::Device device,
                        std::optional<at::ScalarType> dtype, bool copy) {
  std::vector<std::pair<std::string, at::Tensor>> pieces;
  bool moves = copy, mixed = false;
  for (const auto &[n, t] : params) {
    if (!t.defined())
      continue;
    at::ScalarType want = dtype.value_or(t.scalar_type());
    moves = moves || t.device() != device || t.scalar_type() != want;
    mixed = mixed || (!pieces.empty() &&
                      want != dtype.value_or(pieces[0].second.scalar_type()));
    pieces.emplace_back(n, t);
  }
  if (!moves || pieces.empty())
    return params;
  if (mixed) { // tensor by tensor
    for (auto &[n, t] : params)
      if (t.defined())
        t = t.to(device, dtype.value_or(t.scalar_type()),
                 /*non_blocking=*/false, copy);
    return params;
  }
  // In the source's order in memory where it is one block (a shard's q, k,
  // v stay back to back: stackedRows), else by name.
  const at::Storage &first = pieces[0].second.storage();
  if (std::all_of(pieces.begin(), pieces.end(), [&](const auto &x) {
        return x.second.storage().is_alias_of(first);
      }))
    std::sort(pieces.begin(), pieces.end(), [](auto &x, auto &y) {
      return x.second.storage_offset() < y.second.storage_offset();
    });
  ParamMap out = packShard(
      pieces, at::TensorOptions()
                  .dtype(dtype.value_or(pieces[0].second.scalar_type()))
                  .device(device));
  for (auto &[n, t] : params)
    if (!t.defined())
      out[n] = t;
  return out;
}

ParamMap rlhf::shardParams(const ModelConfig &cfg, const ParamMap &full,
                           int tpRank, int tpSize) {
  ParamMap out;
  for (const ParamSpec &p : llamaParams(cfg.shape)) {
    const at::Tensor &t = full.at(p.name);
    switch (p.shard) {
    case Shard::Replicated:
      out[p.name] = t.clone();
      break;
    case Shard::Dim0: {
      int64_t n = t.size(0) / tpSize;
      out[p.name] = t.narrow(0, tpRank * n, n).clone();
      break;
    }
    case Shard::Dim1: {
      int64_t n = t.size(1) / tpSize;
      out[p.name] = t.narrow(1, tpRank * n, n).clone();
      break;
    }
    }
  }
  return out;
}
