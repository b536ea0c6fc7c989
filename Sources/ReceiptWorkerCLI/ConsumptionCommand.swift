import Flows
import Foundation
import Kafka
import ReceiptWorker
import Vocabulary

/// `receipt-worker consumption answer`: what a grant service produces when Apple asks about a refund
/// request (`receipt.consumption_requested`), from flags; for trying it and for an operator at 3 a.m.
enum ConsumptionCommand {
    static let help = """
        usage: receipt-worker consumption answer [--config FILE] [--set key=value]... --transaction-id ID
                   (--consented | --not-consented) --sample-content-provided true|false
                   [--delivery-status STATUS] [--consumption-percentage 0-100] [--refund-preference PREF]

        Produces a consumption answer to topics.consumption (key: the transaction id), checked as the worker
        will read it. The worker sends it to Apple (Send Consumption Information) before the request's
        respond_by; without the player's consent it sends nothing. STATUS: DELIVERED,
        UNDELIVERED_QUALITY_ISSUE, UNDELIVERED_WRONG_ITEM, UNDELIVERED_SERVER_OUTAGE, UNDELIVERED_OTHER
        (default: from the ledger). PREF: DECLINE, GRANT_FULL, GRANT_PRORATED.

        Exit codes: 0 produced; 1 the broker did not take it; 2 usage error or an invalid answer.
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        guard arguments.first == "answer" else { throw UsageError("consumption needs a subcommand: answer") }
        let options = try Options(
            Array(arguments.dropFirst()),
            valued: Options.configurationOptions.union([
                "--transaction-id", "--sample-content-provided", "--delivery-status", "--consumption-percentage",
                "--refund-preference",
            ]), flags: ["--consented", "--not-consented"])
        guard let transaction = options.value("--transaction-id") else {
            throw UsageError("--transaction-id is required")
        }
        guard options.has("--consented") != options.has("--not-consented") else {
            throw UsageError("say --consented or --not-consented")
        }
        guard let sample = options.value("--sample-content-provided").flatMap(Bool.init) else {
            throw UsageError("--sample-content-provided must be true or false")
        }
        var answer: [String: JSONValue] = [
            "transaction_id": .string(transaction), "customer_consented": .bool(options.has("--consented")),
            "sample_content_provided": .bool(sample),
        ]
        if let status = options.value("--delivery-status") { answer["delivery_status"] = .string(status) }
        if let preference = options.value("--refund-preference") { answer["refund_preference"] = .string(preference) }
        if let text = options.value("--consumption-percentage") {
            guard let percentage = Double(text) else { throw UsageError("--consumption-percentage must be a number") }
            answer["consumption_percentage"] = .double(percentage)
        }
        let value = Array(JSONValue.object(answer).data)
        if let problem = ConsumptionAnswerCheck.problem(in: value) { throw UsageError(problem) }
        let configuration = try options.configuration(purpose: .tool)
        let producer = try ToolKafka.producer(configuration)
        let sent: Result<DeliveryReport, any Error>
        do {
            sent = .success(
                try await producer.send(
                    OutboundMessage(
                        topic: configuration.topics.consumption, key: Array(transaction.utf8), value: value)))
        } catch {
            sent = .failure(error)
        }
        await producer.close()
        switch sent {
        case .success(let report):
            emit("answer for \(transaction) produced to \(report.topic)[\(report.partition)]@\(report.offset)")
            return 0
        case .failure(let error):
            complain("the broker did not take the answer: \(error)")
            return 1
        }
    }
}
