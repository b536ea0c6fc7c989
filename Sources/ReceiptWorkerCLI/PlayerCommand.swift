import DeskService
import Foundation
import Ledger
import LedgerDomain
import ReceiptWorker
import Support
import Vocabulary

/// `receipt-worker player export`: a player's data request, from the command line.
enum PlayerCommand {
    static let help = """
        usage: receipt-worker player export [--config FILE] [--set key=value]... [--app NAME] [--ticket T] --by WHO
                   (--user-id PLAYER | --order-id ORDER)

        A player asks for their data (GDPR article 15, the CCPA's right to know). Prints, as one JSON document
        (docs/schemas/player-export.json), everything the ledger holds about the player in the app: the purchases
        granted to them (job grants, renewals, support's credits) with the events that credited them, each one's
        refund, subscription state and Apple's refund request, the answers to every job that named them (grants
        and denials), the purchases Apple reported with their app account tokens, and the support desk's audit
        lines about them. --order-id finds the player of a job's order. What the results topic and the grant
        services hold is theirs to export (docs/support-desk.md, "A player's data"). Appended to the support
        desk's audit under --by (never the data: how many of each). Needs the ledger alone (no call to Apple); on
        PostgreSQL a role that reads the desk's tables, as `ledger audit` does: the desk's (`ledger migrate
        --grant-desk-to`).

        Exit codes: 0 exported; 3 no such order; 1 the ledger did not answer; 2 usage or configuration error.
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        guard arguments.first == "export" else { throw UsageError("say player export (see --help)") }
        let options = try Options(
            Array(arguments.dropFirst()),
            valued: Options.configurationOptions.union(["--app", "--ticket", "--by", "--user-id", "--order-id"]),
            flags: [])
        let by = try OperatorAudit.by(options.value("--by"))
        let ticket = try OperatorAudit.ticket(options.value("--ticket"))
        let queries: [SupportDesk.PlayerQuery] = [
            options.value("--user-id").map(SupportDesk.PlayerQuery.userID),
            options.value("--order-id").map(SupportDesk.PlayerQuery.orderID),
        ].compactMap { $0 }
        guard queries.count == 1, let query = queries.first else { throw UsageError("say --user-id or --order-id") }
        for value in [options.value("--user-id"), options.value("--order-id")].compactMap({ $0 }) {
            guard !value.isEmpty, value.utf8.count <= 128,
                !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else { throw UsageError("--user-id and --order-id are 1 to 128 bytes without control characters") }
        }
        let configuration = try options.configuration(purpose: .ledger)
        let wanted = options.value("--app") ?? "default"
        guard
            let (index, found) = configuration.allApps.enumerated().first(where: {
                $0.element.name == wanted || $0.element.bundleID == wanted
            })
        else { throw UsageError("--app: no configured app is named \(wanted) (default, an apps.NAME, or a bundle id)") }
        let app = PlayerData.App(
            scope: index == 0 ? .defaultApp : AppScope(found.bundleID), name: found.name, bundleID: found.bundleID)
        let exported = try await configuration.withToolLedger { ledger in
            let exported = try await PlayerData.export(query, app: app, ledger: ledger)
            try await ledger.appendAudit(
                DeskAudit.operatorExport(query, found: exported, app: app.name, by: by, ticket: ticket))
            return exported
        }
        guard let (_, document) = exported else {
            complain("the ledger holds no grant for that order in app \(app.name)")
            return 3
        }
        emit(document.text)
        return 0
    }
}
