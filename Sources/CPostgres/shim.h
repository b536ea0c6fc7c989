#ifndef RECEIPT_WORKER_CPOSTGRES_SHIM_H
#define RECEIPT_WORKER_CPOSTGRES_SHIM_H
#include <libpq-fe.h>
#endif
