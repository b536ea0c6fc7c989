// glibc's posix_spawn_file_actions_addclosefrom_np (2.34 and later) is a GNU extension Swift's Glibc module does
// not export: the end-to-end tests' children must not inherit the test process's thousands of sockets.
#define _GNU_SOURCE
#include <spawn.h>
#include "TestProcess.h"

int test_process_spawn_close_from(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}
