import Foundation
import Observability

/// One step of a PostgreSQL migration, as it runs beside traffic: no step holds a lock that blocks the ledger's
/// writes for longer than a catalog change, and none waits for one for long.
public enum MigrationStep: Sendable {
    /// Statements in one short transaction under `lock_timeout`: a lock not granted in time (a long transaction
    /// holds it) rolls the step back, and it is tried again a little later.
    case transaction([String])
    /// An index built with `CREATE [UNIQUE] INDEX CONCURRENTLY`, outside any transaction, without blocking
    /// writes; an invalid leftover of an interrupted build of it (`name`) is dropped first.
    case index(name: String, create: String)
}

extension PostgresSchema {
    /// A migration applied: how long it took, and the longest a step held its locks (a transactional step's
    /// duration: what writers may have waited behind).
    public struct Applied: Sendable {
        public let migration: Migration
        public let duration: Duration
        public let longestLock: Duration
        public let longestLockStep: String
    }

    /// How long a migration step waits for a lock before it gives up and tries again, and how often it tries.
    static let lockTimeoutMs = 2_000
    static let lockAttempts = 90
    /// A migration's own statement timeout: a step is no request on a payment path. Index builds have none.
    static let migrationStatementTimeoutMs = 600_000

    /// The migrations the database lacks (reading only: any role may ask).
    func pending(on connection: PostgresConnection) throws -> [Migration] {
        let applied = try appliedVersions(on: connection)
        return migrations.filter { !applied.contains($0.version) }
    }

    private func appliedVersions(on connection: PostgresConnection) throws -> Set<Int> {
        guard try connection.query("SELECT to_regclass('\(name).schema_migrations')::text").first ?? nil != nil else {
            return []
        }
        return Set(
            try connection.query("SELECT version FROM \(name).schema_migrations").compactMap { $0.flatMap(Int.init) })
    }

    /// Applies the migrations the database lacks, each step as ``MigrationStep`` says, under the session lock of
    /// migrations (one migrator at a time, whichever replica or Job: the steps span transactions, so it is a
    /// session lock, and a migration needs a connection of its own, not one behind PgBouncer in transaction
    /// pooling). A database already at the latest version is only read. Returns what was applied.
    func migrate(on connection: PostgresConnection, logger: Logger? = nil) throws -> [Applied] {
        guard !(try pending(on: connection)).isEmpty else {
            try checkDefaultApp(on: connection)
            return []
        }
        // Tried, not waited for: a statement waiting for the lock would hold a snapshot, and the holder's
        // CREATE INDEX CONCURRENTLY waits for every older snapshot to end: each would wait for the other.
        while try connection.query("SELECT pg_try_advisory_lock(\(Self.migrationLock))").first != "t" {
            Thread.sleep(forTimeInterval: 0.5)
        }
        defer { _ = try? connection.query("SELECT pg_advisory_unlock(\(Self.migrationLock))") }
        let session = try SessionCheck(connection)
        let applied = try appliedVersions(on: connection)
        let pending = migrations.filter { !applied.contains($0.version) }
        if !applied.isEmpty && !applied.contains(LedgerMigrations.baseline) {
            throw LedgerError.beforeBaseline("schema \(name) at migration \(applied.max() ?? 0)")
        }
        if applied.isEmpty, try connection.query("SELECT (\(hasUnversionedTables))::text").first == "true" {
            throw LedgerError.beforeBaseline("a ledger's tables, and no migration recorded in schema \(name)")
        }
        var done: [Applied] = []
        do {
            if !pending.isEmpty { _ = try run(.transaction(bootstrap), on: connection) }
            for migration in pending {
                let started = ContinuousClock.now
                var longest: (Duration, String) = (.zero, "")
                for step in migration.steps {
                    try session.confirm()
                    let held = try run(step, on: connection)
                    if held > longest.0 { longest = (held, Self.describe(step)) }
                }
                _ = try run(.transaction([record(migration)]), on: connection)
                let applied = Applied(
                    migration: migration, duration: ContinuousClock.now - started, longestLock: longest.0,
                    longestLockStep: longest.1)
                logger?.notice(
                    "ledger schema migrated",
                    [
                        "schema": name, "version": String(migration.version), "migration": migration.description,
                        "seconds": String(format: "%.3f", applied.duration.inSeconds),
                        "longest_lock_seconds": String(format: "%.3f", applied.longestLock.inSeconds),
                    ])
                done.append(applied)
            }
        } catch let error as LedgerError where error.reason.contains("permission denied") {
            // A least-privilege role meeting a schema not yet migrated: say who must do what.
            throw LedgerError(
                .notMigrated,
                "schema \(name) lacks migrations \(pending.map { String($0.version) }.joined(separator: ", ")) and"
                    + " this role may not apply them: run `receipt-worker ledger migrate` as the schema's owner"
                    + " (\(error.reason))")
        } catch let error as LedgerError where connection.isHealthy && error.code != .misconfigured {
            // The server answered and the migration failed (a lock never granted, a statement refused): retrying
            // for ever at start-up would hide it. Said once, and the process exits.
            throw LedgerError(
                .migrationFailed,
                "migrating schema \(name) failed: \(error.reason); nothing half done is lost: run"
                    + " `receipt-worker ledger migrate` again (each step is idempotent)")
        }
        try checkDefaultApp(on: connection)
        return done
    }

