// The lists the core keeps as tables (issue 27): drop reasons, trace kinds, counters. Each row
// must be complete, and the names a trace or `simnic status` shows must be unique.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "simnic/abi/device_counters.h"
#include "simnic/core/observe/counters.h"
#include "simnic/core/observe/drop_reasons.h"
#include "simnic/core/observe/trace_kinds.h"

namespace simnic::core {
namespace {

TEST(DropTable, EveryReasonHasANameAnExplanationAndACounterThatExists) {
  std::set<std::string> names;
  for (int i = 0; i <= int(Drop::kCmMalformedReq); ++i) {
    const DropReason& r = drop_reason(Drop(i));
    ASSERT_NE(r.name, nullptr) << i;
    EXPECT_TRUE(names.insert(r.name).second) << "two drop reasons are named " << r.name;
    EXPECT_GE(std::string(r.explanation).size(), 8u) << r.name;
    ASSERT_NE(r.rule, nullptr) << r.name;
    if (*r.rule) {
      EXPECT_EQ(std::string(r.rule).rfind("IBA ", 0), 0u) << r.name << ": a rule cites the IBA";
    }
    if (!r.counter) {
      EXPECT_EQ(std::string(r.name).rfind("cm_", 0), 0u) << r.name << ": only QP1's drops are counted elsewhere";
      continue;
    }
    const std::string counter = DeviceCounters::name_of(r.counter);
    EXPECT_EQ(counter.rfind("rx_drop_", 0), 0u) << r.name << " is counted in '" << counter << "'";
  }
  EXPECT_TRUE(names.count("qkey")) << "labs/06-ud/grader.py finds Q_Key drops by this name";
}

TEST(DropTable, CountingARowIncrementsItsCounter) {
  DeviceCounters c;
  const DropReason& r = drop_reason(Drop::kQkey);
  ++(c.*r.counter);
  EXPECT_EQ(c.rx_drop_qkey, 1u);
  EXPECT_STREQ(DeviceCounters::name_of(r.counter), "rx_drop_qkey");
}

TEST(CounterTable, EveryDeviceCounterSaysWhatItCounts) {
  DeviceCounters c;
  size_t n = 0;
  c.for_each([&](const char* name, uint64_t) {
    ++n;
    const char* meaning = abi::device_counter_meaning(name);
    ASSERT_NE(meaning, nullptr) << name;
    EXPECT_GT(std::string(meaning).size(), 5u) << name;
    EXPECT_STREQ(DeviceCounters::name_of(nullptr), "");
  });
  EXPECT_GE(n, 30u);
  EXPECT_EQ(abi::device_counter_meaning("no_such_counter"), nullptr);
}

TEST(TraceKindTable, NamesAreUniqueAndTheEnumIndexesThem) {
  std::set<std::string> names(std::begin(kTraceKindNames), std::end(kTraceKindNames));
  EXPECT_EQ(names.size(), kTraceKindCount);
  EXPECT_STREQ(trace_kind_name(TraceKind::kPktDrop), "pkt_drop");
  EXPECT_STREQ(trace_kind_name(TraceKind::kEngineSteps), "engine_steps");
  EXPECT_STREQ(trace_kind_name(TraceKind::kNicUp), "nic_up");
}

}  // namespace
}  // namespace simnic::core
