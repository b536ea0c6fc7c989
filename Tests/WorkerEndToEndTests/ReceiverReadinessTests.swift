import KafkaMock
import AppStoreSimulator
import Flows
import Foundation
import HTTPClient
import Kafka
import Observability
import ReceiptWorker
import TestSupport
import Testing

/// The receiver alone is ready only while a record could be written: against librdkafka's mock
/// cluster, whose faults the test sets, with Apple's notifications from the simulator over HTTP.
@Suite("The receiver's readiness means a record can be written", .timeLimit(.minutes(2)))
struct ReceiverReadinessTests {
    @Test(
        "ready and storing while the topic takes records; unready while a partition has no leader (ready again once it has one), and after a delivery the broker refused (a produce ACL)"
    )
    func readinessFollowsTheBroker() async throws {
        let logger = WorkerHarness.logger
        let mock = try KafkaMockCluster()
        let topic = "notifications"
        try mock.createTopic(topic, partitions: 2)
        let simulator = try AppStoreSimulator()
        simulator.start()
        defer { simulator.stop() }
        let http = HTTPClient(logger: logger)
        defer { http.shutdown() }
        var configuration = WorkerConfiguration()
        configuration.topics.notifications = topic
        configuration.defaultApp.bundleID = "com.example"
        configuration.defaultApp.appAppleID = AppStoreSimulator.Configuration().appAppleID
        configuration.apple.rootCertificates = [Data(AppStoreSimulator.testRootPEM.utf8)]
        configuration.kafka = ["bootstrap.servers": mock.bootstrapServers, "group.id": "unused"]
        let role = try ReceiverRole(configuration: configuration, logger: logger, healthInterval: .milliseconds(200))
        let receiver = try role.receiver(listen: ListenAddress(host: "127.0.0.1", port: 0))
        receiver.start()
        defer { receiver.stop() }
        let running = Task { try await role.run() }
        let admin = SimulatorAdmin(baseURL: simulator.baseURL, http: http)
        try await admin.sendNotifications(
            to: "http://127.0.0.1:\(receiver.port)/notifications/apple", retryDelaysMs: [])
        let purchase = try await admin.purchase(["product_id": "coins_100"])
        /// The status the receiver answered Apple's delivery of notification `uuid` with.
        func answered(_ uuid: String) async -> Int? {
            var status: Int?
            _ = await eventually(timeout: .seconds(30)) {
                let sent = try? await admin.notifications().first { $0["notification_uuid"] as? String == uuid }
                status = (sent?["attempts"] as? [[String: Any]])?.last?["status"] as? Int
                return status != nil
            }
            return status
        }

        #expect(await eventually(timeout: .seconds(30)) { role.readiness.isEmpty }, "\(role.readiness)")
        // What the alerts read: a receiver that can write says so (its `receipt_worker_ready`), as a worker does.
        #expect(role.metrics.registry.render().contains("receipt_worker_ready 1"))
        #expect(await answered(try await admin.notify("refund", ["transaction_id": purchase.transactionID])) == 200)

        try mock.setLeader(topic: topic, partition: 1, broker: -1)
        #expect(
            await eventually(timeout: .seconds(30)) { role.readiness.contains { $0.contains("no leader") } },
            "\(role.readiness)")
        try mock.setLeader(topic: topic, partition: 1, broker: 1)
        #expect(await eventually(timeout: .seconds(30)) { role.readiness.isEmpty }, "\(role.readiness)")

        mock.refuseProduce(count: 1_000)
        let refused = try await admin.notify("reverse-refund", ["transaction_id": purchase.transactionID])
        #expect(await answered(refused) == 503, "Apple is told to send it again")
        #expect(role.readiness.contains { $0.contains("did not take") }, "\(role.readiness)")
        #expect(role.metrics.registry.render().contains("receipt_worker_ready 0"))
        role.shutdown()
        try await running.value
    }

    @Test(
        "a fatal error of the producer ends the receiver's run: the process exits and is restarted, never unready for ever"
    )
    func fatalProducerEndsTheRole() async throws {
        let mock = try KafkaMockCluster()
        try mock.createTopic("notifications", partitions: 1)
        var configuration = WorkerConfiguration()
        configuration.topics.notifications = "notifications"
        configuration.defaultApp.bundleID = "com.example"
        configuration.defaultApp.appAppleID = AppStoreSimulator.Configuration().appAppleID
        configuration.apple.rootCertificates = [Data(AppStoreSimulator.testRootPEM.utf8)]
        configuration.kafka = ["bootstrap.servers": mock.bootstrapServers, "group.id": "unused"]
        let role = try ReceiverRole(
            configuration: configuration, logger: WorkerHarness.logger, healthInterval: .milliseconds(200))
        let running = Task { try await role.run() }
        #expect(await eventually(timeout: .seconds(30)) { role.readiness.isEmpty }, "\(role.readiness)")
        role.raiseProducerFatalErrorForTesting()
        let ended = await withTaskGroup(of: String?.self) { group in
            group.addTask {
                do {
                    try await running.value
                    return "returned"
                } catch {
                    return "threw \(error)"
                }
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(30))
                return nil
            }
            defer { group.cancelAll() }
            return await group.next() ?? nil
        }
        #expect(ended?.contains("a test's fatal producer error") == true, "\(ended ?? "still running after 30 s")")
        role.shutdown()
    }
}
