//===- StepGraphs.cpp - decode steps replayed as CUDA graphs --------------===//

#include "StepGraphs.h"

#include "rlhf/runtime/Error.h"

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

using namespace rlhf;

struct StepGraphs::Impl {
  c10::Device device;
  bool require = false; ///< RLHF_CUDA_GRAPHS=require: a failed capture throws
  bool failed = false;
  std::map<int64_t, std::unique_ptr<at::cuda::CUDAGraph>> graphs;
  /// Every capture shares the first's memory pool: graphs of one generation
  /// replay one after another, never concurrently.
  at::cuda::MempoolId_t pool{0, 0};
};

StepGraphs::StepGraphs(c10::Device device, bool enabled) {
  const char *env = std::getenv("RLHF_CUDA_GRAPHS");
  if (env && !std::strcmp(env, "0"))
    enabled = false;
  if (enabled && device.is_cuda())
    impl = std::make_unique<Impl>(
        Impl{device, env && !std::strcmp(env, "require")});
}

StepGraphs::~StepGraphs() = default;

bool StepGraphs::active() const { return impl && !impl->failed; }

int64_t StepGraphs::captures() const {
  return impl ? int64_t(impl->graphs.size()) : 0;
}

void StepGraphs::run(int64_t key, const std::function<void()> &step) {
  if (!active()) {
    step();
    return;
  }
  if (auto it = impl->graphs.find(key); it != impl->graphs.end()) {
    it->second->replay();
    return;
  }
  // Capture needs a side stream, and lazy initialisation (cuBLAS handles and
  // workspaces) must happen before it: warm up there eagerly, which also
  // computes this step, then capture the same work.
  const auto index = impl->device.index();
  c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(index);
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, index);
  at::cuda::CUDAEvent ready;
  ready.record(current);
  ready.block(side);
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  {
    c10::cuda::CUDAStreamGuard guard(side);
    step();
    try {
      graph->capture_begin(impl->pool);
      try {
        step();
      } catch (...) {
        graph->capture_end();
        throw;
      }
      graph->capture_end();
    } catch (const std::exception &e) {
      impl->failed = true;
      std::string what = e.what();
      if (impl->require)
        throw Error("capturing a decode step as a CUDA graph failed "
                    "(RLHF_CUDA_GRAPHS=require): " +
                    what.substr(0, what.find('\n')));
      std::fprintf(stderr,
                   "warning: capturing a decode step as a CUDA graph failed, "
                   "decoding without graphs: %s\n",
                   what.substr(0, what.find('\n')).c_str());
    }
    at::cuda::CUDAEvent done;
    done.record(side);
    done.block(current);
  }
  if (impl->failed)
    return;
  if (impl->graphs.empty())
    impl->pool = graph->pool();
  impl->graphs.emplace(key, std::move(graph));
}
