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

namespace simnic::fuzz {

constexpr uint8_t kExactSize = 0xff;

inline size_t request_size(abi::Op op) {
  using namespace simnic::abi;
  switch (op) {
    case Op::Hello: return sizeof(HelloReq);
    case Op::QueryPort: return sizeof(QueryPortReq);
    case Op::QueryGid: return sizeof(QueryGidReq);
    case Op::RegMr: return sizeof(RegMrReq);
    case Op::AllocMw: return sizeof(AllocMwReq);
    case Op::CreateCq: return sizeof(CreateCqReq);
    case Op::CreateQp: return sizeof(CreateQpReq);
    case Op::ModifyQp: return sizeof(ModifyQpReq);
    case Op::QueryQp: return sizeof(QueryQpReq);
    case Op::CreateSrq: return sizeof(CreateSrqReq);
    case Op::ModifySrq: return sizeof(ModifySrqReq);
    case Op::CreateAh: return sizeof(CreateAhReq);
    case Op::OpenXrcd: return sizeof(OpenXrcdReq);
    case Op::CreateXrcSrq: return sizeof(CreateXrcSrqReq);
    case Op::CreateXrcQp: return sizeof(CreateXrcQpReq);
    case Op::OpenXrcQp: return sizeof(OpenXrcQpReq);
    case Op::CloseXrcd: return sizeof(HandleReq);
    case Op::DeallocPd: case Op::DeregMr: case Op::DestroyCompChannel: case Op::DestroyCq:
    case Op::DestroyQp: case Op::QuerySrq: case Op::DestroySrq: case Op::DestroyAh: case Op::DeallocMw:
      return sizeof(HandleReq);
    default: return 0;
  }
}

}  // namespace simnic::fuzz
