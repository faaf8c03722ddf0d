//===- StepGraphs.cpp - decode steps replayed as CUDA graphs --------------===//

#include "StepGraphs.h"

#include "CommWatchdog.h"

#include "rlhf/runtime/Error.h"

#include <ATen/core/CachingHostAllocator.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>

using namespace rlhf;

struct StepGraphs::Impl {
  c10::Device device;
  bool require = false; ///< RLHF_CUDA_GRAPHS=require: a failed capture throws
  bool failed = false;
  std::map<int64_t, std::unique_ptr<at::cuda::CUDAGraph>> graphs;
  /// Every capture shares one memory pool, ours: graphs of one generation
  /// replay one after another, never concurrently.
  at::cuda::MempoolId_t pool{0, 0};
  std::function<bool(bool)> agree;
};

namespace {

/// Undoes what capture_begin set up once a capture has been invalidated (a
/// sync or host copy inside the step). CUDAGraph::capture_end would throw at
/// cudaStreamEndCapture before telling the allocators the capture is over,
/// leaving them routing to the pool, deferring frees and never releasing it.
void abandonCapture(cudaStream_t stream, c10::DeviceIndex index,
                    at::cuda::MempoolId_t pool) {
  cudaGraph_t g = nullptr;
  if (cudaStreamEndCapture(stream, &g) == cudaSuccess && g)
    cudaGraphDestroy(g);
  (void)cudaGetLastError(); // the capture's error is reported by the caller
  try {
    c10::cuda::CUDACachingAllocator::endAllocateToPool(index, pool);
    c10::cuda::CUDACachingAllocator::releasePool(index, pool);
    at::HostAllocator *host = at::getHostAllocator(at::kCUDA);
    host->end_allocate_to_pool(pool);
    host->release_pool(pool);
  } catch (const std::exception &) {
    // Best effort: decoding goes on without graphs either way.
  }
}

/// The side stream every capture of this thread on `index` uses. cuBLAS
/// keeps a workspace (32 MiB on Hopper) per stream it has run on, for the
/// life of the process: a new pool stream per generation grew a generator's
/// allocator by that much per call, up to the pool's 32 streams (1 GiB).
c10::cuda::CUDAStream captureStream(c10::DeviceIndex index) {
  thread_local std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;
  auto it = streams.find(index);
  if (it == streams.end())
    it = streams.emplace(index, c10::cuda::getStreamFromPool(false, index))
             .first;
  return it->second;
}

} // namespace

StepGraphs::StepGraphs(c10::Device device, bool enabled,
                       std::function<bool(bool)> agree) {
  const char *env = std::getenv("RLHF_CUDA_GRAPHS");
  if (env && !std::strcmp(env, "0"))
    enabled = false;
  if (enabled && device.is_cuda()) {
    impl = std::make_unique<Impl>(
        Impl{device, env && !std::strcmp(env, "require")});
    impl->agree = std::move(agree);
  }
}

StepGraphs::~StepGraphs() {
  // After a communicator was aborted, graphs holding its captured
  // collectives must not be destroyed: NCCL's cleanup of their plans would
  // write into the freed communicator. The process is failing; leak them.
  if (impl && communicatorAborted())
    for (auto &[key, graph] : impl->graphs)
      (void)graph.release();
}

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
    // A replay after an abort would run collectives on a freed communicator
    // and bury the failure under an illegal memory access: report it first.
    if (communicatorAborted()) {
      CommWatchdog::process().check(); // the watchdog's error, if it was one
      throw Error("a communicator of this process was aborted earlier; "
                  "decode steps cannot replay their collectives");
    }
    it->second->replay();
    return;
  }
  // Capture needs a side stream, and lazy initialisation (cuBLAS handles and
  // workspaces) must happen before it: warm up there eagerly, which also
  // computes this step, then capture the same work.
  const auto index = impl->device.index();
  c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(index);
  c10::cuda::CUDAStream side = captureStream(index);
  at::cuda::CUDAEvent ready;
  ready.record(current);
  ready.block(side);
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  if (impl->pool == at::cuda::MempoolId_t{0, 0})
    impl->pool = at::cuda::graph_pool_handle();
  std::string why; // this rank's capture failure, if any
  {
    c10::cuda::CUDAStreamGuard guard(side);
    step();
    try {
      graph->capture_begin(impl->pool);
      std::exception_ptr failure;
      try {
        step();
      } catch (...) {
        failure = std::current_exception();
      }
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
      (void)cudaStreamIsCapturing(side.stream(), &status);
      if (status == cudaStreamCaptureStatusActive) {
        try {
          graph->capture_end(); // a failed step's partial graph is dropped
        } catch (...) {
          // Torch ends the allocators' routing to the pool only once
          // cudaStreamEndCapture has worked, and the graph releases the pool
          // only after that: when it failed, neither happened. When a later
          // step failed instead, endAllocateToPool throws and this does no
          // more.
          abandonCapture(side.stream(), index, impl->pool);
          throw;
        }
      } else {
        abandonCapture(side.stream(), index, impl->pool);
        if (!failure)
          throw Error("the capture was invalidated (a sync or a host copy "
                      "inside the step)");
      }
      if (failure)
        std::rethrow_exception(failure);
    } catch (const std::exception &e) {
      why = firstLine(e.what());
      if (why.empty())
        why = "unknown error";
    }
    at::cuda::CUDAEvent done;
    done.record(side);
    done.block(current);
  }
  // Ranks whose steps share collectives replay together or not at all: NCCL
  // pairs a captured collective only with captured ones.
  bool everywhere = why.empty();
  if (impl->agree) {
    try {
      everywhere = impl->agree(why.empty());
    } catch (...) {
      // The agreement's all-reduce failed: the communicator may be freed
      // (see ~StepGraphs), so the new graph must not be destroyed either.
      if (communicatorAborted())
        (void)graph.release();
      throw;
    }
  }
  if (why.empty() && everywhere) {
    impl->graphs.emplace(key, std::move(graph));
    return;
  }
  impl->failed = true;
  if (why.empty())
    why = "the capture failed on another rank of the group";
  if (impl->require)
    throw Error("capturing a decode step as a CUDA graph failed "
                "(RLHF_CUDA_GRAPHS=require): " +
                why);
  std::fprintf(stderr,
               "warning: capturing a decode step as a CUDA graph failed, "
               "decoding without graphs: %s\n",
               why.c_str());
}
