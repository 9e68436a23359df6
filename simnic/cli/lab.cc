// `simnic lab`: the students' entry point to the coursework labs in labs/ (list, start, check)
// and the teacher's (grade a class). The checks themselves are each lab's grader.py; this file
// finds the labs, copies starters, runs graders with python3 and collects their PASS/FAIL lines.
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "simnic/cli/cli.h"

namespace simnic::cli {
namespace {

namespace fs = std::filesystem;

const char kLabUsage[] =
    "usage: simnic lab list\n"
    "       simnic lab start N [DIR]\n"
    "       simnic lab check N [DIR] [--device NAME] [--gid-index I] [--keep] [--verbose]\n"
    "       simnic lab check N --solution | --starter | --broken [NAME]\n"
    "       simnic lab grade N DIR... [--csv FILE]\n"
    "\n"
    "The coursework labs (labs/ in the simnic tree; SIMNIC_LABS_DIR overrides).\n"
    "  list      the labs and, for each, how your copy in ./labNN did at its last check\n"
    "  start     copy lab N's starter code, build file and README into DIR (default ./labNN)\n"
    "  check     build your code in DIR (default ./labNN), run it on private simulated NICs and\n"
    "            print each check as PASS or FAIL with a hint; exit status 0 when all pass.\n"
    "            The NICs' trace is saved in DIR/trace (simnic viz --replay DIR/trace/*.jsonl).\n"
    "            --solution/--starter grade the lab's own code; --broken grades its deliberately\n"
    "            broken variants (exit status 0 when the grader caught every one);\n"
    "            --device NAME runs on a real RDMA NIC: checks that need simnic's trace are skipped\n"
    "  grade     grade a class: one folder per student; prints a table and writes a CSV\n"
    "            (default ./labNN-grades.csv) with each check and the score\n";

const char kStatusFile[] = ".simnic-lab-status";

bool is_dir(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// labs/ next to the build tree (build/bin/../../labs), or the installed share/simnic/labs.
std::string labs_dir() {
  if (const char* d = std::getenv("SIMNIC_LABS_DIR"); d && *d) return d;
  const std::string bin = self_dir();
  for (std::string dir : {bin + "/../../labs", bin + "/../share/simnic/labs"})
    if (::access((dir + "/common/simnic_lab.py").c_str(), R_OK) == 0) return fs::weakly_canonical(dir).string();
  return "";
}

// The lab folders, "01-devices", "02-rc-send-recv", ..., sorted.
std::vector<std::string> lab_folders(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    std::string n = e.path().filename().string();
    if (e.is_directory() && n.size() > 3 && isdigit(n[0]) && isdigit(n[1]) && n[2] == '-') out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string find_lab(const std::string& root, int n) {
  char prefix[8];
  std::snprintf(prefix, sizeof prefix, "%02d-", n);
  for (const auto& f : lab_folders(root))
    if (f.rfind(prefix, 0) == 0) return f;
  return "";
}

// "# Lab 2: RC SEND and RECV" -> "RC SEND and RECV".
std::string lab_title(const std::string& lab_path) {
  std::ifstream in(lab_path + "/README.md");
  std::string line;
  std::getline(in, line);
  auto colon = line.find(':');
  if (colon != std::string::npos) return line.substr(colon + 2);
  return line.rfind("# ", 0) == 0 ? line.substr(2) : line;
}

std::string default_dir(int n) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "lab%02d", n);
  return buf;
}

// Runs argv; its output goes to our stdout when `echo`, and is returned. Exit status in *rc.
std::string run_capture(const std::vector<std::string>& argv, bool echo, int* rc) {
  int fds[2];
  if (::pipe(fds) != 0) return *rc = 127, "";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    exec_or_exit(argv, "simnic");
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) {
    out.append(buf, size_t(n));
    if (echo) {
      std::fwrite(buf, 1, size_t(n), stdout);
      std::fflush(stdout);
    }
  }
  ::close(fds[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  *rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return out;
}

struct Grading {
  int rc = 2;
  std::vector<std::pair<std::string, std::string>> checks;  // (name, PASS/FAIL/SKIP)
  int passed() const { return int(std::count_if(checks.begin(), checks.end(), [](auto& c) { return c.second == "PASS"; })); }
  int counted() const { return int(std::count_if(checks.begin(), checks.end(), [](auto& c) { return c.second != "SKIP"; })); }
};

// The grader's `PASS name` / `FAIL name` / `SKIP name (...)` lines.
Grading parse_grading(const std::string& out, int rc) {
  Grading g;
  g.rc = rc;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    for (const char* tag : {"PASS ", "FAIL ", "SKIP "}) {
      if (line.rfind(tag, 0) != 0) continue;
      std::string name = line.substr(5);
      if (std::string(tag) == "SKIP ") name = name.substr(0, name.rfind(" (needs"));
      g.checks.emplace_back(name, std::string(tag, 4));
    }
  }
  return g;
}

// Runs lab `lab`'s grader with `args` (e.g. {"--src", DIR}).
Grading grade(const std::string& root, const std::string& lab, const std::vector<std::string>& args, bool echo) {
  std::vector<std::string> argv = {"python3", root + "/" + lab + "/grader.py"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--simnic", self_dir() + "/simnic"});
  int rc = 0;
  std::string out = run_capture(argv, echo, &rc);
  return parse_grading(out, rc);
}

bool copy_tree(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::skip_existing, ec);
  if (ec) std::fprintf(stderr, "simnic: cannot copy %s to %s: %s\n", from.c_str(), to.c_str(), ec.message().c_str());
  return !ec;
}

// Parses "N", reporting a bad one. Returns 0 when it is not a lab number.
int lab_number(const std::string& s) {
  char* end = nullptr;
  long n = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || n <= 0 || n > 99) {
    std::fprintf(stderr, "simnic lab: '%s' is not a lab number (simnic lab list shows them)\n", s.c_str());
    return 0;
  }
  return int(n);
}

// The newest modification time of the files directly in `dir` (not trace/, build/).
fs::file_time_type newest_source(const std::string& dir) {
  auto t = fs::file_time_type::min();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().filename() != kStatusFile) t = std::max(t, e.last_write_time());
  return t;
}

