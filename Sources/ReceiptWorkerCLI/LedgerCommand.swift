import Foundation
import Ledger
import ReceiptWorker
import Observability

/// `receipt-worker ledger migrate`, `ledger prune` and `ledger accept-offsets`: the ledger's upkeep, by its
/// owner, by cron, or by an operator after losing a ledger.
enum LedgerCommand {
    static let help = """
        usage: receipt-worker ledger migrate [--config FILE] [--set key=value]... [--grant-to ROLE]
                   [--grant-desk-to ROLE] [--print]
               receipt-worker ledger prune [--config FILE] [--set key=value]... [--older-than-days N]
               receipt-worker ledger accept-offsets [--config FILE] [--set key=value]...
               receipt-worker ledger backup --to PATH [--config FILE] [--set key=value]...
               receipt-worker ledger rewind-group [--config FILE] [--set key=value]... [--dry-run] [--accept-loss]
               receipt-worker ledger audit [--config FILE] [--set key=value]... [--since TIME] [--agent SUBJECT]
                   [--player USER_ID] [--limit N] [--json]

        migrate  applies the PostgreSQL ledger's missing migrations in ledger.schema (default
                 receipt_worker) and lists them. Run it as the schema's owner; the worker can then run
                 as a role that may only read and write (docs/deployment.md, "The PostgreSQL ledger"). The
                 worker also applies missing migrations at start-up when its role may.
                 Each step runs beside traffic: short transactions under a 2 s lock_timeout, retried;
                 indexes built CONCURRENTLY; backfills in bounded batches. It prints each step's
                 duration and the longest lock it held.
                 --grant-to ROLE then grants the worker's role what it needs on the schema (rows and
                 functions; nothing to create), every run, so a migration that adds a table is granted
                 too (the migration Job does this; ROLE must exist).
                 --grant-desk-to ROLE grants the support desk's role what it needs (`receipt-worker
                 desk`): reads, a credit's claim, the desk's tables; the audit only appended to.
                 --print: print every migration's SQL (idempotent; each step on its own, as the
                 migration runs it) and, with --grant-to ROLE, the grants; connects to nothing, for a DBA
                 to review and run with psql.
        prune    deletes, in bounded batches, the results stored for re-delivered jobs decided more
                 than ledger.results_retention_days (or N) days ago, handled notifications past
                 ledger.notifications_retention_days, and what is settled (consumption requests,
                 reported purchases, reinstated states) past ledger.settled_retention_days; prints
                 how many of each. Grants and refunds are never deleted. The worker prunes hourly by
                 itself; this is for a one-off or a cron job.
        accept-offsets
                 the worker refuses to start on a ledger that does not hold what its consumer group
                 (kafka.group.id) has processed: a ledger replaced, started empty on a fresh volume, or
                 restored from an older copy, whose missing grants would let purchases be granted again.
                 When the ledger is new on purpose (the old one is lost, and what it held is accepted as
                 lost), this records the group's committed offsets in it, so the worker starts. It prints
                 them. Needs the kafka.* keys besides the ledger's.
        backup   copies a SQLite ledger to PATH (a new file) while the worker runs, with SQLite's online
                 backup API; prints the copy's size. A PostgreSQL ledger is backed up with its own tools
                 (pg_basebackup, or pg_dump): docs/runbook.md, "Backup and restore".
        rewind-group
                 after a ledger is restored from a backup: moves the consumer group back to the offsets
                 the ledger recorded, wherever the group committed past them, so the workers decide again
                 every job the backup lacks (a grant decided again repeats its event id). Stop every
                 worker of the group first. Prints each partition moved; --dry-run moves nothing. Needs
                 the kafka.* keys besides the ledger's. When a topic no longer holds jobs the backup
                 lacks (older than the topic's retention), it moves nothing and exits 1: those purchases
                 could be granted again. --accept-loss moves the group to the first offset kept anyway.
        audit    lists the support desk's audit, newest first: every lookup and credit of `receipt-worker
                 desk` and of the `lookup` and `credit` commands, refused ones included (who, the ticket,
                 what was asked, what was answered or recorded, when). --since an RFC 3339 time, --agent a
                 token's subject, --player a user id, --limit (default 100, at most 10000); --json: one
                 JSON object a line, for a SIEM.

        Reads only the ledger's keys (ledger.url or ledger.url_file, ledger.schema, ...) and apple.bundle_id
        (recorded in the ledger: the default app's rows keep a scope of their own): not Apple's key or secret.
        A ledger of a release before 1.0.0 is refused, untouched: migrate it with 1.0.0 first.
        Exit codes: 0 done; 1 the ledger failed; 2 usage or configuration error.
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        let actions = ["migrate", "prune", "accept-offsets", "backup", "rewind-group", "audit"]
        guard let action = arguments.first, actions.contains(action) else {
            throw UsageError(
                "ledger needs a subcommand: migrate, prune, accept-offsets, backup, rewind-group or audit")
        }
        let rest = Array(arguments.dropFirst())
        switch action {
        case "migrate":
            let options = try Options(
                rest, valued: Options.configurationOptions.union(["--grant-to", "--grant-desk-to"]), flags: ["--print"])
            let roles = (options.value("--grant-to"), options.value("--grant-desk-to"))
            for (name, role) in [("--grant-to", roles.0), ("--grant-desk-to", roles.1)] {
                if let role, !PostgresSchema.isIdentifier(role) {
                    throw UsageError("\(name) must be a lower-case SQL name: a-z, 0-9 and _")
                }
                // Not a role but every role (or whichever runs the statement): the ledger's rows to anyone.
                if let role, ["public", "current_user", "session_user", "current_role"].contains(role) {
                    throw UsageError("\(name) \(role) names no one role: give the worker's (or the desk's) own role")
                }
            }
            let configuration = try options.configuration(purpose: .ledger)
            return try await migrate(
                configuration, printOnly: options.has("--print"), grantingTo: roles.0, deskRole: roles.1)
        case "audit":
            return try await AuditCommand.run(rest)
        case "accept-offsets":
            let options = try Options(rest, valued: Options.configurationOptions, flags: [])
            let configuration = try options.configuration(purpose: .ledger)
            let recorded = try await LedgerGroupCheck.acceptGroupOffsets(configuration, logger: ToolKafka.logger)
            for (partition, offset) in recorded { emit("\(partition) \(offset)") }
            emit(
                "recorded \(recorded.count) committed offset(s) of group \(configuration.groupID)"
                    + " in the ledger: the worker starts on it")
            return 0
        case "backup":
            let options = try Options(rest, valued: Options.configurationOptions.union(["--to"]), flags: [])
            guard let destination = options.value("--to") else { throw UsageError("ledger backup needs --to PATH") }
            let configuration = try options.configuration(purpose: .ledger)
            guard configuration.ledgerURL.hasPrefix("sqlite:"), configuration.ledgerURL != "sqlite::memory:" else {
                throw UsageError(
                    "ledger backup copies a SQLite ledger; back up PostgreSQL with pg_basebackup or pg_dump"
                        + " (docs/runbook.md, \"Backup and restore\")")
            }
            let bytes = try SQLiteBackup.copy(
                from: String(configuration.ledgerURL.dropFirst("sqlite:".count)), to: destination)
            emit("copied the ledger to \(destination) (\(bytes) bytes)")
            return 0
        case "rewind-group":
            let options = try Options(
                rest, valued: Options.configurationOptions, flags: ["--dry-run", "--accept-loss"])
            let configuration = try options.configuration(purpose: .ledger)
            let dryRun = options.has("--dry-run")
            let rewinds = try await LedgerGroupCheck.rewindGroup(
                configuration, logger: ToolKafka.logger, dryRun: dryRun, acceptLoss: options.has("--accept-loss"))
            for rewind in rewinds {
                emit(
                    "\(rewind.partition) \(rewind.committed) -> \(rewind.recorded)"
                        + " (\(rewind.committed - rewind.recorded) message(s) to decide again"
                        + (rewind.lost > 0 ? "; \(rewind.lost) the ledger lacks are past the topic's retention)" : ")"))
            }
            emit(
                rewinds.isEmpty
                    ? "group \(configuration.groupID) committed nothing past what the ledger recorded: nothing to rewind"
                    : "\(dryRun ? "would move" : "moved") group \(configuration.groupID) back on \(rewinds.count)"
                        + " partition(s): start the workers")
            return 0
        default:
            let options = try Options(
                rest, valued: Options.configurationOptions.union(["--older-than-days"]), flags: [])
            let configuration = try options.configuration(purpose: .ledger)
            let days = try options.integer("--older-than-days", in: 1...36_500) ?? configuration.resultsRetentionDays
            guard days > 0 else {
                throw UsageError("ledger.results_retention_days is 0 (keep forever): give --older-than-days N")
            }
            let cutoff = Date(timeIntervalSinceNow: -Double(days) * 86_400)
            let (deleted, others) = try await configuration.withToolLedger { ledger in
                (
                    try await ledger.pruneResults(decidedBefore: cutoff),
                    try await ledger.prune(configuration.retention())
                )
            }
            emit("deleted \(deleted) stored result(s) decided more than \(days) day(s) ago")
            for kind in Retention.Kind.allCases { emit("deleted \(others[kind] ?? 0) \(kind.rawValue) past retention") }
            return 0
        }
    }

    private static func migrate(
        _ configuration: WorkerConfiguration, printOnly: Bool, grantingTo role: String?, deskRole: String?
    ) async throws -> Int32 {
        // The loader validated the name already. The default app's bundle id, when set, is recorded in the ledger
        // (its rows have the app ""): a worker configured with another is refused.
        let bundleID = configuration.defaultApp.bundleID
        guard
            let schema = PostgresSchema(
                name: configuration.ledgerSchema, defaultBundleID: bundleID.isEmpty ? nil : bundleID)
        else { return 2 }
        if printOnly {
            print(schema.script(grantingTo: role, deskRole: deskRole), terminator: "")
            return 0
        }
        guard !configuration.ledgerURL.hasPrefix("sqlite:") else {
            // SQLite has one writer, the worker, which migrates its file when it opens it.
            emit("ledger.url is SQLite: the worker migrates its file itself; nothing to do")
            return 0
        }
        let applied = try await schema.migrate(url: configuration.ledgerURL, grantingTo: role, deskRole: deskRole)
        for applied in applied {
            emit(
                "applied \(applied.migration.version): \(applied.migration.description) in "
                    + String(format: "%.2f s", applied.duration.inSeconds) + "; longest lock "
                    + String(format: "%.3f s", applied.longestLock.inSeconds)
                    + (applied.longestLockStep.isEmpty ? "" : " (\(applied.longestLockStep))"))
        }
        emit("ledger schema \(schema.name) is at version \(schema.latestVersion)")
        if let role { emit("granted role \(role) what the worker needs on schema \(schema.name)") }
        if let deskRole { emit("granted role \(deskRole) what the support desk needs on schema \(schema.name)") }
        return 0
    }
}
