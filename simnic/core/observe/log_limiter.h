// Says a repeated complaint once, then at most once per interval with how many it held back,
// so that a storm (RNR NAKs, packets for a QP that does not exist, retries without ACKs)
// explains itself in the log without flooding it.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>

#include "simnic/core/env.h"

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

// A global budget for complaints about what other hosts send (issue 29 point 4). LogLimiter
// above keys by category and QP and forgets past kMaxKeys, so a sweep of QPNs, or CM REQs
// from many sources, gets a line per packet (191 MB of log in 10 s). LogBudget caps lines
// whatever the key: a token bucket per category and one for all of them, in simulated time.
// Lines past a bucket are counted, and a summary ("N more lines suppressed") is due at most
// every kSummaryIntervalNs while some are. Fixed storage: no allocation per line refused.
class LogBudget {
 public:
  static constexpr uint64_t kSecondNs = 1'000'000'000;
  static constexpr uint32_t kCategoryBurst = 20, kCategoryPerSecond = 5;
  static constexpr uint32_t kAllBurst = 100, kAllPerSecond = 20;
  static constexpr uint64_t kSummaryIntervalNs = 10 * kSecondNs;
  static constexpr size_t kMaxCategories = 32;  // more share the last one

  // True when a line of `category` (a string literal) could be written at now_ns. Spends
  // nothing: call spend() when the line is written, suppressed() when it is not.
  bool has_room(const char* category, uint64_t now_ns) {
    Bucket& c = bucket_of(category);
    refill(c, kCategoryBurst, kCategoryPerSecond, now_ns);
    refill(all_, kAllBurst, kAllPerSecond, now_ns);
    return c.milli >= kMilli && all_.milli >= kMilli;
  }
  void spend(const char* category) {
    Bucket& c = bucket_of(category);
    c.milli -= std::min<uint64_t>(c.milli, kMilli);
    all_.milli -= std::min<uint64_t>(all_.milli, kMilli);
  }
  // One line has_room() refused.
  void suppressed(const char* category) {
    ++bucket_of(category).suppressed;
    ++suppressed_total_;
  }
  // has_room() and spend() in one: a line that is written if this returns true.
  bool take(const char* category, uint64_t now_ns) {
    if (!has_room(category, now_ns)) {
      suppressed(category);
      return false;
    }
    spend(category);
    return true;
  }
  // The summary line due at now_ns, or "": lines were suppressed since the last summary and
  // kSummaryIntervalNs has passed since it (or this is the first).
  std::string take_summary(uint64_t now_ns) {
    uint64_t pending = 0;
    for (size_t i = 0; i < used_; ++i) pending += buckets_[i].suppressed;
    if (!pending || (summarized_ && now_ns - last_summary_ns_ < kSummaryIntervalNs)) return {};
    std::string text = std::to_string(pending) + " more log lines suppressed (";
    for (size_t i = 0; i < used_; ++i) {
      if (!buckets_[i].suppressed) continue;
      text += (text.back() == '(' ? "" : ", ") + std::string(buckets_[i].category) + " " +
              std::to_string(buckets_[i].suppressed);
      buckets_[i].suppressed = 0;
    }
    text += "): more complaints about received packets than the log takes (at most " +
            std::to_string(kCategoryPerSecond) + " a second per kind, " + std::to_string(kAllPerSecond) +
            " in all); the drop counters of `simnic status` count every packet";
    summarized_ = true;
    last_summary_ns_ = now_ns;
    return text;
  }
  uint64_t suppressed_total() const { return suppressed_total_; }

 private:
  static constexpr uint64_t kMilli = 1000;  // tokens are kept in thousandths
  struct Bucket {
    const char* category = nullptr;
    uint64_t milli = 0;
    uint64_t last_ns = 0;
    bool started = false;
    uint64_t suppressed = 0;  // since the last summary
  };
  static void refill(Bucket& b, uint32_t burst, uint32_t per_second, uint64_t now_ns) {
    if (!b.started) {
      b = Bucket{b.category, uint64_t(burst) * kMilli, now_ns, true, b.suppressed};
      return;
    }
    if (now_ns <= b.last_ns) return;
    const uint64_t cap = uint64_t(burst) * kMilli;
    const uint64_t elapsed = now_ns - b.last_ns;
    const uint64_t gained = elapsed >= kSecondNs * burst ? cap : elapsed * per_second * kMilli / kSecondNs;
    if (b.milli + gained >= cap) {
      b.milli = cap;
      b.last_ns = now_ns;
      return;
    }
    // Only the time the whole thousandths gained stand for is used up: a steady trickle of
    // calls still refills.
    b.milli += gained;
    b.last_ns += gained * kSecondNs / (uint64_t(per_second) * kMilli);
  }
  Bucket& bucket_of(const char* category) {
    for (size_t i = 0; i < used_; ++i)
      if (buckets_[i].category == category || std::strcmp(buckets_[i].category, category) == 0) return buckets_[i];
    if (used_ == kMaxCategories) return buckets_[kMaxCategories - 1];
    buckets_[used_].category = category;
    return buckets_[used_++];
  }
  std::array<Bucket, kMaxCategories> buckets_{};
  size_t used_ = 0;
  Bucket all_{"all"};
  uint64_t suppressed_total_ = 0;
  uint64_t last_summary_ns_ = 0;
  bool summarized_ = false;
};

// A line about received packets, for code with a Logger of its own (the CM agent): written
// only if `budget` has room for `category`, with the budget's summary first when one is due.
template <class MakeLine>
void log_within_budget(Logger& logger, LogBudget& budget, LogLevel level, const char* category, uint64_t now_ns,
                       MakeLine&& line) {
  if (std::string summary = budget.take_summary(now_ns); !summary.empty()) logger.log(LogLevel::kWarn, summary);
  if (budget.take(category, now_ns)) logger.log(level, line());
}

}  // namespace simnic::core
