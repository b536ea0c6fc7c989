#include "build_info.h"

#include <stddef.h>
#include <stdio.h>

#ifndef RECEIPT_WORKER_REVISION
#define RECEIPT_WORKER_REVISION "unknown"
#endif

const char *receipt_worker_revision(void) { return RECEIPT_WORKER_REVISION; }

// jemalloc's control interface, referenced weakly: present when jemalloc serves this process's malloc (the
// worker links it; a preloaded one counts too), absent (NULL) under glibc's malloc.
extern int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen) __attribute__((weak));

const char *receipt_worker_allocator(void) {
    static char description[96];
    if (mallctl == NULL) return "glibc";
    const char *version = NULL;
    size_t length = sizeof(version);
    if (mallctl("version", &version, &length, NULL, 0) != 0 || version == NULL) return "jemalloc";
    // "5.3.0-0-g54eaed1d…": the release, without git's suffix.
    int release = 0;
    while (version[release] != '\0' && version[release] != '-' && release < 32) release++;
    snprintf(description, sizeof(description), "jemalloc %.*s", release, version);
    return description;
}