int lab_list(const std::string& root) {
  for (const auto& f : lab_folders(root)) {
    int n = std::atoi(f.c_str());
    std::string dir = default_dir(n), status = "not started";
    if (is_dir(dir)) {
      std::ifstream in(dir + "/" + kStatusFile);
      std::string last;
      status = std::getline(in, last) ? "last check: " + last : "started, not checked yet";
      std::error_code ec;
      if (!last.empty() && newest_source(dir) > fs::last_write_time(dir + "/" + kStatusFile, ec))
        status += " (edited since)";
    }
    std::printf("%2d  %-58s %-7s %s\n", n, lab_title(root + "/" + f).c_str(), dir.c_str(), status.c_str());
  }
  return 0;
}

int lab_start(const std::string& root, const std::string& lab, int n, const std::vector<std::string>& rest) {
  std::string dir = rest.empty() ? default_dir(n) : rest[0];
  std::error_code ec;
  if (is_dir(dir) && !fs::is_empty(dir, ec)) {
    std::fprintf(stderr, "simnic lab: %s already exists and is not empty; not touching it (choose another DIR)\n",
                 dir.c_str());
    return 1;
  }
  fs::create_directories(dir, ec);
  const std::string src = root + "/" + lab;
  // The starter's files, labutil.h, and the lab's own top-level files (README.md, img/,
  // CMakeLists.txt, helpers such as a plot script), but not the grader's.
  bool ok = copy_tree(src + "/starter", dir) && copy_tree(root + "/common/labutil.h", dir + "/labutil.h");
  std::error_code it_ec;
  for (const auto& e : fs::directory_iterator(src, it_ec)) {
    std::string name = e.path().filename().string();
    bool grader_only = name == "grader.py" || name == "expect.txt" || name == "starter" || name == "solution" ||
                       name == "broken" || name == "__pycache__";
    if (ok && !grader_only) ok = copy_tree(e.path(), fs::path(dir) / name);
  }
  if (!ok) return 1;
  std::printf("Lab %d (%s) is in %s/. Next:\n"
              "  read     %s/README.md\n"
              "  edit     the TODOs in %s/*.c\n"
              "  check    simnic lab check %d%s\n",
              n, lab_title(src).c_str(), dir.c_str(), dir.c_str(), dir.c_str(), n,
              rest.empty() ? "" : (" " + dir).c_str());
  return 0;
}

