//===- ReplayMain.cpp - run a fuzz target over files and folders ----------===//
//
// The driver for builds without libFuzzer: feeds every file named on the
// command line (folders recursively) to LLVMFuzzerTestOneInput once.
//
//===----------------------------------------------------------------------===//

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned runOne(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf) {
    llvm::errs() << "replay: cannot read " << path << "\n";
    return 0;
  }
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>((*buf)->getBufferStart()),
                         (*buf)->getBufferSize());
  return 1;
}

int main(int argc, char **argv) {
  unsigned n = 0;
  for (int i = 1; i < argc; ++i) {
    if (!llvm::sys::fs::is_directory(argv[i])) {
      n += runOne(argv[i]);
      continue;
    }
    std::error_code ec;
    for (llvm::sys::fs::recursive_directory_iterator it(argv[i], ec), end;
         it != end && !ec; it.increment(ec))
      if (llvm::sys::fs::is_regular_file(it->path()))
        n += runOne(it->path());
  }
  llvm::outs() << "replayed " << n << " inputs without a crash\n";
  return n ? 0 : 1;
}
