import DeskService
import Foundation
import Kafka
import Ledger
import LedgerDomain
import ReceiptWorker
import Support
import Vocabulary

/// `receipt-worker player export` and `player erase`: a player's data requests, from the command line.
enum PlayerCommand {
    static let help = """
        usage: receipt-worker player export [--config FILE] [--set key=value]... [--app NAME] [--ticket T] --by WHO
                   (--user-id PLAYER | --order-id ORDER | --app-account-token UUID)
               receipt-worker player erase [--config FILE] [--set key=value]... [--app NAME] [--ticket T] --by WHO
                   --user-id PLAYER [--dry-run]

        A player asks for their data (GDPR article 15, the CCPA's right to know). Prints, as one JSON document
        (docs/schemas/player-export.json), everything the ledger holds about the player in the app: the purchases
        granted to them (job grants, renewals, support's credits) with the events that credited them, each one's
        refund, subscription state and Apple's refund request, the answers to every job that named them (grants
        and denials), the purchases Apple reported with their app account tokens, and the support desk's audit
        lines about them. --order-id finds the player of a job's order; --app-account-token the player of the
        purchases Apple reported with it (refused when it leads to more than one: a token is the app's to set). What the results topic and the grant
        services hold is theirs to export (docs/support-desk.md, "A player's data"). Appended to the support
        desk's audit under --by (never the data: how many of each). Needs the ledger alone (no call to Apple); on
        PostgreSQL a role that reads the desk's tables, as `ledger audit` does: the desk's (`ledger migrate
        --grant-desk-to`).

        erase: a player asks to be forgotten (GDPR article 17, the CCPA's right to delete). Every identifier of
        the player in the ledger (their user id, their orders, their app account tokens, their jobs' ids) is
        replaced by a keyed pseudonym (HMAC-SHA-256 with privacy.erasure_key_file: the same player erased twice
        gets the same one), and free text about them by "(erased)"; purchases, transaction ids, amounts and
        decisions stay (a purchase replayed later is still denied duplicate_transaction). The erasure is recorded
        and audited without the erased values (by the pseudonym), and a player.erased event is published to
        topics.results once, keyed by the user id, so that grant services erase theirs. --dry-run prints what it
        would rewrite and changes nothing. Safe to run again: after a crash or a broker that did not take the event,
        the same command finishes it. On PostgreSQL it rewrites the desk's audit: run it with a role that may, the
        desk's (ledger migrate --grant-desk-to) or the ledger's owner (docs/support-desk.md, "A player erased").

        Exit codes: 0 exported, erased (or counted); 3 no such order; 1 the ledger or the broker did not answer
        (run it again); 2 usage or configuration error (a missing privacy.erasure_key_file is named).
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        if arguments.first == "erase" { return try await erase(Array(arguments.dropFirst())) }
        guard arguments.first == "export" else { throw UsageError("say player export or player erase (see --help)") }
        let options = try Options(
            Array(arguments.dropFirst()),
            valued: Options.configurationOptions.union([
                "--app", "--ticket", "--by", "--user-id", "--order-id", "--app-account-token",
            ]),
            flags: [])
        let by = try OperatorAudit.by(options.value("--by"))
        let ticket = try OperatorAudit.ticket(options.value("--ticket"))
        let queries: [SupportDesk.PlayerQuery] = [
            options.value("--user-id").map(SupportDesk.PlayerQuery.userID),
            options.value("--order-id").map(SupportDesk.PlayerQuery.orderID),
            try options.uuid("--app-account-token").map { .appAccountToken($0.uuidString.lowercased()) },
        ].compactMap { $0 }
        guard queries.count == 1, let query = queries.first else {
            throw UsageError("say --user-id, --order-id or --app-account-token")
        }
        for value in [options.value("--user-id"), options.value("--order-id")].compactMap({ $0 }) {
            guard Options.isPlain(value) else {
                throw UsageError("--user-id and --order-id are 1 to 128 bytes without control characters")
            }
        }
        let configuration = try options.configuration(purpose: .ledger)
        let app = try self.app(options, configuration)
        let exported = try await configuration.withToolLedger { ledger in
            let exported = try await PlayerData.export(query, app: app, ledger: ledger)
            try await ledger.appendAudit(
                DeskAudit.operatorExport(query, found: exported, app: app.name, by: by, ticket: ticket))
            return exported
        }
        guard let (_, document) = exported else {
            complain(
                "the ledger holds no grant for that order, or no one player's purchase with that token, in app \(app.name)"
            )
            return 3
        }
        emit(document.text)
        return 0
    }

    /// The app `--app` names (default: the default app).
    static func app(_ options: Options, _ configuration: WorkerConfiguration) throws -> PlayerData.App {
        let wanted = options.value("--app") ?? "default"
        guard
            let (index, found) = configuration.allApps.enumerated().first(where: {
                $0.element.name == wanted || $0.element.bundleID == wanted
            })
        else { throw UsageError("--app: no configured app is named \(wanted) (default, an apps.NAME, or a bundle id)") }
        return PlayerData.App(
            scope: index == 0 ? .defaultApp : AppScope(found.bundleID), name: found.name, bundleID: found.bundleID)
    }

    static func erase(_ arguments: [String]) async throws -> Int32 {
        let options = try Options(
            arguments, valued: Options.configurationOptions.union(["--app", "--ticket", "--by", "--user-id"]),
            flags: ["--dry-run"])
        let by = try OperatorAudit.by(options.value("--by"))
        let ticket = try OperatorAudit.ticket(options.value("--ticket"))
        guard let userID = options.value("--user-id"), Options.isPlain(userID) else {
            throw UsageError("--user-id is required: 1 to 128 bytes without control characters")
        }
        let configuration = try options.configuration(purpose: .worker)
        guard let bytes = configuration.erasureKey else {
            throw ConfigurationError(
                .missingKey, key: "privacy.erasure_key_file", reason: "is required by player erase")
        }
        guard let key = PlayerData.ErasureKey(bytes) else {
            throw ConfigurationError(
                .unusable, key: "privacy.erasure_key_file", reason: "OpenSSL cannot make a MAC with it")
        }
        let app = try self.app(options, configuration)
        let dryRun = options.has("--dry-run")
        let outcome = try await configuration.withToolLedger { ledger in
            let outcome = try await PlayerData.erase(
                userID: userID, app: app, key: key, ledger: ledger,
                by: DeskAudit.operatorSubject(by),
                dryRun: dryRun)
            try await ledger.appendAudit(DeskAudit.operatorErasure(outcome, app: app.name, by: by, ticket: ticket))
            return outcome
        }
        switch outcome {
        case .refused(let why):
            complain("not erased: \(why)")
            return 3
        case .dryRun(let counts, let pseudonym):
            emit("dry run: would rewrite \(PlayerData.erasureSummary(counts).text) (the player would be \(pseudonym))")
            return 0
        case .erased(let counts, let pseudonym, nil):
            emit("erased before: the player is \(pseudonym); its event was published (this run: \(counts.total) rows)")
            return 0
        case .erased(let counts, let pseudonym, let event?):
            do {
                let producer = try ToolKafka.producer(configuration)
                _ = try await producer.send(SupportDesk.message(event, configuration))
                await producer.close()
            } catch {
                complain(
                    "erased, but the broker did not take its player.erased event (\(error)): run the same command again"
                )
                return 1
            }
            try await configuration.withToolLedger { ledger in
                try await PlayerData.markPublished(pseudonym: pseudonym, app: app, ledger: ledger)
            }
            emit(
                "erased: the player is \(pseudonym) now; rewrote \(PlayerData.erasureSummary(counts).text); event "
                    + "\(event.eventID) published to \(configuration.topics.results)")
            return 0
        }
    }
}
