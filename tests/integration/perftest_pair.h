// One run of an unmodified perftest binary between two NICs, as the perftest, XRC, busy-poll
// and many-QP tests make it: server on simnic0, client on simnic1, RoCE GID index 0, a free TCP
// port for perftest's own exchange.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness.h"

namespace simnic::it {

struct PerftestLimits {
  std::chrono::seconds listen{15};   // for the server to listen
  std::chrono::seconds client{120};  // for the client's whole run
  std::chrono::seconds server{30};   // for the server to finish after it
};

// Runs `binary` with `args` on both sides; both must exit 0 (a fatal failure otherwise: wrap
// the call in ASSERT_NO_FATAL_FAILURE). The client's output goes to *client_output.
inline void run_perftest_pair(const Nics& nics, const std::string& binary, const std::vector<std::string>& args,
                              std::string* client_output = nullptr, PerftestLimits limits = {}) {
  const int port = free_tcp_port();
  auto side = [&](const char* nic) {
    std::vector<std::string> v = {binary, "-d", nic, "-x", "0", "-p", std::to_string(port)};
    v.insert(v.end(), args.begin(), args.end());
    return v;
  };
  std::vector<std::string> client = side("simnic1");
  client.push_back("127.0.0.1");
  auto srv = nics.start(side("simnic0"));
  ASSERT_TRUE(wait_for_listener(port, limits.listen)) << srv->output();
  Result cl = nics.run(client, limits.client);
  Result sv = srv->wait(limits.server);
  if (client_output) *client_output = cl.output;
  ASSERT_EQ(cl.exit_code, 0) << binary << " client:\n" << cl.output << "\nserver:\n" << sv.output;
  ASSERT_EQ(sv.exit_code, 0) << binary << " server:\n" << sv.output;
}

}  // namespace simnic::it
