//===- SpmShim.cpp - sentencepiece behind a C interface -------------------===//
//
// Debian's libsentencepiece carries its own copy of protobuf-lite, whose
// symbols collide with LibTorch's libprotobuf when both are loaded normally
// (the process crashes in static initialisation). The runtime therefore
// dlopen()s this shim with RTLD_LOCAL | RTLD_DEEPBIND, so sentencepiece binds
// to its own protobuf, and talks to it through these C functions only.
//
//===----------------------------------------------------------------------===//

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

extern "C" {

void *rlhf_spm_load(const char *path, char *err, size_t errLen) {
  auto *sp = new sentencepiece::SentencePieceProcessor();
  auto status = sp->Load(path);
  if (!status.ok()) {
    std::strncpy(err, status.ToString().c_str(), errLen - 1);
    err[errLen - 1] = '\0';
    delete sp;
    return nullptr;
  }
  return sp;
}

void rlhf_spm_free(void *h) { delete static_cast<sentencepiece::SentencePieceProcessor *>(h); }

/// Writes up to `cap` ids; returns how many there are in total.
int rlhf_spm_encode(void *h, const char *text, size_t len, int *out, int cap) {
  std::vector<int> ids;
  // With its length: text may hold NUL bytes.
  static_cast<sentencepiece::SentencePieceProcessor *>(h)->Encode(
      std::string(text, len), &ids);
  for (int i = 0; i < int(ids.size()) && i < cap; ++i)
    out[i] = ids[i];
  return int(ids.size());
}

/// Writes up to `cap` bytes of the text (which may hold NUL bytes); returns
/// its length.
int rlhf_spm_decode(void *h, const int *ids, int n, char *out, int cap) {
  std::string text;
  static_cast<sentencepiece::SentencePieceProcessor *>(h)->Decode(
      std::vector<int>(ids, ids + n), &text);
  if (cap > 0)
    std::memcpy(out, text.data(), std::min(size_t(cap), text.size()));
  return int(text.size());
}

/// 0: vocabulary size, 1: bos, 2: eos, 3: pad.
int rlhf_spm_info(void *h, int which) {
  auto *sp = static_cast<sentencepiece::SentencePieceProcessor *>(h);
  switch (which) {
  case 0: return sp->GetPieceSize();
  case 1: return sp->bos_id();
  case 2: return sp->eos_id();
  case 3:
    return sp->pad_id();
  default:
    return sp->unk_id();
  }
}

} // extern "C"
