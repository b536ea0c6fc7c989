import AppleVerification
import Foundation
import HTTPClient
import Kafka
import Ledger
import Observability
import Synchronization

/// The receipt worker: consumes jobs, verifies each with Apple (retries that do not block other jobs),
/// runs the contract's checks, claims the transaction in the ledger, publishes the result (or the dead
/// letter), and commits offsets only behind finished jobs.
public final class Worker: Sendable {
    let configuration: WorkerConfiguration
    let logger: Logger
    let consumer: KafkaConsumer
    let producer: KafkaProducer
    let ledger: any Ledger
    /// The apps whose purchases this worker verifies (the default app first).
    let apps: AppleApps
    let breaker = CircuitBreaker()
    let state = WorkerState()
    let slots: JobSlots
    let waiting = WaitingJobs()
    public let metrics: WorkerMetrics
    private let stopping = Atomic<Bool>(false)
    /// Per assigned partition, its lag (high watermark minus committed offset) as last measured.
    let lags = Mutex<[KafkaTopicPartition: Int64]>([:])
    /// Operations (publishing, the ledger) failing repeatedly now, with their last error: readiness fails.
    let blockedOperations = Mutex<[String: String]>([:])
    /// When a failed commit was last logged (nil: the last commit succeeded).
    private let commitFailures = Mutex<ContinuousClock.Instant?>(nil)
    private let ledgerReachable = Atomic<Bool>(false)

    public init(
        configuration: WorkerConfiguration, consumer: KafkaConsumer, producer: KafkaProducer, ledger: any Ledger,
        apps: AppleApps, metrics: WorkerMetrics = WorkerMetrics(), logger: Logger
    ) {
        self.configuration = configuration
        self.consumer = consumer
        self.producer = producer
        self.ledger = ledger
        self.apps = apps
        self.metrics = metrics
        self.logger = logger
        self.slots = JobSlots(jobs: configuration.maxInFlight, bytes: configuration.maxInFlightBytes)
        registerStateMetrics()
    }

    /// Ready for traffic: partitions assigned, the ledger answered its last health check, no partition with
    /// lag stands still past `worker.stall_timeout_ms`, not stopping.
    public var isReady: Bool { readiness.isEmpty }

    /// Why the worker is not ready (empty when it is), for `/readyz`.
    public var readiness: [String] {
        var problems: [String] = []
        if isStopping { problems.append("stopping") }
        if !ledgerReachable.load(ordering: .relaxed) { problems.append("ledger unreachable") }
        if state.assigned.isEmpty { problems.append("no partition assigned") }
        for (operation, error) in blockedOperations.withLock({ $0 }).sorted(by: { $0.key < $1.key }) {
            problems.append("\(operation) failing: \(error)")
        }
        for stall in stalledPartitions() {
            problems.append(
                "partition \(stall.partition) stalled: lag \(stall.lag), no progress for \(stall.seconds) s")
        }
        return problems
    }

    /// Asks `run` to stop taking jobs, drain, commit and return.
    public func shutdown() {
        stopping.store(true, ordering: .releasing)
        consumer.endEvents()
    }

    var isStopping: Bool { stopping.load(ordering: .acquiring) }

