#ifndef RECEIPT_WORKER_CZLIB_SHIM_H
#define RECEIPT_WORKER_CZLIB_SHIM_H
#include <zlib.h>

/* deflateInit2 and inflateInit2 are macros over their _ variants (version and struct size); Swift cannot call
   macros. */
static inline int receipt_worker_deflate_init_gzip(z_streamp stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
}

static inline int receipt_worker_inflate_init_gzip(z_streamp stream) {
    return inflateInit2(stream, 15 + 16);
}
#endif