void write_status(const std::string& dir, const Grading& g) {
  std::ofstream out(dir + "/" + kStatusFile);
  out << (g.rc == 0 ? "PASS " : "FAIL ") << g.passed() << "/" << g.counted() << " checks\n";
}

// check N --broken [NAME]: every broken variant must fail its grading.
int check_broken(const std::string& root, const std::string& lab, const std::vector<std::string>& names,
                 const std::vector<std::string>& extra) {
  std::vector<std::string> variants = names;
  // A variant is a folder of files copied over solution/ or a NAME.patch applied to it.
  if (variants.empty()) {
    for (const auto& e : fs::directory_iterator(root + "/" + lab + "/broken")) {
      if (e.is_directory()) variants.push_back(e.path().filename().string());
      else if (e.path().extension() == ".patch") variants.push_back(e.path().stem().string());
    }
  }
  std::sort(variants.begin(), variants.end());
  int missed = 0;
  for (const auto& v : variants) {
    std::vector<std::string> args = {"--broken", v};
    args.insert(args.end(), extra.begin(), extra.end());
    Grading g = grade(root, lab, args, true);
    bool caught = g.rc == 1;
    std::printf("=> broken/%s: %s\n\n", v.c_str(), caught ? "caught (it fails, as it should)" : "NOT caught");
    missed += !caught;
  }
  return missed == 0 ? 0 : 1;
}

