import Support
import DeskService
import Foundation
import Kafka
import Ledger
import ReceiptWorker

/// `receipt-worker lookup`: a purchase as support asks about it, Apple's view beside the ledger's.
enum LookupCommand {
    static let help = """
        usage: receipt-worker lookup [--config FILE] [--set key=value]... [--app NAME] [--json] [--ticket T] --by WHO
                   (--apple-order-id ID | --transaction-id ID | --order-id ID | --app-account-token UUID |
                    --user-id PLAYER | --history TRANSACTION_ID)

        A player says they paid and got nothing. Finds the purchase by the order id on the player's invoice from
        Apple (Look Up Order ID), by transaction id, by the game's order_id (what the ledger granted to it), or by
        the player's app account token (purchases Apple reported that no job claimed). Prints, per purchase,
        Apple's signed transaction (verified: product, price, refund, expiry) beside the ledger's record (the
        order and player it was granted to and when; revoked; credited unclaimed; waiting), and one line that
        names the case: "paid, granted to order X of player Y", "paid, never claimed: credit it", "refunded on
        D", "not this app's", "Sandbox". Safe to hand to support: no receipt, no signed data, no secret; a
        token only shortened. --app: the app (default, an apps.NAME, or a bundle id; default: default).
        --user-id: every purchase the ledger granted to the player, newest first; --history: the customer's whole
        history in the app at Apple (Get Transaction History) from any one of their transaction ids.
        Needs the app's App Store Server API key (apple.api.*) and the ledger (ledger.url). Each lookup is appended
        to the support desk's audit (receipt-worker ledger audit) under --by (who asks: the audit's agent is
        cli:WHO, its request says it came from the command line and, when the system has one, the login name),
        with --ticket.

        Exit codes: 0 found; 3 nothing found (or nothing that verifies as this app's); 1 Apple or the ledger did not answer; 2 usage or configuration error.
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        let options = try Options(
            arguments,
            valued: Options.configurationOptions.union([
                "--app", "--apple-order-id", "--transaction-id", "--order-id", "--app-account-token", "--user-id",
                "--history", "--ticket", "--by",
            ]), flags: ["--json"])
        let queries: [SupportDesk.Query] = [
            options.value("--apple-order-id").map(SupportDesk.Query.appleOrderID),
            options.value("--transaction-id").map(SupportDesk.Query.transactionID),
            options.value("--order-id").map(SupportDesk.Query.orderID),
            try options.uuid("--app-account-token").map { .appAccountToken($0.uuidString.lowercased()) },
            options.value("--user-id").map(SupportDesk.Query.userID),
            options.value("--history").map { SupportDesk.Query.customerOf(transactionID: $0) },
        ].compactMap { $0 }
        guard queries.count == 1, let query = queries.first else {
            throw UsageError(
                "say one of --apple-order-id, --transaction-id, --order-id, --app-account-token, --user-id or"
                    + " --history")
        }
        let ticket = try OperatorAudit.ticket(options.value("--ticket"))
        let by = try OperatorAudit.by(options.value("--by"))
        let configuration = try options.configuration(purpose: .worker)
        // The audit names the app as the desk does (its name, whether --app gave it or its bundle id): an
        // erasure of the player finds the line.
        let appName = try PlayerCommand.app(options, configuration).name
        let report = try await configuration.withToolLedger { ledger in
            let desk = try SupportDesk.make(
                configuration, app: options.value("--app"), ledger: ledger, logger: ToolKafka.logger)
            let report = try await desk.lookup(query)
            try await ledger.appendAudit(
                DeskAudit.operatorLookup(
                    query, report: report, app: appName, by: by, ticket: ticket))
            return report
        }
        if options.has("--json") {
            emit(String(decoding: report.json(), as: UTF8.self))
        } else {
            emit(report.table())
        }
        return report.purchases.contains(where: \.verified) ? 0 : 3
    }
}

/// `receipt-worker credit`: support credits a purchase no order holds, through the same ledger claim as a job.
enum CreditCommand {
    static let help = """
        usage: receipt-worker credit [--config FILE] [--set key=value]... [--app NAME] --transaction-id ID
                   --order-id ORDER --user-id PLAYER --by WHO --reason WHY [--ticket T]
                   (--apple-order-id ID | --app-account-token UUID | both)

