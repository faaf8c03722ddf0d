//===- FusedKernels.cu - SwiGLU and rotary embedding in one kernel each ---===//
//
// Each kernel runs FusedElements.h's body over groups in a grid-stride loop.
// One kernel replaces LibTorch's two (SwiGLU) or six (rotary of q and k),
// and in backward the five or more that autograd would run: fewer launches
// per decode step, and one pass over the activations in training.
//
//===----------------------------------------------------------------------===//

#include "FusedKernels.h"

#include <cuda_runtime.h>

#include <algorithm>

using namespace rlhf::fused;

namespace {

template <typename Body, typename Args>
__global__ void eachGroup(Args a, int64_t n) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step)
    Body::run(a, i);
}

/// Launches Body<T, V> over a's groups for the (T, V) dispatch picks.
template <template <typename, int> class Body, typename Args> struct Launch {
  const Args &a;
  cudaStream_t stream;
  template <typename T, int V> void run() {
    const int64_t n = a.groups(V);
    if (n == 0)
      return;
    constexpr int kBlock = 256;
    // A grid-stride loop: a few waves of blocks cover any size.
    const int64_t blocks = std::min<int64_t>((n + kBlock - 1) / kBlock, 65536);
    eachGroup<Body<T, V>, Args><<<unsigned(blocks), kBlock, 0, stream>>>(a, n);
  }
};

/// Launches through `go`; an error already pending beforehand (an earlier
/// asynchronous call's) is reported as such, not as this launch's.
template <typename Go> const char *checkedLaunch(Go go) {
  if (cudaPeekAtLastError() != cudaSuccess)
    return "an earlier CUDA call failed before this launch";
  if (const char *refused = go())
    return refused;
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

template <template <typename, int> class Body, typename Args>
const char *launch(Dtype dtype, int width, const Args &a, void *stream) {
  return checkedLaunch([&]() -> const char * {
    Launch<Body, Args> l{a, static_cast<cudaStream_t>(stream)};
    return dispatch(dtype, width, l)
               ? nullptr
               : "no fused kernel for this dtype and group width";
  });
}

/// A block per tile (a grid-stride loop over tiles past 65536 blocks).
template <typename U, int V> __global__ void copyTiles(CopyArgs a) {
  for (int64_t tile = blockIdx.x; tile < a.tiles(); tile += gridDim.x)
    copyTile<U, V>(a, tile, threadIdx.x, blockDim.x);
}

struct LaunchCopies {
  const CopyArgs &a;
  cudaStream_t stream;
  template <typename U, int V> void run() {
    const int64_t tiles = a.tiles();
    if (tiles == 0)
      return;
    copyTiles<U, V>
        <<<unsigned(std::min<int64_t>(tiles, 65536)), 256, 0, stream>>>(a);
  }
};

/// Launched never: whether the driver finds an image of it for a device.
__global__ void probe() {}

} // namespace

bool rlhf::fused::haveKernels() {
  // Built for sm_80 and sm_90 (runtime/CMakeLists.txt); on a GPU neither
  // image runs on (a V100), the separate LibTorch ops serve instead.
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) {
    cudaGetLastError();
    return false;
  }
  static signed char known[64] = {}; // 1 yes, -1 no, 0 not asked yet
  if (!known[device]) {
    cudaFuncAttributes attributes;
    const bool ok = cudaFuncGetAttributes(&attributes, probe) == cudaSuccess;
    if (!ok)
      cudaGetLastError(); // not a sticky error: clear it
    known[device] = ok ? 1 : -1;
  }
  return known[device] > 0;
}

const char *rlhf::fused::launchSwiGluForward(Dtype dtype, int width,
                                             const SwiGluArgs &a,
                                             void *stream) {
  return launch<SwiGluForwardBody>(dtype, width, a, stream);
}

const char *rlhf::fused::launchSwiGluBackward(Dtype dtype, int width,
                                              const SwiGluArgs &a,
                                              void *stream) {
  return launch<SwiGluBackwardBody>(dtype, width, a, stream);
}

const char *rlhf::fused::launchRotary(Dtype dtype, int width,
                                      const RotaryArgs &a, void *stream) {
  return launch<RotaryBody>(dtype, width, a, stream);
}

const char *rlhf::fused::launchCopies(int unitBytes, const CopyArgs &a,
                                      void *stream) {
  return checkedLaunch([&]() -> const char * {
    LaunchCopies l{a, static_cast<cudaStream_t>(stream)};
    return dispatchUnit(unitBytes, l) ? nullptr
                                      : "no copy kernel for this unit";
  });
}
