import Foundation
import HTTPClient
import Kafka
import TestSupport
import Testing

/// `receipt-worker receive`: the notification receiver as a role of its own, needing only the broker
/// (deploy/kubernetes/receiver.yaml). Apple's deliveries are answered whatever the ledger is doing.
@Suite("The receiver role", .serialized, .timeLimit(.minutes(3)))
struct ReceiverRoleTests {
    @Test(
        "with its PostgreSQL unreachable, the receiver is ready and answers Apple's notification 200, stored on the topic; SIGTERM exits 0"
    )
    func answersWithoutTheLedger() async throws {
        let harness = try await ProcessHarness()
        let listen = try freeLoopbackPort()
        let metrics = try freeLoopbackPort()
        // A ledger that never answers: nothing of the receiver may depend on it.
        let config = try harness.config(
            ledger: "postgresql://nobody@127.0.0.1:1/none",
            extra: ["notifications.listen": "127.0.0.1:\(listen)", "metrics.listen": "127.0.0.1:\(metrics)"])
        let process = try WorkerProcess(config: config, command: "receive")
        let http = HTTPClient(logger: ProcessHarness.logger)
        defer { http.shutdown() }
        let ready = await eventually {
            (try? await http.execute(HTTPRequest(url: "http://127.0.0.1:\(metrics)/readyz")))?.status == 200
        }
        #expect(ready, "log:\n\(process.log.suffix(2000))")
        let purchase = try await harness.purchase(product: "coins")
        try await harness.admin.sendNotifications(to: "http://127.0.0.1:\(listen)/notifications/apple")
        let uuid = try await harness.admin.notify("refund", ["transaction_id": purchase.transaction])
        let delivered = await eventually {
            let sent = try? await harness.admin.notifications().first { $0["notification_uuid"] as? String == uuid }
            let attempts = sent?["attempts"] as? [[String: Any]] ?? []
            return attempts.contains { $0["status"] as? Int == 200 }
        }
        #expect(delivered, "Apple's delivery was not answered 200; log:\n\(process.log.suffix(2000))")
        // Stored: on the notifications topic, with its uuid header, for the workers to consume.
        let reader = try KafkaConsumer(
            configuration: .init(
                bootstrapServers: WorkerHarness.bootstrap, groupID: "receiver-check-\(harness.suffix)"),
            logger: ProcessHarness.logger)
        try await reader.assign(topics: ["notifications-\(harness.suffix)"], from: .beginning)
        let stored = Task {
            for await event in reader.events {
                if case .message(let message) = event,
                    message.headers.contains(where: { $0.name == "notification_uuid" && $0.stringValue == uuid })
                {
                    return true
                }
            }
            return false
        }
        let found = await withTaskGroup(of: Bool.self) { group in
            group.addTask { await stored.value }
            group.addTask {
                try? await Task.sleep(for: .seconds(60))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        await reader.close()
        #expect(found, "the notification is not on the notifications topic")
        #expect(await process.stop(SIGTERM) == 0, "log:\n\(process.log.suffix(2000))")
        await harness.stop()
    }
}
