import Glibc
import TestSupport
import Testing

/// The test process itself: a peer that closes first costs a failed write, never the whole run.
@Suite struct TestProcessTests {
    @Test("a write to a closed peer fails with EPIPE instead of ending the test process")
    func closedPeerIsAnError() throws {
        #expect(testProcessIgnoresSIGPIPE)
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        close(fds[0])
        defer { close(fds[1]) }
        let written = write(fds[1], "x", 1)
        #expect(written == -1 && errno == EPIPE)
    }
}
