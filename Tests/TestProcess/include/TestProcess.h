#pragma once
#include <spawn.h>
/// 1 when SIGPIPE is ignored in this process (it is from load time: ignore_sigpipe.c says why).
int test_process_sigpipe_ignored(void);
/// Adds "close every descriptor from `from` up" to `actions` (spawn.c).
int test_process_spawn_close_from(posix_spawn_file_actions_t *actions, int from);
