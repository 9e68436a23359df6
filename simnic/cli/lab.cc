// `simnic lab`: the students' entry point to the coursework labs in labs/ (list, start, check)
// and the teacher's (grade a class). The checks themselves are each lab's grader.py; this file
// finds the labs, copies starters, runs graders with python3 and collects their PASS/FAIL lines.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
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
    "       simnic lab grade N DIR... [-j N] [--out DIR] [--csv FILE] [--timeout S]\n"
    "\n"
    "The coursework labs (labs/ in the simnic tree; SIMNIC_LABS_DIR overrides).\n"
    "  list      the labs and, for each, how your copy in ./labNN did at its last check\n"
    "  start     copy lab N's starter code, build file and README into DIR (default ./labNN)\n"
    "  check     build your code in DIR (default: the lab N folder you are in, else ./labNN),\n"
    "            run it on private simulated NICs and print each check as PASS or FAIL with a\n"
    "            hint; exit status 0 when all pass. --verbose shows the programs' full output.\n"
    "            The NICs' trace is saved in DIR/trace (simnic viz --replay DIR/trace/*.jsonl).\n"
    "            --solution/--starter grade the lab's own code; --broken grades its deliberately\n"
    "            broken variants (exit status 0 when the grader caught every one);\n"
    "            --device NAME runs on a real RDMA NIC: checks that need simnic's trace are skipped\n"
    "  grade     grade a class, one folder per student, in parallel: prints a table, writes a CSV,\n"
    "            per-student feedback and a class report into ./labNN-grading (simnic lab grade --help)\n";

const char kStatusFile[] = ".simnic-lab-status";
// Written by `lab start`: the lab number, so that `lab check N` run inside the folder finds it
// and `lab start` never nests a starter inside a lab folder.
const char kMarkerFile[] = ".simnic-lab";

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The installed <prefix>/share/simnic/labs (bin/../share/simnic/labs), or labs/ next to the
// build tree (build/bin/../../labs). The install comes first: from /usr/bin, ../../labs is /labs.
std::string labs_dir() {
  if (const char* d = std::getenv("SIMNIC_LABS_DIR"); d && *d) return d;
  const std::string bin = self_dir();
  for (std::string dir : {bin + "/../share/simnic/labs", bin + "/../../labs"})
    if (::access((dir + "/common/simnic_lab.py").c_str(), R_OK) == 0) return fs::weakly_canonical(dir).string();
  return "";
}

// Where lab `lab`'s solution/, broken/ and teacher/ are: next to its grader in the source tree;
// in an install, sealed in share/simnic/teacher/labs/ (readable by root and simnic-teachers).
std::string sealed_dir(const std::string& root, const std::string& lab) {
  if (is_dir(root + "/" + lab + "/solution")) return root + "/" + lab;
  return fs::path(root).parent_path().string() + "/teacher/labs/" + lab;
}

