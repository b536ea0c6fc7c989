#ifndef RECEIPT_WORKER_BENCH_CEPOLL_H
#define RECEIPT_WORKER_BENCH_CEPOLL_H
/* epoll and eventfd, which Swift's Glibc module does not export, for http-bench's raw client. */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#endif
