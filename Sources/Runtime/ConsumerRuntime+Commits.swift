import Kafka
import Observability
import Synchronization

/// Commits: every 200 ms what answered messages allow, and a partition's drain when it is released.
extension ConsumerRuntime {
    /// Commits what answered messages allow, every 200 ms, and re-evaluates the intake.
    func commitLoop() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(200))
            adjustIntake()
            await commit(book.committable())
        }
    }

    /// False while commits fail (since the first failure, until one succeeds).
    var commitsSucceed: Bool { state.withLock { $0.commitsSucceed } }

    func commit(_ offsets: [TopicPartition: Int64]) async {
        guard !offsets.isEmpty else { return }
        do {
            try await recordOffsets?(offsets)
            try await consumer.commit(offsets)
            book.markCommitted(offsets)
            state.withLock { $0.commitSucceeded() }
        } catch {
            metrics.failure("commit").increment()
            // Retried every 200 ms: said once, then every 30 s while it lasts.
            if state.withLock({ $0.commitFailed(at: .now) }) {
                logger.warning("commit failed; it will be retried", ["error": "\(error)"])
            }
        }
    }

    /// Waits for the messages of `partitions` to be answered, up to the drain timeout, then commits them.
    func drain(_ partitions: [TopicPartition], commit shouldCommit: Bool) async {
        let deadline = ContinuousClock.now + configuration.drainTimeout
        while book.outstanding(in: partitions) > 0 && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        let abandoned = book.outstanding(in: partitions)
        if abandoned > 0 {
            logger.warning("drain deadline passed; messages left to the next owner", ["messages": String(abandoned)])
        }
        if shouldCommit { await commit(book.committable(only: Set(partitions))) }
    }
}
