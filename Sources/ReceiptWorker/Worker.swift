import AppleVerification
public import Flows
import Foundation
public import Kafka
public import LedgerDomain
public import Lifecycle
public import Observability
import Runtime
import Synchronization
import Vocabulary

/// The receipt worker: the runtime (``ConsumerRuntime``) with one handler per topic (jobs, notifications,
/// consumption answers), the ledger's upkeep, and what the services beside it read (readiness, metrics, the
/// notification intake). It decides nothing itself: the handlers do, each in a file of its own.
public final class Worker: Service {
    let configuration: WorkerConfiguration
    let logger: Logger
    let runtime: ConsumerRuntime
    let consumer: KafkaConsumer
    let producer: KafkaProducer
    let ledger: any Ledger
    /// The apps whose purchases this worker verifies (the default app first).
    let apps: AppleApps
    public let metrics: WorkerMetrics
    private let ledgerReachable = Atomic<Bool>(false)
    /// Triggered by ``shutdown()``: the same as the graceful shutdown of the group running the worker.
    private let stop = GracefulShutdown()
    /// Each replica's share of Apple's limits: its share of the jobs topic's partitions.
    private let appleShare: AppleLimitShare
    /// The budgets (and metric series) of the flows beside the apps' jobs; no app may have these names.
    static let notificationsGroup = FlowGroup.notifications
    static let consumptionGroup = FlowGroup.consumption
    /// Each app's consumption answers have a budget of their own: one app's answers waiting on Apple never
    /// hold another's (app names have no `:`).
    static func consumptionGroup(of app: AppleApp) -> String { "\(consumptionGroup):\(app.name)" }
    /// What this process's receiver verified, for its own processor.
    let recentlyVerified = RecentlyVerifiedNotifications()
    /// Finish Transaction after grants (`apple.finish_transactions`), nil: off.
    private let finisher: TransactionFinisher?
    /// Spans to an OTLP collector (`otel.endpoint`), nil without one.
    private let traceExporter: TraceExporter?

