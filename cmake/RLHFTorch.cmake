# LibTorch from the pinned torch wheel, and the CUDA toolkit its CMake config
# needs.
#
# scripts/setup.sh installs torch (a CUDA 13 build) and PyPI's NVIDIA toolkit
# packages into a venv. The wheel's TorchConfig refuses to load without a CUDA
# toolkit, even on a machine without a GPU, so one is always located: the
# machine's own (CUDAToolkit_ROOT, /usr/local/cuda, nvcc on PATH) where there
# is one, else a toolkit root assembled in the build tree from the wheels'
# nvidia/cu13 and nvidia/nccl folders. Sets:
#   RLHF_TORCH_SITE     site-packages holding torch (and nvidia/ beside it)
#   NCCL_INCLUDE_DIR, NCCL_LIBRARY
# and loads Torch (TORCH_LIBRARIES, TORCH_CXX_FLAGS). The wheel's libraries find
# the NVIDIA wheels' libraries through their own $ORIGIN run paths.

set(RLHF_PYTHON "" CACHE FILEPATH
    "Python whose torch package provides LibTorch (default: the setup venv)")
if(NOT RLHF_PYTHON)
  if(DEFINED ENV{RLHF_VENV} AND EXISTS "$ENV{RLHF_VENV}/bin/python3")
    set(RLHF_PYTHON "$ENV{RLHF_VENV}/bin/python3")
  elseif(EXISTS /opt/rlhfc/venv/bin/python3)
    set(RLHF_PYTHON /opt/rlhfc/venv/bin/python3)
  else()
    find_program(RLHF_PYTHON_FOUND NAMES python3 REQUIRED)
    set(RLHF_PYTHON "${RLHF_PYTHON_FOUND}")
  endif()
endif()

# find_spec locates the package without importing it (an import costs seconds).
execute_process(
  COMMAND "${RLHF_PYTHON}" -c
    "import importlib.util as u, os; s = u.find_spec('torch'); print(os.path.dirname(s.submodule_search_locations[0]) if s else '')"
  OUTPUT_VARIABLE RLHF_TORCH_SITE OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT RLHF_TORCH_SITE)
  message(FATAL_ERROR
    "no torch package for ${RLHF_PYTHON}: run scripts/setup.sh (it installs the "
    "pinned torch wheel into /opt/rlhfc/venv), or pass -DRLHF_PYTHON=<python with torch>")
endif()
set(RLHF_TORCH_SITE "${RLHF_TORCH_SITE}" CACHE INTERNAL "")
if(NOT Torch_DIR)
  set(Torch_DIR "${RLHF_TORCH_SITE}/torch/share/cmake/Torch")
endif()

set(_pip_cuda "${RLHF_TORCH_SITE}/nvidia/cu13")
set(_pip_nccl "${RLHF_TORCH_SITE}/nvidia/nccl")
find_program(_path_nvcc nvcc)
if(NOT _path_nvcc AND EXISTS /usr/local/cuda/bin/nvcc)
  set(_path_nvcc /usr/local/cuda/bin/nvcc)
endif()
# A node's own toolkit of another CUDA major than torch's would put two CUDA
# runtimes in one process (ours and the wheel's): take the wheels' then.
set(_sys_cuda_ok FALSE)
if(_path_nvcc)
  execute_process(COMMAND "${_path_nvcc}" --version OUTPUT_VARIABLE _nvcc_out
                  RESULT_VARIABLE _nvcc_rc ERROR_QUIET)
  execute_process(COMMAND "${RLHF_PYTHON}" -c
                  "import torch; print(torch.version.cuda or '')"
                  OUTPUT_VARIABLE _torch_cuda OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET)
  string(REGEX MATCH "release ([0-9]+)" _ "${_nvcc_out}")
  set(_nvcc_major "${CMAKE_MATCH_1}")
  string(REGEX MATCH "^([0-9]+)" _ "${_torch_cuda}")
  if(NOT _nvcc_rc EQUAL 0 OR NOT _nvcc_major OR NOT CMAKE_MATCH_1
     OR _nvcc_major STREQUAL CMAKE_MATCH_1)
    set(_sys_cuda_ok TRUE)
  elseif(NOT EXISTS "${_pip_cuda}/bin/nvcc")
    message(WARNING "${_path_nvcc} is CUDA ${_nvcc_major} but torch is built "
                    "for CUDA ${_torch_cuda}, and torch's NVIDIA wheels hold no "
                    "toolkit: pass -DCUDAToolkit_ROOT=<a CUDA ${_torch_cuda} "
                    "toolkit>")
    set(_sys_cuda_ok TRUE)
  endif()
