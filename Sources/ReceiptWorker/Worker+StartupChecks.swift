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

/// What the worker checks before it takes a job: its topics, the retries topic's lanes, the ledger against the
/// consumer group.
extension Worker {
    /// Every topic the worker reads or writes must exist before it takes a job: a missing results or DLQ
    /// topic on a broker without auto-creation would make every job retry its publish forever. A missing or
    /// forbidden topic stops start-up as a configuration error naming its key; a broker that does not answer
    /// yet is waited for. The notifications and consumption topics are read when they exist (the
    /// notifications topic must, with `notifications.listen` set). Returns the topics to read, jobs first,
    /// with their partition counts.
    func checkTopics() async throws -> [(topic: String, partitions: Int)] {
        var required = [
            ("topics.jobs", configuration.topics.jobs), ("topics.results", configuration.topics.results),
            ("topics.dlq", configuration.topics.dlq),
        ]
        if configuration.notificationsListen != nil {
            required.append(("topics.notifications", configuration.topics.notifications))
        }
        var jobsPartitions = 0
        for (key, topic) in required {
            guard let partitions = try await partitionCount(topic) else {
                throw ConfigurationError(
                    .unusable, key: key,
                    reason: "topic \(topic) cannot be used; create it first (deploy/README.md, Topics)")
            }
            if key == "topics.jobs" { jobsPartitions = partitions }
        }
        appleShare.partitions.store(jobsPartitions, ordering: .relaxed)
        var read = [(topic: configuration.topics.jobs, partitions: jobsPartitions)]
        for (key, topic, without) in [
            (
                "topics.retries", configuration.topics.retries,
                "a game whose jobs wait (its Apple lane paused, its circuit open) pauses every game's intake once its waiting room is full"
            ),
            ("topics.notifications", configuration.topics.notifications, "no notification is handled"),
            ("topics.consumption", configuration.topics.consumption, "no consumption answer is sent"),
        ] {
            if let partitions = try await partitionCount(topic) {
                read.append((topic, partitions))
                if key == "topics.retries" { checkParkingLanes(partitions: partitions) }
            } else {
                logger.notice(
                    "\(key) \(topic) does not exist: not read (create it, then restart); meanwhile \(without)")
                unreadTopics.withLock { $0.append((key, topic, nil)) }
            }
        }
        return read
    }

    /// Describes again the topics missing at start, every round (15 s) for 20 minutes, then every 20th (5 minutes:
    /// a deployment that never makes one pays an admin client's connection rarely). One that exists now asks for a
    /// restart (``liveness``) after a delay of this replica's own, up to a minute, so the replicas do not all restart
    /// at once; said once, at error level: until then what is put there waits unread.
    func lookForUnreadTopics() async {
        let round = unreadTopicRounds.add(1, ordering: .relaxed).newValue
        guard round <= 80 || round % 20 == 0 else { return }
        for (index, unread) in unreadTopics.withLock({ $0 }).enumerated() where unread.restartAt == nil {
            guard
                (try? await KafkaAdmin.partitionCount(
                    of: unread.topic, properties: WorkerAssembly.adminProperties(configuration), logger: logger)) != nil
            else { continue }
            let delay = Duration.milliseconds(Int64.random(in: 0...60_000))
            unreadTopics.withLock { $0[index].restartAt = .now + delay }
            logger.error(
                "\(unread.key) \(unread.topic) exists now and is not read: the worker asks to be restarted (/healthz)",
                ["in_seconds": String(delay.components.seconds)])
        }
    }

    /// The games whose parked jobs share a partition of `topics.retries` with another game's (fewer partitions than
    /// games): such games wait behind each other's backlog. Said at start, and kept in
    /// `receipt_worker_retries_shared_games` for an alert (0 when each game has a partition of its own).
    func checkParkingLanes(partitions: Int) {
        let sharing = Self.gamesSharingParkingPartitions(apps: apps.all.map(\.name), partitions: partitions)
        metrics.retriesSharedGames.set(sharing.count)
        guard !sharing.isEmpty else { return }
        logger.warning(
            "topics.retries has fewer partitions than games: their parked jobs wait behind each other's",
            [
                "topic": configuration.topics.retries, "partitions": String(partitions),
                "games": String(apps.all.count), "sharing": sharing.sorted().joined(separator: ","),
            ])
    }

    /// The apps whose lane (``lanes(_:)``) falls on a partition another app's falls on too.
    static func gamesSharingParkingPartitions(apps names: [String], partitions: Int) -> [String] {
        guard partitions > 0 else { return names }
        let sorted = names.sorted()
        var byPartition: [Int: [String]] = [:]
        for (index, name) in sorted.enumerated() { byPartition[index % partitions, default: []].append(name) }
        return byPartition.values.filter { $0.count > 1 }.flatMap { $0 }
    }

    /// Refuses to start on a ledger that does not hold what the consumer group has processed (LedgerGroupCheck),
    /// waiting for a ledger or a broker that does not answer yet.
    func checkLedgerMatchesGroup(_ read: [(topic: String, partitions: Int)]) async throws {
        var delay = Duration.milliseconds(500)
        while !runtime.isStopping && !Task.isCancelled {
            do {
                let committed = try await LedgerGroupCheck.committed(consumer: consumer, partitionCounts: read)
                try await LedgerGroupCheck.check(ledger: ledger, group: configuration.groupID, committed: committed)
                return
            } catch let error as LedgerMismatchError {
                throw error
            } catch {
                if runtime.isStopping || Task.isCancelled { return }
                logger.warning("cannot compare the ledger with the group's offsets; retrying", ["error": "\(error)"])
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(10))
            }
        }
    }

    /// The topic's partition count (nil: missing or forbidden), waiting for a broker that does not answer yet.
    /// Stopping, it asks no more (each ask may wait out a metadata timeout) and answers 1, which start-up, stopped,
    /// does not use.
    func partitionCount(_ topic: String) async throws -> Int? {
        var delay = Duration.milliseconds(500)
        while !runtime.isStopping && !Task.isCancelled {
            do {
                return try await KafkaAdmin.partitionCount(
                    of: topic, properties: WorkerAssembly.adminProperties(configuration), logger: logger)
            } catch let error as KafkaError where error.isMissingTopic {
                return nil
            } catch {
                if runtime.isStopping || Task.isCancelled { break }
                logger.warning("cannot describe topic \(topic); retrying", ["error": "\(error)"])
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(10))
            }
        }
        return 1
    }
}
