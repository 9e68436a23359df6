// The NIC's own fault injector: settings parse as `simnic fault` documents them, "off" restores
// a perfect wire, bad settings are refused with a reason, and a seed makes drops repeatable.
#include <gtest/gtest.h>

#include "simnic/core/wire/fault_injector.h"

namespace simnic::core {
namespace {

TEST(FaultInjector, SettingsOffAndErrors) {
  FaultInjector f;
  std::string err;
  ASSERT_TRUE(f.apply_spec("loss=0.25 dup=0.1 reorder=0.05 delay=30 seed=9", &err)) << err;
  EXPECT_EQ(f.config().loss, 0.25);
  EXPECT_EQ(f.config().dup, 0.1);
  EXPECT_EQ(f.config().reorder, 0.05);
  EXPECT_EQ(f.config().delay_us, 30u);
  ASSERT_TRUE(f.apply_spec("off", &err)) << err;
  EXPECT_EQ(f.config().loss, 0);
  EXPECT_EQ(f.config().dup, 0);
  EXPECT_EQ(f.config().reorder, 0);
  EXPECT_EQ(f.config().delay_us, 0u);
  EXPECT_FALSE(f.apply_spec("loss=2", &err));
  EXPECT_NE(err.find("probability"), std::string::npos);
  EXPECT_FALSE(f.apply_spec("loss", &err));
  EXPECT_FALSE(f.apply_spec("loss=abc", &err));
}

}  // namespace
}  // namespace simnic::core
