#include "simnic/core/wire/fault_injector.h"

#include <cstdlib>
#include <sstream>

namespace simnic::core {

void FaultInjector::configure(const FaultConfig& c) {
  config_ = c;
  rng_.seed(c.seed);
}

FaultDecision FaultInjector::decide() {
  FaultDecision d;
  if (!active()) return d;
  if (config_.loss > 0 && uniform_(rng_) < config_.loss) {
    d.drop = true;
    return d;
  }
  if (config_.dup > 0 && uniform_(rng_) < config_.dup) d.copies = 2;
  d.delay_ns = uint64_t(config_.delay_us) * 1000;
  if (config_.reorder > 0 && uniform_(rng_) < config_.reorder) d.delay_ns += kReorderHoldNs;
  return d;
}

bool FaultInjector::apply_spec(const std::string& spec, std::string* error) {
  FaultConfig c = config_;
  std::istringstream in(spec);
  std::string item;
  bool reseed = false;
  while (in >> item) {
    if (item == "off") {  // everything back to a perfect wire (the seed stays)
      c.loss = c.dup = c.reorder = 0;
      c.delay_us = 0;
      continue;
    }
    auto eq = item.find('=');
    if (eq == std::string::npos) {
      *error = "expected key=value, got '" + item + "'";
      return false;
    }
    std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    char* end = nullptr;
    double v = std::strtod(val.c_str(), &end);
    if (val.empty() || *end) {
      *error = "'" + val + "' is not a number";
      return false;
    }
    auto prob = [&](double* dst) {
      if (v < 0 || v > 1) {
        *error = key + " is a probability: 0 to 1";
        return false;
      }
      *dst = v;
      return true;
    };
    if (key == "loss") {
      if (!prob(&c.loss)) return false;
    } else if (key == "dup") {
      if (!prob(&c.dup)) return false;
    } else if (key == "reorder") {
      if (!prob(&c.reorder)) return false;
    } else if (key == "delay_us" || key == "delay") {
      if (v < 0 || v > 10'000'000) {
        *error = "delay_us must be 0..10000000";
        return false;
      }
      c.delay_us = uint32_t(v);
    } else if (key == "seed") {
      c.seed = uint64_t(v);
      reseed = true;
    } else {
      *error = "unknown fault '" + key + "' (known: loss, dup, reorder, delay_us, seed)";
      return false;
    }
  }
  if (reseed) configure(c);
  else config_ = c;
  return true;
}

std::string FaultInjector::describe() const {
  std::ostringstream s;
  s << "loss=" << config_.loss << " dup=" << config_.dup << " reorder=" << config_.reorder
    << " delay_us=" << config_.delay_us << " seed=" << config_.seed;
  return s.str();
}

}  // namespace simnic::core
