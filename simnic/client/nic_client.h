// A program's side of a NIC's control socket, outside the shim: finding the NICs in a simnic
// directory and asking one of them one thing (status, step, fault). `simnic` and simnic-viz
// use it; it depends on the ABI only.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace simnic::client {

// The NICs whose control sockets are in `dir`, sorted by name.
std::vector<std::string> list_nics(const std::string& dir);

// One request to a running NIC over a query-only control connection. Returns 0 or an errno;
// `text` receives the reply body.
int query_nic(const std::string& dir, const std::string& name, unsigned op, const std::string& body, std::string* text);

// "key value" lines, as simnicd's Status reply has them.
std::map<std::string, std::string> parse_kv(const std::string& text);

}  // namespace simnic::client
