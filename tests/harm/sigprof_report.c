/* sigprof_report [full|alive]: the image a program execs. `full` prints the
 * kernel's view of SIGPROF for this process (/proc/self/status: ignored,
 * caught, blocked, pending), then both: unblocks SIGPROF and says it is
 * still alive. */
#include <signal.h>

#include "harm.h"

int main(int argc, char** argv) {
  int full = argc < 2 || strcmp(argv[1], "full") == 0;
  if (full) {
    printf("SIGPROF: ignored %d, caught %d, blocked %d, pending %d\n",
           harm_sig_in(harm_status_mask("SigIgn"), SIGPROF),
           harm_sig_in(harm_status_mask("SigCgt"), SIGPROF),
           harm_sig_in(harm_status_mask("SigBlk"), SIGPROF),
           harm_sig_in(harm_status_mask("SigPnd") | harm_status_mask("ShdPnd"), SIGPROF));
    fflush(stdout);
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPROF);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  printf("alive after unblocking SIGPROF\n");
  return 0;
}
