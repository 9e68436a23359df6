// Says a repeated complaint once, then at most once per interval with how many it held back,
// so that a storm (RNR NAKs, packets for a QP that does not exist, retries without ACKs)
// explains itself in the log without flooding it.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>

namespace simnic::core {

class LogLimiter {
 public:
  static constexpr uint64_t kIntervalNs = 1'000'000'000;  // simulated time
  static constexpr size_t kMaxKeys = 4096;                // forget everything past this

  // True when a line for `key` may be written at `now_ns`; *held_back is how many lines for
  // it were held back since the last one written.
  bool allow(const std::string& key, uint64_t now_ns, uint64_t* held_back) {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      if (entries_.size() >= kMaxKeys) entries_.clear();
      entries_[key] = Entry{now_ns, 0};
      *held_back = 0;
      return true;
    }
    Entry& e = it->second;
    if (now_ns - e.last_ns < kIntervalNs) {
      ++e.held_back;
      return false;
    }
    *held_back = e.held_back;
    e = Entry{now_ns, 0};
    return true;
  }

 private:
  struct Entry {
    uint64_t last_ns;
    uint64_t held_back;
  };
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace simnic::core