    /// The server session a migration's lock belongs to. Its steps span transactions under one session lock
    /// (and a concurrent index build cannot run in a transaction): behind PgBouncer in transaction pooling,
    /// each transaction may land on another server connection, where the lock is not held. PgBouncer reuses
    /// the connection a lone client just released (its default, server_round_robin = 0), so a start-up
    /// migration through it usually keeps one session; when it does not, the migration stops before its next
    /// step, with what to do, instead of running unlocked.
    private struct SessionCheck {
        let connection: PostgresConnection
        let backend: String?

        init(_ connection: PostgresConnection) throws {
            self.connection = connection
            self.backend = try connection.query("SELECT pg_backend_pid()::text").first ?? nil
        }

        func confirm() throws {
            let now = try connection.query("SELECT pg_backend_pid()::text").first ?? nil
            guard now == backend else {
                throw LedgerError(
                    .misconfigured,
                    "the migration's statements reached more than one server session (a pooler in transaction"
                        + " pooling, such as PgBouncer's default): run `receipt-worker ledger migrate` on a direct"
                        + " connection to PostgreSQL (deploy/kubernetes/migrate-job.yaml) and start the workers with"
                        + " ledger.migrate_on_start=false", key: "ledger.url")
            }
        }
    }

    /// Runs one step; returns how long it held locks writers could wait behind (a transaction's duration;
    /// zero for a concurrent index build, which blocks no writer).
    private func run(_ step: MigrationStep, on connection: PostgresConnection) throws -> Duration {
        switch step {
        case .transaction(let statements):
            return try retryingLocks(on: connection) {
                let started = ContinuousClock.now
                try connection.transaction([
                    "lock_timeout = \(Self.lockTimeoutMs)", "statement_timeout = \(Self.migrationStatementTimeoutMs)",
                ]) {
                    for statement in statements { try connection.query(statement) }
                }
                return ContinuousClock.now - started
            }
        case .index(let index, let create):
            return try retryingLocks(on: connection) {
                try connection.query("SET lock_timeout = \(Self.lockTimeoutMs)")
                try connection.query("SET statement_timeout = 0")
                defer {
                    _ = try? connection.query("RESET lock_timeout")
                    _ = try? connection.query("RESET statement_timeout")
                }
                let invalid = try connection.query(
                    """
                    SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                        JOIN pg_namespace n ON n.oid = c.relnamespace
                        WHERE n.nspname = $1 AND c.relname = $2 AND NOT i.indisvalid
                    """, [name, index])
                if !invalid.isEmpty { try connection.query("DROP INDEX CONCURRENTLY IF EXISTS \(name).\(index)") }
                // CONCURRENTLY builds in the schema of its table: the name is unqualified in CREATE.
                try connection.query(create)
                return .zero
            }
        }
    }