    public init(
        configuration: WorkerConfiguration, consumer: KafkaConsumer, producer: KafkaProducer, ledger: any Ledger,
        apps: AppleApps, metrics: WorkerMetrics = .ofProcess(), logger: Logger
    ) {
        self.configuration = configuration
        self.consumer = consumer
        self.producer = producer
        self.ledger = ledger
        self.apps = apps
        self.metrics = metrics
        metrics.prepareDecisions(apps: apps.all.map(\.name))
        metrics.prepareMoney(apps: apps.all.map(\.name))
        // Every app's, also one without an API key (never swept): the rules and dashboard read them at 0.
        metrics.prepareSweep(apps: apps.all.map(\.name))
        self.logger = logger
        let topics = configuration.topics
        let finisher =
            configuration.apple.finishTransactions
            ? TransactionFinisher(apps: apps.all, retry: configuration.retry, metrics: metrics, logger: logger) : nil
        self.finisher = finisher
        let jobs = JobHandler(
            settings: .init(
                maxBytes: configuration.jobsMaxBytes,
                transactionIDRequiresAccountToken: configuration.apple.transactionIDRequiresAccountToken,
                retry: configuration.retry, resultsTopic: topics.results, eventSource: configuration.eventSource,
                retriesTopic: topics.retries, malformedReceiptCalls: configuration.apple.malformedReceiptCalls),
            apps: apps, decisions: ledger, metrics: metrics, logger: logger,
            finisher: finisher)
        let appGroups = Set(apps.all.map(\.name))
        let consumptionGroups = apps.all.map(Self.consumptionGroup(of:))
        let routes = [
            // A game whose room is full (its lane paused, its circuit open) has its new jobs and consumption
            // answers parked on its own partition of topics.retries, read again by the same handler, instead of
            // pausing the jobs or the answers of every game.
            RuntimeConfiguration.Route(
                topic: topics.jobs, handler: jobs, taken: metrics.jobsConsumed, groups: appGroups, parks: true),
            RuntimeConfiguration.Route(
                topic: topics.notifications,
                handler: NotificationHandler(
                    apps: apps, purchases: ledger, resultsTopic: topics.results, eventSource: configuration.eventSource,
                    metrics: metrics, logger: logger, unclaimedAfter: configuration.unclaimedAfter,
                    recentlyVerified: recentlyVerified),
                groups: [Self.notificationsGroup]),
            RuntimeConfiguration.Route(
                topic: topics.consumption,
                handler: ConsumptionHandler(
                    apps: apps, requests: ledger, retry: configuration.retry, metrics: metrics, logger: logger,
                    retriesTopic: topics.retries),
                groups: Set(consumptionGroups), parks: true),
        ]
        var runtimeConfiguration = RuntimeConfiguration(routes: routes, deadLetterTopic: topics.dlq)
        runtimeConfiguration.groups = apps.all.map(\.name) + [Self.notificationsGroup] + consumptionGroups
        runtimeConfiguration.parking = RuntimeConfiguration.Parking(topic: topics.retries, lanes: Self.lanes(apps))
        runtimeConfiguration.maxInFlight = configuration.maxInFlight
        runtimeConfiguration.maxInFlightBytes = configuration.maxInFlightBytes
        runtimeConfiguration.drainTimeout = configuration.drainTimeout
        runtimeConfiguration.stallTimeout = configuration.stallTimeout
        runtimeConfiguration.retry = configuration.retry
        runtimeConfiguration.maxRecordBytes = configuration.kafka["message.max.bytes"].flatMap(Int.init) ?? 1_000_000
        traceExporter = configuration.tracing.endpoint.map {
            TraceExporter(configuration.tracing, endpoint: $0, registry: metrics.registry, logger: logger)
        }
        runtimeConfiguration.tracer = traceExporter?.tracer(sampleRatio: configuration.tracing.sampleRatio)
        // After a rebalance, the partition count is read again (one metadata request; nil on failure, the
        // last count kept).
        let adminProperties = WorkerAssembly.adminProperties(configuration)
        let appleShare = AppleLimitShare(apps: apps, jobsTopic: topics.jobs) { [logger] in
            try? await KafkaAdmin.partitionCount(of: topics.jobs, properties: adminProperties, logger: logger)
        }
        self.appleShare = appleShare
        // Every commit is recorded in the ledger first: a ledger that does not hold what the group committed is
        // refused at the next start (LedgerGroupCheck).
        let group = configuration.groupID
        runtime = ConsumerRuntime(
            configuration: runtimeConfiguration, consumer: consumer, producer: producer, registry: metrics.registry,
            logger: logger, assignmentChanged: { appleShare.update(assigned: $0) },
            recordOffsets: { offsets in
                try await ledger.recordOffsets(
                    Dictionary(uniqueKeysWithValues: offsets.map { (ConsumedPartition($0.key), $0.value) }),
                    group: group)
            })
        for flow in ["job", "notification"] { runtime.prepareWaits(flow: flow, apps: apps.all.map(\.name)) }
        registerGauges()
        metrics.readiness.withLock { $0 = { [weak self] in self?.isReady == true } }
    }

    /// Each app's lane on topics.retries: its index among the apps sorted by name (the same on every replica
    /// of one configuration), shared by its jobs and its consumption answers. With as many partitions as apps,
    /// each app's parked messages wait on a partition of their own.
    static func lanes(_ apps: AppleApps) -> [String: Int] {
        var lanes: [String: Int] = [:]
        for (index, app) in apps.all.sorted(by: { $0.name < $1.name }).enumerated() {
            lanes[app.name] = index
            lanes[consumptionGroup(of: app)] = index
        }
        return lanes
    }

    /// Ready for traffic: the runtime's own checks (partitions assigned, nothing failing again and again, no
    /// stalled partition, not stopping) and the ledger answering its last health check.
    public var isReady: Bool { readiness.isEmpty }

    /// Why the worker is not ready (empty when it is), for `/readyz`.
    public var readiness: [String] {
        var problems = runtime.problems
        if !ledgerReachable.load(ordering: .relaxed) { problems.insert("ledger unreachable", at: 0) }
        return problems
    }

