import CLinux
import Foundation
public import Kafka
public import Observability
import Synchronization
import Vocabulary

/// The runtime every flow runs on: one consumer-group member that takes messages from its topics, gives each
/// a slot of its group's budget, hands it to its topic's handler, publishes the outcome (events, a dead
/// letter), and commits each partition only behind messages whose outcome the broker acknowledged. It drains
/// on shutdown and on a revocation, reports stalled partitions, and knows nothing of Apple or of ledgers.
///
/// A message's life: taken (registered with its partition, so commits stay behind it) → waits for a slot of
/// its group → its handler's outcome → published and acknowledged → answered; the partition's offset is
/// committed once every earlier message is answered too. A message let go (a stop, a revocation) is never
/// committed past, so it is delivered again.
public final class ConsumerRuntime: Sendable {
    let configuration: RuntimeConfiguration
    let consumer: KafkaConsumer
    let producer: KafkaProducer
    let logger: Logger
    let metrics: RuntimeMetrics
    /// What players wait, from a message's send to its answer (``WaitTracker``).
    let waits: WaitTracker
    let book = PartitionBook()
    let scheduler: GroupScheduler
    let routeIndex: [String: Int]
    /// The topics read, their partition counts, the lags, what fails now: one value, one lock.
    let state = Mutex(RuntimeState())
    private let stopping = Atomic<Bool>(false)
    /// The producer's fatal error (its idempotent session broken for good, say after a broker's failover lost
    /// what it acknowledged): no record can be sent again, so ``run()`` ends with it and the process is restarted.
    private let producerFatal = Mutex<KafkaError?>(nil)
    /// Retries of the broker and of the handlers' services, and which of them keep failing now.
    let retries: ServiceRetries
    /// Told of the assignment whenever it changes.
    private let assignmentChanged: (@Sendable ([TopicPartition]) -> Void)?
    /// Called with the offsets about to be committed, before they are: a failure skips this round's commit.
    let recordOffsets: (@Sendable ([TopicPartition: Int64]) async throws -> Void)?

    public init(
        configuration: RuntimeConfiguration, consumer: KafkaConsumer, producer: KafkaProducer,
        registry: MetricsRegistry, logger: Logger,
        assignmentChanged: (@Sendable ([TopicPartition]) -> Void)? = nil,
        recordOffsets: (@Sendable ([TopicPartition: Int64]) async throws -> Void)? = nil
    ) {
        self.configuration = configuration
        self.consumer = consumer
        self.producer = producer
        self.logger = logger
        self.assignmentChanged = assignmentChanged
        self.recordOffsets = recordOffsets
        metrics = RuntimeMetrics(registry: registry, groups: configuration.groups)
        waits = WaitTracker(registry: registry)
        retries = ServiceRetries(retry: configuration.retry, metrics: metrics, logger: logger)
        scheduler = GroupScheduler(
            maxInFlight: configuration.maxInFlight, maxInFlightBytes: configuration.maxInFlightBytes,
            groups: configuration.groups)
        routeIndex = Dictionary(
            configuration.routes.enumerated().map { ($1.topic, $0) }, uniquingKeysWith: { first, _ in first })
        registerGauges(registry)
    }

    /// Why the runtime is not ready (empty when it is): stopping, no partition assigned, an operation failing
    /// again and again, a partition with lag that stands still past the stall timeout.
    public var problems: [String] {
        var problems: [String] = []
        if isStopping { problems.append("stopping") }
        if book.assigned.isEmpty { problems.append("no partition assigned") }
        for (operation, error) in retries.blocked.sorted(by: { $0.key < $1.key }) {
            problems.append("\(operation) failing: \(error)")
        }
        for stall in stalledPartitions() {
            problems.append(
                "partition \(stall.partition) stalled: lag \(stall.lag), no progress for \(stall.seconds) s")
        }
        return problems
    }

    /// The partitions assigned to this member now.
    public var assignedPartitions: [TopicPartition] { book.assigned }

    /// Asks ``run()`` to stop taking messages, drain, commit and return.
    public func shutdown() {
        stopping.store(true, ordering: .releasing)
        consumer.endEvents()
    }

    public var isStopping: Bool { stopping.load(ordering: .acquiring) }

    /// A fabricated fatal Kafka error, for tests of what follows one.
    package func raiseFatalErrorForTesting() { consumer.raiseFatalErrorForTesting("a test's fatal error") }

    /// The same, raised by the producer: seen at the next send.
    package func raiseProducerFatalErrorForTesting() {
        producer.raiseFatalErrorForTesting("a test's fatal producer error")
    }