// --solution and --broken grade the sealed code; say so plainly when this user may not read it.
bool sealed_readable(const std::string& root, const std::string& lab, const std::string& mode) {
  const std::string dir = sealed_dir(root, lab);
  if (::access(dir.c_str(), R_OK | X_OK) == 0) return true;
  std::fprintf(stderr,
               "simnic lab: the solutions are sealed: only teachers (group simnic-teachers) can run %s "
               "(%s is not readable for you)\n",
               mode.c_str(), dir.c_str());
  return false;
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

// The lab number of the lab folder `dir` (0: not one): its marker file, or, for a folder
// started before markers existed, its status file or the name labNN with a README next to it.
int lab_folder_number(const fs::path& dir) {
  std::ifstream marker(dir / kMarkerFile);
  int n = 0;
  if (marker >> n && n > 0) return n;
  const std::string name = dir.filename().string();
  bool named = name.size() == 5 && name.rfind("lab", 0) == 0 && isdigit(name[3]) && isdigit(name[4]);
  bool looks_started = fs::exists(dir / kStatusFile) || fs::exists(dir / "README.md");
  return named && looks_started ? std::atoi(name.c_str() + 3) : 0;
}

// The innermost lab folder containing `path` (itself included), or "" when none does.
std::string enclosing_lab_folder(const fs::path& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  for (; !p.empty(); p = p.parent_path()) {
    if (lab_folder_number(p)) return p.string();
    if (p == p.root_path()) break;
  }
  return "";
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
  int passed() const {
    return int(std::count_if(checks.begin(), checks.end(), [](auto& c) { return c.second == "PASS"; }));
  }
  int counted() const {
    return int(std::count_if(checks.begin(), checks.end(), [](auto& c) { return c.second != "SKIP"; }));
  }
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

// The files every copy of lab folder `src` gets besides its starter/ (simnic_lab.py's
// shared_files, which the graded and reference builds use): labutil.h, the labs/common/ files
// named in the lab's shared.txt, and the lab's common/ (files the student does not edit).
std::vector<fs::path> shared_files(const std::string& root, const std::string& src) {
  std::vector<fs::path> out = {root + "/common/labutil.h"};
  std::ifstream listed(src + "/shared.txt");
  for (std::string line; std::getline(listed, line);)
    if (!line.empty() && line[0] != '#') out.push_back(root + "/common/" + line);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(src + "/common", ec))
    if (e.is_regular_file()) out.push_back(e.path());
  return out;
}

// The lab's CMakeLists.txt standing alone: labs/common/lab.cmake's text in place of the line
// that includes it, so the student's folder builds without the simnic tree.
std::string student_cmakelists(const std::string& root, const std::string& src) {
  const std::string include_line = "include(${CMAKE_CURRENT_LIST_DIR}/../common/lab.cmake)\n";
  std::ostringstream text, shared;
  text << std::ifstream(src + "/CMakeLists.txt").rdbuf();
  shared << std::ifstream(root + "/common/lab.cmake").rdbuf();
  std::string out = text.str();
  if (auto at = out.find(include_line); at != std::string::npos) out.replace(at, include_line.size(), shared.str());
  return out;
}

// What of a lab's top level stays out of the student's folder: the grader's and the teacher's
// (teacher/: answer keys, sealed like solution/), and what copy_student_files assembles.
bool not_for_student(const std::string& name) {
  static const char* const kKept[] = {"grader.py", "expect.txt",  "starter", "solution",   "broken",
                                      "teacher",   "__pycache__", "common",  "shared.txt", "CMakeLists.txt"};
  return std::find(std::begin(kKept), std::end(kKept), name) != std::end(kKept);
}

// Copies what the student works with into `dir`: the starter's files, the shared files, the
// lab's own top-level files (README.md, img/, helpers such as a plot script), and a
// CMakeLists.txt that stands alone.
bool copy_student_files(const std::string& root, const std::string& src, const std::string& dir) {
  bool ok = copy_tree(src + "/starter", dir);
  for (const auto& f : shared_files(root, src)) ok = ok && copy_tree(f, fs::path(dir) / f.filename());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(src, ec)) {
    const fs::path name = e.path().filename();
    if (ok && !not_for_student(name.string())) ok = copy_tree(e.path(), fs::path(dir) / name);
  }
  std::ofstream(fs::path(dir) / "CMakeLists.txt") << student_cmakelists(root, src);
  return ok;
}

