import AppleVerification
import Flows
import Foundation
import Kafka
import LedgerDomain
import Lifecycle
import Observability
import Runtime
import Synchronization
import Vocabulary

/// Apple's limits are per app across every replica: each replica takes the share of them that its share of
/// the jobs topic's partitions is (jobs are spread over partitions by their key), so the pool keeps to the
/// limit as it scales, with no arithmetic by the operator.
final class AppleLimitShare: Service {
    let apps: AppleApps
    let jobsTopic: String
    /// The jobs topic's partition count: read at start-up, and again after each rebalance (partitions added
    /// to the topic start one), so a share never counts against fewer partitions than there are.
    let partitions = Atomic<Int>(0)
    private let assigned = Mutex<[TopicPartition]>([])
    /// Reads the partition count again (nil when it cannot now).
    private let recount: @Sendable () async -> Int?

    /// Each change of the assignment, for ``run()`` to count the partitions again.
    private let changes: AsyncStream<Void>
    private let changed: AsyncStream<Void>.Continuation

    init(apps: AppleApps, jobsTopic: String, recount: @escaping @Sendable () async -> Int? = { nil }) {
        self.apps = apps
        self.jobsTopic = jobsTopic
        self.recount = recount
        (changes, changed) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// The assignment changed: each app's share follows it at once, then again once ``run()`` read the count
    /// anew.
    func update(assigned partitions: [TopicPartition]) {
        assigned.withLock { $0 = partitions }
        apply()
        changed.yield()
    }

    /// Counts the jobs topic's partitions after each change of the assignment, until the shutdown.
    func run() async {
        await withGracefulShutdown(of: [GracefulShutdown.current], stop: { self.changed.finish() }) {
            for await _ in changes {
                guard let count = await recount(), count > 0 else { continue }
                partitions.store(count, ordering: .relaxed)
                apply()
            }
        }
    }

    private func apply() {
        let owned = assigned.withLock { $0 }.filter { $0.topic == jobsTopic }
        // A partition numbered past the count read means partitions were added since.
        let total = max(partitions.load(ordering: .relaxed), Int(owned.map(\.partition).max() ?? -1) + 1)
        guard total > 0 else { return }
        for app in apps.all { app.governor?.setShare(Double(owned.count) / Double(total)) }
    }
}
