import AppleVerification
import Foundation
public import Lifecycle
package import Messaging
package import Observability
package import Vocabulary

/// Finish Transaction (App Store Server API 1.20), with `apple.finish_transactions=true`: once a grant's event is
/// acknowledged by the broker, Apple is told the transaction is finished, so StoreKit stops delivering it to the
/// app again. A service of the worker with a queue of its own, its own rate lane (`finish_transaction`), and a
/// bounded number of calls per transaction: it never holds a job, and its failure never changes a decision (the
/// grant stands; the app may see the transaction again and its job is answered from the ledger). Counted in
/// `receipt_worker_finish_transactions_total{app,outcome}`.
public final class TransactionFinisher: Service {
    package struct Request: Sendable {
        let app: String
        let transactionID: String
        let environment: AppleEnvironment
    }

    /// Calls per transaction, the first included.
    package static let maximumCalls = 3
    /// Transactions waiting; past it a grant's finish is dropped (and counted): the queue never grows without end.
    package static let capacity = 10_000
    /// Calls in flight together.
    package static let concurrency = 8
    package static let outcomes = ["finished", "not_found", "refused", "failed", "dropped"]

    private let apis: [String: AppStoreServerAPIClient]
    private let bundles: [String: String]
    private let retry: RetryPolicy
    private let metrics: WorkerMetrics
    private let logger: Logger
    private let stream: AsyncStream<Request>
    private let continuation: AsyncStream<Request>.Continuation

    /// `apps`: the apps that have an App Store Server API key, by name; their grants' transactions are finished.
    package init(apps: [AppleApp], retry: RetryPolicy, metrics: WorkerMetrics, logger: Logger) {
        let withKey = apps.compactMap { app in app.api.map { (app, $0) } }
        apis = Dictionary(withKey.map { ($0.0.name, $0.1) }) { first, _ in first }
        bundles = Dictionary(withKey.map { ($0.0.bundleID, $0.0.name) }) { first, _ in first }
        self.retry = retry
        self.metrics = metrics
        self.logger = logger
        (stream, continuation) = AsyncStream.makeStream(
            of: Request.self, bufferingPolicy: .bufferingOldest(Self.capacity))
        for app in apis.keys { for outcome in Self.outcomes { _ = metrics.finishedTransaction(app: app, outcome) } }
    }

    /// The grants among `records` (acknowledged by the broker), to finish. Never blocks.
    package func granted(_ records: [OutboundRecord], defaultApp: String) {
        for record in records
        where record.headers.contains(where: { $0.name == "ce_type" && $0.stringValue == EventType.granted.rawValue }) {
            // Production and Sandbox only: Xcode's and local testing's transactions are no server's to finish.
            guard let fields = Self.fields(record.value), let transactionID = fields.transactionID,
                let environment = fields.environment, environment == .production || environment == .sandbox
            else { continue }
            let app = fields.bundleID.flatMap { bundles[$0] } ?? defaultApp
            guard apis[app] != nil else { continue }
            if case .dropped = continuation.yield(
                Request(app: app, transactionID: transactionID, environment: environment))
            {
                metrics.finishedTransaction(app: app, "dropped").increment()
            }
        }
    }

    /// A grant event's transaction, original transaction, environment and app (the worker's own JSON; a field
    /// written `null` is nil). Also read by support's rerun of a credit Apple no longer vouches for.
    package static func fields(_ value: [UInt8]) -> (
        transactionID: String?, originalTransactionID: String?, environment: AppleEnvironment?, bundleID: String?
    )? {
        guard let members = JSONObjectScanner.members(value) else { return nil }
        func string(_ key: String) -> String? {
            guard let member = members.first(where: { $0.key == key }), member.raw.first == UInt8(ascii: "\"")
            else { return nil }
            return JSONStringToken.text(member.raw)
        }
        return (
            string("transaction_id"), string("original_transaction_id"),
            string("environment").map(AppleEnvironment.init(rawValue:)), string("bundle_id")
        )
    }

    public func run() async {
        let shutdown = GracefulShutdown.current
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [continuation] in
                // Stopping: what waits is left (the app sees the transaction again; its job is answered from the ledger).
                await shutdown.wait()
                continuation.finish()
            }
            await withTaskGroup(of: Void.self) { calls in
                var running = 0
                for await request in stream {
                    if shutdown.isTriggered { break }
                    if running == Self.concurrency {
                        await calls.next()
                        running -= 1
                    }
                    running += 1
                    calls.addTask { await self.finish(request) }
                }
                calls.cancelAll()
            }
            group.cancelAll()
        }
    }

    /// One transaction: at most ``maximumCalls`` calls, transient failures waited out as a job's are.
    package func finish(_ request: Request) async {
        guard let api = apis[request.app] else { return }
        var rounds = retry
        rounds.maxAttempts = Self.maximumCalls
        let outcome: String
        do {
            switch try await rounds.retryingApple({
                try await api.finishTransaction(
                    id: request.transactionID, environment: request.environment, attempts: &$0)
            }) {
            case .done: outcome = "finished"
            case .notFound: outcome = "not_found"
            case .refused: outcome = "refused"
            }
        } catch {
            // Apple down past the rounds, or the worker stopping (the wait cancelled).
            outcome = "failed"
            logger.debug(
                "finish transaction failed; the grant stands",
                ["app": request.app, "transaction_id": request.transactionID, "error": "\(error)"])
        }
        metrics.finishedTransaction(app: request.app, outcome).increment()
    }
}

extension WorkerMetrics {
    package func finishedTransaction(app: String, _ outcome: String) -> Counter {
        registry.counter(
            "receipt_worker_finish_transactions_total",
            help:
                "Finish Transaction calls after a grant (apple.finish_transactions), by app and outcome (finished, not_found, refused, failed, dropped).",
            labels: ["app": app, "outcome": outcome])
    }
}
