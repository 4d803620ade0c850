// dlprof-collector: started by libdlprof for a profiled process under
// DLPROF_COLLECTOR=process (core/collector_process.h), never by a user. The
// program's arena is fd 3, a pidfd of the program fd 4. Arguments:
//   --pid=PID --run-path=DIR --run-dev=D --run-ino=I
//   --base=ROLE-PID --snapshot-ms=MS --mode=light|detailed --file-at-once=0|1
//   [--field=KEY=VALUE]... [--python=MAJOR.MINOR:RUNTIME:CODE_TYPE:UNICODE_TYPE]
//   [--check-reused-walks] (DLPROF_CHECK_REUSED_WALKS)
// Where an address of the program's arena is taken here, it execs itself
// again (a new layout), at most kMaxAttempts times in all.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "collector/process_collector.h"

namespace po = boost::program_options;

namespace {

constexpr int kMaxAttempts = 8;

bool Parse(int argc, char** argv, dlprof::CollectorProcessArgs* a, int* attempt) {
  std::string mode;
  std::vector<std::string> fields;
  unsigned long long dev = 0, ino = 0;
  po::options_description options;
  options.add_options()
      ("pid", po::value<pid_t>(&a->pid)->required())
      ("run-path", po::value<std::string>(&a->file.run_path)->required())
      ("run-dev", po::value<unsigned long long>(&dev)->required())
      ("run-ino", po::value<unsigned long long>(&ino)->required())
      ("base", po::value<std::string>(&a->file.base)->required())
      ("snapshot-ms", po::value<int>(&a->snapshot_ms)->required())
      ("mode", po::value<std::string>(&mode)->required())
      ("field", po::value<std::vector<std::string>>(&fields))
      ("python", po::value<std::string>(&a->python))
      ("stderr", po::value<std::string>(&a->program_stderr))
      ("file-at-once", po::value<bool>(&a->file_at_once))
      ("check-reused-walks", po::bool_switch(&a->check_reused_walks))
      ("attempt", po::value<int>(attempt));
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, options), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    fprintf(stderr, "dlprof-collector: %s (it is started by libdlprof, not by hand)\n", e.what());
    return false;
  }
  a->file.run_dev = static_cast<dev_t>(dev);
  a->file.run_ino = static_cast<ino_t>(ino);
  a->light = mode != "detailed";
  for (const std::string& f : fields) {
    const size_t eq = f.find('=');
    if (eq != std::string::npos) a->fields.emplace_back(f.substr(0, eq), f.substr(eq + 1));
  }
  return a->pid > 0 && a->snapshot_ms > 0;
}

}  // namespace

int main(int argc, char** argv) {
  dlprof::CollectorProcessArgs args;
  int attempt = 1;
  if (!Parse(argc, argv, &args, &attempt)) return 2;
  // Not in the directory the program started in (spawned, it inherited
  // it): a helper there kept the program's own `umount` of it busy. Its
  // paths are absolute.
  if (chdir("/") != 0) return 2;
  const int status = dlprof::RunProcessCollector(args);
  if (status == dlprof::kExitAddressTaken && attempt < kMaxAttempts) {
    std::vector<std::string> again(argv, argv + argc);
    again.push_back("--attempt=" + std::to_string(attempt + 1));
    std::vector<char*> v;
    for (std::string& s : again) v.push_back(s.data());
    v.push_back(nullptr);
    execv("/proc/self/exe", v.data());
  }
  return status;
}
