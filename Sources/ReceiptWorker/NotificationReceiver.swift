import AppleVerification
public import Flows
import Foundation
public import HTTPServerKit
public import Lifecycle
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

    /// The receiver's limits: a public port's (``HTTPServerLimits/publicPort(maximumBodyBytes:descriptors:)``, about
    /// 200 connections: Apple delivers a few at a time), with bodies of 256 KiB.
    public static func limits(budget: Int = DescriptorBudget.current) -> HTTPServerLimits {
        .publicPort(maximumBodyBytes: maximumBodyBytes, descriptors: budget)
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
