import DeskService
import Foundation
import HTTPServerKit
import Ledger
import Observability
import ReceiptWorker

/// `receipt-worker desk`: the support desk (docs/support-desk.md).
enum DeskCommand {
    static let help = """
        usage: receipt-worker desk [--config FILE] [--set key=value]...

        Serves the support desk on desk.listen: the web console (/desk/) and its API (/desk/api/...), behind the
        studio's OpenID Connect sign-in (desk.oidc.*), and /metrics, /healthz, /readyz on metrics.listen. The
        desk holds the App Store Server API key, the ledger's desk role and a producer of topics.results; the
        agents hold none of them. Lookups and credits follow the same rules as `lookup` and `credit`, each
        audited (receipt-worker ledger audit). Roles, caps, sessions and the threat model:
        docs/support-desk.md. The ledger is never migrated here: run `ledger migrate` first.
        Ready once the provider's keys are fetched, while the ledger answers.
        SIGTERM or SIGINT: stop answering, exit 0.
        Exit codes: 0 stopped; 1 runtime failure; 2 configuration error (a desk.* key missing, naming it).
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        let options = try Options(arguments, valued: Options.configurationOptions, flags: [])
        let configuration = try options.configuration(purpose: .worker)
        let logger = Logger(label: "receipt-worker")
        signal(SIGPIPE, SIG_IGN)
        _ = DescriptorBudget.raiseToHardLimit()
        let code = await ExitStatus.serve(try DeskProcess.group(configuration, logger: logger), logger: logger)
        if code == 0 { logger.info("support desk stopped") }
        return code
    }
}

/// `receipt-worker ledger audit`: the desk's audit, for an operator or a SIEM.
enum AuditCommand {
    static func run(_ arguments: [String]) async throws -> Int32 {
        let options = try Options(
            arguments, valued: Options.configurationOptions.union(["--since", "--agent", "--player", "--limit"]),
            flags: ["--json"])
        var filter = AuditFilter()
        if let since = options.value("--since") {
            guard let date = DeskAudit.time(since) else { throw UsageError("--since must be an RFC 3339 time") }
            filter.since = date
        }
        filter.agent = options.value("--agent")
        filter.player = options.value("--player")
        if let limit = options.value("--limit") {
            guard let count = Int(limit), (1...10_000).contains(count) else {
                throw UsageError("--limit must be 1 to 10000")
            }
            filter.limit = count
        }
        let configuration = try options.configuration(purpose: .ledger)
        let lines = try await configuration.withToolLedger { try await $0.audit(filter) }
        for line in lines {
            emit(options.has("--json") ? DeskAudit.jsonLine(line) : DeskAudit.textLine(line))
        }
        return 0
    }
}
