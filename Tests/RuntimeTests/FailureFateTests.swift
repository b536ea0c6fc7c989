import Messaging
import Synchronization
import Testing
import Vocabulary

@testable import Runtime

/// The runtime's contract with every handler: what becomes of a message whose handling threw. Only what can never
/// succeed is dead-lettered with the handler's reason; anything else is handled again, and past its budget goes to
/// the dead-letter topic as `retries_exhausted`, the reason the runbook says to replay.
@Suite("What a handler's error becomes: (error kind → fate)")
struct FailureFateTests {
    struct Transient: Error {}
    struct ValueRefused: Error {}

    /// Permanent: `ValueRefused` (as a value the ledger refuses for good); dead letters say `consumption_not_sent`.
    struct Handler: MessageHandler {
        func intake(of message: InboundMessage) -> Intake { Intake(group: "g") }
        func isPermanent(_ error: any Error) -> Bool { error is ValueRefused }
        var deadLetterReason: DeadLetterReason { .consumptionNotSent }
        func handle(_ message: InboundMessage, context: any HandlingContext) async throws -> Disposition {
            .publish([])
        }
    }

    static var policy: RetryPolicy {
        var policy = RetryPolicy()
        policy.maxAttempts = 4
        policy.initialBackoff = .milliseconds(100)
        policy.maxBackoff = .seconds(1)
        return policy
    }

    @Test(
        "each error kind, at each attempt",
        arguments: [
            (LetGo() as any Error, 1, FailureFate.letGo),
            (CancellationError(), 3, .letGo),
            (LetGo(), 4, .letGo),  // let go even with its budget spent: the next delivery decides
            (ValueRefused(), 1, .deadLetter(.consumptionNotSent)),
            (ValueRefused(), 4, .deadLetter(.consumptionNotSent)),
            (Transient(), 1, .retry(after: .milliseconds(100))),
            (Transient(), 2, .retry(after: .milliseconds(200))),
            (Transient(), 3, .retry(after: .milliseconds(400))),
            (Transient(), 4, .deadLetter(.retriesExhausted)),
            (Transient(), 99, .deadLetter(.retriesExhausted)),
        ])
    func fate(error: any Error, attempts: Int, expected: FailureFate) {
        // The longest backoff the policy draws (random 1): the ceiling, doubling from the first.
        let fate = FailureFate.of(error, attempts: attempts, handler: Handler(), policy: Self.policy, random: 1)
        #expect(fate == expected, "\(type(of: error)) at attempt \(attempts)")
    }

    @Test("a transient error is never dead-lettered as malformed, whatever the handler's own reason")
    func neverMalformed() {
        for attempts in 1...20 {
            let fate = FailureFate.of(Transient(), attempts: attempts, handler: Handler(), policy: Self.policy)
            #expect(fate != .deadLetter(.malformedJob) && fate != .deadLetter(.consumptionNotSent))
        }
    }

    @Test("a backoff never exceeds retry.max_backoff_ms, however many attempts")
    func backoffBounded() {
        var policy = Self.policy
        policy.maxAttempts = 1_000
        for attempts in [1, 10, 31, 62, 999] {
            guard
                case .retry(let after) = FailureFate.of(
                    Transient(), attempts: attempts, handler: Handler(), policy: policy, random: 1)
            else {
                Issue.record("attempt \(attempts) was not retried")
                continue
            }
            #expect(after <= policy.maxBackoff)
        }
    }
}

@Suite("A backoff let go")
struct LetGoSleepTests {
    @Test("a backoff of 30 s ends within a quarter second of its message being let go (its partition revoked)")
    func wakesWhenLetGo() async throws {
        let letGo = Atomic<Bool>(false)
        let started = ContinuousClock.now
        let waiting = Task { try await LetGo.sleep(for: .seconds(30), unless: { letGo.load(ordering: .relaxed) }) }
        try await Task.sleep(for: .milliseconds(200))
        letGo.store(true, ordering: .relaxed)
        await #expect(throws: LetGo.self) { try await waiting.value }
        #expect(ContinuousClock.now - started < .seconds(5), "slept \(ContinuousClock.now - started)")
        // Not let go: the whole delay, then nothing thrown.
        let short = ContinuousClock.now
        try await LetGo.sleep(for: .milliseconds(600), unless: { false })
        #expect(ContinuousClock.now - short >= .milliseconds(600))
    }
}
