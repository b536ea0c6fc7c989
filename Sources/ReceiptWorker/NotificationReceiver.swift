import Lifecycle
import AppleVerification
import Foundation
import HTTPServerKit
import Messaging
import Observability
import Runtime

/// Serves `notifications.listen`: `POST /notifications/apple`, where Apple sends App Store Server
/// Notifications V2. A notification is verified (nested data too), produced to `topics.notifications` as
/// received, and answered 200 only once the broker acknowledged it: Apple sends again whatever is not
/// answered 200, so nothing is lost while the broker is away (503) and nothing forged gets in (400).
public final class NotificationReceiver: Service {
    private let server: MicroHTTPServer
    public var port: UInt16 { server.port }

    /// Apple's notifications are a few kilobytes; a megabyte is no notification.
    static let maximumBodyBytes = 256 * 1024
    /// Apple waits for an answer only so long; a broker that does not acknowledge within this is unavailable.
    public static let defaultProduceDeadline = Duration.seconds(5)

    public convenience init(listen: ListenAddress, worker: Worker) throws {
        try self.init(listen: listen, intake: { worker.notificationIntake })
    }

    /// `intake`: what serves each request (the apps that verify it, the producer that stores it); a test
    /// restarts its worker under a running receiver. `produceDeadline`: how long the broker may take to
    /// acknowledge before the answer is 503.
    public init(
        listen: ListenAddress, produceDeadline: Duration = defaultProduceDeadline,
        intake: @escaping @Sendable () -> NotificationIntake
    ) throws {
        let limits = Self.limits()
        do {
            server = try MicroHTTPServer(host: listen.host, port: listen.port, limits: limits) { request in
                await Self.route(request, intake: intake(), deadline: produceDeadline)
            }
        } catch {
            throw ConfigurationError(
                .unusable, key: "notifications.listen", reason: "cannot listen on \(listen): \(error)")
        }
    }

    /// The receiver's limits: half the process's descriptor budget in connections, and a quarter of them
    /// per client address. Behind an ingress every request comes from its few addresses, so the per-client
    /// bound is wide (64, a public port's, would cap Apple's deliveries), but one client still cannot hold
    /// every connection.
    public static func limits(budget: Int = DescriptorBudget.current) -> HTTPServerLimits {
        var limits = HTTPServerLimits()
        limits.maximumBodyBytes = maximumBodyBytes
        limits.maximumConnections = DescriptorBudget.connections(share: 0.5, of: budget)
        limits.maximumConnectionsPerIP = max(64, limits.maximumConnections / 4)
        return limits
    }

    struct Unacknowledged: Error, CustomStringConvertible {
        let deadline: Duration
        var description: String { "the broker did not acknowledge within \(deadline.milliseconds) ms" }
    }

    public func start() { server.start() }
    public func stop() { server.stop() }

    /// Serves until its graceful shutdown (or cancellation), then stops answering.
    public func run() async {
        start()
        await GracefulShutdown.current.wait()
        stop()
    }

    static func route(_ request: ServerRequest, intake: NotificationIntake, deadline: Duration) async -> ServerReply {
        guard request.path == "/notifications/apple" else { return .text(404, "not found\n") }
        guard request.method == "POST" else { return .text(405, "POST only\n") }
        let (status, text) = await intake.receive(body: request.body, deadline: deadline)
        return .text(status, text + "\n")
    }
}

/// What the receiver does with one notification: verify it with the app it names, produce it to the
/// notifications topic as received, and answer once the broker acknowledged it.
public struct NotificationIntake: Sendable {
    let apps: AppleApps
    let producer: any MessageSender
    let topic: String
    let metrics: WorkerMetrics
    let logger: Logger
    /// Where a record the broker took is remembered for this process's processor (nil: a receiver alone).
    var recentlyVerified: RecentlyVerifiedNotifications? = nil
    /// Told whether each record reached the broker (the receiver role's readiness).
    var deliveries: DeliveryHealth? = nil

    /// One notification at the receiver: the HTTP status and a short text for it.
    func receive(body: Data, deadline: Duration) async -> (Int, String) {
        switch await AppleNotification.verifySettled(body: body, apps: apps) {
        case .unavailable(let reason):
            metrics.notificationReceived(type: nil, outcome: "unavailable").increment()
            logger.warning(
                "notification not verified yet: its certificates' revocation status is not known; Apple will send it"
                    + " again", ["error": reason])
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
                try await withDeadline(deadline, timeout: NotificationReceiver.Unacknowledged(deadline: deadline)) {
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