        Credits a verified purchase that no order holds to ORDER of PLAYER: Apple's signed transaction is fetched
        and verified (Get Transaction Info), then claimed in the ledger as a job's grant is, so it is never a
        second grant, and a receipt.granted is published on topics.results (the event grant services already
        handle; credited_by and credit_reason say who asked and why, and the ledger keeps the event). A purchase
        credited unclaimed before is tied to ORDER with that credit's event_id: the grant service credits nothing
        twice. A transaction id alone proves nothing (ids are nearly sequential): the purchase must be shown to be
        the player's, by the order id on the player's invoice from Apple (--apple-order-id: Look Up Order ID must
        list the transaction) or, for a purchase that carries an app account token, by the player's token
        (--app-account-token: it must be the purchase's). Each credit, refused ones included, is appended to the
        support desk's audit (receipt-worker ledger audit) under --by (cli:WHO; the request says it came from the
        command line, with the login name when the system has one), with --ticket, in the credit's own transaction.
        A purchase without a token gets the one given, through
        Apple's Set App Account Token, so Apple's later notifications of it name the player. With
        apple.finish_transactions, the transaction is finished at Apple. A purchase Apple refunded in part is
        credited, and the refunded share taken back at once by a receipt.revoked. Refuses, and says which, a
        purchase already held by an order, refunded or revoked in all, a family member's access, of another app,
        of the Sandbox where Sandbox is not accepted, for an order id starting unclaimed: (reserved), or not shown
        to be the player's. Running it again with the same values publishes the same event again (the same
        event_id), whatever Apple says of the purchase now; while Apple still vouches for it, it checks the proof
        again and sets the token when it holds.

        Exit codes: 0 credited; 3 refused (nothing recorded by this run); 1 the ledger or the broker did not answer
        within 20 s, or Apple within retry.max_attempts (run it again: it is safe); 2 usage or configuration error.
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        let options = try Options(
            arguments,
            valued: Options.configurationOptions.union([
                "--app", "--transaction-id", "--order-id", "--user-id", "--by", "--reason", "--app-account-token",
                "--apple-order-id", "--ticket",
            ]), flags: [])
        func required(_ name: String) throws -> String {
            guard let value = options.value(name), Options.isPlain(value) else {
                throw UsageError("\(name) is required: 1 to 128 bytes without control characters")
            }
            return value
        }
        let token = try options.uuid("--app-account-token")
        let appleOrderID = options.value("--apple-order-id")
        guard token != nil || appleOrderID != nil else {
            throw UsageError("say --apple-order-id (the player's invoice) or --app-account-token (the player's token)")
        }
        let ticket = try OperatorAudit.ticket(options.value("--ticket"))
        let request = SupportDesk.CreditRequest(
            transactionID: try required("--transaction-id"), orderID: try required("--order-id"),
            userID: try required("--user-id"), by: try required("--by"), reason: try required("--reason"),
            appleOrderID: appleOrderID, appAccountToken: token)
        let configuration = try options.configuration(purpose: .worker)
        let app = try PlayerCommand.app(options, configuration).name  // as the desk names it: erasure finds it
        let (desk, outcome): (SupportDesk, SupportDesk.CreditDecision) = try await configuration.withToolLedger {
            ledger in
            let desk = try SupportDesk.make(
                configuration, app: options.value("--app"), ledger: ledger, logger: ToolKafka.logger)
            let audit: @Sendable (SupportDesk.CreditDecision) -> AuditEntry = {
                DeskAudit.operatorCredit(request, outcome: $0, app: app, ticket: ticket)
            }
            // No caps on the command line: a credit is never over one.
            let result = try await desk.credit(request, audit: audit)
            guard case .done(let outcome) = result else {
                return (desk, SupportDesk.CreditDecision.refused("over a cap"))
            }
            return (desk, outcome)
        }
        guard case .credited(let event, let original, let environment, let note, let setToken) = outcome else {
            if case .refused(let why) = outcome { complain("not credited: \(why)") }
            return 3
        }
        let followed: CreditFollowThrough
        do {
            let producer = try ToolKafka.producer(configuration)
            followed = await desk.followThrough(
                event, originalTransactionID: original, environment: environment, setToken: setToken,
                request: request, finish: configuration.apple.finishTransactions
            ) { try await producer.send(SupportDesk.message($0, configuration)) }
            await producer.close()
        } catch {
            complain("recorded, but the broker did not take the event (\(error)): run the same command again")
            return 1
        }
        if let published = followed.publishedTo {
            emit("credited: \(note); event \(event.eventID) published to \(published)")
        }
        for line in followed.notes { emit(line) }
        if let unfinished = followed.unfinished {
            complain(unfinished.replacingOccurrences(of: "the same request", with: "the same command"))
            return 1
        }
        return 0
    }
}

/// Who runs a support command, as the audit names them.
enum OperatorAudit {
    /// `--by`: who asks, required (a command line has no sign-in to say it): 1 to 128 bytes without control
    /// characters.
    static func by(_ given: String?) throws -> String {
        guard let given, Options.isPlain(given) else {
            throw UsageError("--by is required: who asks, 1 to 128 bytes without control characters")
        }
        return given
    }

    /// A ticket as the desk takes it (1 to 64 of `A-Z a-z 0-9 - _ . : # /`); `-` when none is given.
    static func ticket(_ given: String?) throws -> String {
        guard let given else { return "-" }
        guard DeskAudit.isTicket(given) else { throw UsageError("--ticket is 1 to 64 of A-Z a-z 0-9 - _ . : # /") }
        return given
    }
}
