// The control fuzzer's input format, shared by the fuzzer and the seed generator: a sequence
// of requests, each
//   [op: 1 byte][size: 1 byte][body]
// where size 0xff means "exactly the size of the op's request struct" (so most mutations keep
// the message decodable) and any other value is the body's length. A Hello gets a doorbell and
// an async fd, a CreateCompChannel a channel fd (numbers only: the fakes never touch them).
#pragma once
#include <cstddef>
#include <cstdint>

#include "simnic/abi/control.h"
#include "simnic/service/control_ops.h"

namespace simnic::fuzz {

constexpr uint8_t kExactSize = 0xff;

// The size of `op`'s request struct, from the dispatcher's own table (control_op_table.cc): 0
// for an op whose body is free-form (text, or none) or that nobody serves.
inline size_t request_size(abi::Op op) {
  const size_t body = service::control::op_rule(op).body;
  return body == service::control::kAnyBody ? 0 : body;
}

}  // namespace simnic::fuzz
