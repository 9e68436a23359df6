// libFuzzer target: the control-message dispatcher (simnic/service/control_dispatch.*) on a NIC
// with in-memory fakes. Each input is a connection's whole life (control_fuzz_format.h): its
// requests in order, then its close, which must free everything it created; a second
// connection then checks the NIC still serves. Any DMA write is a defect here (no traffic
// flows), and the sanitizers catch the rest.
#include <cstdlib>
#include <span>
#include <vector>

#include "checked_memory.h"
#include "control_fuzz_format.h"
#include "simnic/service/control_dispatch.h"
#include "tests/unit/core/fabric.h"

namespace {

using namespace simnic;

core::DeviceConfig config() {
  core::DeviceConfig c;
  c.ipv4 = 0x7f000002;
  c.name = "fuzz";
  return c;
}

// Runs one connection's requests; returns the reply status of the last one.
void run_session(service::ControlDispatcher& d, service::ControlSession& s, const uint8_t* data, size_t size,
                 uint64_t& now) {
  size_t pos = 0;
  int fd_number = 100;
  for (int n = 0; pos + 2 <= size && n < 200; ++n) {
    const uint32_t op = uint32_t(data[pos]) % uint32_t(abi::Op::Count_);
    const uint8_t size_byte = data[pos + 1];
    pos += 2;
    size_t len = size_byte == fuzz::kExactSize ? fuzz::request_size(abi::Op(op)) : size_byte;
    std::vector<uint8_t> body(data + pos, data + pos + std::min(len, size - pos));
    body.resize(len, 0);  // a short tail reads as zeros, so the last request stays decodable
    pos += std::min(len, size - pos);
    std::vector<int> fds;
    if (op == uint32_t(abi::Op::Hello) || op == uint32_t(abi::Op::CreateCompChannel) ||
        op == uint32_t(abi::Op::OpenXrcd))
      fds = {fd_number, fd_number + 1};
    fd_number += 2;
    now += 1000;
    service::ControlReply r = d.handle(s, abi::Op(op), body, fds, now);
    if (r.status < 0) std::abort();  // statuses are positive errnos
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::CheckedMemory mem;  // nothing may be written: no MR is writable to the DMA engine
  mem.space(4001);
  testing::HeapShm shm;
  testing::RecordingNotifier notifier;
  fuzz::NullLogger logger;
  fuzz::CountingSink wire;
  core::Device dev(config(), mem, wire, shm, notifier, logger);
  service::ControlDispatcher::Hooks hooks;
  // ibv_open_xrcd's file: a few inodes, so that opens meet the same domain again.
  hooks.file_identity = [](int fd, uint64_t* dev, uint64_t* ino) {
    *dev = 1;
    *ino = uint64_t(fd) % 3;
    return 0;
  };
  service::ControlDispatcher dispatcher(dev, 1, hooks);
  uint64_t now = 1'000'000;
  service::ControlSession s{4001, 1000};
  run_session(dispatcher, s, data, size, now);
  dispatcher.close(s);
  if (dev.tables().context_count() != 0) std::abort();  // a closed connection leaves nothing behind

  // The NIC still serves a well-behaved client.
  service::ControlSession next{4002, 1000};
  abi::HelloReq hello{};
  hello.abi_version = abi::kAbiVersion;
  std::vector<int> fds = {7, 8};
  std::span<const uint8_t> body(reinterpret_cast<const uint8_t*>(&hello), sizeof hello);
  if (dispatcher.handle(next, abi::Op::Hello, body, fds, now).status != 0) std::abort();
  std::vector<int> none;
  if (dispatcher.handle(next, abi::Op::AllocPd, {}, none, now).status != 0) std::abort();
  dispatcher.close(next);
  return 0;
}
