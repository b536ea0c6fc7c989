#ifndef RECEIPT_WORKER_CLINUX_SHIM_H
#define RECEIPT_WORKER_CLINUX_SHIM_H
/* Linux APIs that Swift's Glibc module does not export: epoll and eventfd (the HTTP server, the HTTP client's loop),
   accept4 (an accepted socket close-on-exec and non-blocking in one call), and prctl (a thread's name). */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>

int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);

static inline int clinux_accept_cloexec_nonblock(int listener) {
    return accept4(listener, 0, 0, SOCK_CLOEXEC | SOCK_NONBLOCK);
}

/* Names the calling thread as `top -H`, perf and /proc/PID/task/TID/comm show it; Linux keeps its first 15 bytes.
   prctl is variadic, which Swift cannot call. */
static inline void clinux_name_this_thread(const char *name) {
    prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}
#endif
