// The connection manager's part of the control protocol, whole: its ops (abi::Op::Cm*, with
// the rest of the protocol in control.h) and its request bodies and events (cm_bodies.h).
// librdmacm (rdmacm/) and simnic/service include this; the core includes cm_bodies.h alone.
#pragma once
#include "simnic/abi/cm_bodies.h"
#include "simnic/abi/control.h"
