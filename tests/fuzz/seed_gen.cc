// Writes the seed inputs of the control-dispatcher fuzzer: the request sequences a real
// application sends (what ibv_rc_pingpong, ibv_ud_pingpong, ibv_srq_pingpong and a memory-window
// program do through the shim), encoded as control_fuzz_format.h describes. Handles are the
// ones a fresh NIC gives out (1, 2, 3... in creation order).
//   fuzz_seed_gen OUT_DIR
#include <fcntl.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "control_fuzz_format.h"

namespace {

using namespace simnic::abi;

class Script {
 public:
  template <class T>
  Script& req(Op op, const T& body) {
    out_.push_back(uint8_t(op));
    out_.push_back(simnic::fuzz::kExactSize);
    const auto* p = reinterpret_cast<const uint8_t*>(&body);
    out_.insert(out_.end(), p, p + sizeof(T));
    return *this;
  }
  Script& bare(Op op) {  // a request without a body
    out_.push_back(uint8_t(op));
    out_.push_back(0);
    return *this;
  }
  Script& text(Op op, const std::string& s) {
    out_.push_back(uint8_t(op));
    out_.push_back(uint8_t(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return out_; }

 private:
  std::vector<uint8_t> out_;
};

constexpr uint64_t kBase = 0x10000000;  // CheckedMemory::kBase

Script& hello(Script& s) {
  HelloReq h{};
  h.abi_version = kAbiVersion;
  s.req(Op::Hello, h).bare(Op::QueryDevice);
  s.req(Op::QueryPort, QueryPortReq{1, 0}).req(Op::QueryGid, QueryGidReq{1, 0});
  return s;
}

// PD 1, MR 2, channel 3, CQ 4, then a QP of `type` (handle 5).
Script& qp_setup(Script& s, ibv_qp_type type, uint32_t srq = 0) {
  s.bare(Op::AllocPd);
  RegMrReq mr{1, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, kBase, 8192, kBase};
  s.req(Op::RegMr, mr).bare(Op::CreateCompChannel);
  s.req(Op::CreateCq, CreateCqReq{64, 3, 0, 0});
  CreateQpReq qp{1, 4, 4, srq, uint32_t(type), 0, {}};
  qp.cap = {16, srq ? 0u : 16u, 2, srq ? 0u : 2u, 64};
  return s.req(Op::CreateQp, qp);
}

Script& connect(Script& s, uint32_t qp, ibv_qp_type type) {
  ModifyQpReq m{qp, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT, {}};
  m.attr.qp_state = IBV_QPS_INIT;
  m.attr.port_num = 1;
  m.attr.qkey = 0x11111111;
  m.attr_mask |= type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
  s.req(Op::ModifyQp, m);
  m = {qp, IBV_QP_STATE, {}};
  m.attr.qp_state = IBV_QPS_RTR;
  if (type != IBV_QPT_UD) {
    m.attr_mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                   IBV_QP_MIN_RNR_TIMER;
    m.attr.path_mtu = IBV_MTU_1024;
    m.attr.dest_qp_num = 0x12;
    m.attr.max_dest_rd_atomic = 1;
    m.attr.min_rnr_timer = 12;
    m.attr.ah_attr.is_global = 1;
    m.attr.ah_attr.port_num = 1;
    m.attr.ah_attr.grh.dgid.raw[10] = m.attr.ah_attr.grh.dgid.raw[11] = 0xff;
    m.attr.ah_attr.grh.dgid.raw[12] = 127;
    m.attr.ah_attr.grh.dgid.raw[15] = 1;
  }
  s.req(Op::ModifyQp, m);
  m = {qp, IBV_QP_STATE | IBV_QP_SQ_PSN, {}};
  m.attr.qp_state = IBV_QPS_RTS;
  if (type == IBV_QPT_RC) {
    m.attr_mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    m.attr.timeout = 14, m.attr.retry_cnt = 7, m.attr.rnr_retry = 7, m.attr.max_rd_atomic = 1;
  }
  s.req(Op::ModifyQp, m);
  return s.req(Op::QueryQp, QueryQpReq{qp, IBV_QP_STATE | IBV_QP_CAP});
}

Script& teardown(Script& s) {
  return s.req(Op::DestroyQp, HandleReq{5})
      .req(Op::DestroyCq, HandleReq{4})
      .req(Op::DestroyCompChannel, HandleReq{3})
      .req(Op::DeregMr, HandleReq{2})
      .req(Op::DeallocPd, HandleReq{1});
}

void write(const std::string& dir, const std::string& name, const Script& s) {
  std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(s.bytes().data(), 1, s.bytes().size(), f) != s.bytes().size()) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  {
    Script s;
    write(dir, "rc_pingpong", teardown(connect(qp_setup(hello(s), IBV_QPT_RC), 5, IBV_QPT_RC)));
  }
  {
    Script s;
    connect(qp_setup(hello(s), IBV_QPT_UC), 5, IBV_QPT_UC);
    write(dir, "uc_no_teardown", s);  // the close frees it all
  }
  {
    Script s;
    connect(qp_setup(hello(s), IBV_QPT_UD), 5, IBV_QPT_UD);
    CreateAhReq ah{1, 0, {}};
    ah.attr.is_global = 1;
    ah.attr.port_num = 1;
    ah.attr.grh.dgid.raw[10] = ah.attr.grh.dgid.raw[11] = 0xff;
    ah.attr.grh.dgid.raw[12] = 127;
    ah.attr.grh.dgid.raw[15] = 1;
    s.req(Op::CreateAh, ah).req(Op::DestroyAh, HandleReq{6});
    write(dir, "ud_pingpong", teardown(s));
  }
  {
    Script s;
    hello(s).bare(Op::AllocPd);
    CreateSrqReq srq{1, 0, {64, 2, 0}};
    s.req(Op::CreateSrq, srq);  // handle 2
    s.req(Op::ModifySrq, ModifySrqReq{2, IBV_SRQ_LIMIT, {0, 0, 8}}).req(Op::QuerySrq, HandleReq{2});
    RegMrReq mr{1, IBV_ACCESS_LOCAL_WRITE, kBase, 4096, kBase};
    s.req(Op::RegMr, mr).bare(Op::CreateCompChannel).req(Op::CreateCq, CreateCqReq{64, 4, 0, 0});
    CreateQpReq qp{1, 5, 5, 2, IBV_QPT_RC, 1, {16, 0, 2, 0, 0}};
    s.req(Op::CreateQp, qp).req(Op::DestroySrq, HandleReq{2});
    write(dir, "srq_pingpong", s);
  }
  {
    Script s;
    hello(s).bare(Op::AllocPd);
    RegMrReq mr{1, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND | IBV_ACCESS_REMOTE_WRITE, kBase, 4096, kBase};
    s.req(Op::RegMr, mr).req(Op::AllocMw, AllocMwReq{1, IBV_MW_TYPE_1}).req(Op::AllocMw, AllocMwReq{1, IBV_MW_TYPE_2});
    s.req(Op::DeregMr, HandleReq{2}).req(Op::DeallocMw, HandleReq{3}).req(Op::DeallocMw, HandleReq{4});
    write(dir, "memory_windows", s);
  }
  {
    Script s;  // what ibv_xsrq_pingpong asks: an XRC domain on a file, an XRC SRQ, TGT and INI QPs
    hello(s).bare(Op::AllocPd);
    RegMrReq mr{1, IBV_ACCESS_LOCAL_WRITE, kBase, 4096, kBase};
    s.req(Op::RegMr, mr).bare(Op::CreateCompChannel).req(Op::CreateCq, CreateCqReq{64, 3, 0, 0});
    s.req(Op::OpenXrcd, OpenXrcdReq{1, O_CREAT});  // handle 5
    s.req(Op::CreateXrcSrq, CreateXrcSrqReq{1, 5, 4, 0, {16, 1, 0}});
    s.req(Op::CreateXrcQp, CreateXrcQpReq{{0, 0, 0, 0, IBV_QPT_XRC_RECV, 0, {}}, 5, 0});
    s.req(Op::CreateXrcQp, CreateXrcQpReq{{1, 4, 0, 0, IBV_QPT_XRC_SEND, 0, {16, 0, 1, 0, 0}}, 0, 0});
    s.req(Op::DestroyQp, HandleReq{7}).req(Op::DestroySrq, HandleReq{6}).req(Op::CloseXrcd, HandleReq{5});
    write(dir, "xrc", s);
  }
  {
    Script s;
    HelloReq h{};
    h.abi_version = kAbiVersion;
    s.req(Op::Hello, h).bare(Op::Status).text(Op::SetFault, "loss=0.05 dup=0.01").text(Op::Step, "status");
    write(dir, "status_and_faults", s);  // what `simnic status` and `simnic fault` send
  }
  return 0;
}
