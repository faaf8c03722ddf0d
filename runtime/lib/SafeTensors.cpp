//===- SafeTensors.cpp - Hugging Face safetensors files -------------------===//

#include "rlhf/runtime/SafeTensors.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Files.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace rlhf;
using json = nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string &path, const std::string &why) {
  throw Error("malformed safetensors file '" + path + "': " + why);
}

} // namespace

ParamMap rlhf::loadSafetensors(const std::string &path,
                               std::map<std::string, std::string> *metadata) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("cannot open safetensors file '" + path +
                "': " + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  if (bytes.size() < 8)
    fail(path, "shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | uint8_t(bytes[i]);
  if (n > bytes.size() - 8)
    fail(path, "header length " + std::to_string(n) +
                   " exceeds the file size " + std::to_string(bytes.size()));
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + int64_t(n));
  } catch (const std::exception &e) {
    fail(path, std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (!header.is_object())
    fail(path, "header is not a JSON object");
  const size_t base = 8 + n, dataSize = bytes.size() - base;
  ParamMap out;
  for (auto &[name, info] : header.items()) {
    if (name == "__metadata__") {
      if (metadata && info.is_object())
        for (auto &[k, v] : info.items())
          if (v.is_string())
            (*metadata)[k] = v.get<std::string>();
      continue;
    }
    if (!info.is_object() || !info.contains("dtype") ||
        !info.contains("shape") || !info.contains("data_offsets"))
      fail(path, "entry '" + name + "' lacks dtype, shape or data_offsets");
    // Types and sizes are checked before use: a corrupt header must be an
    // error naming the file, not a JSON type error or an overflowed size.
    const json &jd = info["dtype"], &js = info["shape"],
               &jo = info["data_offsets"];
    if (!jd.is_string())
      fail(path, "entry '" + name + "' has a dtype that is not a string");
    const std::string dtype = jd.get<std::string>();
    size_t width = dtype == "F32"                        ? 4
                   : (dtype == "F16" || dtype == "BF16") ? 2
                   : dtype == "I64"                      ? 8
                   : dtype == "BOOL"                     ? 1
                                                         : 0;
    if (!width)
      fail(path, "entry '" + name + "' has unsupported dtype " + dtype +
                     " (F32, F16, BF16, I64 and BOOL are read)");
    if (!js.is_array() || !std::all_of(js.begin(), js.end(), [](const json &d) {
          return d.is_number_integer();
        }))
      fail(path, "entry '" + name +
                     "' has a shape that is not a list of "
                     "integers");
    std::vector<int64_t> shape = js.get<std::vector<int64_t>>();
    // Elements, bounded by what the file can hold so that no product
    // overflows.
    const uint64_t most = dataSize / width;
    uint64_t numel = 1;
    for (int64_t d : shape) {
      if (d < 0)
        fail(path, "entry '" + name + "' has a negative dimension");
      if (d > 0 && numel > most / uint64_t(d))
        fail(path, "entry '" + name + "' has a shape larger than the file");
      numel *= uint64_t(d);
    }
    if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() ||
        !jo[1].is_number_unsigned())
      fail(path, "entry '" + name +
                     "' has data_offsets that are not two "
                     "non-negative integers");
    const std::vector<uint64_t> off = jo.get<std::vector<uint64_t>>();
    if (off[0] > off[1] || off[1] > dataSize ||
        off[1] - off[0] != numel * width)
      fail(path, "entry '" + name +
                     "' has data_offsets that do not match its shape "
                     "or lie outside the file");
    const char *src = bytes.data() + base + off[0];
    at::Tensor t;
    if (dtype == "F32" || dtype == "I64" || dtype == "BOOL") {
      // Token ids and masks keep their type.
      t = at::empty(shape, dtype == "F32"   ? at::kFloat
                           : dtype == "I64" ? at::kLong
                                            : at::kBool);
      std::memcpy(t.data_ptr(), src, numel * width);
    } else {
      t = at::empty(shape, dtype == "F16" ? at::kHalf : at::kBFloat16);
      std::memcpy(t.data_ptr(), src, numel * 2);
      t = t.to(at::kFloat);
    }
    out[name] = t;
  }
  return out;
}

void rlhf::saveSafetensors(const std::string &path, const ParamMap &tensors,
                           const std::map<std::string, std::string> &metadata,
                           bool bf16) {
  json header = json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;
  uint64_t off = 0;
  for (auto &[name, t] : tensors) {
    // Integer and bool tensors (token ids, masks) are written as I64 and
    // BOOL; everything else as floats.
    const bool isInt =
        !at::isFloatingType(t.scalar_type()) && t.scalar_type() != at::kBool;
    const char *dtype = t.scalar_type() == at::kBool ? "BOOL"
                        : isInt                      ? "I64"
                        : bf16                       ? "BF16"
                                                     : "F32";
    at::Tensor c = t.detach()
                       .to(t.scalar_type() == at::kBool ? at::kBool
                           : isInt                      ? at::kLong
                           : bf16                       ? at::kBFloat16
                                                        : at::kFloat)
                       .cpu()
                       .contiguous();
    uint64_t n = uint64_t(c.numel()) * c.element_size();
    header[name] = {{"dtype", dtype},
                    {"shape", c.sizes().vec()},
                    {"data_offsets", {off, off + n}}};
    off += n;
    data.push_back(c);
  }
  std::string h = header.dump();
  while ((8 + h.size()) % 8)
    h += ' '; // keep the data 8-byte aligned, as the reference writer does
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    throw Error("cannot write '" + path + "': " + std::strerror(errno));
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i)
    out.put(char((n >> (8 * i)) & 0xff));
  out.write(h.data(), std::streamsize(h.size()));
  for (const at::Tensor &c : data)
    out.write(static_cast<const char *>(c.data_ptr()),
              std::streamsize(c.numel() * c.element_size()));
  closeChecked(out, path);
}
