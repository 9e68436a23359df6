// Notifier over sockets: completion events on channel sockets, async events on the
// context's async socket, as the kernel's uverbs does on its event files.
#pragma once
#include "simnic/core/env.h"

namespace simnic::io {

class FdNotifier final : public core::Notifier {
 public:
  explicit FdNotifier(core::Logger* logger = nullptr) : logger_(logger) {}
  void completion_event(int channel_fd, uint32_t cq_handle) override;
  void async_event(int async_fd, uint32_t event_type, uint32_t handle) override;
  void release_fd(int fd) override;
  bool send_event(int fd, const void* msg, size_t len) override;
  void wake_sleepers(std::atomic<uint32_t>* word) override;
  uint64_t dropped() const { return dropped_; }

 private:
  void count_drop(const char* what);

  core::Logger* logger_;
  uint64_t dropped_ = 0;
};

}  // namespace simnic::io
