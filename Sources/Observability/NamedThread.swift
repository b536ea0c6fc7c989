import CLinux
import Foundation

/// A thread of the process's own, named where operators look: `top -H`, `perf` and `/proc/PID/task/*/comm`
/// (Foundation's `Thread.name` names only the `Thread` object on Linux, so every thread showed the dispatch
/// thread's name it was started from). `scripts/bench-worker.sh` splits the worker's CPU by these names.
public enum NamedThread {
    /// Starts `body` on a new thread called `name` (at most 15 bytes: Linux keeps no more).
    public static func start(_ name: String, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread {
            clinux_name_this_thread(name)
            body()
        }
        thread.name = name
        thread.start()
    }
}
