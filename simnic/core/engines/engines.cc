#include "simnic/core/engines/engines.h"

#include "simnic/core/device.h"

namespace simnic::core {

namespace {
uint64_t peer_window(const DeviceConfig& config) {
  return config.peer_window_bytes ? config.peer_window_bytes : DeviceConfig::kDefaultPeerWindow;
}
}  // namespace

Engines::Engines(Device& dev)
    : transmit(dev),
      windows(dev),
      dma(dev, windows),
      recv(dev, dma),
      congestion(dev, requester, peer_window(dev.config())),
      requester(dev, transmit, dma, windows, congestion, completer, responder, direct),
      direct(dev, requester, completer, congestion, responder),
      completer(dev, requester, dma, congestion),
      responder(dev, transmit, dma, recv, windows, requester, completer, receive_wait),
      receive_wait(dev, requester, responder),
      datagram(dev, recv, responder, ingress),
      ingress(dev, transmit, requester, completer, responder, datagram) {}

}  // namespace simnic::core