int lab_check(const std::string& root, const std::string& lab, int n, const std::vector<std::string>& rest) {
  std::vector<std::string> extra, broken;
  std::string dir, mode;
  for (size_t i = 0; i < rest.size(); ++i) {
    const std::string& a = rest[i];
    if (a == "--solution" || a == "--starter" || a == "--broken") mode = a;
    else if (a == "--device" || a == "--gid-index" || a == "--trace-out") {
      if (i + 1 >= rest.size()) return std::fprintf(stderr, "simnic lab: %s needs a value\n", a.c_str()), 2;
      extra.insert(extra.end(), {a, rest[++i]});
    } else if (a == "--keep" || a == "--verbose") extra.push_back(a);
    else if (a.rfind("-", 0) == 0) return std::fprintf(stderr, "simnic lab: unknown option %s\n%s", a.c_str(), kLabUsage), 2;
    else if (mode == "--broken") broken.push_back(a);
    else dir = a;
  }
  if (mode == "--broken") return check_broken(root, lab, broken, extra);
  if (!mode.empty()) {
    extra.insert(extra.begin(), mode);
    return grade(root, lab, extra, true).rc;
  }
  if (dir.empty()) dir = default_dir(n);
  if (!is_dir(dir)) {
    std::fprintf(stderr, "simnic lab: no folder %s; start the lab first: simnic lab start %d\n", dir.c_str(), n);
    return 1;
  }
  extra.insert(extra.begin(), {"--src", dir});
  Grading g = grade(root, lab, extra, true);
  if (g.rc <= 1) write_status(dir, g);
  return g.rc;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// One row per student, one column per check (in the order the graders printed them).
void write_csv(const std::string& path, const std::vector<std::pair<std::string, Grading>>& rows) {
  std::vector<std::string> names;
  for (const auto& [student, g] : rows)
    for (const auto& c : g.checks)
      if (std::find(names.begin(), names.end(), c.first) == names.end()) names.push_back(c.first);
  std::ofstream out(path);
  out << "student";
  for (const auto& n : names) out << "," << csv_field(n);
  out << ",score\n";
  for (const auto& [student, g] : rows) {
    out << csv_field(student);
    for (const auto& n : names) {
      auto it = std::find_if(g.checks.begin(), g.checks.end(), [&](auto& c) { return c.first == n; });
      out << "," << (it == g.checks.end() ? "-" : it->second);
    }
    out << "," << g.passed() << "/" << std::max(g.counted(), int(names.size())) << "\n";
  }
}

int lab_grade(const std::string& root, const std::string& lab, int n, const std::vector<std::string>& rest) {
  std::vector<std::string> dirs;
  std::string csv = default_dir(n) + "-grades.csv";
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == "--csv" && i + 1 < rest.size()) csv = rest[++i];
    else dirs.push_back(rest[i]);
  }
  if (dirs.empty()) return std::fputs(kLabUsage, stderr), 2;
  std::vector<std::pair<std::string, Grading>> rows;
  for (size_t i = 0; i < dirs.size(); ++i) {
    std::string student = fs::path(dirs[i]).lexically_normal().filename().string();
    if (student.empty()) student = fs::path(dirs[i]).lexically_normal().parent_path().filename().string();
    std::fprintf(stderr, "\r[%zu/%zu] grading %-30s", i + 1, dirs.size(), student.c_str());
    Grading g;
    g.rc = -1;  // no such folder
    if (is_dir(dirs[i])) g = grade(root, lab, {"--src", dirs[i]}, false);
    rows.emplace_back(student, g);
  }
  std::fprintf(stderr, "\r%-50s\r", "");
  std::printf("%-24s %-7s %s\n", "student", "score", "failed checks");
  for (const auto& [student, g] : rows) {
    std::string failed;
    int nfailed = 0;
    for (const auto& c : g.checks)
      if (c.second == "FAIL" && ++nfailed <= 2) failed += (failed.empty() ? "" : "; ") + c.first;
    if (nfailed > 2) failed += "; and " + std::to_string(nfailed - 2) + " more (see the CSV)";
    if (g.checks.empty()) failed = g.rc == -1 ? "(no such folder)" : "(the grader broke: run simnic lab check on it)";
    std::printf("%-24s %3d/%-3d %s\n", student.c_str(), g.passed(), g.counted(), failed.c_str());
  }
  write_csv(csv, rows);
  std::printf("CSV: %s\n", csv.c_str());
  return 0;
}

}  // namespace

int cmd_lab(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kLabUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string root = labs_dir();
  if (root.empty() || ::access((root + "/common/simnic_lab.py").c_str(), R_OK) != 0) {
    std::fprintf(stderr, "simnic lab: no labs/ folder (with common/simnic_lab.py) %s%s; set SIMNIC_LABS_DIR\n",
                 root.empty() ? "next to " : "in ", root.empty() ? self_dir().c_str() : root.c_str());
    return 1;
  }
  const std::string& sub = args[0];
  if (sub == "list") return lab_list(root);
  if (sub != "start" && sub != "check" && sub != "grade") {
    std::fprintf(stderr, "simnic lab: unknown command '%s'\n%s", sub.c_str(), kLabUsage);
    return 2;
  }
  if (args.size() < 2) return std::fputs(kLabUsage, stderr), 2;
  int n = lab_number(args[1]);
  if (!n) return 2;
  std::string lab = find_lab(root, n);
  if (lab.empty()) {
    std::fprintf(stderr, "simnic lab: there is no lab %d in %s (simnic lab list shows them)\n", n, root.c_str());
    return 2;
  }
  std::vector<std::string> rest(args.begin() + 2, args.end());
  if (sub == "start") return lab_start(root, lab, n, rest);
  if (sub == "check") return lab_check(root, lab, n, rest);
  return lab_grade(root, lab, n, rest);
}

}  // namespace simnic::cli
