#ifndef RECEIPT_WORKER_CLINUX_SHIM_H
#define RECEIPT_WORKER_CLINUX_SHIM_H
/* Linux APIs that Swift's Glibc module does not export: epoll and eventfd (the HTTP server, the HTTP client's loop). */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#endif
