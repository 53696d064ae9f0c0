/* A pod sandbox's pause process, what registry.k8s.io/pause runs: holds the pod's namespaces and
 * sleeps until signalled, reaping orphans (it is PID 1 when the pod shares its PID namespace).
 * Built static by build-node.sh, so its image holds this one file. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
  (void)sig;
  _exit(0);
}

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  signal(SIGINT, stop);
  signal(SIGTERM, stop);
  signal(SIGCHLD, reap);
  for (;;) pause();
}