    /// Runs until ``shutdown()`` (then drains within `worker.drain_timeout_ms` and commits) or a fatal
    /// Kafka error (thrown).
    public func run() async throws {
        let topics = try await checkTopics()
        try consumer.subscribe(topics: topics)
        logger.info(
            "worker started",
            ["topics": topics.joined(separator: ","), "max_in_flight": String(configuration.maxInFlight)])
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await self.commitLoop() }
            group.addTask { await self.ledgerHealthLoop() }
            group.addTask { await self.resultsPruneLoop() }
            group.addTask { await self.consumptionGaugeLoop() }
            group.addTask { await self.startJobs() }
            group.addTask { await self.livenessLoop() }
            // This loop never waits for a slot: it keeps reading, so rebalances are served at once and the
            // poll thread never stalls (a stalled poll past max.poll.interval.ms would leave the group).
            for await event in consumer.events {
                if isStopping { break }
                switch event {
                case .message(let message):
                    if message.topic == configuration.topics.jobs { metrics.jobsConsumed.increment() }
                    waiting.append(.init(message: message, generation: state.generation(of: message.topicPartition)))
                    adjustIntake()
                case .partitionsAssigned(let partitions):
                    // The consumer already put them in the intake's state (paused or fetching).
                    state.assign(partitions)
                case .partitionsRevoked(let revocation):
                    state.stopTaking(revocation.partitions)
                    waiting.remove(Set(revocation.partitions))
                    await drain(revocation.partitions, commit: !revocation.isLost)
                    state.release(revocation.partitions)
                    lags.withLock { lags in for partition in revocation.partitions { lags[partition] = nil } }
                    revocation.done()
                case .fatalError(let error):
                    throw error
                }
                if isStopping { break }
            }
            stopping.store(true, ordering: .releasing)
            waiting.finish()
            let all = state.assigned
            await drain(all, commit: true)
            group.cancelAll()
        }
        await consumer.close()
        await producer.close()
        logger.info("worker stopped")
    }

    /// Every topic the worker reads or writes must exist before it takes a job: a missing results or DLQ
    /// topic on a broker without auto-creation would make every job retry its publish forever. A missing or
    /// forbidden topic stops start-up as a configuration error naming its key; a broker that does not
    /// answer yet is waited for. The notifications and consumption topics are read when they exist (the
    /// notifications topic must, with `notifications.listen` set); returns the topics to subscribe to.
    private func checkTopics() async throws -> [String] {
        var required = [
            ("topics.jobs", configuration.topics.jobs), ("topics.results", configuration.topics.results),
            ("topics.dlq", configuration.topics.dlq),
        ]
        if configuration.notificationsListen != nil {
            required.append(("topics.notifications", configuration.topics.notifications))
        }
        for (key, topic) in required {
            guard try await topicExists(topic) else {
                throw ConfigurationError(
                    key: key, reason: "topic \(topic) cannot be used; create it first (deploy/README.md, Topics)")
            }
        }
        var subscribed = [configuration.topics.jobs]
        for (key, topic) in [
            ("topics.notifications", configuration.topics.notifications),
            ("topics.consumption", configuration.topics.consumption),
        ] {
            if try await topicExists(topic) {
                subscribed.append(topic)
            } else {
                logger.notice("\(key) \(topic) does not exist: not read (create it, then restart)")
            }
        }
        return subscribed
    }

    /// Whether `topic` can be read and written (false: missing or forbidden), waiting for a broker that
    /// does not answer yet.
    private func topicExists(_ topic: String) async throws -> Bool {
        var delay = Duration.milliseconds(500)
        while true {
            do {
                // A producer-type client: consumer settings would only draw librdkafka's warnings.
                let properties = configuration.kafka.filter {
                    !WorkerAssembly.consumerOnly.contains($0.key) && $0.key != "group.id"
                }
                _ = try await KafkaAdmin.partitionCount(of: topic, properties: properties, logger: logger)
                return true
            } catch let error as KafkaError where error.isMissingTopic {
                return false
            } catch {
                if isStopping { return true }
                logger.warning("cannot describe topic \(topic); retrying", ["error": "\(error)"])
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(10))
            }
        }
    }

    /// Starts waiting jobs in arrival order, each with a slot of the in-flight budget (which so holds even
    /// for messages fetched before a pause). Jobs run in a group of their own, cancelled at shutdown
    /// after the drain.
    private func startJobs() async {
        await withDiscardingTaskGroup { jobs in
            while let waitingJob = await waiting.next() {
                let message = waitingJob.message
                let bytes = message.value.count
                await slots.acquire(bytes: bytes)
                guard !isStopping,
                    state.start(message.topicPartition, offset: message.offset, generation: waitingJob.generation)
                else {
                    slots.release(bytes: bytes)
                    continue
                }
                jobs.addTask {
                    let started = ContinuousClock.now
                    switch await self.handle(JobTicket(message: message, generation: waitingJob.generation)) {
                    case .answered:
                        self.metrics.jobDuration.observe(ContinuousClock.now - started)
                        self.state.finish(
                            message.topicPartition, offset: message.offset, generation: waitingJob.generation)
                    case .redeliver:
                        // Never committed past: read again after the restart, or by the partition's new owner.
                        self.state.abandon(
                            message.topicPartition, offset: message.offset, generation: waitingJob.generation)
                    }
                    self.slots.release(bytes: bytes)
                }
            }
        }
    }

    /// Pauses intake when the in-flight budget is spent (jobs running plus jobs waiting for a slot) or
    /// Apple fails broadly; resumes at half the budget. Called by the event loop and the commit loop: the
    /// consumer serialises the state and the librdkafka calls, and applies them to its real assignment.
    func adjustIntake() {
        let inFlight = state.inFlight + waiting.count
        let bytes = slots.bytesInUse + waiting.bytes
        let breakerOpen = breaker.state == .open
        do {
            if inFlight >= configuration.maxInFlight || bytes >= configuration.maxInFlightBytes || breakerOpen {
                if try consumer.pauseIntake() {
                    logger.debug("intake paused", ["in_flight": String(inFlight), "circuit": breaker.state.rawValue])
                }
            } else if inFlight <= configuration.maxInFlight / 2 && bytes <= configuration.maxInFlightBytes / 2 {
                if try consumer.resumeIntake() { logger.debug("intake resumed", ["in_flight": String(inFlight)]) }
            }
        } catch {
            logger.warning("cannot pause or resume intake; it will be tried again", ["error": "\(error)"])
        }
    }

    /// Commits what finished jobs allow, every 200 ms, and re-evaluates the intake.
    private func commitLoop() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(200))
            adjustIntake()
            await commit(state.committable())
        }
    }

    /// Checks the ledger every 5 s for `/readyz` and `receipt_worker_ledger_up`.
    private func ledgerHealthLoop() async {
        while !Task.isCancelled {
            let reachable: Bool
            do {
                try await pingLedger(within: .seconds(5))
                reachable = true
            } catch {
                reachable = false
                logger.warning("ledger health check failed", ["error": "\(error)"])
            }
            ledgerReachable.store(reachable, ordering: .relaxed)
            try? await Task.sleep(for: .seconds(5))
        }
    }

    /// The ledger's health check with a deadline of its own: a ledger hung behind a network partition must
    /// turn readiness false in seconds, not hold the check as long as it holds every job.
    private func pingLedger(within deadline: Duration) async throws {
        let ledger = self.ledger
        try await Self.within(deadline, timeout: LedgerError("no answer within \(deadline.milliseconds) ms")) {
            try await ledger.ping()
        }
    }

    /// Runs `body`, but returns (throwing `timeout`) after `deadline` whether it finished or not; it then
    /// finishes in the background. For callers that must answer in time (a health check, Apple waiting).
    static func within(
        _ deadline: Duration, timeout: any Error, _ body: @escaping @Sendable () async throws -> Void
    ) async throws {
        let failure: (any Error)? = await withCheckedContinuation { continuation in
            let answer = ResumeOnce(continuation)
            let timer = DeadlineSweeper.shared.schedule(after: deadline) { answer.resume(timeout) }
            Task {
                do {
                    try await body()
                    answer.resume(nil)
                } catch { answer.resume(error) }
                DeadlineSweeper.shared.cancel(timer)
            }
        }
        if let failure { throw failure }
    }

    private func commit(_ offsets: [KafkaTopicPartition: Int64]) async {
        guard !offsets.isEmpty else { return }
        do {
            try await consumer.commit(offsets)
            state.markCommitted(offsets)
            commitFailures.withLock { $0 = nil }
        } catch {
            metrics.failure("commit").increment()
            // Retried every 200 ms: said once, then every 30 s while it lasts.
            let shouldLog = commitFailures.withLock { since -> Bool in
                let now = ContinuousClock.now
                guard let last = since, now - last < .seconds(30) else {
                    since = now
                    return true
                }
                return false
            }
            if shouldLog { logger.warning("commit failed; it will be retried", ["error": "\(error)"]) }
        }
    }

    /// Waits for the jobs of `partitions` to finish, up to the drain timeout, then commits their offsets.
    private func drain(_ partitions: [KafkaTopicPartition], commit shouldCommit: Bool) async {
        let deadline = ContinuousClock.now + configuration.drainTimeout
        while state.outstanding(in: partitions) > 0 && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        let abandoned = state.outstanding(in: partitions)
        if abandoned > 0 {
            logger.warning("drain deadline passed; jobs left to the next owner", ["jobs": String(abandoned)])
        }
        if shouldCommit { await commit(state.committable(only: Set(partitions))) }
    }
}

