import Kafka
import Observability
import Synchronization

/// Retries of the worker's own services (the broker, the ledger) with backoff: their failures are never the
/// player's, so they are retried until they answer, the message must be let go, or they fail for good. Each
/// failure is counted by operation; an operation that failed three times in a row (or met a missing topic)
/// is reported as failing (readiness) until it succeeds again.
final class ServiceRetries: Sendable {
    private let retry: RetryPolicy
    private let metrics: RuntimeMetrics?
    private let logger: Logger
    /// Operations failing repeatedly now, with their last error.
    private let blockedOperations = Mutex<[String: String]>([:])

    init(retry: RetryPolicy, metrics: RuntimeMetrics?, logger: Logger) {
        self.retry = retry
        self.metrics = metrics
        self.logger = logger
    }

    /// Operations failing again and again now, with their last error.
    var blocked: [String: String] { blockedOperations.withLock { $0 } }

    /// Repeats `body` with backoff until it succeeds, the message must be let go (``LetGo``, checked after
    /// each failed attempt), or it fails for good (`isPermanent`, or a fatal Kafka client error: rethrown).
    func retrying<T: Sendable>(
        _ operation: String, stage: Histogram?, isPermanent: (any Error) -> Bool, letGo: () -> Bool,
        _ body: @Sendable () async throws -> T
    ) async throws -> T {
        var attempt = 0
        while true {
            attempt += 1
            let started = ContinuousClock.now
            do {
                let value = try await body()
                stage?.observe(ContinuousClock.now - started)
                blockedOperations.withLock { if $0[operation] != nil { $0[operation] = nil } }
                return value
            } catch {
                stage?.observe(ContinuousClock.now - started)
                if error is CancellationError { throw LetGo() }
                metrics?.failure(operation).increment()
                // A topic missing or forbidden, or a ledger that keeps refusing: the worker is not ready, and
                // says so (once per message, at error level) until the operation succeeds again.
                let missingTopic = (error as? KafkaError)?.isMissingTopic == true
                if attempt >= 3 || missingTopic {
                    blockedOperations.withLock { $0[operation] = "\(error)" }
                    if attempt == 3 || (attempt == 1 && missingTopic) {
                        logger.error("\(operation) keeps failing; not ready", ["error": "\(error)"])
                    }
                }
                // A fatal client error (librdkafka's instance unusable) is never healed by asking again.
                if isPermanent(error) || ConsumerRuntime.isFatal(error) {
                    logger.warning("\(operation) failed for good", ["error": "\(error)"])
                    throw error
                }
                if attempt == 1 || attempt % 10 == 0 {
                    logger.warning("\(operation) failed; retrying", ["error": "\(error)", "attempt": String(attempt)])
                }
                try await LetGo.sleep(
                    for: retry.delay(afterAttempts: min(attempt, 8), retryAfter: nil), unless: letGo)
                if letGo() { throw LetGo() }
            }
        }
    }
}