endif()
if(NOT CUDAToolkit_ROOT AND NOT CMAKE_CUDA_COMPILER AND NOT _sys_cuda_ok
   AND EXISTS "${_pip_cuda}/bin/nvcc")
  if(_path_nvcc)
    message(WARNING "${_path_nvcc} is CUDA ${_nvcc_major} but torch is built "
                    "for CUDA ${_torch_cuda}: using the toolkit of torch's "
                    "NVIDIA wheels instead (-DCUDAToolkit_ROOT=DIR chooses)")
  endif()
  # FindCUDA and FindCUDAToolkit want bin/, include/ and lib64/ under one root,
  # and unversioned library names; the wheels ship versioned ones only.
  # bin/ is a real folder: nvcc finds lib64/ as bin/.. without resolving links.
  set(root "${CMAKE_BINARY_DIR}/cuda-toolkit")
  file(MAKE_DIRECTORY "${root}/lib64" "${root}/bin")
  foreach(d include nvvm)
    file(CREATE_LINK "${_pip_cuda}/${d}" "${root}/${d}" SYMBOLIC)
  endforeach()
  file(GLOB tools "${_pip_cuda}/bin/*")
  foreach(tool ${tools})
    get_filename_component(name "${tool}" NAME)
    file(CREATE_LINK "${tool}" "${root}/bin/${name}" SYMBOLIC)
  endforeach()
  file(GLOB libs "${_pip_cuda}/lib/lib*.so*" "${_pip_cuda}/lib/lib*.a"
                 "${_pip_nccl}/lib/lib*.so*")
  foreach(lib ${libs})
    get_filename_component(name "${lib}" NAME)
    file(CREATE_LINK "${lib}" "${root}/lib64/${name}" SYMBOLIC)
    string(REGEX REPLACE "\\.so\\..*$" ".so" plain "${name}")
    if(NOT EXISTS "${root}/lib64/${plain}")
      file(CREATE_LINK "${lib}" "${root}/lib64/${plain}" SYMBOLIC)
    endif()
  endforeach()
  set(CUDAToolkit_ROOT "${root}")
  set(CUDA_TOOLKIT_ROOT_DIR "${root}" CACHE PATH "" FORCE)
  set(CMAKE_CUDA_COMPILER "${root}/bin/nvcc" CACHE FILEPATH "" FORCE)
  message(STATUS "CUDA toolkit assembled from the NVIDIA wheels: ${root}")
endif()

# Hopper only (the GPU machines are H100/H200); torch's default list compiles
# every kernel for eleven architectures.
if(NOT TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "9.0")
endif()
find_package(Torch REQUIRED)

find_path(NCCL_INCLUDE_DIR nccl.h HINTS "${_pip_nccl}/include" ${CUDAToolkit_INCLUDE_DIRS})
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS "${_pip_nccl}/lib"
             ${CUDAToolkit_LIBRARY_DIR})

# c10d's ProcessGroupGloo.hpp includes Gloo's headers, which the wheel does not
# ship; Debian's libgloo-dev provides them (Gloo itself is inside libtorch_cpu).
find_path(GLOO_INCLUDE_DIR gloo/algorithm.h)
if(NOT GLOO_INCLUDE_DIR)
  message(FATAL_ERROR "Gloo's headers (gloo/algorithm.h) are missing: run scripts/setup.sh "
                      "(Debian package libgloo-dev)")
endif()