    /// Stops the runtime after the producer failed for good: messages whose answers cannot be sent are let go
    /// (never committed past: read again after the restart), the rest drained and committed, then ``run()`` throws.
    func producerFailed(_ error: KafkaError) {
        let first = producerFatal.withLock { fatal in
            defer { if fatal == nil { fatal = error } }
            return fatal == nil
        }
        guard first else { return }
        logger.critical("the Kafka producer failed for good; the worker stops", ["error": "\(error)"])
        stopping.store(true, ordering: .releasing)
        consumer.endEvents()
    }

    /// Reads `topics` (each a route's, or the park topic) until ``shutdown()`` (then drains within the drain
    /// timeout and commits) or a fatal Kafka error (thrown). `partitionCounts`: what the caller found at
    /// start-up; the park topic's gives each lane its partition (without it, a full group pauses all of it).
    public func run(subscribing topics: [String], partitionCounts: [String: Int] = [:]) async throws {
        let read = topics.filter { routeIndex[$0] != nil || $0 == configuration.parking?.topic }
        state.withLock { $0.start(reading: Set(read), partitionCounts: partitionCounts) }
        try consumer.subscribe(topics: read)
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await self.commitLoop() }
            group.addTask { await self.startMessages() }
            group.addTask { await self.livenessLoop() }
            // This loop never waits for a slot: it keeps reading, so rebalances are served at once and the
            // poll thread never stalls (a stalled poll past max.poll.interval.ms would leave the group).
            for await event in consumer.events {
                if isStopping { break }
                switch event {
                case .message(let message):
                    take(message)
                case .partitionsAssigned(let partitions):
                    // The consumer already put them in the intake's state (paused or fetching).
                    book.assign(partitions)
                    assignmentChanged?(book.assigned)
                case .partitionsRevoked(let revocation):
                    let partitions = revocation.partitions
                    book.stopTaking(partitions)
                    leave(scheduler.remove(Set(partitions)))
                    await drain(partitions, commit: !revocation.isLost)
                    book.release(partitions)
                    state.withLock { $0.released(partitions) }
                    revocation.done()
                    assignmentChanged?(book.assigned)
                case .positions(let positions):
                    book.advance(positions)
                case .fatalError(let error):
                    // Ends every task of the group: the starting task waits in the scheduler, which only
                    // finishing wakes. Nothing more is committed; what was taken is read again by the next
                    // owner.
                    stopping.store(true, ordering: .releasing)
                    leave(scheduler.finish())
                    throw error
                }
                if isStopping { break }
            }
            stopping.store(true, ordering: .releasing)
            leave(scheduler.finish())
            await drain(book.assigned, commit: true)
            group.cancelAll()
        }
        await consumer.close()
        await producer.close()
        if let fatal = producerFatal.withLock({ $0 }) { throw fatal }
    }

    /// Registers a message with its partition and puts it in its group's line.
    private func take(_ message: InboundMessage) {
        let wasParked = message.topic == configuration.parking?.topic
        guard let route = wasParked ? parkedRoute(of: message) : routeIndex[message.topic] else { return }
        if !wasParked { configuration.routes[route].taken?.increment() }
        let generation = book.generation(of: message.topicPartition)
        // Not taken: read under an earlier assignment, or taken before (a second delivery).
        guard book.take(message.topicPartition, offset: message.offset, generation: generation) else { return }
        let handler = configuration.routes[route].handler
        let intake = handler.intake(of: message)
        let group = intake.group
        var item = GroupScheduler.Item(message: message, generation: generation, intake: intake, route: route)
        if var start = intake.waitStart {
            // A parked copy's wait began at its first send.
            if wasParked, let first = message.header(WaitStart.parkedHeader)?.stringValue.flatMap(Int64.init) {
                start.at = Date(timeIntervalSince1970: Double(first) / 1000)
            }
            item.waitStart = start
            waits.began(start, at: message.offset, in: message.topicPartition)
        }
        if !wasParked, configuration.routes[route].parks, let parking = activeParking, scheduler.isFull(group) {
            // Its group's room is full (its Apple lane paused, its circuit open): it waits on its lane's
            // partition of the park topic, not in memory, and this topic goes on for the other groups.
            item.parkTo = GroupScheduler.ParkTarget(topic: parking.topic, partition: parkPartition(of: group))
            scheduler.enqueueParked(item)
        } else {
            scheduler.enqueue(item)
        }
        adjustIntake()
    }

    /// The route a parked message came from: the topic of its `parked_from`, when that route parks; else the
    /// first route that parks (a message written there by hand is handled as that route's).
    private func parkedRoute(of message: InboundMessage) -> Int? {
        let parking = configuration.routes.indices.filter { configuration.routes[$0].parks }
        if let origin = ParkedOrigin(of: message), let route = routeIndex[origin.topic],
            configuration.routes[route].parks
        {
            return route
        }
        return parking.first
    }

    /// The park topic's partition of `group`'s lane (nil: the partitioner's choice, the lane or the count unknown).
    func parkPartition(of group: String) -> Int32? {
        guard let parking = configuration.parking, let lane = parking.lanes[group],
            let count = state.withLock({ $0.partitionCounts[parking.topic] }), count > 0
        else { return nil }
        return Int32(lane % count)
    }

    /// Marks messages that never started as left for their next delivery.
    private func leave(_ items: [GroupScheduler.Item]) {
        for item in items {
            endWait(item, answered: false)
            book.abandon(item.message.topicPartition, offset: item.message.offset, generation: item.generation)
        }
    }

    /// Starts each message that has a slot, as a task of its own; they run in a group of their own, cancelled
    /// at shutdown after the drain, and each when its partition is released first.
    private func startMessages() async {
        await withDiscardingTaskGroup { tasks in
            while let item = await scheduler.next() {
                guard !isStopping, book.holds(item.message.topicPartition, generation: item.generation) else {
                    leave([item])
                    scheduler.release(item)
                    continue
                }
                tasks.addTask {
                    // A receipt job's frames nest about 12 KB deep (docs/benchmarks.md, "The task allocator's
                    // slabs"): one slab for them all, not a malloc and a free for each large frame.
                    clinux_reserve_task_frames(16_256)
                    let message = item.message
                    await self.book.handling(
                        message.topicPartition, offset: message.offset, generation: item.generation
                    ) {
                        await self.handle(item)
                    }
                }
            }
        }
    }

    /// One message, from its handler to its outcome acknowledged (or left for its next delivery).
    private func handle(_ item: GroupScheduler.Item) async {
        let span = processSpan(item.message, beginsTrace: configuration.routes[item.route].beginsTraces)
        defer { span?.end() }
        // A recorded span is the task's current one: the handler's calls (Apple's, the ledger's) add theirs under it.
        guard let span, span.context.sampled else { return await handle(item, span: span) }
        await Span.$current.withValue(span) { await handle(item, span: span) }
    }

    private func handle(_ item: GroupScheduler.Item, span: Span?) async {
        let handler = configuration.routes[item.route].handler
        let context = RuntimeHandlingContext(
            message: item.message, intake: item.intake, retries: retries, isPermanent: { handler.isPermanent($0) },
            letGo: { [weak self] in self?.mustLetGo(item.message, generation: item.generation) ?? true }, span: span)
        let outcome: Disposition
        if let park = item.parkTo {
            let partition = item.message.topicPartition
            switch await self.park(
                item.message, to: park.topic, partition: park.partition, waitStartedAt: item.waitStart?.at, context)
            {
            case .parked:
                metrics.parked(item.group).increment()
                endWait(item, answered: false)  // it waits on the park topic now, counted there
                book.finish(partition, offset: item.message.offset, generation: item.generation)
                scheduler.release(item)
                return
            case .letGo:
                endWait(item, answered: false)
                book.abandon(partition, offset: item.message.offset, generation: item.generation)
                scheduler.release(item)
                return
            case .failed:
                break  // handled here, outside its group's slots
            }
        }
        outcome = await handled(item, handler: handler, context: context)
        let partition = item.message.topicPartition
        switch outcome {
        case .publish: span?.set("receipt_worker.outcome", .string("published"))
        case .deadLetter(let letter, _):
            span?.set("receipt_worker.outcome", .string("dead_letter"))
            span?.fail(letter.reason.rawValue)
        case .letGo: span?.set("receipt_worker.outcome", .string("let_go"))
        }
        if await deliver(outcome, context, group: item.group, handler: handler) {
            if let start = item.waitStart, start.flow == "job" {
                metrics.duration(app: start.app).observe(ContinuousClock.now - item.takenAt)
            }
            endWait(item, answered: true)
            book.finish(partition, offset: item.message.offset, generation: item.generation)
        } else {
            // Never committed past: read again after the restart, or by the partition's new owner.
            endWait(item, answered: false)
            book.abandon(partition, offset: item.message.offset, generation: item.generation)
        }
        scheduler.release(item)
    }

    /// The handler's outcome; a failure meets its ``FailureFate``: handled again after a backoff while it may heal,
    /// dead-lettered when it never will or its budget is spent, let go when the message must be.
    private func handled(_ item: GroupScheduler.Item, handler: any MessageHandler, context: any HandlingContext) async
        -> Disposition
    {
        var attempts = 0
        while true {
            attempts += 1
            do {
                return try await handler.handle(item.message, context: context)
            } catch {
                let fields = [
                    "error": "\(error)", "attempt": String(attempts), "topic": item.message.topic,
                    "partition": String(item.message.partition), "offset": String(item.message.offset),
                ]
                switch FailureFate.of(error, attempts: attempts, handler: handler, policy: configuration.retry) {
                case .letGo:
                    return .letGo
                case .deadLetter(let reason):
                    if reason == .retriesExhausted {
                        logger.error("a message kept failing; it is dead-lettered for a replay", fields)
                    }
                    return .deadLetter(DeadLetter(reason: reason, error: "\(error)", attempts: attempts))
                case .retry(let delay):
                    metrics.failure("handle").increment()
                    // Said at the first failure and every tenth: a message retried in its slot stays in sight.
                    if attempts == 1 || attempts % 10 == 0 {
                        logger.warning("a message's handling failed; it is handled again after a backoff", fields)
                    }
                    do {
                        try await context.sleep(for: delay)
                    } catch {
                        return .letGo
                    }
                }
            }
        }
    }

    /// The `process` span of a message (OpenTelemetry's messaging conventions), a child of the trace its
    /// `traceparent` carries, when the worker traces; the root of that trace when it `beginsTrace` there.
    private func processSpan(_ message: InboundMessage, beginsTrace: Bool) -> Span? {
        guard let tracer = configuration.tracer else { return nil }
        let parent = TraceContext(headers: message.headers)?.parent
        let name = "process \(message.topic)"
        if beginsTrace, let parent {
            return tracer.start(name, kind: .consumer, rootOf: parent.traceID, attributes: processAttributes(message))
        }
        return tracer.start(name, kind: .consumer, parent: parent, attributes: processAttributes(message))
    }

    private func processAttributes(_ message: InboundMessage) -> [(String, SpanValue)] {
        [
            ("messaging.system", .string("kafka")), ("messaging.operation.type", .string("process")),
            ("messaging.destination.name", .string(message.topic)),
            ("messaging.destination.partition.id", .string(String(message.partition))),
            ("messaging.kafka.offset", .int(message.offset)),
        ]
    }

    /// Registers the wait histograms of `flow` for these apps, so dashboards read 0 before the first message.
    public func prepareWaits(flow: String, apps: [String]) {
        for app in apps {
            _ = waits.histogram(flow: flow, app: app)
            if flow == "job" { _ = metrics.duration(app: app) }
        }
    }

    /// Ends a measured message's wait here: observed when it was answered.
    private func endWait(_ item: GroupScheduler.Item, answered: Bool) {
        guard let start = item.waitStart else { return }
        if answered {
            waits.answered(start, at: item.message.offset, in: item.message.topicPartition)
        } else {
            waits.ended(start, at: item.message.offset, in: item.message.topicPartition)
        }
    }

    /// Publishes an outcome; true once the broker acknowledged all of it (answered).
    private func deliver(
        _ outcome: Disposition, _ context: any HandlingContext, group: String, handler: any MessageHandler
    )
        async -> Bool
    {
        switch outcome {
        case .letGo:
            return false
        case .publish(let records):
            switch await publish(records, context) {
            case .published:
                if !records.isEmpty { handler.delivered(records) }
                return true
            case .letGo:
                return false
            case .refused(let error):
                // Left unanswered, it would hold its partition's commits for ever, and again after a restart: a
                // dead letter to replay once the topic takes the answer (the ledger gives the same answer again).
                let letter = DeadLetter(
                    reason: .retriesExhausted,
                    error:
                        "the broker refused the message's answer for good (\(error)); replay it once the topic takes it"
                )
                return await deadLetter(context.message, letter, context, group: group)
            }
        case .deadLetter(var letter, let records):
            switch await publish(records, context) {
            case .published: break
            case .letGo: return false
            case .refused(let error): letter.error += "; its answer was refused by the broker for good (\(error))"
            }
            return await deadLetter(context.message, letter, context, group: group)
        }
    }

    /// True when the message must be left for its next delivery: the runtime is stopping, or the message's
    /// partition was released (its new owner handles it again).
    func mustLetGo(_ message: InboundMessage, generation: UInt64) -> Bool {
        isStopping || !book.holds(message.topicPartition, generation: generation)
    }

}
