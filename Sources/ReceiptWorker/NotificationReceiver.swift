import AppleVerification
import Foundation
import HTTPServerKit
import Kafka

/// Serves `notifications.listen`: `POST /notifications/apple`, where Apple sends App Store Server
/// Notifications V2. A notification is verified (nested data too), produced to `topics.notifications` as
/// received, and answered 200 only once the broker acknowledged it: Apple sends again whatever is not
/// answered 200, so nothing is lost while the broker is away (503) and nothing forged gets in (400).
public final class NotificationReceiver: Sendable {
    private let server: MicroHTTPServer
    public var port: UInt16 { server.port }

    /// Apple's notifications are a few kilobytes; a megabyte is no notification.
    static let maximumBodyBytes = 256 * 1024
    /// Apple waits for an answer only so long; a broker that does not acknowledge within this is unavailable.
    public static let defaultProduceDeadline = Duration.seconds(5)

    public convenience init(listen: String, worker: Worker) throws {
        try self.init(listen: listen, worker: { worker })
    }

    /// `worker`: the worker whose producer and verifier serve each request (a test restarts its worker).
    /// `produceDeadline`: how long the broker may take to acknowledge before the answer is 503.
    public init(
        listen: String, produceDeadline: Duration = defaultProduceDeadline, worker: @escaping @Sendable () -> Worker
    ) throws {
        let colon = listen.lastIndex(of: ":")!  // validated by ConfigurationLoader
        let host = listen[..<colon].isEmpty ? "0.0.0.0" : String(listen[..<colon])
        let port = UInt16(listen[listen.index(after: colon)...])!
        var limits = HTTPServerLimits()
        limits.maximumBodyBytes = Self.maximumBodyBytes
        // Behind an ingress every request comes from its few addresses: 64 per address would cap Apple's.
        limits.maximumConnectionsPerIP = limits.maximumConnections
        do {
            server = try MicroHTTPServer(
                host: host == "localhost" ? "127.0.0.1" : host, port: port, limits: limits
            ) { request in
                await Self.route(request, worker: worker(), deadline: produceDeadline)
            }
        } catch {
            throw ConfigurationError(key: "notifications.listen", reason: "cannot listen on \(listen): \(error)")
        }
    }

    struct Unacknowledged: Error, CustomStringConvertible {
        let deadline: Duration
        var description: String { "the broker did not acknowledge within \(deadline.milliseconds) ms" }
    }

    public func start() { server.start() }
    public func stop() { server.stop() }

    static func route(_ request: ServerRequest, worker: Worker, deadline: Duration) async -> ServerReply {
        guard request.path == "/notifications/apple" else { return .text(404, "not found\n") }
        guard request.method == "POST" else { return .text(405, "POST only\n") }
        let (status, text) = await worker.receiveNotification(body: request.body, deadline: deadline)
        return .text(status, text + "\n")
    }
}

extension Worker {
    /// One notification at the receiver: the HTTP status and a short text for it.
    func receiveNotification(body: Data, deadline: Duration) async -> (Int, String) {
        switch AppleNotification.verify(body: body, apps: apps) {
        case .rejected(let reason):
            let counter = metrics.notificationReceived(type: "unverified", outcome: "rejected")
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
            let record = KafkaProducerMessage(
                topic: configuration.topics.notifications, key: Array(notification.key.utf8), value: Array(body),
                headers: notification.headers.map { KafkaHeader(name: $0.0, string: $0.1) })
            let producer = self.producer
            do {
                try await Self.within(deadline, timeout: NotificationReceiver.Unacknowledged(deadline: deadline)) {
                    _ = try await producer.send(record)
                }
            } catch {
                metrics.notificationReceived(type: notification.type, outcome: "unavailable").increment()
                logger.error(
                    "notification not stored: the broker did not take it; Apple will send it again",
                    ["notification_id": notification.id, "error": "\(error)"])
                return (503, "not stored; send it again")
            }
            metrics.notificationReceived(type: notification.type, outcome: "accepted").increment()
            logger.info(
                "notification received",
                ["notification_id": notification.id, "type": notification.type, "subtype": notification.subtype ?? ""])
            return (200, "ok")
        }
    }
}