    /// Why the worker must be restarted (empty when it need not), for `/healthz`: the runtime wedged.
    public var liveness: [String] { runtime.wedged }

    /// What the notification receiver needs of this worker: the apps, the producer, the topic.
    public var notificationIntake: NotificationIntake {
        NotificationIntake(
            apps: apps, producer: producer, topic: configuration.topics.notifications, metrics: metrics,
            logger: logger, recentlyVerified: recentlyVerified)
    }

    /// Asks ``run()`` to stop taking messages, drain, commit and return (as its group's graceful shutdown does).
    public func shutdown() { stop.trigger() }

    /// A fabricated fatal Kafka error, for tests of what follows one.
    package func raiseFatalErrorForTesting() { runtime.raiseFatalErrorForTesting() }

    /// Runs until its graceful shutdown or ``shutdown()`` (then drains within `worker.drain_timeout_ms` and
    /// commits) or a fatal Kafka error (thrown). A missing or forbidden topic stops start-up as a configuration
    /// error. (`receipt-worker run` puts ``startUp()``'s parts in the process's one group instead.)
    public func run() async throws {
        let group = ServiceGroup([.later("worker") { try await self.startUp() }], logger: logger)
        try await withGracefulShutdown(of: [GracefulShutdown.current, stop], stop: { group.shutdown() }) {
            try await group.run()
        }
    }

    /// Starts the worker: waits for its topics (a missing or forbidden one stops start-up as a configuration
    /// error) and checks the ledger against the consumer group; then returns its parts, in the order they start.
    /// A graceful shutdown (``GracefulShutdown/current``, or ``shutdown()``) meanwhile ends the wait: nothing then.
    public func startUp() async throws -> [ServiceGroup.Entry] {
        let shutdowns = [GracefulShutdown.current, stop]
        // Start-up waits for a broker or a ledger that does not answer yet; a shutdown meanwhile ends it.
        let read = try await withGracefulShutdown(of: shutdowns, stop: { self.runtime.shutdown() }) {
            let read = try await checkTopics()
            try await checkLedgerMatchesGroup(read)
            return read
        }
        if runtime.isStopping || Task.isCancelled { return [] }
        logger.info(
            "worker started",
            [
                "topics": read.map(\.topic).joined(separator: ","),
                "max_in_flight": String(configuration.maxInFlight),
            ])
        // Told last of the worker's parts, once the others stopped.
        let stopped = ServiceGroup.Entry("worker stopped", ShutdownNotice { [logger] in logger.info("worker stopped") })
        return [stopped] + services(reading: read)
    }

    /// This worker as a lease's holder: its host and a random part (a restarted worker is another holder).
    let leaseHolder = "\(ProcessInfo.processInfo.hostName)-\(UUID().uuidString.prefix(8))"