extension Worker {
    /// Gauges read at scrape time from the state the worker already keeps.
    private func registerStateMetrics() {
        let registry = metrics.registry
        registry.gauges("receipt_worker_jobs_in_flight", help: "Jobs taken and not yet finished.") { [state] in
            [(Labels.none, Double(state.inFlight))]
        }
        registry.gauges(
            "receipt_worker_jobs_waiting", help: "Jobs taken from Kafka and waiting for a slot of worker.max_in_flight."
        ) {
            [waiting] in [(Labels.none, Double(waiting.count))]
        }
        registry.gauges(
            "receipt_worker_jobs_in_flight_bytes",
            help: "Bytes of the job messages being verified (budget: worker.max_in_flight_bytes)."
        ) { [slots] in [(Labels.none, Double(slots.bytesInUse))] }
        registry.gauges(
            "receipt_worker_intake_paused", help: "1 while intake is paused (budget spent or circuit open)."
        ) {
            [consumer] in [(Labels.none, consumer.isIntakePaused ? 1 : 0)]
        }
        registry.gauges(
            "receipt_worker_circuit_state", help: "1 for the circuit breaker's current state (closed, open, half_open)."
        ) {
            [breaker] in
            let current = breaker.state
            return [CircuitBreaker.State.closed, .open, .halfOpen].map {
                (["state": $0.rawValue], $0 == current ? 1 : 0)
            }
        }
        registry.gauges(
            "receipt_worker_ledger_up", help: "1 when the ledger answered its last health check (every 5 s)."
        ) {
            [weak self] in [(Labels.none, self?.ledgerReachable.load(ordering: .relaxed) == true ? 1 : 0)]
        }
        registry.gauges("receipt_worker_ready", help: "1 when /readyz answers 200.") { [weak self] in
            [(Labels.none, self?.isReady == true ? 1 : 0)]
        }
        registry.gauges(
            "receipt_worker_partition_committed_offset", help: "The next offset committed, per assigned partition."
        ) {
            [state] in
            state.partitionsSnapshot().compactMap { partition in
                partition.committed.map { (Self.labels(partition.partition), Double($0)) }
            }
        }
        registry.gauges(
            "receipt_worker_partition_outstanding_jobs",
            help: "Jobs of the partition not yet finished (holding its commits back)."
        ) {
            [state] in state.partitionsSnapshot().map { (Self.labels($0.partition), Double($0.outstanding)) }
        }
        registry.gauges(
            "receipt_worker_partition_lag",
            help:
                "Messages of the partition not yet committed (high watermark minus committed offset), measured every few seconds."
        ) { [weak self] in
            guard let self else { return [] }
            let lags = self.lags.withLock { $0 }
            return state.assigned.compactMap { partition in lags[partition].map { (Self.labels(partition), Double($0)) }
            }
        }
        registry.gauges(
            "receipt_worker_partition_idle_seconds",
            help:
                "Seconds since the partition last made progress while it has lag (0 without lag); above worker.stall_timeout_ms it is stalled."
        ) { [weak self] in
            guard let self else { return [] }
            return idleness().map { (Self.labels($0.partition), $0.seconds) }
        }
    }

    private static func labels(_ partition: KafkaTopicPartition) -> Labels {
        ["topic": partition.topic, "partition": String(partition.partition)]
    }
}

/// Resumes a continuation once, with whichever answer comes first.
private final class ResumeOnce: Sendable {
    private let continuation: Mutex<CheckedContinuation<(any Error)?, Never>?>

    init(_ continuation: CheckedContinuation<(any Error)?, Never>) { self.continuation = Mutex(continuation) }

    func resume(_ value: (any Error)?) {
        continuation.withLock { $0.take() }?.resume(returning: value)
    }
}
