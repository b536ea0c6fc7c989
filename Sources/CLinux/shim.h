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

/* Swift's task allocator (libswift_Concurrency's runtime entry points, Swift's calling convention). A task takes its
   async frames from slabs it mallocs as it goes: a 984-byte slab, or one of its own for a larger frame, each freed
   when the task ends, often on another thread. One allocation as large as a task's deepest frames, given back at
   once, leaves one empty slab that holds them all: one malloc a task instead of one for each large frame. Call it
   only inside a task: with none, the runtime falls back to one allocator shared by every thread, unsynchronised. */
#include <stddef.h>
__attribute__((swiftcall)) void *swift_task_alloc(size_t size);
__attribute__((swiftcall)) void swift_task_dealloc(void *ptr);

static inline void clinux_reserve_task_frames(size_t bytes) {
    swift_task_dealloc(swift_task_alloc(bytes));
}
#endif