int lab_start(const std::string& root, const std::string& lab, int n, const std::vector<std::string>& rest) {
  std::string dir = rest.empty() ? default_dir(n) : rest[0];
  // A starter nested in a lab folder would be graded instead of the student's code there.
  if (std::string outer = enclosing_lab_folder(fs::absolute(dir).parent_path()); !outer.empty()) {
    std::fprintf(stderr,
                 "simnic lab: %s is inside the lab folder %s (lab %d); start lab %d next to it, not in it: "
                 "cd %s && simnic lab start %d\n",
                 dir.c_str(), outer.c_str(), lab_folder_number(outer), n, fs::path(outer).parent_path().c_str(), n);
    return 1;
  }
  std::error_code ec;
  if (is_dir(dir) && !fs::is_empty(dir, ec)) {
    std::fprintf(stderr, "simnic lab: %s already exists and is not empty; not touching it (choose another DIR)\n",
                 dir.c_str());
    return 1;
  }
  fs::create_directories(dir, ec);
  const std::string src = root + "/" + lab;
  bool ok = copy_student_files(root, src, dir);
  std::ofstream(fs::path(dir) / kMarkerFile) << n << "\n";
  if (!ok) return 1;
  std::printf(
      "Lab %d (%s) is in %s/. Next:\n"
      "  read     %s/README.md\n"
      "  edit     the TODOs in %s/*.c\n"
      "  check    simnic lab check %d%s\n",
      n, lab_title(src).c_str(), dir.c_str(), dir.c_str(), dir.c_str(), n, rest.empty() ? "" : (" " + dir).c_str());
  return 0;
}

void write_status(const std::string& dir, const Grading& g) {
  std::ofstream out(dir + "/" + kStatusFile);
  out << (g.rc == 0 ? "PASS " : "FAIL ") << g.passed() << "/" << g.counted() << " checks\n";
}

// Where `lab check N` looks without a DIR: the lab N folder the student is in (the README
// says `cd labNN`), else ./labNN. Returns "" after saying why there is none.
std::string default_check_dir(int n) {
  std::error_code ec;
  const std::string here = enclosing_lab_folder(fs::current_path(ec));
  const int here_lab = here.empty() ? 0 : lab_folder_number(here);
  if (here_lab == n) return here;
  if (is_dir(default_dir(n))) return default_dir(n);
  if (here_lab)
    std::fprintf(stderr,
                 "simnic lab: you are in lab %d's folder %s, not lab %d's: check it with simnic lab check %d, "
                 "or go back up (cd %s) before simnic lab start %d\n",
                 here_lab, here.c_str(), n, here_lab, fs::path(here).parent_path().c_str(), n);
  else
    std::fprintf(stderr, "simnic lab: no folder %s here; start the lab first: simnic lab start %d\n",
                 default_dir(n).c_str(), n);
  return "";
}

