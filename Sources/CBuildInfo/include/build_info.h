#ifndef RECEIPT_WORKER_BUILD_INFO_H
#define RECEIPT_WORKER_BUILD_INFO_H

/// The source revision this binary was built from (Package.swift passes it: RECEIPT_WORKER_REVISION at build
/// time, else the clone's git HEAD, else "unknown").
const char *receipt_worker_revision(void);

/// The allocator serving this process's malloc: "jemalloc 5.3.0" (the worker links Debian's libjemalloc2), or
/// "glibc" (a binary built without it, such as a test's).
const char *receipt_worker_allocator(void);

#endif
