import AppleVerification
@testable import Events
import Flows
import Foundation
import Kafka
import Ledger
@testable import ReceiptWorker
import Testing
import Vocabulary

/// docs/ against the code: every deny reason, dead-letter reason, event type and configuration key the code has is
/// in the documents, and the documents name none the code does not have. docs/contract.md's tables are read
/// between their `<!-- BEGIN name` and `<!-- END name` lines; Tests/contract/check_contract.py checks the rest.
@Suite("The contract documents follow the code")
struct ContractDocumentTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// A file of docs/schemas as a JSON object.
    static func schema(_ name: String) throws -> [String: Any] {
        let data = try Data(contentsOf: root.appendingPathComponent("docs/schemas/\(name)"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any], "\(name): not an object")
    }

    /// The values a schema allows or knows for one property: its `enum`, its `x-known-values` (a list a later
    /// release may extend: consumers' schemas stay open), or its `const`.
    static func allowed(_ schema: [String: Any], _ property: String) -> [String] {
        let definition = (schema["properties"] as? [String: Any])?[property] as? [String: Any]
        if let values = definition?["enum"] as? [String] { return values }
        if let values = definition?["x-known-values"] as? [String] { return values }
        if let value = definition?["const"] as? String { return [value] }
        return []
    }

    /// The names in one column of a table of docs/contract.md, each cell exactly one `name` in backticks. The
    /// table is the one between `<!-- BEGIN <table>` and `<!-- END <table>`; its header and separator rows are
    /// skipped. `column` counts from 0; -1 is the last.
    static func tableNames(_ table: String, column: Int) throws -> [String] {
        let lines = try text("docs/contract.md").split(separator: "\n", omittingEmptySubsequences: false)
        let beginLine = lines.firstIndex { $0.hasPrefix("<!-- BEGIN \(table)") }
        let begin = try #require(beginLine, "no table \(table)")
        let endLine = lines[begin...].firstIndex { $0.hasPrefix("<!-- END \(table)") }
        let end = try #require(endLine, "the table \(table) does not end")
        var names: [String] = []
        for line in lines[(begin + 1)..<end].filter({ $0.hasPrefix("|") }).dropFirst(2) {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
            let index = column < 0 ? cells.count + column : column
            guard cells.indices.contains(cells.startIndex + index) else {
                Issue.record("docs/contract.md, table \(table): a row without column \(column): \(line)")
                continue
            }
            let cell = cells[cells.startIndex + index].trimmingCharacters(in: .whitespaces)
            guard cell.count > 2, cell.hasPrefix("`"), cell.hasSuffix("`"), cell.filter({ $0 == "`" }).count == 2
            else {
                Issue.record("docs/contract.md, table \(table): \(cell) is not one name in backticks")
                continue
            }
            names.append(String(cell.dropFirst().dropLast()))
        }
        return names
    }

    @Test("deny reasons: the code's, docs/contract.md's check table and the receipt.denied schema's enum")
    func denyReasons() throws {
        let code = Set(DenyReason.allCases.map(\.rawValue))
        let documented = try Self.tableNames("deny reasons", column: -1)
        #expect(Set(documented) == code, "docs/contract.md's deny reasons differ from DenyReason")
        #expect(documented.count == Set(documented).count, "docs/contract.md lists a deny reason twice")
        let denied = try Self.schema("receipt.denied.json")
        #expect(Set(Self.allowed(denied, "reason")) == code, "receipt.denied.json's reason enum differs from the code")
        let granted = try Self.schema("receipt.granted.json")
        #expect(Self.allowed(granted, "reason") == ["verified"])
    }

    @Test("dead-letter reasons: the code's, docs/contract.md's table and the dlq-headers schema's enum")
    func deadLetterReasons() throws {
        let code = Set(DeadLetterReason.allCases.map(\.rawValue))
        let documented = try Self.tableNames("dead-letter reasons", column: 0)
        #expect(Set(documented) == code, "docs/contract.md's dead-letter reasons differ from DeadLetterReason")
        #expect(documented.count == Set(documented).count, "docs/contract.md lists a dead-letter reason twice")
        let headers = try Self.schema("dlq-headers.json")
        #expect(Set(Self.allowed(headers, "dlq_reason")) == code, "dlq-headers.json's dlq_reason enum differs")
        let asyncapi = try Self.text("docs/asyncapi.yaml")
        #expect(asyncapi.contains("./schemas/dlq-headers.json"), "docs/asyncapi.yaml does not use dlq-headers.json")
    }

    @Test("event types: what the headers carry, docs/contract.md, the headers schema, a schema each, AsyncAPI")
    func eventTypes() throws {
        let code = ResultEvent.eventTypes
        var sent: [String] = [ResultEvent.Decision.grant, .deny(.revoked)].map { decision in
            let event = ResultEvent(
                eventID: "e", jobID: "j", orderID: "o", userID: "u", decision: decision, productID: "p",
                quantity: 1, transactionID: nil, originalTransactionID: nil, environment: nil, purchaseDate: nil,
                expiresDate: nil, verifiedAt: Date(), attempts: 0, detail: nil)
            let headers = event.stored().record(topic: "results", source: "s").headers
            return headers.first { $0.name == "ce_type" }?.stringValue ?? ""
        }
        sent +=
            (NotificationEvent.types + SubscriptionEvent.types + [
                .unclaimed, .consentRescinded, .extensionCompleted, .playerErased,
            ])
            .map(\.rawValue)
            .map {
                type in
                StoredEvent(eventID: "e", type: type, time: "t", key: "o", json: []).record(
                    topic: "results", source: "s"
                )
                .headers.first { $0.name == "ce_type" }?.stringValue ?? ""
            }
        #expect(sent == code, "a ce_type is sent that is not in ResultEvent.eventTypes")
        let documented = try Self.tableNames("event types", column: 0)
        #expect(documented == code, "docs/contract.md's event types differ from ResultEvent.eventTypes")
        let headers = try Self.schema("result-headers.json")
        #expect(Set(Self.allowed(headers, "ce_type")) == Set(code), "result-headers.json's ce_type enum differs")
        let asyncapi = try Self.text("docs/asyncapi.yaml")
        for eventType in code {
            let payload = try Self.schema("\(eventType).json")
            // Grants and denials carry their decision; the events after the grant carry their type.
            if eventType == EventType.granted.rawValue || eventType == EventType.denied.rawValue {
                let decision = eventType == EventType.granted.rawValue ? "grant" : "deny"
                #expect(
                    Self.allowed(payload, "decision") == [decision], "\(eventType).json must say decision \(decision)")
            }
            #expect(Self.allowed(payload, "type") == [eventType], "\(eventType).json must say type \(eventType)")
            #expect(
                asyncapi.contains("const: \(eventType)\n"), "docs/asyncapi.yaml has no message of ce_type \(eventType)")
            #expect(asyncapi.contains("./schemas/\(eventType).json"), "docs/asyncapi.yaml does not use its schema")
        }
    }

    @Test("configuration keys: ConfigurationLoader.documentedKeys and docs/contract.md's table, both ways")
    func configurationKeys() throws {
        let code = Set(ConfigurationLoader.documentedKeys)
        let documented = try Self.tableNames("configuration keys", column: 0)
        #expect(documented.count == Set(documented).count, "docs/contract.md lists a configuration key twice")
        for key in code.subtracting(documented).sorted() {
            Issue.record("the configuration key \(key) is missing from docs/contract.md's table")
        }
        for key in Set(documented).subtracting(code).sorted() {
            Issue.record("docs/contract.md's table has \(key), which the code does not know")
        }
    }

    /// Every match of `pattern`'s first group in the Swift files of `directory` (under Sources/).
    static func written(_ pattern: String, in directory: String) throws -> Set<String> {
        let folder = root.appendingPathComponent("Sources/\(directory)")
        let regex = try Regex(pattern).dotMatchesNewlines()
        var found = Set<String>()
        for name in try FileManager.default.subpathsOfDirectory(atPath: folder.path) where name.hasSuffix(".swift") {
            let source = try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
            for match in source.matches(of: regex) {
                if let group = match.output[1].substring { found.insert(String(group)) }
            }
        }
        return found
    }

    @Test("every notification type docs/contract.md names is one NotificationType knows, and counted by its name")
    func notificationTypes() throws {
        // The first column of section 9's table, "notification | when | event ...".
        let lines = try Self.text("docs/contract.md").split(separator: "\n", omittingEmptySubsequences: false)
        let header = try #require(lines.firstIndex { $0.hasPrefix("| notification | when |") }, "no notification table")
        let rows = lines[(header + 2)...].prefix { $0.hasPrefix("|") }
        let firstCells = rows.map { $0.dropFirst().prefix { $0 != "|" } }.joined(separator: " ")
        let named = Set(firstCells.matches(of: /`([A-Z][A-Z_]+[A-Z])`/).map { String($0.1) })
        let known = Set(NotificationType.known.map(\.rawValue))
        let subtypes: Set = [
            "INITIAL_BUY", "RESUBSCRIBE", "UPGRADE", "DOWNGRADE", "FAMILY_SHARED", "UNREPORTED",
            NotificationSubtype.created.rawValue, NotificationSubtype.activeTokenReminder.rawValue,
            NotificationSubtype.summary.rawValue, NotificationSubtype.failure.rawValue,
        ]
        let types = named.subtracting(subtypes).filter { !$0.hasPrefix("UNDELIVERED") && $0 != "DELIVERED" }
        #expect(types.count >= 15, "the pattern no longer finds the notification types: \(types.sorted())")
        for type in types.subtracting(known).sorted() {
            Issue.record("docs/contract.md names \(type), which NotificationType does not know")
        }
        // A type Apple adds later decodes, keeps its name, and is one series, `other`.
        #expect(WorkerMetrics.label(notificationType: NotificationType(rawValue: "SOMETHING_NEW")) == "other")
        #expect(WorkerMetrics.label(notificationType: .priceIncrease) == "PRICE_INCREASE")
        #expect(WorkerMetrics.label(notificationType: nil) == "unverified")
    }

    @Test("the configuration keys the components declare, and those errors name, are the documented ones")
    func keysReadByTheLoader() throws {
        let declared = try Self.written(#"ConfigurationKey\(\s*"([a-z_]+\.[a-z_.]+)""#, in: "Configuration")
            .union(Self.written(#"ConfigurationKey\(\s*"([a-z_]+\.[a-z_.]+)""#, in: "ReceiptWorker"))
        let named = try ["Configuration", "ReceiptWorker", "ReceiptWorkerCLI", "Support"].reduce(into: Set<String>()) {
            $0.formUnion(try Self.written(#"key: "([a-z_]+\.[a-z_.]+)""#, in: $1))
        }
        let documented = Set(ConfigurationLoader.documentedKeys)
        #expect(declared.count >= 40, "the pattern no longer finds the components' keys: \(declared.count)")
        #expect(named.count >= 10, "the pattern no longer finds the keys errors name: \(named.count)")
        for key in declared.union(named).subtracting(documented).sorted() {
            Issue.record("the code reads or names \(key), which documentedKeys does not list")
        }
    }

    @Test("docs/metrics.md's table names every metric the worker exports, and none it does not")
    func metricsTable() throws {
        let exported = try Self.written(#""(receipt_worker_[a-z_]+)""#, in: "ReceiptWorker")
            .union(try Self.written(#""(receipt_worker_[a-z_]+)""#, in: "Flows"))
            .union(try Self.written(#""(receipt_worker_[a-z_]+)""#, in: "Runtime"))
            .union(try Self.written(#""(receipt_worker_[a-z_]+)""#, in: "DeskService"))
        #expect(exported.count >= 20, "the pattern no longer finds the metrics: \(exported.count)")
        var documented = Set<String>()
        for line in try Self.text("docs/metrics.md").split(separator: "\n") where line.hasPrefix("| `receipt_worker_") {
            let firstCell = line.dropFirst(2).prefix { $0 != "|" }
            for match in firstCell.matches(of: /`(receipt_worker_[a-z_]+)`/) { documented.insert(String(match.1)) }
        }
        for name in exported.subtracting(documented).sorted() {
            Issue.record("the metric \(name) is missing from docs/metrics.md's table")
        }
        for name in documented.subtracting(exported).sorted() {
            Issue.record("docs/metrics.md's table has \(name), which the worker does not export")
        }
    }

    @Test("the AsyncAPI channels' addresses are the default topic names")
    func topicNames() throws {
        let asyncapi = try Self.text("docs/asyncapi.yaml")
        let topics = WorkerConfiguration().topics
        for topic in [topics.jobs, topics.results, topics.dlq, topics.notifications, topics.consumption] {
            #expect(asyncapi.contains("address: \(topic)\n"), "docs/asyncapi.yaml has no channel for \(topic)")
        }
    }
}