// check N --broken [NAME]: every broken variant must fail its grading.
int check_broken(const std::string& root, const std::string& lab, const std::vector<std::string>& names,
                 const std::vector<std::string>& extra) {
  std::vector<std::string> variants = names;
  // A variant is a folder of files copied over solution/ or a NAME.patch applied to it.
  if (variants.empty()) {
    for (const auto& e : fs::directory_iterator(sealed_dir(root, lab) + "/broken")) {
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
    else if (a.rfind("-", 0) == 0)
      return std::fprintf(stderr, "simnic lab: unknown option %s\n%s", a.c_str(), kLabUsage), 2;
    else if (mode == "--broken") broken.push_back(a);
    else dir = a;
  }
  if ((mode == "--solution" || mode == "--broken") && !sealed_readable(root, lab, mode)) return 2;
  if (mode == "--broken") return check_broken(root, lab, broken, extra);
  if (!mode.empty()) {
    extra.insert(extra.begin(), mode);
    return grade(root, lab, extra, true).rc;
  }
  if (dir.empty() && (dir = default_check_dir(n)).empty()) return 1;
  if (!is_dir(dir)) {
    std::fprintf(stderr, "simnic lab: no folder %s; start the lab first: simnic lab start %d\n", dir.c_str(), n);
    return 1;
  }
  extra.insert(extra.begin(), {"--src", dir});
  Grading g = grade(root, lab, extra, true);
  if (g.rc <= 1) write_status(dir, g);
  return g.rc;
}

// ---- simnic lab grade: a class, graded in parallel ---------------------------------------

const char kGradeUsage[] =
    "usage: simnic lab grade N DIR... [-j N] [--out DIR] [--csv FILE] [--timeout S]\n"
    "\n"
    "Grades a class: each DIR is one student's lab folder (the student is the folder's name).\n"
    "Each student is graded on a private copy of the folder, on private NICs, by lab N's grader;\n"
    "nothing is written into the folders.\n"
    "  -j N         grade N students at once (default: the number of CPUs)\n"
    "  --timeout S  stop a student's grading after S seconds (default 180); the row then shows\n"
    "               what was graded before the limit, and 'timed out'\n"
    "  --out DIR    the feedback folder (default ./labNN-grading): STUDENT/feedback.txt (the\n"
    "               grader's output: checks, hints, compiler errors), STUDENT/build.log,\n"
    "               STUDENT/logs/ (the programs' output), STUDENT/trace/ (simnic viz --replay),\n"
    "               and the class report, report.md and report.html\n"
    "  --csv FILE   one row per student, one column per check, a note and the score\n"
    "               (default: grades.csv in the --out folder)\n"
    "Prints a table: per student the score (the lab's weighted points) and the failed checks.\n";

using Clock = std::chrono::steady_clock;

struct GradeOptions {
  std::vector<std::string> dirs;
  int jobs = 0;
  int timeout_s = 180;
  std::string out, csv;
};

// One student's row: what the grader printed, and how the grading ended.
struct ClassRow {
  std::string student, dir, feedback_dir;
  Grading g;
  bool missing = false, timed_out = false;
  std::string score_p, score_t;  // the grader's "score P/T", when its summary had one
  std::string note() const {
    if (missing) return "no such folder";
    if (timed_out) return "timed out";
    for (const auto& c : g.checks)
      if (c.first == "builds" && c.second == "FAIL") return "does not compile";
    if (g.rc == 2 || g.checks.empty()) return "grader error (see feedback.txt)";
    return "";
  }
  std::vector<std::string> failed() const {
    std::vector<std::string> out;
    for (const auto& c : g.checks)
      if (c.second == "FAIL") out.push_back(c.first);
    return out;
  }
};

bool parse_count(const std::string& s, int lo, int* out) {
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || v < lo || v > 100000) return false;
  *out = int(v);
  return true;
}

// Returns -1 when the options are good, else the exit status.
int parse_grade_options(const std::vector<std::string>& rest, int n, GradeOptions* o) {
  for (size_t i = 0; i < rest.size(); ++i) {
    const std::string& a = rest[i];
    if (a == "--help" || a == "-h") return std::fputs(kGradeUsage, stdout), 0;
    bool takes_value = a == "-j" || a == "--jobs" || a == "--out" || a == "--csv" || a == "--timeout";
    if (takes_value && i + 1 >= rest.size())
      return std::fprintf(stderr, "simnic lab grade: %s needs a value\n%s", a.c_str(), kGradeUsage), 2;
    if (a == "-j" || a == "--jobs") {
      if (!parse_count(rest[++i], 1, &o->jobs))
        return std::fprintf(stderr, "simnic lab grade: -j needs a number >= 1\n"), 2;
    } else if (a.rfind("-j", 0) == 0 && a.size() > 2) {
      if (!parse_count(a.substr(2), 1, &o->jobs))
        return std::fprintf(stderr, "simnic lab grade: -j needs a number >= 1\n"), 2;
    } else if (a == "--timeout") {
      if (!parse_count(rest[++i], 1, &o->timeout_s))
        return std::fprintf(stderr, "simnic lab grade: --timeout needs seconds >= 1\n"), 2;
    } else if (a == "--out") o->out = rest[++i];
    else if (a == "--csv") o->csv = rest[++i];
    else if (a.rfind("-", 0) == 0 && a.size() > 1)
      return std::fprintf(stderr, "simnic lab grade: unknown option %s\n%s", a.c_str(), kGradeUsage), 2;
    else o->dirs.push_back(a);
  }
  if (o->dirs.empty()) return std::fputs(kGradeUsage, stderr), 2;
  if (o->jobs == 0) o->jobs = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  if (o->out.empty()) o->out = default_dir(n) + "-grading";
  if (o->csv.empty()) o->csv = o->out + "/grades.csv";
  return -1;
}