    /// The worker's parts, in the order they start; they stop the other way round. The chores that only read
    /// the ledger start before the runtime and stop after its drain (readiness stays true to what is
    /// happening); the unclaimed credits publish with the runtime's producer, so they stop before it drains.
    private func services(reading read: [(topic: String, partitions: Int)]) -> [ServiceGroup.Entry] {
        var services: [ServiceGroup.Entry] = [
            .init("ledger health", PeriodicService(every: .seconds(5)) { await self.checkLedger() }),
            .init(
                "ledger pruning", PeriodicService(every: .seconds(3_600), after: .seconds(60)) { await self.prune() }),
            .init(
                "consumption gauge", PeriodicService(every: .seconds(30)) { await self.refreshConsumptionGauge() }),
            .init("Apple limit share", appleShare),
        ]
        // Started before the runtime, stopped after its drain; what waits then is left (StoreKit delivers the
        // transaction again, its job is answered from the ledger, and that grant's finish goes out then).
        if let finisher { services.append(.init("finish transactions", finisher)) }
        // Started before the runtime, stopped after it drained: the last jobs' spans go out too.
        if let traceExporter { services.append(.init("trace exporter", traceExporter)) }
        services += [
            .init(
                "consumer runtime",
                RuntimeService(
                    runtime: runtime, topics: read.map(\.topic),
                    partitionCounts: Dictionary(read.map { ($0.topic, $0.partitions) }) { first, _ in first }))
        ]
        if let sweep = NotificationSweeper.service(
            configuration, apps: apps, ledger: ledger, producer: producer, metrics: metrics, logger: logger,
            holder: leaseHolder, recentlyVerified: recentlyVerified)
        {
            services.append(.init("notification sweep", sweep))
        }
        if let checks = SubscriptionStatusChecks.service(
            configuration, apps: apps, ledger: ledger, producer: producer, metrics: metrics, logger: logger,
            holder: leaseHolder)
        {
            services.append(.init("subscription status checks", checks))
        }
        if let answers = ConsumptionPolicyAnswers.service(
            configuration, apps: apps, ledger: ledger, producer: producer, metrics: metrics, logger: logger,
            holder: leaseHolder)
        {
            services.append(.init("refund requests answered by policy", answers))
        }
        if let after = configuration.unclaimedAfter {
            let apps = apps
            let credits = UnclaimedCredits(
                ledger: ledger, producer: producer, resultsTopic: configuration.topics.results,
                eventSource: configuration.eventSource, metrics: metrics, logger: logger,
                appName: { apps.app(bundleID: $0)?.name ?? "other" })
            services.append(
                .init(
                    "unclaimed credits",
                    PeriodicService(every: UnclaimedCredits.interval(after: after)) { await credits.round() }))
        }
        return services
    }

