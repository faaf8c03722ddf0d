//===- Tokenizer.cpp - sentencepiece tokenizer ----------------------------===//
//
// Loads the sentencepiece shim privately (see runtime/spm/SpmShim.cpp for
// why) and calls it through C function pointers.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/Tokenizer.h"
#include "rlhf/runtime/Error.h"

#include <dlfcn.h>

#include <fstream>
#include <string>

using namespace rlhf;

namespace {

struct Shim {
  void *lib = nullptr;
  void *(*load)(const char *, char *, size_t) = nullptr;
  void (*free)(void *) = nullptr;
  int (*encode)(void *, const char *, size_t, int *, int) = nullptr;
  int (*decode)(void *, const int *, int, char *, int) = nullptr;
  int (*info)(void *, int) = nullptr;
};

/// The shim sits next to librlhf_runtime.so.
const Shim &shim() {
  static Shim s = [] {
    Shim sh;
    Dl_info self;
    std::string dir = ".";
    if (dladdr(reinterpret_cast<void *>(&shim), &self) && self.dli_fname) {
      std::string f = self.dli_fname;
      dir = f.substr(0, f.find_last_of('/'));
    }
    std::string path = dir + "/librlhf_spm.so";
    sh.lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!sh.lib)
      throw Error("cannot load the tokenizer library '" + path +
                  "': " + dlerror() +
                  " (a runtime built without sentencepiece has none: install "
                  "libsentencepiece-dev and rebuild)");
    sh.load =
        reinterpret_cast<decltype(sh.load)>(dlsym(sh.lib, "rlhf_spm_load"));
    sh.free =
        reinterpret_cast<decltype(sh.free)>(dlsym(sh.lib, "rlhf_spm_free"));
    sh.encode =
        reinterpret_cast<decltype(sh.encode)>(dlsym(sh.lib, "rlhf_spm_encode"));
    sh.decode =
        reinterpret_cast<decltype(sh.decode)>(dlsym(sh.lib, "rlhf_spm_decode"));
    sh.info =
        reinterpret_cast<decltype(sh.info)>(dlsym(sh.lib, "rlhf_spm_info"));
    if (!sh.load || !sh.free || !sh.encode || !sh.decode || !sh.info)
      throw Error("tokenizer library '" + path + "' lacks its entry points");
    return sh;
  }();
  return s;
}

} // namespace

Tokenizer::Tokenizer(const std::string &path) {
  if (!std::ifstream(path))
    throw Error("tokenizer model '" + path +
                "' does not exist; point the model's 'tokenizer' at a "
                "sentencepiece .model file (make one with spm_train)");
  char err[512] = {0};
  handle = shim().load(path.c_str(), err, sizeof(err));
  if (!handle)
    throw Error("cannot load tokenizer model '" + path + "': " + err);
  if (eos() < 0)
    throw Error("tokenizer model '" + path +
                "' has no end-of-sequence piece, which generation stops at; "
                "train it with one (spm_train --eos_id=2)");
}

Tokenizer::~Tokenizer() {
  if (handle)
    shim().free(handle);
}

std::vector<int64_t> Tokenizer::encode(const std::string &text,
                                       bool addBos) const {
  std::vector<int> ids(text.size() + 8);
  int n = shim().encode(handle, text.data(), text.size(), ids.data(),
                        int(ids.size()));
  if (n > int(ids.size())) {
    ids.resize(n);
    n = shim().encode(handle, text.data(), text.size(), ids.data(), n);
  }
  std::vector<int64_t> out;
  if (addBos && bos() >= 0)
    out.push_back(bos());
  out.insert(out.end(), ids.begin(), ids.begin() + n);
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t> &ids) const {
  std::vector<int> v;
  for (int64_t i : ids)
    if (i >= 0 && i < vocabSize() && i != bos() && i != eos() && i != pad())
      v.push_back(int(i));
  std::string buf(v.size() * 16 + 16, '\0');
  int n = shim().decode(handle, v.data(), int(v.size()), buf.data(),
                        int(buf.size()));
  if (n > int(buf.size())) {
    buf.assign(n, '\0');
    shim().decode(handle, v.data(), int(v.size()), buf.data(), int(buf.size()));
  }
  buf.resize(n);
  return buf;
}

int64_t Tokenizer::vocabSize() const { return shim().info(handle, 0); }
int64_t Tokenizer::bos() const { return shim().info(handle, 1); }
int64_t Tokenizer::eos() const { return shim().info(handle, 2); }
int64_t Tokenizer::pad() const {
  int64_t pad = shim().info(handle, 3);
  return pad >= 0 ? pad : shim().info(handle, 4);
}
