#ifndef RECEIPT_WORKER_CSQLITE_SHIM_H
#define RECEIPT_WORKER_CSQLITE_SHIM_H
#include <sqlite3.h>
/* SQLITE_TRANSIENT is a cast macro Swift cannot import. */
static inline sqlite3_destructor_type csqlite_transient(void) { return SQLITE_TRANSIENT; }
/* sqlite3_config is variadic, which Swift cannot call. Turns off SQLite's memory statistics, whose global mutex
   every allocation of every statement took; nothing reads them. Only before SQLite's first use (else
   SQLITE_MISUSE, and nothing changes). */
static inline int csqlite_disable_memory_statistics(void) { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }
#endif