    /// Runs `body`, again after a pause when a lock was not granted in time (or a deadlock broke it), up to
    /// ``lockAttempts`` times: a migration yields to the traffic rather than queueing every writer behind it.
    private func retryingLocks<T>(on connection: PostgresConnection, _ body: () throws -> T) throws -> T {
        var delay = 0.25
        for attempt in 1...Self.lockAttempts {
            do {
                return try body()
            } catch let error as LedgerError
                where (error.sqlstate == "55P03" || error.sqlstate == "40P01") && attempt < Self.lockAttempts
            {
                Thread.sleep(forTimeInterval: delay)
                delay = min(delay * 2, 5)
            }
        }
        throw LedgerError(.unavailable, "a migration step never got its lock")
    }

    static func describe(_ step: MigrationStep) -> String {
        switch step {
        case .transaction(let statements):
            return statements.first.map { String($0.prefix(80)).replacingOccurrences(of: "\n", with: " ") } ?? ""
        case .index(let name, _): return "index \(name)"
        }
    }

    /// Every migration as a script for psql (each step as the worker runs it: transactions, concurrent index
    /// builds outside them): idempotent, so it can be run again. Then, with
    /// `role`, the grants of the worker's role. Run it on a connection of its own (not through PgBouncer in
    /// transaction pooling): it takes a session lock and builds indexes concurrently.
    public func script(grantingTo role: String? = nil, deskRole: String? = nil) -> String {
        var parts = [
            "\\set ON_ERROR_STOP on", "SELECT pg_advisory_lock(\(Self.migrationLock));",
            "BEGIN;\n\n" + bootstrap.map { $0 + ";" }.joined(separator: "\n\n") + "\n\nCOMMIT;",
        ]
        for migration in migrations {
            parts.append("-- \(migration.version): \(migration.description)")
            for step in migration.steps { parts.append(scriptPart(step)) }
            parts.append(record(migration) + ";")
        }
        if let role {
            parts.append("-- the worker's role: rows and functions, nothing to create")
            parts += grants(to: role).map { $0 + ";" }
        }
        if let deskRole {
            parts.append("-- the support desk's role: reads, a credit's claim, its own tables; the audit appended to")
            parts += deskGrants(to: deskRole).map { $0 + ";" }
        }
        parts.append("SELECT pg_advisory_unlock(\(Self.migrationLock));")
        return parts.joined(separator: "\n\n") + "\n"
    }

    private func scriptPart(_ step: MigrationStep) -> String {
        switch step {
        case .transaction(let statements):
            return "BEGIN;\nSET LOCAL lock_timeout = \(Self.lockTimeoutMs);\n\n"
                + statements.map { $0 + ";" }.joined(separator: "\n\n") + "\n\nCOMMIT;"
        case .index(let index, let create):
            return "-- if an interrupted run left index \(index) invalid: DROP INDEX CONCURRENTLY \(name).\(index);\n"
                + create + ";"
        }
    }
}

extension PostgresSchema {
    /// Applies the schema's missing migrations without opening a ledger (`receipt-worker ledger migrate`), then,
    /// with `role`, grants that role what the worker needs (``grants(to:)``), and `deskRole` what the support desk
    /// needs (``deskGrants(to:)``), in one transaction: every run, so a migration that adds a table or a function
    /// is granted too (GRANT is idempotent).
    public func migrate(url: String, grantingTo role: String? = nil, deskRole: String? = nil) async throws -> [Applied]
    {
        let thread = BlockingThread(name: "ledger-migrate")
        defer { thread.stop() }
        return try await thread.perform {
            let connection = try PostgresConnection(url: url)
            let applied = try self.migrate(on: connection)
            let grants = (role.map(self.grants(to:)) ?? []) + (deskRole.map(self.deskGrants(to:)) ?? [])
            if !grants.isEmpty { try connection.transaction { for grant in grants { try connection.query(grant) } } }
            return applied
        }
    }
}
