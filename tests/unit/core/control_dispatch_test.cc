// The control dispatcher (simnic/service: control_dispatch.cc, control_op_table.cc) as a hostile
// or careless client meets it: bodies of the wrong size for every op, requests before Hello, a
// query-only connection that tries to create objects, and one context naming another's
// objects. Each refusal is checked for its exact errno and for what it must not do: create,
// keep a descriptor, or leave anything behind.
#include <gtest/gtest.h>

#include <fcntl.h>

#include <cstring>
#include <map>
#include <set>
#include <span>
#include <vector>

#include "fabric.h"
#include "simnic/abi/cm.h"
#include "simnic/service/control_dispatch.h"
#include "simnic/service/control_ops.h"

namespace simnic::testing {
namespace dispatch_test {  // named: a unity build puts this file with others
namespace {

using abi::Op;
using service::control::kAnyBody;
using service::control::Needs;
using service::control::op_rule;

constexpr uint32_t kIp = 0x7f000002;
constexpr int kForeignFd = 50;  // a descriptor number the client sends along: kept only by a handler that takes it

// Counts the shared regions alive, so a refused request is seen to map nothing.
class CountingShm : public HeapShm {
 public:
  bool allocate(size_t size, const std::string& name, core::ShmRegion* out, int* err) override {
    ++live;
    return HeapShm::allocate(size, name, out, err);
  }
  void release(core::ShmRegion& r) override {
    --live;
    HeapShm::release(r);
  }
  int live = 0;
};

std::vector<Op> all_ops() {
  std::vector<Op> ops;
  for (uint32_t o = uint32_t(Op::Hello); o < uint32_t(Op::Count_); ++o) ops.push_back(Op(o));
  return ops;
}

template <class T>
std::vector<uint8_t> bytes_of(const T& v) {
  std::vector<uint8_t> b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}

// Everything the NIC holds, to compare before and after a refused request.
struct Snapshot {
  core::ObjectCounts objects;
  size_t cm_ids;
  int shm_regions;
  bool operator==(const Snapshot&) const = default;
};

struct Nic {
  FakeMemory mem;
  Fabric fabric;
  Fabric::Port port{fabric, kIp};
  CountingShm shm;
  RecordingNotifier notifier;
  CapturingLogger logger;
  core::Device dev{config(), mem, port, shm, notifier, logger};
  service::ControlDispatcher dispatcher{dev, 1, hooks()};
  uint64_t now = 1'000'000;

  static core::DeviceConfig config() {
    core::DeviceConfig c;
    c.ipv4 = kIp;
    c.key_seed = 7;
    return c;
  }
  static service::ControlDispatcher::Hooks hooks() {
    service::ControlDispatcher::Hooks h;
    h.file_identity = [](int fd, uint64_t* dev, uint64_t* ino) {
      *dev = 1;
      *ino = uint64_t(fd);
      return 0;
    };
    return h;
  }

  Snapshot snapshot() const { return {dev.tables().counts(), dev_cm().ids().size(), shm.live}; }
  const core::CmAgent& dev_cm() const { return const_cast<core::Device&>(dev).cm(); }

  service::ControlReply call(service::ControlSession& s, Op op, std::span<const uint8_t> body, std::vector<int>& fds) {
    now += 1000;
    return dispatcher.handle(s, op, body, fds, now);
  }
  service::ControlReply call(service::ControlSession& s, Op op, std::span<const uint8_t> body) {
    std::vector<int> none;
    return call(s, op, body, none);
  }
  service::ControlReply call(service::ControlSession& s, Op op, const std::vector<uint8_t>& body) {
    return call(s, op, std::span<const uint8_t>(body));
  }
  template <class T>
  service::ControlReply call(service::ControlSession& s, Op op, const T& req) {
    return call(s, op, bytes_of(req));
  }

  // A connection whose Hello opened an ibv_context (pid `pid`), or a query-only one.
  service::ControlSession connect(pid_t pid, bool context) {
    service::ControlSession s{pid, 1000};
    std::vector<int> fds;
    if (context) fds = {10, 11};
    abi::HelloReq hello{abi::kAbiVersion, 0};
    EXPECT_EQ(call(s, Op::Hello, bytes_of(hello), fds).status, 0);
    EXPECT_EQ(s.ctx != nullptr, context);
    return s;
  }

