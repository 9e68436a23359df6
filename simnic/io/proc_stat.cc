#include "simnic/io/proc_stat.h"

#include <filesystem>
#include <fstream>

namespace simnic::io {

ProcStat parse_proc_stat(const std::string& line) {
  const size_t open = line.find('('), close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open || close + 2 >= line.size() ||
      line[close + 1] != ' ')
    return {};
  return {line.substr(open + 1, close - open - 1), line[close + 2]};
}

namespace {
ProcStat read_stat_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  return std::getline(in, line) ? parse_proc_stat(line) : ProcStat{};
}
}  // namespace

ProcStat read_proc_stat(pid_t pid) { return read_stat_file("/proc/" + std::to_string(pid) + "/stat"); }

bool any_thread_runnable(pid_t pid, size_t max_threads) {
  std::error_code ec;
  std::filesystem::directory_iterator tasks("/proc/" + std::to_string(pid) + "/task", ec), end;
  for (size_t seen = 0; !ec && tasks != end && seen < max_threads; tasks.increment(ec), ++seen) {
    if (read_stat_file(tasks->path() / "stat").state == 'R') return true;
  }
  return false;
}

}  // namespace simnic::io
