import AppleVerification
import Events
package import Foundation
import Lifecycle
package import Messaging
package import Observability
import Vocabulary

/// What the receiver does with one notification: verify it with the app it names, produce it to the
/// notifications topic as received, and answer once the broker acknowledged it.
public struct NotificationIntake: Sendable {
    package let apps: AppleApps
    package let producer: any MessageSender
    package let topic: String
    package let metrics: WorkerMetrics
    package let logger: Logger
    /// Where a record the broker took is remembered for this process's processor (nil: a receiver alone).
    package var recentlyVerified: RecentlyVerifiedNotifications? = nil
    /// Told whether each record reached the broker (the receiver role's readiness).
    package var deliveries: DeliveryHealth? = nil

    package init(
        apps: AppleApps, producer: any MessageSender, topic: String, metrics: WorkerMetrics, logger: Logger,
        recentlyVerified: RecentlyVerifiedNotifications? = nil, deliveries: DeliveryHealth? = nil
    ) {
        self.apps = apps
        self.producer = producer
        self.topic = topic
        self.metrics = metrics
        self.logger = logger
        self.recentlyVerified = recentlyVerified
        self.deliveries = deliveries
    }

    /// The broker did not acknowledge a record within the time Apple waits for its answer.
    struct Unacknowledged: Error, CustomStringConvertible {
        let deadline: Duration
        var description: String { "the broker did not acknowledge within \(deadline.milliseconds) ms" }
    }

    /// One notification at the receiver: the HTTP status and a short text for it.
    package func receive(body: Data, deadline: Duration) async -> (Int, String) {
        switch await AppleNotification.verifySettled(body: body, apps: apps) {
        case .unavailable(let error):
            metrics.notificationReceived(type: nil, outcome: "unavailable").increment()
            logger.warning(
                "notification not verified yet: its certificates' revocation status is not known; Apple will send it"
                    + " again", ["error": error.reason])
            return (503, "not verified yet; send it again")
        case .rejected(let reason):
            let counter = metrics.notificationReceived(type: nil, outcome: "rejected")
            counter.increment()
            // Anyone can post here: the first refusal and every hundredth are logged, not a flood of them.
            if counter.value % 100 == 1 {
                logger.warning(
                    "notification refused: it does not verify",
                    ["error": reason, "refused_so_far": String(counter.value)])
            }
            return (400, "does not verify")
        case .environmentNotAllowed(let type):
            // Genuine, but Sandbox where sandbox is off: accepted (Apple must stop sending it), not kept.
            metrics.notificationReceived(type: type, outcome: "sandbox_dropped").increment()
            return (200, "sandbox notifications are not accepted here; dropped")
        case .verified(let notification):
            let record = OutboundMessage(
                topic: topic, key: Array(notification.key.utf8), value: Array(body),
                headers: notification.recordHeaders())
            // Remembered before the broker answers: the processor may read the record before the receiver
            // hears the acknowledgement. One that is never stored leaves with the oldest.
            recentlyVerified?.remember(value: record.value, notification)
            let producer = self.producer
            do {
                try await withDeadline(deadline, timeout: Unacknowledged(deadline: deadline)) {
                    _ = try await producer.send(record)
                }
            } catch {
                deliveries?.failed("\(error)")
                metrics.notificationReceived(type: notification.type, outcome: "unavailable").increment()
                logger.error(
                    "notification not stored: the broker did not take it; Apple will send it again",
                    ["notification_id": notification.id, "error": "\(error)"])
                return (503, "not stored; send it again")
            }
            deliveries?.succeeded()
            metrics.notificationReceived(type: notification.type, outcome: "accepted").increment()
            logger.info(
                "notification received",
                [
                    "notification_id": notification.id, "type": notification.type.rawValue,
                    "subtype": notification.subtype?.rawValue ?? "",
                ])
            return (200, "ok")
        }
    }
}
