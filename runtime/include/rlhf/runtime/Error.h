//===- Error.h - runtime error type -----------------------------*- C++ -*-===//

#ifndef RLHF_RUNTIME_ERROR_H
#define RLHF_RUNTIME_ERROR_H

#include <stdexcept>
#include <string>

namespace rlhf {

/// Every failure the runtime reports to its caller. The message is complete
/// and user-facing: it names the rank, the operation and what to do.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string &msg) : std::runtime_error(msg) {}
};

/// The first line of `msg`: c10::Error appends a C++ backtrace, and users
/// need the first line only.
inline std::string firstLine(std::string msg) {
  if (auto nl = msg.find('\n'); nl != std::string::npos)
    msg.resize(nl);
  return msg;
}

} // namespace rlhf

#endif // RLHF_RUNTIME_ERROR_H
