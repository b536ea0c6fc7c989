import Vocabulary
import Foundation
import Kafka
import ReceiptWorker

enum ResultsCommand {
    static let help = """
        usage: receipt-worker results [--config FILE] [--set key=value]... [--from-beginning] [--order-id ID]
                                      [--count N] [--timeout SECONDS] [--json]

        Follows topics.results and prints one line per result event, as they arrive:

          VERIFIED AT  DECISION  REASON  ORDER  PRODUCT  TRANSACTION  ENVIRONMENT  ATTEMPTS

        Events after the grant show their type instead of the decision (revoked, reinstated, consumption
        for a refund request, renewed, expired, billing_issue, renewal_changed, unclaimed), with the
        revocation (type and share), the deadline, a subscription's status and expiry, or the start of an
        unclaimed purchase's app_account_token instead of the reason.
        It reads outside any consumer group and commits nothing: the workers and grant services are not
        disturbed. Ctrl-C stops it.

        options:
          --from-beginning   start at the oldest event kept (default: only events from now on)
          --order-id ID      only this order's events (repeatable)
          --count N          exit after N events
          --timeout SECONDS  exit with code 1 if --count events have not arrived by then
          --json             print each event's JSON as published instead of a line
          --config FILE, --set key=value    kafka.* and topics.results, as for `run`

        Exit codes: 0 Ctrl-C or --count reached; 1 broker failure or --timeout passed; 2 usage error.
        """

    static let header = line([
        "VERIFIED AT", "DECISION", "REASON", "ORDER", "PRODUCT", "TRANSACTION", "ENVIRONMENT", "ATTEMPTS",
    ])

    static func run(_ arguments: [String]) async throws -> Int32 {
        let options = try Options(
            arguments, valued: Options.configurationOptions.union(["--order-id", "--count", "--timeout"]),
            flags: ["--from-beginning", "--json"])
        let configuration = try options.configuration(purpose: .tool)
        let count = try options.integer("--count", in: 1...Int.max)
        let timeout = try options.integer("--timeout", in: 1...86_400)
        let orders = Set(options.all("--order-id"))
        let json = options.has("--json")

        let consumer = try ToolKafka.reader(configuration)
        _ = try await consumer.assign(
            topic: configuration.topics.results, from: options.has("--from-beginning") ? .beginning : .end)
        TerminationSignals.install { _ in consumer.endEvents() }
        let timedOut = Timeout(seconds: timeout) { consumer.endEvents() }
        if !json { emit(header) }
        var printed = 0
        var failure: KafkaError?
        reading: for await event in consumer.events {
            switch event {
            case .message(let message):
                let object = JSONValue(parsing: message.value)?.object ?? [:]
                if !orders.isEmpty && !orders.contains(object["order_id"]?.string ?? "") { continue }
                emit(json ? String(decoding: message.value, as: UTF8.self) : describe(object))
                printed += 1
                if let count, printed >= count { break reading }
            case .fatalError(let error):
                failure = error
                break reading
            case .partitionsAssigned, .partitionsRevoked, .positions:
                continue
            }
        }
        await consumer.close()
        if let failure {
            complain("\(failure)")
            return 1
        }
        if timedOut.fired, let count, printed < count {
            complain("\(printed) of \(count) events before the timeout")
            return 1
        }
        return 0
    }

    static func describe(_ event: [String: JSONValue]) -> String {
        func field(_ name: String) -> String {
            switch event[name] {
            case .string(let text)?: text
            case .int(let number)?: String(number)
            case .double(let number)?: String(number)
            case .bool(let flag)?: flag ? "1" : "0"
            default: "-"
            }
        }
        // After the grant (receipt.revoked, ...): the type where the decision goes, the detail where the reason.
        if event["decision"] == nil, let type = event["type"]?.string {
            let detail =
                switch EventType(rawValue: type) {
                case .revoked:
                    "\(field("revocation_type")) \(event["revocation_percentage"]?.isNull == false ? field("revocation_percentage") + "%" : "all")"
                case .consumptionRequested: "answer by \(field("respond_by").prefix(19))Z"
                case .renewed, .expired, .billingIssue, .renewalChanged:
                    "\(field("status")) to \(field("expires_at").prefix(10))"
                case .unclaimed: "token \(field("app_account_token").prefix(8))"
                default: "-"
                }
            return line([
                event["credited_at"]?.string != nil ? field("credited_at") : field("notified_at"),
                type == EventType.consumptionRequested.rawValue ? "consumption" : String(type.dropFirst(8)),
                detail, field("order_id"),
                field("product_id"), field("transaction_id"), field("environment"), "-",
            ])
        }
        return line([
            field("verified_at"), field("decision"), field("reason"), field("order_id"), field("product_id"),
            field("transaction_id"), field("environment"), field("attempts"),
        ])
    }

    static func line(_ columns: [String]) -> String {
        let widths = [24, 11, 28, 16, 16, 19, 11, 8]
        return zip(columns, widths).map { text, width in
            text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
        }.joined(separator: "  ").trimmingCharacters(in: .whitespaces)
    }
}

/// Calls `action` once after `seconds` (never when nil), on a thread of its own.
final class Timeout: Sendable {
    private let done = AtomicFlag()
    var fired: Bool { done.isSet }

    init(seconds: Int?, action: @escaping @Sendable () -> Void) {
        guard let seconds else { return }
        let done = self.done
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds)) {
            done.set()
            action()
        }
    }
}