    /// Every topic the worker reads or writes must exist before it takes a job: a missing results or DLQ
    /// topic on a broker without auto-creation would make every job retry its publish forever. A missing or
    /// forbidden topic stops start-up as a configuration error naming its key; a broker that does not answer
    /// yet is waited for. The notifications and consumption topics are read when they exist (the
    /// notifications topic must, with `notifications.listen` set). Returns the topics to read, jobs first,
    /// with their partition counts.
    private func checkTopics() async throws -> [(topic: String, partitions: Int)] {
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
            }
        }
        return read
    }

    /// The games whose parked jobs share a partition of `topics.retries` with another game's (fewer partitions than
    /// games): such games wait behind each other's backlog. Said at start, and kept in
    /// `receipt_worker_retries_shared_games` for an alert (0 when each game has a partition of its own).
    private func checkParkingLanes(partitions: Int) {
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
    private func checkLedgerMatchesGroup(_ read: [(topic: String, partitions: Int)]) async throws {
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
    private func partitionCount(_ topic: String) async throws -> Int? {
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

    /// Checks the ledger (every 5 s) for `/readyz` and `receipt_worker_ledger_up`, each check with a deadline
    /// of its own: a ledger hung behind a network partition must turn readiness false in seconds.
    private func checkLedger() async {
        do {
            let reachable: Bool
            do {
                let ledger = self.ledger
                try await withDeadline(.seconds(5), timeout: LedgerError(.unavailable, "no answer within 5000 ms")) {
                    try await ledger.ping()
                }
                reachable = true
            } catch {
                reachable = false
                logger.warning("ledger health check failed", ["error": "\(error)"])
            }
            ledgerReachable.store(reachable, ordering: .relaxed)
        }
    }

    /// The ledger's retention (a minute after start, then hourly): stored results past
    /// `ledger.results_retention_days`, handled notifications past `ledger.notifications_retention_days`, and
    /// what is settled past `ledger.settled_retention_days`, each in bounded batches. Every replica runs it;
    /// the PostgreSQL ledger lets one at a time do the work.
    private func prune() async {
        func cutoff(_ days: Int) -> Date? { days > 0 ? Date(timeIntervalSinceNow: -Double(days) * 86_400) : nil }
        do {
            do {
                if let before = cutoff(configuration.resultsRetentionDays) {
                    let deleted = try await ledger.pruneResults(decidedBefore: before)
                    if deleted > 0 {
                        logger.info(
                            "stored results pruned",
                            ["deleted": String(deleted), "decided_before": RFC3339.format(before)])
                    }
                }
                let deleted = try await ledger.prune(configuration.retention())
                for (kind, count) in deleted.sorted(by: { $0.key.rawValue < $1.key.rawValue }) where count > 0 {
                    logger.info(
                        "ledger rows past their retention pruned", ["kind": kind.rawValue, "deleted": String(count)])
                }
            } catch {
                logger.warning("pruning the ledger failed; trying again in an hour", ["error": "\(error)"])
            }
        }
    }

    /// Refreshes `receipt_worker_consumption_request_oldest_unanswered_seconds` (every 30 s). A ledger that
    /// does not answer leaves the last value: an alarm must not clear itself.
    private func refreshConsumptionGauge() async {
        guard let oldest = try? await ledger.oldestOpenConsumptionRequests() else { return }
        let now = Date()
        for app in apps.all {
            let age = oldest[app.scope].map { max(0, Int(now.timeIntervalSince($0))) } ?? 0
            metrics.oldestConsumptionRequest(app: app.name).set(age)
        }
    }

    /// Gauges read at scrape time from the state the worker already keeps.
    private func registerGauges() {
        let registry = metrics.registry
        registry.gauges(
            "receipt_worker_circuit_state",
            help: "1 for each Apple call's circuit breaker state (closed, open, half_open), by app and call."
        ) { [apps] in
            apps.all.flatMap { app in
                (app.breakers?.states ?? []).flatMap { call, current in
                    [CircuitBreaker.State.closed, .open, .halfOpen].map {
                        (["app": app.name, "call": call, "state": $0.rawValue], $0 == current ? 1 : 0)
                    }
                }
            }
        }
        registry.counters(
            "receipt_worker_chain_validations_total",
            help:
                "Certificate chains of signed data validated from their certificates (cache misses), by app: Apple's few chains once each; growth is a sender posting chains of its own."
        ) { [apps] in apps.all.map { (["app": $0.name], Double($0.signedData.chainValidations)) } }
        registry.gauges(
            "receipt_worker_ledger_up", help: "1 when the ledger answered its last health check (every 5 s)."
        ) { [weak self] in [(Labels.none, self?.ledgerReachable.load(ordering: .relaxed) == true ? 1 : 0)] }
        // The PostgreSQL ledger's pool (SQLite has none: no series).
        registry.gauges(
            "receipt_worker_ledger_pool_connections",
            help: "PostgreSQL ledger connections: allowed (ledger.pool_size), open, and in use by a call."
        ) { [ledger] in
            guard let stats = ledger.poolStats else { return [] }
            return [
                (["state": "allowed"], Double(stats.size)), (["state": "open"], Double(stats.open)),
                (["state": "in_use"], Double(stats.inUse)),
            ]
        }
        registry.gauges(
            "receipt_worker_ledger_pool_waiting", help: "Ledger calls waiting for a PostgreSQL connection of the pool."
        ) { [ledger] in ledger.poolStats.map { [(Labels.none, Double($0.waiting))] } ?? [] }
        registry.counters(
            "receipt_worker_ledger_pool_waits_total",
            help: "Ledger calls that found every PostgreSQL connection in use and waited for one."
        ) { [ledger] in ledger.poolStats.map { [(Labels.none, Double($0.waits))] } ?? [] }
        registry.counters(
            "receipt_worker_ledger_round_trips_total",
            help:
                "Statements sent to the PostgreSQL ledger, each a round trip (per job or notification: its cost there)."
        ) { [ledger] in ledger.poolStats.map { [(Labels.none, Double($0.roundTrips))] } ?? [] }
        let certificates = CertificateExpiry(configuration)
        registry.gauges(
            "receipt_worker_certificate_expiry_timestamp_seconds",
            help:
                "When the earliest certificate of each trusted CA file or root set expires (kafka_ca, ledger_ca, http_ca, apple_root, apple_receipt_root)."
        ) { certificates.expiries.map { (["certificate": $0.0], $0.1) } }
    }
}

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
