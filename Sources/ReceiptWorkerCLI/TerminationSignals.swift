import Foundation
import Observability

/// SIGINT and SIGTERM, delivered to a callback on a thread of its own.
///
/// A `sigaction` handler writes the signal number to a pipe (the only async-signal-safe thing to do), and a
/// thread reads it. Unlike blocking the signals and `sigwait`, this works whichever thread the kernel
/// picks, including threads the Swift runtime started before `main` could set a signal mask.
enum TerminationSignals {
    nonisolated(unsafe) private static var pipeWrite: Int32 = -1

    static func install(_ onSignal: @escaping @Sendable (Int32) -> Void) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return }
        pipeWrite = fds[1]
        let readEnd = fds[0]
        for signalNumber in [SIGINT, SIGTERM] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { number in
                var byte = UInt8(truncatingIfNeeded: number)
                _ = write(TerminationSignals.pipeWrite, &byte, 1)
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            sigaction(signalNumber, &action, nil)
        }
        NamedThread.start("signals") {
            var byte: UInt8 = 0
            while read(readEnd, &byte, 1) == 1 { onSignal(Int32(byte)) }
        }
    }
}
