#ifndef RECEIPT_WORKER_CLIBFUZZER_SHIM_H
#define RECEIPT_WORKER_CLIBFUZZER_SHIM_H
/*
 * libFuzzer's driver, for fuzz targets whose executable has its own main. libFuzzer ships no header for it: this is
 * the declaration its documentation gives (https://llvm.org/docs/LibFuzzer.html, "Using libFuzzer as a library"),
 * with nullability: libFuzzer never passes NULL for the input, not even an empty one. The library is
 * linked by `-sanitize=fuzzer`, not by this module.
 */
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(
    int *_Nonnull argc, char *_Nullable *_Nonnull *_Nonnull argv,
    int (*_Nonnull callback)(const uint8_t *_Nonnull data, size_t size));
#endif
