#ifndef RECEIPT_WORKER_BUILD_INFO_H
#define RECEIPT_WORKER_BUILD_INFO_H

/// The source revision this binary was built from (Package.swift passes it: RECEIPT_WORKER_REVISION at build
/// time, else the clone's git HEAD, else "unknown").
const char *receipt_worker_revision(void);

#endif
