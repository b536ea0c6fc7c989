#include "build_info.h"

#ifndef RECEIPT_WORKER_REVISION
#define RECEIPT_WORKER_REVISION "unknown"
#endif

const char *receipt_worker_revision(void) { return RECEIPT_WORKER_REVISION; }
