import Dispatch
import Synchronization

/// Runs the jobs of the tasks that prefer it (`Task(executorPreference:)`), one at a time on a queue of its own,
/// and counts them: once every job it was given has run, each of its tasks is suspended or done. How a test
/// knows a task reached an `await` that waits (a reader parked on an empty channel, an answer waiting its turn)
/// instead of sleeping and hoping it did.
public final class CountingExecutor: TaskExecutor {
    private let queue = DispatchQueue(label: "counting-executor")
    private let given = Atomic<Int>(0)
    private let ran = Atomic<Int>(0)

    public init() {}

    public func enqueue(_ job: consuming ExecutorJob) {
        given.add(1, ordering: .relaxed)
        let job = UnownedJob(job)
        queue.async {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
            self.ran.add(1, ordering: .relaxed)
        }
    }

    /// Whether it was given a job and has run every one: its tasks wait (or ended).
    public var isIdle: Bool {
        let given = given.load(ordering: .acquiring)
        return given > 0 && ran.load(ordering: .acquiring) == given
    }
}
