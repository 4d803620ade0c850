// Runs a command as a child subreaper and waits for every process it
// reaps, then exits with the command's status. Under /usr/bin/time this
// counts the CPU of every descendant, orphans included: dlprof's collector
// processes (DLPROF_COLLECTOR=process) leave the program's tree at their
// start (core/collector_spawn.h), so a plain `time python3 ...` never
// counted them, and the process mode looked free.
//
//   bench_reap_all CMD [ARG...]
//
// BENCH_REAP_CPU=FILE also writes to FILE the CPU time (user+sys seconds)
// of what it reaped, by name: "command 12.345" (the command with every
// descendant it waited for itself: a DataLoader's workers) and
// "dlprof-collector 0.456" (the helpers, which it reaps as orphans), so
// that dlprof's own share is counted, not inferred from two noisy runs.
#include <errno.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_reap_all CMD [ARG...]\n");
    return 2;
  }
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    std::perror("bench_reap_all: prctl(PR_SET_CHILD_SUBREAPER)");
    return 2;
  }
  const pid_t child = fork();
  if (child < 0) {
    std::perror("bench_reap_all: fork");
    return 2;
  }
  if (child == 0) {
    execvp(argv[1], argv + 1);
    std::perror("bench_reap_all: exec");
    _exit(127);
  }
  int status = 0, command_status = 0;
  std::map<std::string, double> cpu_by_name;
  for (;;) {
    // The name before the reap, while /proc still has it.
    siginfo_t info{};
    if (waitid(P_ALL, 0, &info, WEXITED | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      break;  // ECHILD: every descendant is reaped
    }
    std::string name = "command";
    if (info.si_pid != child) {
      char path[64], comm[64] = {};
      snprintf(path, sizeof(path), "/proc/%d/comm", static_cast<int>(info.si_pid));
      if (FILE* f = fopen(path, "r")) {
        if (fgets(comm, sizeof(comm), f) != nullptr) comm[strcspn(comm, "\n")] = '\0';
        fclose(f);
      }
      name = comm[0] != '\0' ? comm : "?";
    }
    struct rusage usage{};
    const pid_t pid = wait4(info.si_pid, &status, 0, &usage);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;
    if (pid == child) command_status = status;
    cpu_by_name[name] += static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  }
  if (const char* report = getenv("BENCH_REAP_CPU"); report != nullptr && *report != '\0') {
    if (FILE* f = fopen(report, "w")) {
      for (const auto& [name, seconds] : cpu_by_name) fprintf(f, "%s %.3f\n", name.c_str(), seconds);
      fclose(f);
    }
  }
  if (WIFSIGNALED(command_status)) return 128 + WTERMSIG(command_status);
  return WEXITSTATUS(command_status);
}
