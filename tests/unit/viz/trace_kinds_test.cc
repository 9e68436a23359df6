// The trace's event kinds are one table in simnicd (simnic/core/observe/trace_kinds.h: the enum the
// engines emit and each kind's name) and strings in simnic-viz's model. docs/trace-format.md is
// the contract between the two; these tests read all three and fail on a kind that one side
// has and the documentation (or simnic-viz) does not, and on a row of the table no engine emits.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "simnic/core/observe/trace_kinds.h"
#include "viz/model/field_help.h"

namespace simnic::viz {
namespace {

namespace fs = std::filesystem;
using Kinds = std::set<std::string>;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string source_dir() { return SIMNIC_SOURCE_DIR; }

std::vector<fs::path> sources_under(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(source_dir() + "/" + dir))
    if (e.is_regular_file() && (e.path().extension() == ".cc" || e.path().extension() == ".h")) out.push_back(e.path());
  return out;
}

void add_matches(const std::string& text, const std::regex& re, Kinds* out) {
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) out->insert((*it)[1]);
}

// The kinds simnicd emits: the rows of SIMNIC_TRACE_KINDS whose enumerator some source under
// simnic/ names (`tracer_.event(TraceKind::kQpState)`, `trace_packet(TraceKind::kPktTx, ...)`).
// Any other argument to event() is reported in *unreadable (a helper that takes `TraceKind kind`
// and passes it on is fine), so a new way of naming a kind cannot slip by.
Kinds emitted_kinds(std::vector<std::string>* unreadable) {
  std::map<std::string, std::string> name_of;  // enumerator -> name in the trace
#define SIMNIC_TEST_KIND(id, name) name_of[#id] = name;
  SIMNIC_TRACE_KINDS(SIMNIC_TEST_KIND)
#undef SIMNIC_TEST_KIND
  const std::regex named(R"re(\bTraceKind::(k\w+))re"), any_event(R"re(\.event\(([^)]*)\))re");
  Kinds enumerators, kinds;
  for (const auto& p : sources_under("simnic")) {
    const std::string text = read_file(p);
    add_matches(text, named, &enumerators);
    for (std::sregex_iterator it(text.begin(), text.end(), any_event), end; it != end; ++it) {
      const std::string arg = (*it)[1];
      const bool forwarded = arg == "kind" && text.find("(TraceKind kind") != std::string::npos;
      if (!forwarded && !std::regex_match(arg, std::regex(R"re((core::)?TraceKind::k\w+)re")))
        unreadable->push_back(p.filename().string() + ": event(" + arg + ")");
    }
  }
  for (const auto& id : enumerators) {
    if (name_of.count(id)) kinds.insert(name_of[id]);
    else unreadable->push_back("TraceKind::" + id + " is not a row of SIMNIC_TRACE_KINDS");
  }
  return kinds;
}

// The kinds of the table under "## Kinds": each row starts with its kinds, `a` / `b`.
Kinds documented_kinds() {
  std::istringstream doc(read_file(source_dir() + "/docs/trace-format.md"));
  const std::regex row(R"re(^\| ((`[a-z_]+`( / )?)+))re"), kind(R"re(`([a-z_]+)`)re");
  Kinds kinds;
  bool in_table = false;
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("## ", 0) == 0) in_table = line == "## Kinds";
    std::smatch m;
    if (in_table && std::regex_search(line, m, row)) add_matches(m[1].str(), kind, &kinds);
  }
  return kinds;
}

// The kinds simnic-viz's model compares an event's kind with (`k == "cqe"`, `e.kind != "pkt_rx"`).
Kinds kinds_viz_compares() {
  const std::regex compared(R"re(\b(?:k|kind|e\.kind)\s*[!=]=\s*"([a-z_]+)")re");
  Kinds kinds;
  for (const auto& p : sources_under("viz/model")) add_matches(read_file(p), compared, &kinds);
  return kinds;
}

std::string list(const Kinds& k) {
  std::string s;
  for (const auto& x : k) s += " " + x;
  return s;
}

TEST(TraceKinds, TheExtractionFindsTheKnownKinds) {
  std::vector<std::string> unreadable;
  Kinds emitted = emitted_kinds(&unreadable);
  // A sample from each way of emitting: event(), trace_packet, trace_qp_lifecycle, trace_mad,
  // and step mode in simnic/io. If these go missing, the extraction broke, not the trace.
  for (const char* k : {"qp_state", "pkt_tx", "pkt_rx", "qp_create", "qp_destroy", "cm_rx", "step", "nic_up"})
    EXPECT_TRUE(emitted.count(k)) << k << " not found among:" << list(emitted);
  EXPECT_GE(documented_kinds().size(), 40u);
  EXPECT_TRUE(kinds_viz_compares().count("qp_state"));
}

TEST(TraceKinds, EveryKindSimnicdEmitsIsDocumentedAndEveryDocumentedKindIsEmitted) {
  std::vector<std::string> unreadable;
  const Kinds emitted = emitted_kinds(&unreadable), documented = documented_kinds();
  for (const auto& u : unreadable) ADD_FAILURE() << "a trace kind this test cannot read: " << u;
  for (const auto& k : emitted)
    EXPECT_TRUE(documented.count(k)) << "simnicd emits \"" << k << "\": add it to docs/trace-format.md's Kinds table";
  for (const auto& k : documented)
    EXPECT_TRUE(emitted.count(k)) << "docs/trace-format.md lists \"" << k << "\", which simnicd never emits";
}

// The table is the single source: each of its rows is documented, and emitted somewhere.
TEST(TraceKinds, EveryRowOfTheKindTableIsDocumentedAndEmitted) {
  std::vector<std::string> unreadable;
  const Kinds emitted = emitted_kinds(&unreadable), documented = documented_kinds();
  for (const char* name : simnic::core::kTraceKindNames) {
    EXPECT_TRUE(documented.count(name)) << "trace_kinds.h has \"" << name
                                        << "\": add it to docs/trace-format.md's Kinds table";
    EXPECT_TRUE(emitted.count(name)) << "trace_kinds.h has \"" << name << "\", which no source under simnic/ emits";
  }
  EXPECT_EQ(Kinds(std::begin(simnic::core::kTraceKindNames), std::end(simnic::core::kTraceKindNames)).size(),
            simnic::core::kTraceKindCount)
      << "a name appears twice in trace_kinds.h";
}

TEST(TraceKinds, SimnicVizKnowsEveryDocumentedKindAndOnlyThose) {
  for (const auto& k : documented_kinds())
    EXPECT_FALSE(explain_kind(k).empty())
        << "simnic-viz has no explanation for \"" << k << "\" (viz/model/field_help.cc explain_kind)";
  const Kinds documented = documented_kinds();
  for (const auto& k : kinds_viz_compares())
    EXPECT_TRUE(documented.count(k)) << "viz/model handles \"" << k << "\", which docs/trace-format.md does not list";
  EXPECT_TRUE(explain_kind("no_such_kind").empty());
}

}  // namespace
}  // namespace simnic::viz
