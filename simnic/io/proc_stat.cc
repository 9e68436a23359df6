#include "simnic/io/proc_stat.h"

#include <fstream>

namespace simnic::io {

ProcStat parse_proc_stat(const std::string& line) {
  const size_t open = line.find('('), close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open || close + 2 >= line.size() ||
      line[close + 1] != ' ')
    return {};
  return {line.substr(open + 1, close - open - 1), line[close + 2]};
}

ProcStat read_proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  return std::getline(in, line) ? parse_proc_stat(line) : ProcStat{};
}

}  // namespace simnic::io
