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
    let ledgerReachable = Atomic<Bool>(false)
    /// The topics the worker would read that did not exist at start (`topics.retries`, `.notifications`,
    /// `.consumption`), and when one found since asks for the restart that reads it (``liveness``,
    /// ``lookForUnreadTopics()``).
    let unreadTopics = Mutex<[(key: String, topic: String, restartAt: ContinuousClock.Instant?)]>([])
    /// Rounds of ``lookForUnreadTopics()`` so far.
    let unreadTopicRounds = Atomic<Int>(0)
    /// Triggered by ``shutdown()``: the same as the graceful shutdown of the group running the worker.
    private let stop = GracefulShutdown()
    /// Each replica's share of Apple's limits: its share of the jobs topic's partitions.
    let appleShare: AppleLimitShare
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
    /// The tracer of the messages and the chores' rounds, when the worker traces.
    private let tracer: Tracer?

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
                groups: [Self.notificationsGroup], beginsTraces: true),
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
        tracer = traceExporter?.tracer(sampleRatio: configuration.tracing.sampleRatio)
        runtimeConfiguration.tracer = tracer
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

    /// Why the worker must be restarted (empty when it need not), for `/healthz`: the runtime wedged, or a topic it
    /// reads created since it started (a receiver that answers Apple 200 meanwhile puts notifications there that no
    /// worker would read).
    public var liveness: [String] {
        let now = ContinuousClock.now
        return runtime.wedged
            + unreadTopics.withLock { $0 }.filter { $0.restartAt.map { $0 <= now } ?? false }.map {
                "\($0.key) \($0.topic) exists now and is not read: restart the worker to read it"
            }
    }

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

    /// The same, raised by the producer that publishes the answers.
    package func raiseProducerFatalErrorForTesting() { runtime.raiseProducerFatalErrorForTesting() }

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
            chore(
                "ledger pruning", PeriodicService(every: .seconds(3_600), after: .seconds(60)) { await self.prune() }),
            .init(
                "consumption gauge", PeriodicService(every: .seconds(30)) { await self.refreshConsumptionGauge() }),
            .init("Apple limit share", appleShare),
        ]
        if !unreadTopics.withLock({ $0.isEmpty }) {
            services.append(
                .init("unread topics", PeriodicService(every: .seconds(15)) { await self.lookForUnreadTopics() }))
        }
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
            services.append(chore("notification sweep", sweep))
        }
        if let checks = SubscriptionStatusChecks.service(
            configuration, apps: apps, ledger: ledger, producer: producer, metrics: metrics, logger: logger,
            holder: leaseHolder)
        {
            services.append(chore("subscription status checks", checks))
        }
        if let answers = ConsumptionPolicyAnswers.service(
            configuration, apps: apps, ledger: ledger, producer: producer, metrics: metrics, logger: logger,
            holder: leaseHolder)
        {
            services.append(chore("refund requests answered by policy", answers))
        }
        if let after = configuration.unclaimedAfter {
            let apps = apps
            let credits = UnclaimedCredits(
                ledger: ledger, producer: producer, resultsTopic: configuration.topics.results,
                eventSource: configuration.eventSource, metrics: metrics, logger: logger,
                appName: { apps.app(bundleID: $0)?.name ?? "other" })
            services.append(
                chore(
                    "unclaimed credits",
                    PeriodicService(every: UnclaimedCredits.interval(after: after)) { await credits.round() }))
        }
        return services
    }

    /// A chore of the worker: each round a recorded trace of its own when the worker traces, named as the service.
    private func chore(_ name: String, _ service: PeriodicService) -> ServiceGroup.Entry {
        .init(name, service.traced(name, by: tracer))
    }

}
