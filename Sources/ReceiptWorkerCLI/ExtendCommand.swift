import DeskService
import Foundation
import Ledger
import ReceiptWorker
import Support
import Vocabulary

/// `receipt-worker extend`: support's amends after an outage, one subscription or every subscriber of a product.
enum ExtendCommand {
    static let help = """
        usage: receipt-worker extend [--config FILE] [--set key=value]... [--app NAME] [--ticket T] --by WHO
                   --original-transaction-id ID --days N --reason R [--request-id ID]
               receipt-worker extend ... --all --product-id P [--storefronts USA,CAN] [--sandbox]
                   --days N --reason R [--request-id UUID]
               receipt-worker extend ... --status --product-id P --request-id UUID [--sandbox] [--follow]

        After an outage, studios give their subscribers the days they lost. The first form moves one
        subscription's renewal date N days later (Apple's Extend a Subscription Renewal Date): 1 to 90 days, at
        most twice in 365 days per subscription, active subscriptions only; Apple's refusal is printed in words
        (exit 3). Found in Production, else in the Sandbox where apple.allow_sandbox is true. --all asks Apple to
        extend every active subscriber of the product (in the storefronts given, else all): Apple takes the request
        and works through it for hours or days; the request's identifier is printed. --status says where such a
        request stands; --follow asks every 10 seconds until it is done, then prints how many subscriptions were
        extended and how many not.

        --reason: undeclared, customer_satisfaction, other or service_issue (Apple's codes 0 to 3).
        --request-id: the request's identifier (a UUID for --all; default: a new one, printed on standard error
        before Apple is asked). After a timeout or a failure, run the same command again with it: Apple asks that a
        request be sent again with its identifier unchanged. Without --request-id, a request of the same
        subscription (or product) audited as failed in the last day stops the command (exit 3), naming its
        identifier: Apple may have taken it, and a new identifier would extend twice.
        The grant services hear of it from the worker: receipt.renewal_changed for each subscription extended
        (expires_at moved), receipt.extension_failed for each one --all could not extend, and one
        receipt.extension_completed when --all is done. Each extension is appended to the support desk's audit
        (receipt-worker ledger audit) under --by, with --ticket.

        Exit codes: 0 extended, started, or (--status) answered; 3 refused by Apple or the rules; 1 Apple or the
        ledger did not answer; 2 usage or configuration error.
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        let options = try Options(
            arguments,
            valued: Options.configurationOptions.union([
                "--app", "--ticket", "--by", "--original-transaction-id", "--days", "--reason", "--request-id",
                "--product-id", "--storefronts",
            ]), flags: ["--all", "--status", "--sandbox", "--follow"])
        let configuration = try options.configuration(purpose: .worker)
        let environment: AppleEnvironment = options.has("--sandbox") ? .sandbox : .production
        if options.has("--status") {
            return try await status(options, configuration: configuration, environment: environment)
        }
        let by = try OperatorAudit.by(options.value("--by"))
        let ticket = try OperatorAudit.ticket(options.value("--ticket"))
        let order = try self.order(options, environment: environment)
        let app = try PlayerCommand.app(options, configuration).name  // as the desk names it: erasure finds it
        // Said before Apple is asked: after a timeout, the same command again with it is the same request.
        complain(
            "request \(order.requestIdentifier) (after a failure, run again with --request-id \(order.requestIdentifier))"
        )
        if options.value("--request-id") == nil,
            let failed = try await configuration.withToolLedger({ try await unsettled(order, app: app, in: $0) })
        {
            // Apple may have taken it before its answer was lost: a new identifier would extend twice.
            complain(
                "a request for the same \(order.action == "extend" ? "subscription" : "product") failed at "
                    + "\(RFC3339.format(failed.at)) (request \(failed.requestID)), and Apple may have taken it: run "
                    + "again with --request-id \(failed.requestID); to send a new request anyway, give a new "
                    + "--request-id of your own")
            return 3
        }
        let (outcome, answer) = try await configuration.withToolLedger { ledger in
            let desk = try SupportDesk.make(
                configuration, app: options.value("--app"), ledger: ledger, logger: ToolKafka.logger)
            let (outcome, answer): (String, JSONValue)
            do {
                (outcome, answer) = try await order.carryOut(with: desk)
            } catch {
                // Apple may have taken it before the answer was lost: audited as failed, with its identifier.
                _ = try? await ledger.appendAudit(
                    DeskAudit.operatorExtension(
                        order, outcome: "failed", answer: ["error": "Apple did not answer"], app: app, by: by,
                        ticket: ticket))
                throw error
            }
            try await ledger.appendAudit(
                DeskAudit.operatorExtension(
                    order, outcome: outcome, answer: answer, app: app, by: by, ticket: ticket))
            return (outcome, answer)
        }
        switch outcome {
        case "extended":
            let expires = answer.object?["expires_at"]?.string ?? "unknown"
            emit("extended: renews or expires at \(expires) (request \(order.requestIdentifier))")
            return 0
        case "started":
            emit("started: request \(order.requestIdentifier); follow it with --status --request-id")
            return 0
        default:
            complain("not extended: \(answer.object?["error"]?.string ?? "refused")")
            return 3
        }
    }

    private static func order(_ options: Options, environment: AppleEnvironment) throws -> ExtensionOrder {
        guard let days = try options.integer("--days", in: 1...90) else {
            throw UsageError("--days is required: 1 to 90")
        }
        guard let reasonName = options.value("--reason"), let reason = SupportDesk.extendReason(named: reasonName)
        else { throw UsageError("--reason is required: undeclared, customer_satisfaction, other or service_issue") }
        let requestID = options.value("--request-id")
        if options.has("--all") {
            let product = try productID(options)
            var storefronts: [String]?
            if let list = options.value("--storefronts") {
                let codes = list.split(separator: ",").map { String($0) }
                guard !codes.isEmpty, codes.allSatisfy(SupportDesk.isStorefront) else {
                    throw UsageError("--storefronts is a comma-separated list of three-letter codes, such as USA,CAN")
                }
                storefronts = codes
            }
            if let requestID, UUID(uuidString: requestID) == nil { throw UsageError("--request-id must be a UUID") }
            return ExtensionOrder(
                scope: .all(productID: product, storefronts: storefronts, environment: environment), days: days,
                reason: reason, requestIdentifier: requestID?.lowercased() ?? UUID().uuidString.lowercased())
        }
        guard let original = options.value("--original-transaction-id"), !original.isEmpty, original.utf8.count <= 64,
            original.allSatisfy({ $0.isASCII && $0.isNumber })
        else { throw UsageError("say --original-transaction-id (digits), or --all with --product-id") }
        if let requestID {
            guard Options.isPlain(requestID) else {
                throw UsageError("--request-id is 1 to 128 bytes without control characters")
            }
        }
        return ExtensionOrder(
            scope: .one(originalTransactionID: original), days: days, reason: reason,
            requestIdentifier: requestID ?? UUID().uuidString.lowercased())
    }

    /// The same request (the app's, the same subscription or product, days, reason and storefronts) audited as failed
    /// in the last day and not settled since (no later line of its identifier that is not a failure), with its
    /// identifier: nil when there is none.
    static func unsettled(_ order: ExtensionOrder, app: String, in ledger: any DeskStore) async throws
        -> (at: Date, requestID: String)?
    {
        let lines = try await ledger.audit(
            AuditFilter(since: Date(timeIntervalSinceNow: -86_400), action: order.action, limit: 10_000))
        var asked = order.asked.object ?? [:]
        asked["request_id"] = nil
        var settled: Set<String> = []
        for line in lines where line.app == app {  // newest first
            guard var request = JSONValue(parsing: Array(line.request.utf8))?.object,
                let id = request["request_id"]?.string
            else { continue }
            if line.outcome != "failed" {
                settled.insert(id)
                continue
            }
            request["request_id"] = nil
            guard !settled.contains(id), asked.allSatisfy({ request[$0.key] == $0.value }) else { continue }
            return (line.at, id)
        }
        return nil
    }

    private static func productID(_ options: Options) throws -> String {
        guard let product = options.value("--product-id"), SupportDesk.isProductID(product) else {
            throw UsageError("--product-id is required: letters, digits, . _ and -")
        }
        return product
    }

    /// `--status`: where a mass extension stands; with `--follow`, asked until it is done.
    private static func status(
        _ options: Options, configuration: WorkerConfiguration, environment: AppleEnvironment
    ) async throws -> Int32 {
        let product = try productID(options)
        guard let request = options.value("--request-id"), UUID(uuidString: request) != nil else {
            throw UsageError("--request-id is required with --status: the UUID --all printed")
        }
        return try await configuration.withToolLedger { ledger in
            let desk = try SupportDesk.make(
                configuration, app: options.value("--app"), ledger: ledger, logger: ToolKafka.logger)
            while true {
                let progress = try await desk.massExtensionStatus(
                    productID: product, requestIdentifier: request, environment: environment)
                if case .refused = progress {
                    complain(progress.line)
                    return 3
                }
                emit(progress.line)
                guard !progress.isFinal, options.has("--follow") else { return 0 }
                try await Task.sleep(for: followInterval)
            }
        }
    }

    /// How often `--follow` asks (Apple's status endpoint has no documented limit; a mass request takes hours).
    static var followInterval: Duration {
        let given = ProcessInfo.processInfo.environment["RECEIPT_WORKER_EXTEND_FOLLOW_MS"].flatMap(Int.init)
        return .milliseconds(given.map { max(100, min($0, 600_000)) } ?? 10_000)
    }
}
