# -*- Python -*-
# lit configuration for rlhfc. Tests are .rlhf and .mlir files with RUN lines.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "rlhfc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".rlhf", ".mlir", ".test"]
config.excludes = ["Inputs", "corpus", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.rlhf_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%rlhf_src", config.rlhf_src_root))
# The python whose torch the runtime links: its torchrun launches workers.
config.substitutions.append(("%torchrun", config.torch_python + " -m torch.distributed.run"))
# The same venv holds the Hugging Face libraries the golden fixtures use.
config.substitutions.append(("%hfpython", config.torch_python))
config.substitutions.append(("%stdlib", os.path.join(config.rlhf_src_root, "stdlib")))
config.substitutions.append(("%examples", os.path.join(config.rlhf_src_root, "examples")))

llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()  # FileCheck, count, %python
# `not` at the start of a RUN line is found through PATH, as in MLIR.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.rlhf_tools_dir, append_path=True)

tool_dirs = [config.rlhf_tools_dir, config.llvm_tools_dir]
tools = ["rlhfc", "rlhf-opt", "rlhf-lsp-server", "rlhf-run", "rlhf-fn-eval", "rlhf-comm-worker",
         "rlhf-capi-worker", "rlhf-cost-validate", "rlhf-bench-gpu-runtime"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

if config.rlhf_have_cuda:
    config.available_features.add("cuda")

# Headless Chromium renders the timeline HTML in a test.
import shutil
if shutil.which("chromium"):
    config.available_features.add("chromium")
    config.substitutions.append(
        ("%chromium",
         "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic "
         "--no-first-run --disable-background-networking --disable-component-update "
         "--disable-sync --disable-dev-shm-usage"))

# sentencepiece's trainer (Debian package sentencepiece) makes tokenizers.
if shutil.which("spm_train"):
    config.available_features.add("spm_train")
