import Foundation
import Kafka
import Ledger
import ReceiptWorker

/// `receipt-worker lookup`: a purchase as support asks about it, Apple's view beside the ledger's.
enum LookupCommand {
    static let help = """
        usage: receipt-worker lookup [--config FILE] [--set key=value]... [--app NAME] [--json]
                   (--apple-order-id ID | --transaction-id ID | --order-id ID | --app-account-token UUID)

        A player says they paid and got nothing. Finds the purchase by the order id on the player's invoice from
        Apple (Look Up Order ID), by transaction id, by the game's order_id (what the ledger granted to it), or by
        the player's app account token (purchases Apple reported that no job claimed). Prints, per purchase,
        Apple's signed transaction (verified: product, price, refund, expiry) beside the ledger's record (the
        order and player it was granted to and when; revoked; credited unclaimed; waiting), and one line that
        names the case: "paid, granted to order X of player Y", "paid, never claimed: credit it", "refunded on
        D", "not this app's", "Sandbox". Safe to hand to support: no receipt, no signed data, no secret; a
        token only shortened. --app: the app (default, an apps.NAME, or a bundle id; default: default).
        Needs the app's App Store Server API key (apple.api.*) and the ledger (ledger.url).

        Exit codes: 0 found; 3 nothing found; 1 Apple or the ledger did not answer; 2 usage or configuration error.
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        let options = try Options(
            arguments,
            valued: Options.configurationOptions.union([
                "--app", "--apple-order-id", "--transaction-id", "--order-id", "--app-account-token",
            ]), flags: ["--json"])
        let queries: [SupportDesk.Query] = [
            options.value("--apple-order-id").map(SupportDesk.Query.appleOrderID),
            options.value("--transaction-id").map(SupportDesk.Query.transactionID),
            options.value("--order-id").map(SupportDesk.Query.orderID),
            try options.value("--app-account-token").map {
                guard let uuid = UUID(uuidString: $0) else { throw UsageError("--app-account-token must be a UUID") }
                return SupportDesk.Query.appAccountToken(uuid.uuidString.lowercased())
            },
        ].compactMap { $0 }
        guard queries.count == 1, let query = queries.first else {
            throw UsageError(
                "say one of --apple-order-id, --transaction-id, --order-id or --app-account-token")
        }
        let configuration = try options.configuration(purpose: .worker)
        let report = try await configuration.withToolLedger { ledger in
            let desk = try SupportDesk.make(
                configuration, app: options.value("--app"), ledger: ledger, logger: ToolKafka.logger)
            return try await desk.lookup(query)
        }
        if options.has("--json") {
            emit(String(decoding: report.json(), as: UTF8.self))
        } else {
            emit(report.table())
        }
        return report.purchases.isEmpty ? 3 : 0
    }
}

/// `receipt-worker credit`: support credits a purchase no order holds, through the same ledger claim as a job.
enum CreditCommand {
    static let help = """
        usage: receipt-worker credit [--config FILE] [--set key=value]... [--app NAME] --transaction-id ID
                   --order-id ORDER --user-id PLAYER --by WHO --reason WHY [--app-account-token UUID]

        Credits a verified purchase that no order holds to ORDER of PLAYER: Apple's signed transaction is fetched
        and verified (Get Transaction Info), then claimed in the ledger as a job's grant is, so it is never a
        second grant, and a receipt.granted is published on topics.results (the event grant services already
        handle; credited_by and credit_reason say who asked and why, and the ledger keeps the event). A purchase
        credited unclaimed before is tied to ORDER with that credit's event_id: the grant service credits nothing
        twice. With --app-account-token (the player's UUID), Apple's Set App Account Token is called on the
        purchase, so Apple's later notifications of it name the player. Refuses, and says which, a purchase
        already held by an order, refunded or revoked, of another app, or of the Sandbox where Sandbox is not
        accepted. Running it again with the same values publishes the same event again (the same event_id).

        Exit codes: 0 credited; 3 refused (nothing recorded); 1 Apple, the ledger or the broker did not answer
        (run it again: it is safe); 2 usage or configuration error.
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        let options = try Options(
            arguments,
            valued: Options.configurationOptions.union([
                "--app", "--transaction-id", "--order-id", "--user-id", "--by", "--reason", "--app-account-token",
            ]), flags: [])
        func required(_ name: String) throws -> String {
            guard let value = options.value(name), !value.isEmpty, value.utf8.count <= 128,
                !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else { throw UsageError("\(name) is required: 1 to 128 bytes without control characters") }
            return value
        }
        let request = SupportDesk.CreditRequest(
            transactionID: try required("--transaction-id"), orderID: try required("--order-id"),
            userID: try required("--user-id"), by: try required("--by"), reason: try required("--reason"))
        let token = try options.value("--app-account-token").map {
            guard let uuid = UUID(uuidString: $0) else { throw UsageError("--app-account-token must be a UUID") }
            return uuid
        }
        let configuration = try options.configuration(purpose: .worker)
        let (desk, outcome) = try await configuration.withToolLedger { ledger in
            let desk = try SupportDesk.make(
                configuration, app: options.value("--app"), ledger: ledger, logger: ToolKafka.logger)
            return (desk, try await desk.credit(request))
        }
        guard case .credited(let event, let original, let environment, let note) = outcome else {
            if case .refused(let why) = outcome { complain("not credited: \(why)") }
            return 3
        }
        let producer = try ToolKafka.producer(configuration)
        do {
            let report = try await producer.send(SupportDesk.message(event, configuration))
            await producer.close()
            emit("credited: \(note); event \(event.eventID) published to \(report.topic)[\(report.partition)]")
        } catch {
            await producer.close()
            complain("recorded, but the broker did not take the event (\(error)): run the same command again")
            return 1
        }
        guard let token else {
            emit("no --app-account-token: Apple's later notifications of this purchase will not name the player")
            return 0
        }
        switch try await desk.setAccountToken(token, originalTransactionID: original, environment: environment) {
        case .done:
            emit("Apple's app account token of transaction \(original) set: its notifications name the player")
            return 0
        case .notFound:
            complain("credited; Apple does not know transaction \(original) for Set App Account Token")
        case .refused(let status, let code):
            let why = code == 4000185 ? "a family member's transaction" : "error \(code.map(String.init) ?? "none")"
            complain("credited; Apple refused Set App Account Token (HTTP \(status), \(why))")
        }
        return 1
    }
}