  template <class Reply>
  static Reply reply(const service::ControlReply& r) {
    Reply v{};
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.body.size(), sizeof v);
    if (r.body.size() == sizeof v) std::memcpy(&v, r.body.data(), sizeof v);
    return v;
  }
};

// One context's objects of every kind, made through the dispatcher.
struct Objects {
  uint32_t pd, mr, mw, channel, cq, srq, qp, qpn, ah, xrcd, xrc_srq, tgt_qp, tgt_qpn;
};

Objects make_objects(Nic& nic, service::ControlSession& s) {
  Objects o{};
  o.pd = Nic::reply<abi::HandleReply>(nic.call(s, Op::AllocPd, std::span<const uint8_t>{})).handle;
  abi::RegMrReq mr{o.pd, IBV_ACCESS_LOCAL_WRITE, nic.mem.addr(s.pid, 0), 4096, nic.mem.addr(s.pid, 0)};
  o.mr = Nic::reply<abi::RegMrReply>(nic.call(s, Op::RegMr, mr)).handle;
  o.mw = Nic::reply<abi::AllocMwReply>(nic.call(s, Op::AllocMw, abi::AllocMwReq{o.pd, IBV_MW_TYPE_1})).handle;
  std::vector<int> fds = {kForeignFd};
  o.channel = Nic::reply<abi::HandleReply>(nic.call(s, Op::CreateCompChannel, {}, fds)).handle;
  o.cq = Nic::reply<abi::CreateCqReply>(nic.call(s, Op::CreateCq, abi::CreateCqReq{16, o.channel, 0, 0})).handle;
  abi::CreateSrqReq srq{o.pd, 0, {8, 1, 0}};
  o.srq = Nic::reply<abi::CreateSrqReply>(nic.call(s, Op::CreateSrq, srq)).handle;
  abi::CreateQpReq qp{o.pd, o.cq, o.cq, 0, IBV_QPT_UD, 0, {8, 8, 1, 1, 0}};
  auto qp_rep = Nic::reply<abi::CreateQpReply>(nic.call(s, Op::CreateQp, qp));
  o.qp = qp_rep.handle;
  o.qpn = qp_rep.qp_num;
  abi::CreateAhReq ah{o.pd, 0, {}};
  ah.attr.port_num = 1;
  ah.attr.is_global = 1;
  ah.attr.grh.dgid.raw[10] = ah.attr.grh.dgid.raw[11] = 0xff;
  ah.attr.grh.dgid.raw[12] = 127;
  ah.attr.grh.dgid.raw[15] = 3;
  o.ah = Nic::reply<abi::HandleReply>(nic.call(s, Op::CreateAh, ah)).handle;
  o.xrcd = Nic::reply<abi::HandleReply>(nic.call(s, Op::OpenXrcd, abi::OpenXrcdReq{0, 0})).handle;
  abi::CreateXrcSrqReq xsrq{o.pd, o.xrcd, o.cq, 0, {8, 1, 0}};
  o.xrc_srq = Nic::reply<abi::CreateXrcSrqReply>(nic.call(s, Op::CreateXrcSrq, xsrq)).srq.handle;
  abi::CreateXrcQpReq tgt{{0, 0, 0, 0, IBV_QPT_XRC_RECV, 0, {}}, o.xrcd, 0};
  auto tgt_rep = Nic::reply<abi::CreateQpReply>(nic.call(s, Op::CreateXrcQp, tgt));
  o.tgt_qp = tgt_rep.handle;
  o.tgt_qpn = tgt_rep.qp_num;
  return o;
}

TEST(ControlOpTable, EveryOpOfTheProtocolHasItsLineAndAStructBodySize) {
  for (Op op : all_ops()) {
    const auto& rule = op_rule(op);
    ASSERT_NE(rule.name, nullptr) << "op " << uint32_t(op) << " has no line in kOpTable";
    EXPECT_EQ(rule.op, op) << rule.name;
    EXPECT_NE(rule.handler, nullptr) << rule.name;
  }
  EXPECT_EQ(op_rule(Op::Hello).needs, Needs::kNothing);
  EXPECT_EQ(op_rule(Op::QueryGid).needs, Needs::kHello);
  EXPECT_EQ(op_rule(Op::CreateQp).needs, Needs::kContext);
  EXPECT_EQ(op_rule(Op::CmBind).needs, Needs::kCmClient);
  EXPECT_EQ(op_rule(Op::RegMr).body, sizeof(abi::RegMrReq));
  EXPECT_EQ(op_rule(Op::CreateXrcQp).body, sizeof(abi::CreateXrcQpReq));
  EXPECT_EQ(op_rule(Op::CmInitQpAttr).body, sizeof(abi::CmInitQpAttrReq));
  EXPECT_EQ(op_rule(Op::Status).body, kAnyBody);   // text
  EXPECT_EQ(op_rule(Op::AllocPd).body, kAnyBody);  // no request struct: the body is ignored
  EXPECT_EQ(op_rule(Op(0)).name, nullptr);
  EXPECT_EQ(op_rule(Op::Count_).name, nullptr);
}

// Short, long and far too long bodies of 0xa5 garbage: EINVAL for every op with a request
// struct, before anything is looked at - no object, no CM client, no descriptor taken.
TEST(ControlDispatch, EveryOpRefusesABodyOfTheWrongSizeWithEinvalAndCreatesNothing) {
  Nic nic;
  service::ControlSession s = nic.connect(4001, true);
  make_objects(nic, s);
  const Snapshot before = nic.snapshot();
  int checked = 0;
  for (Op op : all_ops()) {
    const auto& rule = op_rule(op);
    if (rule.body == kAnyBody) continue;
    for (size_t size : {size_t(0), rule.body - 1, rule.body + 1, rule.body + 64}) {
      std::vector<uint8_t> body(size, 0xa5);
      std::vector<int> fds = {kForeignFd, kForeignFd + 1};
      service::ControlReply r = nic.call(s, op, body, fds);
      EXPECT_EQ(r.status, EINVAL) << rule.name << " with " << size << " bytes (expects " << rule.body << ")";
      EXPECT_EQ(fds, (std::vector<int>{kForeignFd, kForeignFd + 1})) << rule.name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * 47);  // the 47 ops with a request struct
  EXPECT_EQ(s.cm_client, 0u);  // a malformed rdma_cm request does not make the connection a CM client
  EXPECT_EQ(nic.snapshot(), before);
  nic.dispatcher.close(s);
  EXPECT_EQ(nic.snapshot(), (Snapshot{{}, 0, 0}));
}

// Bodies of the right size full of 0xa5 garbage: every handle names nothing, every enum is out
// of range. Each op refuses with the errno the matching uverbs command gives, and creates nothing:
// a destroy's lookup of a handle that names nothing is ENOENT (rdma_core.c), the other
// commands' EINVAL (uverbs_cmd.c).
TEST(ControlDispatch, GarbageOfTheRightSizeIsRefusedWithTheExactErrno) {
  const std::map<Op, int> expected = {
      {Op::Hello, EPROTO},  // abi_version 0xa5a5a5a5 (checked before "already greeted")
      {Op::QueryPort, EINVAL},    {Op::QueryGid, EINVAL},
      {Op::DeallocPd, ENOENT},    {Op::RegMr, EINVAL},
      {Op::DeregMr, ENOENT},      {Op::DestroyCompChannel, EINVAL},
      {Op::CreateCq, EINVAL},     {Op::DestroyCq, ENOENT},
      {Op::CreateQp, EOPNOTSUPP},  // qp_type
      {Op::ModifyQp, EINVAL},     {Op::QueryQp, EINVAL},
      {Op::DestroyQp, ENOENT},    {Op::CreateSrq, EINVAL},
      {Op::ModifySrq, EINVAL},    {Op::QuerySrq, EINVAL},
      {Op::DestroySrq, ENOENT},   {Op::CreateAh, EINVAL},
      {Op::DestroyAh, ENOENT},    {Op::AllocMw, EINVAL},
      {Op::DeallocMw, ENOENT},    {Op::ExplainQp, EINVAL},
      {Op::AttachMcast, EINVAL},  {Op::DetachMcast, EINVAL},
      {Op::OpenXrcd, EAGAIN},  // has_file, no O_CREAT, a file with no domain yet (ib_uverbs_open_xrcd)
      {Op::CloseXrcd, ENOENT},    {Op::CreateXrcSrq, EINVAL},
      {Op::CreateXrcQp, EINVAL},  {Op::OpenXrcQp, EINVAL},
      {Op::ResizeCq, EINVAL},     {Op::CmCreateId, EINVAL},
      {Op::CmDestroyId, EINVAL},  {Op::CmMigrateId, EINVAL},
      {Op::CmBind, EINVAL},       {Op::CmListen, EINVAL},
      {Op::CmConnect, EINVAL},    {Op::CmAccept, EINVAL},
      {Op::CmReject, EINVAL},     {Op::CmDisconnect, EINVAL},
      {Op::CmInitQpAttr, EINVAL}, {Op::ReregMr, EINVAL},
      {Op::AllocDm, EINVAL},      {Op::FreeDm, EINVAL},  // AllocDm: comp_mask
      {Op::RegDmMr, EINVAL},      {Op::ImportPd, EINVAL},
      {Op::ImportMr, EINVAL},     {Op::AdviseMr, EINVAL},  // no such PD
  };
  Nic nic;
  service::ControlSession s = nic.connect(4001, true);
  make_objects(nic, s);
  const Snapshot before = nic.snapshot();
  for (Op op : all_ops()) {
    const auto& rule = op_rule(op);
    if (rule.body == kAnyBody) continue;
    ASSERT_TRUE(expected.count(op)) << rule.name;
    std::vector<uint8_t> body(rule.body, 0xa5);
    std::vector<int> fds = {kForeignFd};
    service::ControlReply r = nic.call(s, op, body, fds);
    EXPECT_EQ(r.status, expected.at(op)) << rule.name;
    EXPECT_EQ(fds[0], kForeignFd) << rule.name << " kept a descriptor it refused";
  }
  EXPECT_EQ(nic.snapshot(), before);
  nic.dispatcher.close(s);
  EXPECT_EQ(nic.snapshot(), (Snapshot{{}, 0, 0}));
}

// Ops with no request struct ignore their body (the shim sends a HandleReq, librdmacm nothing):
// garbage there changes nothing in the reply.
TEST(ControlDispatch, AnOpWithoutARequestStructIgnoresItsBody) {
  Nic nic;
  service::ControlSession s = nic.connect(4001, false);
  service::ControlReply empty = nic.call(s, Op::QueryDevice, std::span<const uint8_t>{});
  service::ControlReply garbage = nic.call(s, Op::QueryDevice, std::vector<uint8_t>(100, 0xa5));
  EXPECT_EQ(empty.status, 0);
  EXPECT_EQ(garbage.status, 0);
  EXPECT_EQ(garbage.body, empty.body);
  EXPECT_EQ(garbage.body.size(), sizeof(abi::QueryDeviceReply));
}

// Before its Hello a connection may send only a Hello: every other op, served or not, with a
// well-formed body or not, is EPROTO, and leaves the connection as it was.
TEST(ControlDispatch, EveryRequestBeforeHelloIsEprotoAndChangesNothing) {
  Nic nic;
  service::ControlSession s{4001, 1000};
  std::vector<Op> ops = all_ops();
  ops.insert(ops.end(), {Op(0), Op::Count_, Op(0xffff)});
  for (Op op : ops) {
    if (op == Op::Hello) continue;
    const auto& rule = op_rule(op);
    std::vector<uint8_t> body(rule.body == kAnyBody ? 8 : rule.body, 0);
    std::vector<int> fds = {kForeignFd, kForeignFd + 1};
    service::ControlReply r = nic.call(s, op, body, fds);
    EXPECT_EQ(r.status, EPROTO) << "op " << uint32_t(op);
    EXPECT_EQ(fds, (std::vector<int>{kForeignFd, kForeignFd + 1})) << "op " << uint32_t(op);
  }
  EXPECT_FALSE(s.greeted);
  EXPECT_EQ(s.ctx, nullptr);
  EXPECT_EQ(s.cm_client, 0u);
  EXPECT_EQ(nic.snapshot(), (Snapshot{{}, 0, 0}));
}

TEST(ControlDispatch, HelloChecksItsVersionOnceAndOpensOneContext) {
  Nic nic;
  service::ControlSession s{4001, 1000};
  std::vector<int> fds = {kForeignFd, kForeignFd + 1};
  EXPECT_EQ(nic.call(s, Op::Hello, bytes_of(abi::HelloReq{abi::kAbiVersion + 1, 0}), fds).status, EPROTO);
  EXPECT_FALSE(s.greeted);
  EXPECT_EQ(fds[0], kForeignFd);  // not taken
  EXPECT_EQ(nic.dev.tables().context_count(), 0u);

  service::ControlReply ok = nic.call(s, Op::Hello, bytes_of(abi::HelloReq{abi::kAbiVersion, 0}), fds);
  auto rep = Nic::reply<abi::HelloReply>(ok);
  EXPECT_STREQ(rep.name, "simnic0");
  EXPECT_EQ(rep.abi_version, abi::kAbiVersion);
  EXPECT_EQ(rep.daemon_pid, 1u);
  EXPECT_EQ(fds, (std::vector<int>{-1, -1}));  // the context keeps the doorbell and event socket
  ASSERT_NE(s.ctx, nullptr);

  std::vector<int> again = {kForeignFd + 2, kForeignFd + 3};
  EXPECT_EQ(nic.call(s, Op::Hello, bytes_of(abi::HelloReq{abi::kAbiVersion, 0}), again).status, EALREADY);
  EXPECT_EQ(again[0], kForeignFd + 2);
  EXPECT_EQ(nic.dev.tables().context_count(), 1u);
  nic.dispatcher.close(s);
  EXPECT_EQ(nic.dev.tables().context_count(), 0u);
}

// A query-only connection (a Hello without descriptors: ibv_get_device_list, the CLI,
// librdmacm) may query but never create or use verbs objects: EPROTO for every context op,
// EOPNOTSUPP for none (that would say the op exists but is refused for another reason).
TEST(ControlDispatch, AQueryOnlyConnectionCannotCreateOrUseObjects) {
  Nic nic;
  service::ControlSession owner = nic.connect(4001, true);
  const Objects theirs = make_objects(nic, owner);
  service::ControlSession s = nic.connect(4002, false);
  const Snapshot before = nic.snapshot();
  int refused = 0;
  for (Op op : all_ops()) {
    const auto& rule = op_rule(op);
    if (rule.needs != Needs::kContext) continue;
    // Well-formed bodies naming the other context's objects, where a handle is read first.
    std::vector<uint8_t> body(rule.body == kAnyBody ? 8 : rule.body, 0);
    if (body.size() >= 4) std::memcpy(body.data(), &theirs.pd, 4);
    std::vector<int> fds = {kForeignFd};
    EXPECT_EQ(nic.call(s, op, body, fds).status, EPROTO) << rule.name;
    EXPECT_EQ(fds[0], kForeignFd) << rule.name;
    ++refused;
  }
  EXPECT_EQ(refused, 41);
  EXPECT_EQ(nic.call(s, Op(0xffff), std::span<const uint8_t>{}).status, EPROTO);
  EXPECT_EQ(nic.snapshot(), before);
  EXPECT_EQ(s.ctx, nullptr);
  // What it may do: the queries.
  EXPECT_EQ(nic.call(s, Op::QueryDevice, std::span<const uint8_t>{}).status, 0);
  EXPECT_EQ(nic.call(s, Op::QueryPort, abi::QueryPortReq{1, 0}).status, 0);
  EXPECT_EQ(nic.call(s, Op::QueryPort, abi::QueryPortReq{2, 0}).status, EINVAL);
  EXPECT_EQ(nic.call(s, Op::QueryGid, abi::QueryGidReq{1, 0}).status, 0);
  EXPECT_EQ(nic.call(s, Op::Status, std::span<const uint8_t>{}).status, 0);
  EXPECT_EQ(nic.call(s, Op::SetFault, std::span<const uint8_t>{}).status, EOPNOTSUPP);  // no I/O-layer hook here
  nic.dispatcher.close(s);
  nic.dispatcher.close(owner);
  EXPECT_EQ(nic.snapshot(), (Snapshot{{}, 0, 0}));
}

// rdma_cm requests come on a query-only connection (librdmacm's): the first makes it a CM
// client, whose channel and ids are its own (another client's requests naming them are EINVAL),
// a refusal carries the agent's reason, and the connection's close frees them.
TEST(ControlDispatch, CmRequestsMakeAClientWhoseIdsAreItsOwnAndDieWithIt) {
  Nic nic;
  service::ControlSession s = nic.connect(4001, false);
  service::ControlSession other = nic.connect(4002, false);
  EXPECT_EQ(s.cm_client, 0u);
  std::vector<int> fds = {kForeignFd};
  const uint32_t channel = Nic::reply<abi::HandleReply>(nic.call(s, Op::CmAttachChannel, {}, fds)).handle;
  EXPECT_EQ(fds[0], -1);  // the agent keeps the channel socket
  EXPECT_NE(s.cm_client, 0u);
  abi::CmCreateIdReq create{channel, 0x106 /* RDMA_PS_TCP */, 0, IBV_QPT_RC, 0, 0x1234};
  const uint32_t id = Nic::reply<abi::HandleReply>(nic.call(s, Op::CmCreateId, create)).handle;
  EXPECT_EQ(nic.snapshot().cm_ids, 1u);

  EXPECT_EQ(nic.call(other, Op::CmCreateId, create).status, EINVAL);  // not its channel
  EXPECT_EQ(nic.call(other, Op::CmDestroyId, abi::HandleReq{id, 0}).status, EINVAL);
  EXPECT_EQ(nic.call(other, Op::CmListen, abi::CmListenReq{id, 1}).status, EINVAL);
  EXPECT_EQ(nic.snapshot().cm_ids, 1u);

  service::ControlReply unbound = nic.call(s, Op::CmListen, abi::CmListenReq{id, 1});
  EXPECT_EQ(unbound.status, EINVAL);
  EXPECT_EQ(std::string(unbound.body.begin(), unbound.body.end()), "rdma_listen: bind the id first");

  nic.dispatcher.close(s);
  nic.dispatcher.close(other);
  EXPECT_EQ(nic.snapshot(), (Snapshot{{}, 0, 0}));
}

// A context's handles mean nothing to another context: every verb that names one of them fails
// as if the handle did not exist (uverbs looks handles up in the caller's own file): a destroy
// with ENOENT (rdma_core.c), the others with EINVAL; the owner's objects are untouched and
// still work.
TEST(ControlDispatch, AnotherContextsHandlesNameNothingAndTouchNothing) {
  Nic nic;
  service::ControlSession a = nic.connect(4001, true);
  service::ControlSession b = nic.connect(4002, true);
  const Objects o = make_objects(nic, a);
  const uint32_t b_pd = Nic::reply<abi::HandleReply>(nic.call(b, Op::AllocPd, std::span<const uint8_t>{})).handle;
  const Snapshot before = nic.snapshot();
  abi::ModifyQpReq to_init{o.qp, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, {}};
  to_init.attr.qp_state = IBV_QPS_INIT;
  to_init.attr.port_num = 1;
  to_init.attr.qkey = 0x11111111;
  abi::McastReq mcast{o.qp, 0, 0, {}};
  mcast.gid.raw[0] = 0xff;
  const uint64_t b_addr = nic.mem.addr(b.pid, 0);
  const std::vector<std::pair<Op, std::vector<uint8_t>>> requests = {
      {Op::DeallocPd, bytes_of(abi::HandleReq{o.pd, 0})},
      {Op::RegMr, bytes_of(abi::RegMrReq{o.pd, IBV_ACCESS_LOCAL_WRITE, b_addr, 4096, b_addr})},
      {Op::DeregMr, bytes_of(abi::HandleReq{o.mr, 0})},
      {Op::AllocMw, bytes_of(abi::AllocMwReq{o.pd, IBV_MW_TYPE_1})},
      {Op::DeallocMw, bytes_of(abi::HandleReq{o.mw, 0})},
      {Op::DestroyCompChannel, bytes_of(abi::HandleReq{o.channel, 0})},
      {Op::CreateCq, bytes_of(abi::CreateCqReq{16, o.channel, 0, 0})},
      {Op::ResizeCq, bytes_of(abi::ResizeCqReq{o.cq, 64})},
      {Op::DestroyCq, bytes_of(abi::HandleReq{o.cq, 0})},
      {Op::CreateQp, bytes_of(abi::CreateQpReq{o.pd, o.cq, o.cq, 0, IBV_QPT_RC, 0, {8, 8, 1, 1, 0}})},
      {Op::CreateQp, bytes_of(abi::CreateQpReq{b_pd, o.cq, o.cq, 0, IBV_QPT_RC, 0, {8, 8, 1, 1, 0}})},
      {Op::ModifyQp, bytes_of(to_init)},
      {Op::QueryQp, bytes_of(abi::QueryQpReq{o.qp, 0})},
      {Op::ExplainQp, bytes_of(abi::HandleReq{o.qpn, 0})},
      {Op::DestroyQp, bytes_of(abi::HandleReq{o.qp, 0})},
      {Op::DestroyQp, bytes_of(abi::HandleReq{o.tgt_qp, 0})},
      {Op::CreateSrq, bytes_of(abi::CreateSrqReq{o.pd, 0, {8, 1, 0}})},
      {Op::ModifySrq, bytes_of(abi::ModifySrqReq{o.srq, IBV_SRQ_LIMIT, {8, 1, 1}})},
      {Op::QuerySrq, bytes_of(abi::HandleReq{o.srq, 0})},
      {Op::DestroySrq, bytes_of(abi::HandleReq{o.srq, 0})},
      {Op::DestroySrq, bytes_of(abi::HandleReq{o.xrc_srq, 0})},
      {Op::CreateAh, bytes_of(abi::CreateAhReq{o.pd, 0, {}})},
      {Op::DestroyAh, bytes_of(abi::HandleReq{o.ah, 0})},
      {Op::AttachMcast, bytes_of(mcast)},
      {Op::DetachMcast, bytes_of(mcast)},
      {Op::CloseXrcd, bytes_of(abi::HandleReq{o.xrcd, 0})},
      {Op::CreateXrcSrq, bytes_of(abi::CreateXrcSrqReq{b_pd, o.xrcd, o.cq, 0, {8, 1, 0}})},
      {Op::CreateXrcQp, bytes_of(abi::CreateXrcQpReq{{0, 0, 0, 0, IBV_QPT_XRC_RECV, 0, {}}, o.xrcd, 0})},
      {Op::CreateXrcQp, bytes_of(abi::CreateXrcQpReq{{o.pd, o.cq, 0, 0, IBV_QPT_XRC_SEND, 0, {8, 0, 1, 0, 0}}, 0, 0})},
      {Op::OpenXrcQp, bytes_of(abi::OpenXrcQpReq{o.xrcd, o.tgt_qpn})},
  };
  const std::set<Op> destroys = {Op::DeallocPd, Op::DeregMr,    Op::DeallocMw, Op::DestroyCq,
                                 Op::DestroyQp, Op::DestroySrq, Op::DestroyAh, Op::CloseXrcd};
  for (const auto& [op, body] : requests) {
    service::ControlReply r = nic.call(b, op, body);
    EXPECT_EQ(r.status, destroys.count(op) ? ENOENT : EINVAL) << op_rule(op).name;
  }
  EXPECT_EQ(nic.snapshot(), before);
  // The owner's objects still answer to it.
  EXPECT_EQ(nic.call(a, Op::QueryQp, abi::QueryQpReq{o.qp, 0}).status, 0);
  EXPECT_EQ(nic.call(a, Op::QuerySrq, abi::HandleReq{o.srq, 0}).status, 0);
  EXPECT_EQ(nic.call(a, Op::ModifyQp, to_init).status, 0);
  nic.dispatcher.close(b);
  EXPECT_EQ(nic.snapshot().objects.pds, before.objects.pds - 1);  // b's own PD went with b
  nic.dispatcher.close(a);
  EXPECT_EQ(nic.snapshot(), (Snapshot{{}, 0, 0}));
}

}  // namespace
}  // namespace dispatch_test
}  // namespace simnic::testing