// The student's name: the folder's name ("subs/alice/" -> "alice"), made unique in the class.
std::vector<std::string> student_names(const std::vector<std::string>& dirs) {
  std::vector<std::string> names;
  for (const auto& d : dirs) {
    fs::path p = fs::path(d).lexically_normal();
    std::string name = p.filename().string();
    if (name.empty() || name == ".") name = p.parent_path().filename().string();
    if (name.empty() || name == "." || name == "..") name = "student";
    std::string unique = name;
    for (int k = 2; std::find(names.begin(), names.end(), unique) != names.end(); ++k)
      unique = name + "-" + std::to_string(k);
    names.push_back(unique);
  }
  return names;
}

bool path_within(const fs::path& inner, const fs::path& outer) {
  std::error_code ec;
  fs::path a = fs::weakly_canonical(inner, ec), b = fs::weakly_canonical(outer, ec);
  auto [bi, ai] = std::mismatch(b.begin(), b.end(), a.begin(), a.end());
  return bi == b.end();
}

// The feedback folder must not be inside a submission (it would change it) nor contain one
// (a student's feedback folder is emptied before grading).
bool out_overlaps_submissions(const GradeOptions& o) {
  for (const auto& d : o.dirs) {
    if (!is_dir(d) || !(path_within(o.out, d) || path_within(d, o.out))) continue;
    std::fprintf(stderr,
                 "simnic lab grade: --out %s and the submission %s overlap; grading writes nothing into "
                 "submissions: choose another --out\n",
                 o.out.c_str(), d.c_str());
    return true;
  }
  return false;
}

// Starts the grader on one student in its own process group, its output into feedback.txt.
pid_t start_grader(const std::string& root, const std::string& lab, const ClassRow& r) {
  const std::string feedback = r.feedback_dir + "/feedback.txt";
  std::vector<std::string> argv = {"python3",        root + "/" + lab + "/grader.py",
                                   "--src",          r.dir,
                                   "--feedback-dir", r.feedback_dir,
                                   "--simnic",       self_dir() + "/simnic"};
  pid_t pid = ::fork();
  if (pid != 0) {
    if (pid > 0) ::setpgid(pid, pid);  // (both sides: whichever runs first)
    return pid;
  }
  ::setpgid(0, 0);
  int out = ::open(feedback.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out < 0 || in < 0) _exit(127);
  ::dup2(in, 0);
  ::dup2(out, 1);
  ::dup2(out, 2);
  exec_or_exit(argv, "simnic lab grade");
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void append_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::app) << text; }

// "N passed, M failed[, K skipped]; score P/T": the P and T, when the grader printed them.
void parse_score(const std::string& out, ClassRow* r) {
  static const std::regex summary(R"(^\d+ passed, \d+ failed.*score ([0-9.]+)/([0-9.]+))");
  std::istringstream in(out);
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, summary)) r->score_p = m[1], r->score_t = m[2];
}

// A grader stopped at the time limit says "FAIL grading interrupted by signal 15": that is
// the limit, shown as "timed out", not a check.
void drop_interruption(Grading* g) {
  g->checks.erase(std::remove_if(g->checks.begin(), g->checks.end(),
                                 [](auto& c) { return c.first.rfind("grading interrupted by signal", 0) == 0; }),
                  g->checks.end());
}

