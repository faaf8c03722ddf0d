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

} // namespace rlhf

#endif // RLHF_RUNTIME_ERROR_H
