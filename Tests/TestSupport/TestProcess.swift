import TestProcess

/// Whether this test process ignores SIGPIPE (it does from load time: Tests/TestProcess/ignore_sigpipe.c).
public var testProcessIgnoresSIGPIPE: Bool { test_process_sigpipe_ignored() == 1 }
