// The test process runs libcurl with CURLOPT_NOSIGNAL, libmicrohttpd, libpq, librdkafka, the App Store
// simulator and raw sockets side by side, and peers that close first on purpose. libcurl's documentation of
// CURLOPT_NOSIGNAL leaves SIGPIPE to the application ("some corner cases when they may still happen"), and
// the worker's own binaries ignore it (RunCommand, the simulator's main). A test process that did not would
// die of signal 13 whenever one of those corner cases met a closed socket: the whole run lost, no test named.
// So it ignores SIGPIPE from the moment it is loaded, before any test starts, as the binaries do.
#include <signal.h>
#include <stddef.h>
#include "TestProcess.h"

__attribute__((constructor)) static void test_process_ignores_sigpipe(void) { signal(SIGPIPE, SIG_IGN); }

int test_process_sigpipe_ignored(void) {
    struct sigaction current;
    return sigaction(SIGPIPE, NULL, &current) == 0 && current.sa_handler == SIG_IGN;
}
