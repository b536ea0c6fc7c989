import Lifecycle
import Foundation
import Messaging
import LedgerDomain
import Observability
import Runtime
import Synchronization
import Vocabulary

/// Refund (consumption) requests answered by an app's policy when nobody else does (`consumption.policy`): a
/// grant service down, a game that never built its answer. Every minute, the holder of the app's lease finds the
/// requests no one answered whose deadline is within `consumption.margin_ms`, and puts the policy's answer on the
/// consumption topic as a grant service would (`answered_by: policy`). The consumption flow sends it as any answer
/// (delivery status from the ledger), unless a grant service's answer came first: a policy never answers over one.
struct ConsumptionPolicyAnswers: Sendable {
    let apps: [(app: AppleApp, policy: WorkerConfiguration.ConsumptionPolicy)]
    let ledger: any ConsumptionRequestStore & LeaseStore
    let produce: @Sendable (OutboundMessage) async throws -> Void
    let topic: String
    let metrics: WorkerMetrics
    let logger: Logger
    let holder: String
    /// What this replica put on the topic (not put there twice while the flow sends it).
    let sent = Sent()

    final class Sent: Sendable {
        private let keys = Mutex<Set<String>>([])
        func contains(_ key: String) -> Bool { keys.withLock { $0.contains(key) } }
        func insert(_ key: String) {
            keys.withLock { keys in
                if keys.count > 100_000 { keys.removeAll() }
                keys.insert(key)
            }
        }
    }

    /// The header that says an answer is the policy's, not a grant service's.
    static let header = "answered_by"

    /// The answer a grant service would send, with the policy's refund preference (nil for `none`).
    static func answer(
        _ request: OpenConsumptionRequest, app: AppleApp, policy: WorkerConfiguration.ConsumptionPolicy, topic: String
    ) -> OutboundMessage? {
        guard let preference = policy.answer.refundPreference else { return nil }
        let body =
            "{\"transaction_id\":\(JSONString.quote(request.transactionID)),\"customer_consented\":true,"
            + "\"sample_content_provided\":false,\"refund_preference\":\"\(preference)\","
            + "\"bundle_id\":\(JSONString.quote(app.bundleID))}"
        return OutboundMessage(
            topic: topic, key: Array(request.transactionID.utf8), value: Array(body.utf8),
            headers: [MessageHeader(name: header, string: "policy")])
    }

    func round(every interval: Duration, now: Date = Date()) async {
        for (app, policy) in apps where policy.answer != .none {
            let lease = "consumption-policy/\(app.name)"
            guard (try? await ledger.acquireLease(lease, holder: holder, roundsEvery: interval, now: now)) != nil
            else { continue }
            let due: [OpenConsumptionRequest]
            do {
                due = try await ledger.dueConsumptionRequests(
                    app: app.scope, dueBy: now.addingTimeInterval(policy.margin.inSeconds), now: now, limit: 500)
            } catch {
                logger.warning("refund requests due cannot be read", ["app": app.name, "error": "\(error)"])
                continue
            }
            for request in due {
                let key = "\(app.name)/\(request.environment.rawValue)/\(request.transactionID)"
                guard !sent.contains(key), let message = Self.answer(request, app: app, policy: policy, topic: topic)
                else { continue }
                do {
                    try await produce(message)
                    sent.insert(key)
                    metrics.consumptionPolicyAnswer(app: app.name, answer: policy.answer.rawValue).increment()
                    logger.info(
                        "refund request answered by policy: no grant service answered",
                        [
                            "app": app.name, "transaction_id": request.transactionID,
                            "answer": policy.answer.rawValue,
                            "respond_by": Timestamp.rfc3339(request.respondBy),
                        ])
                } catch {
                    logger.warning("the broker did not take a policy's answer", ["app": app.name, "error": "\(error)"])
                }
            }
        }
    }

    /// The answers of a worker (nil: no app has a policy that answers).
    static func service(
        _ configuration: WorkerConfiguration, apps: AppleApps, ledger: any Ledger, producer: any MessageSender,
        metrics: WorkerMetrics, logger: Logger, holder: String
    ) -> PeriodicService? {
        let answering = zip(apps.all, configuration.allApps).filter {
            $0.1.consumptionPolicy.answer != .none && $0.0.consumption != nil
        }.map { (app: $0.0, policy: $0.1.consumptionPolicy) }
        guard !answering.isEmpty else { return nil }
        let answers = ConsumptionPolicyAnswers(
            apps: answering, ledger: ledger, produce: { _ = try await producer.send($0) },
            topic: configuration.topics.consumption, metrics: metrics, logger: logger, holder: holder)
        let every = configuration.consumptionPolicyInterval
        return PeriodicService(every: every, after: min(every, .seconds(5))) { await answers.round(every: every) }
    }
}
