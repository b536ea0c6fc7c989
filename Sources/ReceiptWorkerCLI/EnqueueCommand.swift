import Flows
import Foundation
import Kafka
import Observability
import ReceiptWorker
import Vocabulary

enum EnqueueCommand {
    static let help = """
        usage: receipt-worker enqueue [--config FILE] [--set key=value]... --order-id ID --user-id ID
                                      --product-id ID (--receipt B64 | --receipt-file FILE | --signed-transaction JWS
                                      | --transaction-id ID) [--quantity N] [--app-account-token UUID] [--job-id ID]
               receipt-worker enqueue [--config FILE] [--set key=value]... --file FILE

        Submits receipt jobs to topics.jobs, keyed by order_id, as a front-end service would, and prints
        "enqueued <job_id> <topic>[<partition>]@<offset>" for each once the broker has it. Each job is
        checked first with the worker's own parser: an invalid job is refused here, not dead-lettered.

        options:
          --file FILE                one job object, or one per line (JSON lines); "-" reads standard input
          --job-id ID                default: a new UUID of version 7 (its text sorts by time)
          --order-id, --user-id, --product-id, --quantity, --app-account-token, --transaction-id,
          --receipt, --signed-transaction    the job's fields (docs/contract.md, section 2)
          --receipt-file FILE        the receipt's base64 text (or its raw bytes, base64-encoded here)
          --config FILE, --set key=value     kafka.* and topics.jobs, as for `run`

        Exit codes: 0 every job enqueued; 1 the broker did not take a job; 2 usage error or invalid job.
        """

    static let fieldOptions: [(option: String, field: String)] = [
        ("--job-id", "job_id"), ("--order-id", "order_id"), ("--user-id", "user_id"), ("--product-id", "product_id"),
        ("--app-account-token", "app_account_token"), ("--receipt", "receipt"),
        ("--signed-transaction", "signed_transaction"),
        ("--transaction-id", "transaction_id"),
    ]

    static func run(_ arguments: [String]) async throws -> Int32 {
        let valued = Options.configurationOptions.union(fieldOptions.map(\.option)).union([
            "--file", "--quantity", "--receipt-file",
        ])
        let options = try Options(arguments, valued: valued, flags: [])
        let configuration = try options.configuration(purpose: .tool)
        let values = try options.value("--file").map(readJobs) ?? [try jobFromFlags(options)]
        // Every job is checked before any is sent: one bad line sends nothing.
        let jobs = try values.enumerated().map { index, value -> (value: [UInt8], parsed: ReceiptJob) in
            switch JobParser.parse(
                value, maxBytes: configuration.jobsMaxBytes,
                transactionIDRequiresAccountToken: configuration.apple.transactionIDRequiresAccountToken)
            {
            case .job(let parsed): return (value, parsed)
            case .unreadable(let reason), .invalidJob(_, let reason): throw UsageError("job \(index + 1): \(reason)")
            }
        }
        let producer = try ToolKafka.producer(configuration)
        var failures = 0
        for (job, parsed) in jobs {
            do {
                let report = try await producer.send(
                    OutboundMessage(topic: configuration.topics.jobs, key: Array(parsed.orderID.utf8), value: job))
                emit("enqueued \(parsed.jobID) \(report.topic)[\(report.partition)]@\(report.offset)")
            } catch {
                failures += 1
                complain("job \(parsed.jobID) not enqueued: \(error)")
            }
        }
        await producer.close()
        return failures == 0 ? 0 : 1
    }

    static func jobFromFlags(_ options: Options) throws -> [UInt8] {
        let now = UInt64(max(0, Date().timeIntervalSince1970 * 1000))
        var job: [String: JSONValue] = ["job_id": .string(TimeOrderedUUID.make(unixMilliseconds: now))]
        for (option, field) in fieldOptions {
            if let value = options.value(option) { job[field] = .string(value) }
        }
        if let quantity = try options.integer("--quantity", in: 1...1_000) { job["quantity"] = JSONValue(quantity) }
        if let path = options.value("--receipt-file") {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw UsageError("--receipt-file: cannot read \(path)")
            }
            let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            job["receipt"] = .string(Data(base64Encoded: text) != nil ? text : data.base64EncodedString())
        }
        for (option, field) in [("--order-id", "order_id"), ("--user-id", "user_id"), ("--product-id", "product_id")]
        where job[field] == nil {
            throw UsageError("\(option) is required (or --file)")
        }
        if job["receipt"] == nil && job["signed_transaction"] == nil && job["transaction_id"] == nil {
            throw UsageError("one of --receipt, --receipt-file, --signed-transaction or --transaction-id is required")
        }
        job["submitted_at"] = .string(RFC3339.format(Date()))
        return Array(JSONValue.object(job).data)
    }

    /// One JSON object, or JSON lines. Sent byte for byte as read (a front-end's exact message).
    static func readJobs(_ path: String) throws -> [[UInt8]] {
        let data: Data
        if path == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let contents = FileManager.default.contents(atPath: path) else {
                throw UsageError("--file: cannot read \(path)")
            }
            data = contents
        }
        if JSONValue(parsing: data)?.object != nil {
            return [Array(data)]
        }
        let lines = data.split(separator: UInt8(ascii: "\n")).filter { !$0.allSatisfy { $0 == 32 || $0 == 13 } }
        guard !lines.isEmpty else { throw UsageError("--file: no job in \(path)") }
        return lines.map { Array($0) }
    }
}
