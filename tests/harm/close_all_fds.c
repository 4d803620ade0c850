/* close_all_fds DIR [range|loop]: a daemon-like program. A first thread
 * starts and burns CPU; after 100 ms of CPU the main thread closes every
 * fd >= 3 (close_range, or a loop up to the fd limit), then reuses the
 * numbers: a pipe (fds 3 and 4), DIR/own.log (fd 5) and 24 more fds on
 * /dev/null (fds 6..29, as a server's sockets would). For 300 records it
 * writes a known 64-byte record into both, with 1 ms of CPU work between, and
 * reads each record back from the pipe. A second thread starts after the
 * close; both threads exit midway. It prints what it saw: bytes that are not
 * its own, fds that were closed or replaced under it, /proc/self/fd entries
 * of its own that changed across the threads' exits. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "harm.h"

static void* Worker(void* arg) {
  harm_burn_ms((int)(intptr_t)arg);
  return NULL;
}

static void Record(int i, char* rec) {
  snprintf(rec, 65, "record %05d of the program's own data, nothing else ........\n", i);
}

/* readlink of /proc/self/fd/N, "" if closed. */
static void FdLink(int fd, char* out, size_t len) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, out, len - 1);
  out[n < 0 ? 0 : n] = '\0';
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  int use_loop = argc > 2 && strcmp(argv[2], "loop") == 0;
  pthread_t before_close, after_close;
  pthread_create(&before_close, NULL, Worker, (void*)(intptr_t)250);
  harm_burn_ms(100);
  if (use_loop) {
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    int max = rl.rlim_cur > 65536 ? 65536 : (int)rl.rlim_cur;
    for (int fd = 3; fd < max; ++fd) close(fd);
  } else if (syscall(SYS_close_range, 3U, ~0U, 0) != 0) {
    printf("close_range failed: %s\n", strerror(errno));
    return 1;
  }
  int p[2];
  if (pipe(p) != 0) return 1;
  char log_path[4096];
  snprintf(log_path, sizeof(log_path), "%s/own.log", argv[1]);
  int log = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  printf("fds after close: pipe %d %d, log %d\n", p[0], p[1], log);
  enum { kPool = 24 };
  int pool[kPool];
  struct stat pool_before[kPool];
  for (int i = 0; i < kPool; ++i) {
    pool[i] = open("/dev/null", O_RDONLY);
    fstat(pool[i], &pool_before[i]);
  }
  int fds[3] = {p[0], p[1], log};
  struct stat before[3];
  char links_before[3][256];
  for (int i = 0; i < 3; ++i) {
    fstat(fds[i], &before[i]);
    FdLink(fds[i], links_before[i], sizeof(links_before[i]));
  }
  int foreign = 0, short_reads = 0, chnk = 0;
  for (int i = 0; i < 300; ++i) {
    if (i == 50) pthread_create(&after_close, NULL, Worker, (void*)(intptr_t)150);
    char rec[65], back[65];
    Record(i, rec);
    if (write(p[1], rec, 64) != 64 || write(log, rec, 64) != 64) ++short_reads;
    ssize_t n = read(p[0], back, 64);
    if (n != 64) ++short_reads;
    if (n > 0 && memcmp(back, rec, (size_t)n) != 0) ++foreign;
    if (n > 0 && memmem(back, (size_t)n, "CHNK", 4) != NULL) ++chnk;
    harm_burn_ms(1);
    if (i == 150) pthread_join(before_close, NULL);
    if (i == 250) pthread_join(after_close, NULL);
  }
  harm_burn_ms(100);  /* time for anything reacting to the threads' exits */
  /* Whatever else is in the pipe was not written by the program. */
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  char extra[65536];
  ssize_t left = read(p[0], extra, sizeof(extra));
  if (left > 0 && memmem(extra, (size_t)left, "CHNK", 4) != NULL) ++chnk;
  printf("pipe: foreign records %d, short reads %d, extra bytes %zd, CHNK seen %d\n", foreign,
         short_reads, left > 0 ? left : 0, chnk);
  for (int i = 0; i < 3; ++i) {
    struct stat now;
    char link_now[256];
    int valid = fcntl(fds[i], F_GETFD) != -1;
    int same = valid && fstat(fds[i], &now) == 0 && now.st_ino == before[i].st_ino &&
               now.st_dev == before[i].st_dev;
    FdLink(fds[i], link_now, sizeof(link_now));
    printf("fd %d: open %d, same file %d, /proc/self/fd unchanged %d\n", fds[i], valid, same,
           strcmp(link_now, links_before[i]) == 0);
  }
  int pool_open = 0, pool_same = 0;
  for (int i = 0; i < kPool; ++i) {
    struct stat now;
    if (fcntl(pool[i], F_GETFD) == -1) continue;
    ++pool_open;
    pool_same += fstat(pool[i], &now) == 0 && now.st_ino == pool_before[i].st_ino &&
                 now.st_dev == pool_before[i].st_dev && now.st_rdev == pool_before[i].st_rdev;
  }
  printf("fds %d..%d: %d open, %d on the same file\n", pool[0], pool[kPool - 1], pool_open, pool_same);
  close(log);
  return 0;
}
