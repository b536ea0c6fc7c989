package import Foundation
package import LedgerDomain
import Lifecycle
package import Messaging
package import Observability
import Synchronization
import Vocabulary

/// Refund (consumption) requests answered by an app's policy when nobody else does (`consumption.policy`): a
/// grant service down, a game that never built its answer. Every `consumption.policy_interval_ms`, the holder of the app's lease finds the
/// requests no one answered whose deadline is within `consumption.margin_ms`, and puts the policy's answer on the
/// consumption topic as a grant service would (`answered_by: policy`). The consumption flow sends it as any answer
/// (delivery status from the ledger), unless a grant service's answer came first: a policy never answers over one.
package struct ConsumptionPolicyAnswers: Sendable {
    package let apps: [(app: AppleApp, policy: ConsumptionPolicy)]
    package let ledger: any ConsumptionRequestStore & LeaseStore
    package let produce: @Sendable (OutboundMessage) async throws -> Void
    package let topic: String
    package let metrics: WorkerMetrics
    package let logger: Logger
    package let holder: String
    /// What this replica put on the topic (not put there twice while the flow sends it).
    package let sent = Sent()

    package init(
        apps: [(app: AppleApp, policy: ConsumptionPolicy)], ledger: any ConsumptionRequestStore & LeaseStore,
        produce: @escaping @Sendable (OutboundMessage) async throws -> Void, topic: String, metrics: WorkerMetrics,
        logger: Logger, holder: String
    ) {
        self.apps = apps
        self.ledger = ledger
        self.produce = produce
        self.topic = topic
        self.metrics = metrics
        self.logger = logger
        self.holder = holder
    }

    package final class Sent: Sendable {
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
    package static let header = RecordHeader.answeredBy

    /// The answer a grant service would send, with the policy's refund preference (nil for `none`).
    package static func answer(
        _ request: OpenConsumptionRequest, app: AppleApp, policy: ConsumptionPolicy, topic: String
    ) -> OutboundMessage? {
        guard let preference = policy.answer.refundPreference else { return nil }
        let body =
            "{\"transaction_id\":\(JSONString.quote(request.transactionID)),\"customer_consented\":true,"
            + "\"sample_content_provided\":false,\"refund_preference\":\"\(preference)\","
            + "\"bundle_id\":\(JSONString.quote(app.bundleID))}"
        return OutboundMessage(
            topic: topic, key: Array(request.transactionID.utf8), value: Array(body.utf8),
            headers: [MessageHeader(name: header, string: RecordHeader.byPolicy)])
    }

    package func round(every interval: Duration, now: Date = Date()) async {
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
                // By its deadline too: a request opened again (the customer asked again) is another to answer.
                let key =
                    "\(app.name)/\(request.environment.rawValue)/\(request.transactionID)"
                    + "/\(EpochMilliseconds.of(request.respondBy))"
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
                            "respond_by": RFC3339.format(request.respondBy),
                        ])
                } catch {
                    logger.warning("the broker did not take a policy's answer", ["app": app.name, "error": "\(error)"])
                }
            }
        }
    }
}
