#ifndef RECEIPT_WORKER_CRDKAFKA_SHIM_H
#define RECEIPT_WORKER_CRDKAFKA_SHIM_H
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#endif
