/* dup2_log DIR: what bash's `exec 5>log` does, onto every fd from 3 to 10:
 * after 100 ms of CPU, DIR/logN is opened and dup2'ed onto fd N. Two threads
 * then burn CPU while the main thread writes 100 lines to each fd, with 2 ms
 * of CPU between rounds. It prints, per fd, whether it is still open on the
 * same file; the test compares the log files' bytes. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>

#include "harm.h"

static void* Worker(void* arg) {
  (void)arg;
  harm_burn_ms(200);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  harm_burn_ms(100);
  struct stat before[11];
  for (int fd = 3; fd <= 10; ++fd) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/log%d", argv[1], fd);
    int tmp = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (tmp < 0) return 1;
    if (tmp != fd) {
      if (dup2(tmp, fd) != fd) return 1;
      close(tmp);
    }
    fstat(fd, &before[fd]);
  }
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) pthread_create(&t[i], NULL, Worker, NULL);
  for (int line = 0; line < 100; ++line) {
    for (int fd = 3; fd <= 10; ++fd) dprintf(fd, "fd %d line %03d: the program's own log\n", fd, line);
    harm_burn_ms(2);
  }
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  harm_burn_ms(100);
  for (int fd = 3; fd <= 10; ++fd) {
    struct stat now;
    int open_now = fcntl(fd, F_GETFD) != -1;
    int same = open_now && fstat(fd, &now) == 0 && now.st_ino == before[fd].st_ino;
    printf("fd %d: open %d, same file %d\n", fd, open_now, same);
  }
  return 0;
}