void finish_row(ClassRow* r, int status, int timeout_s) {
  const std::string feedback = r->feedback_dir + "/feedback.txt";
  if (r->timed_out)
    append_file(feedback, "simnic lab grade: stopped after " + std::to_string(timeout_s) +
                              " s (--timeout); the checks above are what was graded before the limit\n");
  const std::string out = read_file(feedback);
  r->g = parse_grading(out, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  drop_interruption(&r->g);
  parse_score(out, r);
  // The hint quotes a dozen compiler lines; the student's feedback gets the whole build.
  if (r->note() == "does not compile")
    append_file(feedback, "\n---- the build (" + r->feedback_dir + "/build.log) ----\n" +
                              read_file(r->feedback_dir + "/build.log"));
}

struct Running {
  size_t row;
  pid_t pid;
  Clock::time_point deadline;
  bool terminated = false;
};

// Whether `pid` has ended, without reaping it.
bool exited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

// How long a grader told to stop (SIGTERM) has to stop its NICs and programs and print what
// it graded, before its process group is killed.
constexpr auto kStopGrace = std::chrono::seconds(10);

// "[3/30 graded] grading alice, bob" on a terminal, rewritten when it changes.
void progress(size_t done, size_t total, const std::vector<Running>& running, const std::vector<ClassRow>& rows) {
  static std::string last;
  if (!::isatty(2)) return;
  std::string names;
  for (const auto& j : running) names += (names.empty() ? "" : ", ") + rows[j.row].student;
  if (names.size() > 50) names = names.substr(0, 47) + "...";
  char line[160];
  std::snprintf(line, sizeof line, "\r[%zu/%zu graded] grading %-50s", done, total, names.c_str());
  if (line != last) std::fputs(line, stderr);
  last = line;
}

// Runs up to `jobs` graders at once, each stopped at its time limit: SIGTERM (the grader then
// stops its NICs and prints its summary), and SIGKILL to its group kStopGrace later.
void run_graders(const std::string& root, const std::string& lab, const GradeOptions& o, std::vector<ClassRow>* rows) {
  std::vector<Running> running;
  size_t next = 0, done = 0;
  for (auto& r : *rows) done += r.missing;
  while (true) {
    while (running.size() < size_t(o.jobs) && next < rows->size()) {
      ClassRow& r = (*rows)[next];
      if (!r.missing) {
        pid_t pid = start_grader(root, lab, r);
        if (pid > 0) running.push_back({next, pid, Clock::now() + std::chrono::seconds(o.timeout_s)});
        else r.g.rc = 2, ++done;
      }
      ++next;
    }
    if (running.empty()) break;
    progress(done, rows->size(), running, *rows);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (size_t k = 0; k < running.size();) {
      Running& j = running[k];
      if (exited(j.pid)) {
        // Whatever it left in its group (a compiler, a cmake), while its unreaped pid still
        // keeps the group's id from being reused.
        ::kill(-j.pid, SIGKILL);
        int status = 0;
        ::waitpid(j.pid, &status, 0);
        finish_row(&(*rows)[j.row], status, o.timeout_s);
        ++done;
        running.erase(running.begin() + long(k));
        continue;
      }
      if (Clock::now() >= j.deadline && !j.terminated) {
        (*rows)[j.row].timed_out = j.terminated = true;
        ::kill(-j.pid, SIGTERM);
        j.deadline = Clock::now() + kStopGrace;
      } else if (Clock::now() >= j.deadline) {
        ::kill(-j.pid, SIGKILL);
      }
      ++k;
    }
  }
  if (::isatty(2)) std::fprintf(stderr, "\r%-80s\r", "");
}

// Every row's score as "P/T": the grader's weighted score, or (a grader without weights, a
// missing folder, a grader killed before its summary) P out of the same T as the others.
void fill_scores(std::vector<ClassRow>* rows, const std::vector<std::string>& check_names) {
  std::map<std::string, int> totals;  // T -> how many rows said it
  for (const auto& r : *rows)
    if (!r.score_t.empty()) ++totals[r.score_t];
  const bool weighted = !totals.empty();
  std::string t = std::to_string(check_names.size());
  if (weighted)
    t = std::max_element(totals.begin(), totals.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  for (auto& r : *rows) {
    if (!r.score_t.empty()) continue;
    r.score_p = weighted ? "0" : std::to_string(r.g.passed());
    r.score_t = t;
  }
}

// Every check name, in the order the graders printed them.
std::vector<std::string> check_names(const std::vector<ClassRow>& rows) {
  std::vector<std::string> names;
  for (const auto& r : rows)
    for (const auto& c : r.g.checks)
      if (std::find(names.begin(), names.end(), c.first) == names.end()) names.push_back(c.first);
  return names;
}

std::string result_of(const ClassRow& r, const std::string& check) {
  for (const auto& c : r.g.checks)
    if (c.first == check) return c.second;
  return "-";
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// One row per student, one column per check (PASS/FAIL/SKIP, "-" when not graded), a note
// (timed out, does not compile, ...) and the score, last.
bool write_csv(const std::string& path, const std::vector<ClassRow>& rows, const std::vector<std::string>& names) {
  std::ofstream out(path);
  out << "student";
  for (const auto& n : names) out << "," << csv_field(n);
  out << ",note,score\n";
  for (const auto& r : rows) {
    out << csv_field(r.student);
    for (const auto& n : names) out << "," << result_of(r, n);
    out << "," << csv_field(r.note()) << "," << r.score_p << "/" << r.score_t << "\n";
  }
  return bool(out);
}

std::string joined(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

void print_table(const std::vector<ClassRow>& rows) {
  int width = 24;
  for (const auto& r : rows) width = std::max(width, int(r.student.size()));
  std::printf("%-*s %-9s %s\n", width, "student", "score", "failed checks");
  for (const auto& r : rows) {
    std::vector<std::string> failed = r.failed();
    std::string what =
        joined(std::vector<std::string>(failed.begin(), failed.begin() + long(std::min<size_t>(2, failed.size()))),
               "; ");
    if (failed.size() > 2) what += "; and " + std::to_string(failed.size() - 2) + " more (see report.md)";
    if (!r.note().empty()) what = "(" + r.note() + ")" + (what.empty() ? "" : " " + what);
    std::printf("%-*s %-9s %s\n", width, r.student.c_str(), (r.score_p + "/" + r.score_t).c_str(), what.c_str());
  }
}

struct CheckTally {
  int passed = 0, failed = 0, other = 0;
};

CheckTally tally(const std::vector<ClassRow>& rows, const std::string& check) {
  CheckTally t;
  for (const auto& r : rows) {
    std::string res = result_of(r, check);
    (res == "PASS" ? t.passed : res == "FAIL" ? t.failed : t.other)++;
  }
  return t;
}

std::string md_cell(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
  return o;
}

std::string html_text(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string today() {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", std::localtime(&now));
  return buf;
}

// report.md: what a teacher can publish: per student the score and failed checks, per check
// how many passed. (No paths, no hints: those are in each student's feedback.txt.)
bool write_report_md(const std::string& path, const std::string& title, const std::vector<ClassRow>& rows,
                     const std::vector<std::string>& names) {
  std::ofstream out(path);
  out << "# " << title << ": grades\n\n" << rows.size() << " submissions, graded " << today() << ".\n\n";
  out << "| student | score | note | failed checks |\n|---|---|---|---|\n";
  for (const auto& r : rows)
    out << "| " << md_cell(r.student) << " | " << r.score_p << "/" << r.score_t << " | " << md_cell(r.note()) << " | "
        << md_cell(joined(r.failed(), "; ")) << " |\n";
  out << "\n## Checks\n\n| check | passed | failed | not graded |\n|---|---|---|---|\n";
  for (const auto& n : names) {
    CheckTally t = tally(rows, n);
    out << "| " << md_cell(n) << " | " << t.passed << " | " << t.failed << " | " << t.other << " |\n";
  }
  return bool(out);
}

bool write_report_html(const std::string& path, const std::string& title, const std::vector<ClassRow>& rows,
                       const std::vector<std::string>& names) {
  std::ofstream out(path);
  out << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" << html_text(title) << ": grades</title>\n"
      << "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:2em}"
         "td,th{border:1px solid #999;padding:.3em .6em;text-align:left}th{background:#eee}"
         "td.n{text-align:right}</style></head><body>\n"
      << "<h1>" << html_text(title) << ": grades</h1>\n<p>" << rows.size() << " submissions, graded " << today()
      << ".</p>\n<table id=\"students\"><tr><th>student</th><th>score</th><th>note</th><th>failed checks</th></tr>\n";
  for (const auto& r : rows)
    out << "<tr><td>" << html_text(r.student) << "</td><td class=\"n\">" << r.score_p << "/" << r.score_t << "</td><td>"
        << html_text(r.note()) << "</td><td>" << html_text(joined(r.failed(), "; ")) << "</td></tr>\n";
  out << "</table>\n<h2>Checks</h2>\n<table id=\"checks\"><tr><th>check</th><th>passed</th><th>failed</th>"
         "<th>not graded</th></tr>\n";
  for (const auto& n : names) {
    CheckTally t = tally(rows, n);
    out << "<tr><td>" << html_text(n) << "</td><td class=\"n\">" << t.passed << "</td><td class=\"n\">" << t.failed
        << "</td><td class=\"n\">" << t.other << "</td></tr>\n";
  }
  out << "</table>\n</body></html>\n";
  return bool(out);
}

// Each student's feedback folder, emptied of an earlier grading's files.
std::vector<ClassRow> class_rows(const GradeOptions& o) {
  std::vector<ClassRow> rows;
  std::vector<std::string> names = student_names(o.dirs);
  for (size_t i = 0; i < o.dirs.size(); ++i) {
    ClassRow r;
    r.student = names[i];
    r.dir = fs::absolute(o.dirs[i]).string();
    r.feedback_dir = fs::absolute(fs::path(o.out) / names[i]).string();
    r.missing = !is_dir(o.dirs[i]);
    std::error_code ec;
    fs::remove_all(r.feedback_dir, ec);
    fs::create_directories(r.feedback_dir, ec);
    if (r.missing) std::ofstream(r.feedback_dir + "/feedback.txt") << "no such folder: " << o.dirs[i] << "\n";
    rows.push_back(r);
  }
  return rows;
}

int lab_grade(const std::string& root, const std::string& lab, int n, const std::vector<std::string>& rest) {
  GradeOptions o;
  if (int rc = parse_grade_options(rest, n, &o); rc >= 0) return rc;
  if (out_overlaps_submissions(o)) return 2;
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec)
    return std::fprintf(stderr, "simnic lab grade: cannot create %s: %s\n", o.out.c_str(), ec.message().c_str()), 1;
  std::vector<ClassRow> rows = class_rows(o);
  run_graders(root, lab, o, &rows);
  const std::vector<std::string> names = check_names(rows);
  fill_scores(&rows, names);
  print_table(rows);
  const std::string title = "Lab " + std::to_string(n) + " (" + lab_title(root + "/" + lab) + ")";
  bool ok = write_csv(o.csv, rows, names) && write_report_md(o.out + "/report.md", title, rows, names) &&
            write_report_html(o.out + "/report.html", title, rows, names);
  std::printf("CSV: %s\nreport: %s/report.md, %s/report.html\nfeedback: %s/STUDENT/feedback.txt\n", o.csv.c_str(),
              o.out.c_str(), o.out.c_str(), o.out.c_str());
  if (!ok) std::fprintf(stderr, "simnic lab grade: could not write the CSV or the report\n");
  return ok ? 0 : 1;
}

// `simnic lab grade --help`, `simnic lab check 3 -h`: usage, not "'--help' is not a lab number".
bool wants_help(const std::vector<std::string>& args) {
  return std::any_of(args.begin() + 1, args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; });
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
  if (wants_help(args)) return std::fputs(sub == "grade" ? kGradeUsage : kLabUsage, stdout), 0;
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
