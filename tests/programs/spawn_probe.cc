// The helper that tests/collector_spawn_test.cc starts with
// SpawnInvisibleChild. It reports on fd 3 (the passed fd), by mode:
//   exit         nothing; exits 0 at once
//   report       its fds (number and target), SigBlk/SigIgn, session and group
//   wait         "ready <sid>", then waits to be killed
//   watch        polls fd 4, the caller's pidfd: "watching", then "caller
//   ended"
#include <dirent.h>
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

void Say(const std::string& line) {
  const std::string out = line + "\n";
  if (write(3, out.data(), out.size()) != static_cast<ssize_t>(out.size())) _exit(2);
}

void Report() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) _exit(3);
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.' || atoi(entry->d_name) == dirfd(dir)) continue;
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    if (readlink(link.c_str(), target, sizeof target - 1) < 0) strcpy(target, "?");
    Say(std::string("fd ") + entry->d_name + " " + target);
  }
  closedir(dir);
  FILE* status = fopen("/proc/self/status", "r");
  if (status == nullptr) _exit(3);
  char line[256];
  while (fgets(line, sizeof line, status) != nullptr) {
    if (strncmp(line, "SigBlk:", 7) == 0 || strncmp(line, "SigIgn:", 7) == 0) {
      line[strcspn(line, "\n")] = '\0';
      Say(line);
    }
  }
  fclose(status);
  Say("sid " + std::to_string(getsid(0)) + " pgid " + std::to_string(getpgrp()) + " pid " +
      std::to_string(getpid()) + " ppid " + std::to_string(getppid()));
}

void Watch() {
  pollfd p = {4, POLLIN, 0};
  Say("watching");
  while (poll(&p, 1, -1) != 1) {
  }
  Say(p.revents & POLLIN ? "caller ended" : "no pidfd");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "exit") return 0;
  if (mode == "report") {
    Report();
  } else if (mode == "wait") {
    Say("ready " + std::to_string(getsid(0)));
    for (;;) pause();
  } else if (mode == "watch") {
    Watch();
  } else {
    return 1;
  }
  return 0;
}
