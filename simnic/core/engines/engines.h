// The data path's units, held together by Device (docs/architecture.md, "Engines"). Each unit
// acts on one QP at a time, owns only its own state, and calls another unit only through its
// public methods; its header says what it owns and whom it calls. They are constructed in the
// order they depend on each other: a unit given one constructed after it (the requester is
// given the completer and the responder) only keeps the reference while the Device is built.
#pragma once
#include "simnic/core/engines/completer.h"
#include "simnic/core/engines/congestion_hooks.h"
#include "simnic/core/engines/datagram.h"
#include "simnic/core/engines/direct_send.h"
#include "simnic/core/engines/receive_queue.h"
#include "simnic/core/engines/receive_wait.h"
#include "simnic/core/engines/requester.h"
#include "simnic/core/engines/responder.h"
#include "simnic/core/memory/memory_access.h"
#include "simnic/core/objects/window_binding.h"
#include "simnic/core/wire/ingress.h"
#include "simnic/core/wire/transmit.h"

namespace simnic::core {

class Device;

struct Engines {
  explicit Engines(Device& dev);  // engines.cc: where Device is complete
  Transmit transmit;              // the one transmit path (wire/transmit.h)
  WindowBinding windows;          // BIND_MW, LOCAL_INV, window rkeys (objects/window_binding.h)
  MemoryAccess dma;               // every DMA, checked and batched (memory/memory_access.h)
  ReceiveQueue recv;              // receive WQEs of a QP or its SRQ (engines/receive_queue.h)
  CongestionHooks congestion;     // credit towards each peer NIC (engines/congestion_hooks.h)
  Requester requester;            // send WQEs into packets, the work flag (engines/requester.h)
  DirectSend direct;              // a QP's next PSN lent to its program (engines/direct_send.h)
  Completer completer;            // ACKs, responses, the ACK and RNR timers (engines/completer.h)
  Responder responder;            // RC/UC/XRC requests in PSN order (engines/responder.h)
  ReceiveWait receive_wait;       // requests waiting for a receive WQE (engines/receive_wait.h)
  DatagramReceiver datagram;      // UD and multicast receive (engines/datagram.h)
  Ingress ingress;                // the one receive path (wire/ingress.h)
};

}  // namespace simnic::core
