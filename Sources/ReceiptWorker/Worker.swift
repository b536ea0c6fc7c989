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
    let apple: AppleVerifier
    let breaker = CircuitBreaker()
    let state = WorkerState()
    let slots: JobSlots
    private let stopping = Atomic<Bool>(false)
    private let paused = Atomic<Bool>(false)

    public init(
        configuration: WorkerConfiguration, consumer: KafkaConsumer, producer: KafkaProducer, ledger: any Ledger,
        apple: AppleVerifier, logger: Logger
    ) {
        self.configuration = configuration
        self.consumer = consumer
        self.producer = producer
        self.ledger = ledger
        self.apple = apple
        self.logger = logger
        self.slots = JobSlots(configuration.maxInFlight)
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
        try consumer.subscribe(topics: [configuration.topics.jobs])
        logger.info("worker started", ["topic": configuration.topics.jobs, "max_in_flight": String(configuration.maxInFlight)])
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await self.commitLoop() }
            for await event in consumer.events {
                if isStopping { break }
                switch event {
                case .message(let message):
                    adjustIntake()
                    await slots.acquire()  // the budget holds even for messages fetched before a pause
                    guard state.start(message.topicPartition, offset: message.offset) else {
                        slots.release()
                        continue
                    }
                    group.addTask {
                        await self.handle(message)
                        self.state.finish(message.topicPartition, offset: message.offset)
                        self.slots.release()
                    }
                case .partitionsAssigned(let partitions):
                    state.assign(partitions)
                    if paused.load(ordering: .relaxed) { try? consumer.pause(partitions) }
                case .partitionsRevoked(let revocation):
                    await drain(revocation.partitions, commit: !revocation.isLost)
                    state.release(revocation.partitions)
                    revocation.done()
                case .fatalError(let error):
                    throw error
                }
                if isStopping { break }
            }
            stopping.store(true, ordering: .releasing)
            let all = state.assigned
            await drain(all, commit: true)
            group.cancelAll()
        }
        await consumer.close()
        await producer.close()
        logger.info("worker stopped")
    }

    /// Pauses intake when the in-flight budget is spent or Apple fails broadly; resumes at half the budget.
    func adjustIntake() {
        let inFlight = state.inFlight
        let breakerOpen = breaker.state == .open
        let shouldPause = inFlight >= configuration.maxInFlight || breakerOpen
        let shouldResume = inFlight <= configuration.maxInFlight / 2 && !breakerOpen
        if shouldPause, !paused.exchange(true, ordering: .acquiringAndReleasing) {
            try? consumer.pause(state.assigned)
            logger.debug("intake paused", ["in_flight": String(inFlight), "circuit": breaker.state.rawValue])
        } else if shouldResume, paused.exchange(false, ordering: .acquiringAndReleasing) {
            try? consumer.resume(state.assigned)
            logger.debug("intake resumed", ["in_flight": String(inFlight)])
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

    private func commit(_ offsets: [KafkaTopicPartition: Int64]) async {
        guard !offsets.isEmpty else { return }
        do {
            try await consumer.commit(offsets)
            state.markCommitted(offsets)
        } catch {
            logger.warning("commit failed; it will be retried", ["error": "\(error)"])
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
