// arena_reader PATH: what a collector process would see of a live program.
// Opens PATH (the program's arena memfd, /proc/<pid>/fd/<n>), maps the
// arena at the program's addresses (core/shared_arena.h ArenaAttach), and
// prints the program's stages and sampled threads as their words say. Then
// it waits for a line on stdin (the test kills the program meanwhile) and
// prints them again, from the same mapping.
//   stage ID NAME
//   thread TID depth D stage STAGE samples N unread WORDS
//   end
// Exit status 75 when an address of the program's is taken in this process
// (the test runs it again: a new exec, a new layout).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "core/annotations.h"
#include "core/shared_arena.h"
#include "core/thread_registry.h"

namespace {

void Print() {
  for (uint32_t id = 1; id <= dlprof::StageCount(); ++id) {
    const char* name = dlprof::StageName(id);
    printf("stage %u %s\n", id, name != nullptr ? name : "?");
  }
  for (int i = 0; i < dlprof::SlotLimit(); ++i) {
    dlprof::ThreadSlot* s = dlprof::SlotAt(i);
    if (s->state.load() != dlprof::kSlotLive) continue;
    printf("thread %d depth %u stage %u samples %llu unread %llu\n", s->tid.load(),
           s->depth.load(), s->stages[0].load(),
           static_cast<unsigned long long>(s->samples_taken.load()),
           static_cast<unsigned long long>(s->samples.ReadableEnd() - s->samples.ReadPos()));
  }
  printf("end\n");
  fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: arena_reader /proc/PID/fd/N\n");
    return 2;
  }
  const int fd = open(argv[1], O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    perror(argv[1]);
    return 1;
  }
  std::string error;
  if (!dlprof::ArenaAttach(fd, &error)) {
    fprintf(stderr, "arena_reader: %s\n", error.c_str());
    return error.find("taken") != std::string::npos || error.find("exists") != std::string::npos
               ? 75
               : 1;
  }
  // The program's own tables, at its addresses.
  void* slots = const_cast<void*>(dlprof::ArenaRootOf(dlprof::ArenaRoot::kSlots));
  void* tables = const_cast<void*>(dlprof::ArenaRootOf(dlprof::ArenaRoot::kAnnotations));
  if (slots == nullptr) {
    fprintf(stderr, "arena_reader: the program has no slot table yet\n");
    return 1;
  }
  dlprof::UseSlotTableAt(slots);
  if (tables != nullptr) dlprof::UseAnnotationTablesAt(tables);
  Print();
  std::string line;
  std::getline(std::cin, line);
  if (!dlprof::ArenaAttachNewExtents(&error)) {
    fprintf(stderr, "arena_reader: %s\n", error.c_str());
    return 1;
  }
  Print();
  return 0;
}
