import Lifecycle
import Foundation
package import Messaging
package import LedgerDomain
package import Observability
import Events

/// Credits purchases Apple reported that no job claimed in time (docs/contract.md section 9, "Purchases no job
/// claimed"): every replica, every ``interval(after:)`` (a ``PeriodicService`` of the worker), has the ledger
/// credit those due (each once, whichever replica does it) and publishes each credit's `receipt.unclaimed` until
/// the broker acknowledges it. A crash between the credit and its acknowledgement publishes it again, with the
/// same event id.
package struct UnclaimedCredits: Sendable {
    package let ledger: any UnclaimedPurchaseStore
    package let producer: any MessageSender
    package let resultsTopic: String
    package let eventSource: String
    package let metrics: WorkerMetrics
    package let logger: Logger
    /// The app name of a credit's `bundle_id`, for the money it adds (`other` for one no app has).
    package var appName: @Sendable (String?) -> String = { _ in "default" }

    package init(
        ledger: any UnclaimedPurchaseStore, producer: any MessageSender, resultsTopic: String, eventSource: String,
        metrics: WorkerMetrics, logger: Logger, appName: @escaping @Sendable (String?) -> String = { _ in "default" }
    ) {
        self.ledger = ledger
        self.producer = producer
        self.resultsTopic = resultsTopic
        self.eventSource = eventSource
        self.metrics = metrics
        self.logger = logger
        self.appName = appName
    }

    /// What a credit adds to revenue, by its app.
    private func countMoney(_ event: StoredEvent) {
        guard let money = try? JSONDecoder().decode(EventMoney.self, from: Data(event.json)) else { return }
        metrics.money.count(money, app: appName(money.bundleID))
    }

    /// Credits per round: a backlog (a backfill of a week) goes out over several rounds.
    package static let batch = 500

    /// How often to look: a quarter of `notifications.unclaimed_after_ms`, between 1 s and 1 min.
    package static func interval(after: Duration) -> Duration { min(max(after / 4, .seconds(1)), .seconds(60)) }

    /// One round: credit what is due, publish what is not yet published. Failures wait for the next round.
    package func round() async {
        var published: [String] = []
        do {
            let events = try await ledger.creditUnclaimed(now: Date(), limit: Self.batch)
            for event in events {
                // Stopping: the rest is published by the next round, here or on another replica (the group's
                // stop waits for this round, and the runtime's drain waits behind it).
                if GracefulShutdown.current.isTriggered { break }
                let record = event.record(topic: resultsTopic, source: eventSource)
                // A trace of its own: no job or request caused it now.
                let trace = MessageHeader(name: "traceparent", string: TraceContext.fresh().traceparent)
                _ = try await producer.send(
                    OutboundMessage(
                        topic: record.topic, key: Array(record.key.utf8), value: record.value,
                        headers: record.headers + [trace]))
                published.append(event.eventID)
                countMoney(event)
                logger.info("unclaimed purchase credited", ["event_id": event.eventID, "order_id": event.key])
            }
            try await ledger.markCreditsPublished(eventIDs: published)
            metrics.unclaimedCredited.increment(by: published.count)
            metrics.unclaimedWaiting.set(try await ledger.waitingUnclaimed())
        } catch {
            // What the broker acknowledged before the failure is not published again.
            if !published.isEmpty { try? await ledger.markCreditsPublished(eventIDs: published) }
            logger.warning("crediting unclaimed purchases failed; trying again", ["error": "\(error)"])
        }
    }
}
