// ShmAllocator over memfd: the queues simnicd shares with an application.
#pragma once
#include "simnic/core/env.h"

namespace simnic::io {

class MemfdAllocator final : public core::ShmAllocator {
 public:
  bool allocate(size_t size, const std::string& name, core::ShmRegion* out, int* err) override;
  void release(core::ShmRegion& region) override;
};

}  // namespace simnic::io
