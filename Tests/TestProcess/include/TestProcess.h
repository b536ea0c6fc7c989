#pragma once
/// 1 when SIGPIPE is ignored in this process (it is from load time: ignore_sigpipe.c says why).
int test_process_sigpipe_ignored(void);
