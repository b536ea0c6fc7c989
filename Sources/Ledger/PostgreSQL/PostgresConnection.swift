import CPostgres
import Foundation
import Observability
import Synchronization

/// One libpq connection. Used by one caller at a time (the pool hands it out), on a blocking queue.
///
/// `@unchecked Sendable`: the pool guarantees exclusive use; libpq connections may move between threads.
final class PostgresConnection: @unchecked Sendable {
    private let handle: OpaquePointer
    /// Where the statements it sends are counted, each a round trip to the server (its pool's count).
    private let roundTrips: RoundTripCount

    init(url: String, roundTrips: RoundTripCount = RoundTripCount()) throws {
        self.roundTrips = roundTrips
        guard let handle = PQconnectdb(Self.withDeadlines(url)) else {
            throw LedgerError(.unavailable, "postgresql: out of memory")
        }
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = String(cString: PQerrorMessage(handle)).trimmingCharacters(in: .whitespacesAndNewlines)
            PQfinish(handle)
            throw LedgerError(.unavailable, "postgresql: \(Self.redacting(message, of: url))")
        }
        self.handle = handle
        // libpq prints server notices on standard error, which is for JSON log lines only. Notices (such as
        // "relation already exists, skipping") are not wanted; warnings and up still are, as log lines.
        PQsetNoticeProcessor(
            handle,
            { _, message in
                guard let message else { return }
                let text = String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines)
                PostgresConnection.logger.warning("postgresql: \(text)")
            }, nil)
        _ = try? query("SET client_min_messages TO warning")
    }

    static let logger = Logger(label: "ledger")

    /// `message` without the URL's passwords: libpq quotes a malformed URL's parts (a bad percent escape, say),
    /// and a password must never reach a log line or a command's error. A password is the user information's
    /// (`user:password@`), or a `password` or `sslpassword` parameter's (`?password=...`, `password=...` in a
    /// keyword/value string).
    static func redacting(_ message: String, of url: String) -> String {
        var redacted = message.replacingOccurrences(of: url, with: "***")
        for password in passwords(in: url) {
            for secret in [password, password.removingPercentEncoding ?? password] where secret.count >= 2 {
                redacted = redacted.replacingOccurrences(of: secret, with: "***")
            }
            // A fragment of it quoted on its own (libpq shows the token it could not read).
            for token in password.split(separator: "%").map(String.init) where token.count >= 3 {
                redacted = redacted.replacingOccurrences(of: token, with: "***")
            }
        }
        return redacted
    }

    /// The passwords `url` carries, as written in it.
    static func passwords(in url: String) -> [String] {
        var passwords: [String] = []
        // libpq ends the user information at the first `/`, not at `?`: a password may hold a `?`.
        if let scheme = url.range(of: "://") {
            let authority = url[scheme.upperBound...].prefix { $0 != "/" }
            if let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") {
                passwords.append(String(authority[authority.index(after: colon)..<at]))
            }
        }
        // A keyword/value string's quoted value may escape a quote (`'it\'s'`).
        let parameter = /(?:^|[?&\s])(?:ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'|[^&\s]*)/.ignoresCase()
        for match in url.matches(of: parameter) {
            var value = Substring(match.1)
            if value.hasPrefix("'") && value.hasSuffix("'") && value.count >= 2 { value = value.dropFirst().dropLast() }
            passwords.append(String(value))
            passwords.append(value.replacingOccurrences(of: "\\'", with: "'"))
        }
        return passwords.filter { !$0.isEmpty }.reduce(into: []) { if !$0.contains($1) { $0.append($1) } }
    }

    /// Deadlines a ledger on a payment path needs, added unless the URL sets them: a hung or partitioned
    /// server must fail a call in seconds (then it is retried, and `/readyz` turns false), not after the
    /// kernel's TCP timeout of minutes; and a failover replica that is read-only must be refused at
    /// connection time (`target_session_attrs=read-write`), not loop every job on "read-only transaction".
    /// No `options` startup parameter: PgBouncer refuses it; the statement timeout is set per transaction
    /// (``begin()``).
    static let defaultParameters: [(String, String)] = [
        ("connect_timeout", "10"), ("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"),
        ("keepalives_count", "3"), ("tcp_user_timeout", "30000"), ("target_session_attrs", "read-write"),
    ]

    static func withDeadlines(_ url: String) -> String {
        let present = PostgresURL.parameterNames(url)
        return PostgresURL.appending(defaultParameters.filter { !present.contains($0.0) }, to: url)
    }

    deinit {
        PQfinish(handle)
    }

    var isHealthy: Bool { PQstatus(handle) == CONNECTION_OK }

    /// What an error's SQLSTATE means for the caller: a data exception (22) or a program limit (54, an index
    /// row too large) fails the same way forever; a unique violation, a deadlock or a serialization failure met
    /// another writer (retried, it finds what that writer did); anything else may heal.
    static func code(sqlstate: String) -> LedgerError.Code {
        if sqlstate.hasPrefix("22") || sqlstate.hasPrefix("54") { return .valueRefused }
        if ["23505", "40P01", "40001"].contains(sqlstate) { return .conflict }
        return .unavailable
    }

    /// Runs `body` in a transaction, committed when it returns and rolled back when it throws, with `settings`
    /// set for it alone (`SET LOCAL`): no session state, so a pooler in transaction mode (PgBouncer) may hand the
    /// next transaction another server connection. By default the worker's deadline: a statement that waits past
    /// `statement_timeout` (a lock held by a stuck client) fails and is retried.
    func transaction<T>(_ settings: [String] = ["statement_timeout = \(statementTimeoutMs)"], _ body: () throws -> T)
        throws -> T
    {
        roundTrips.add()
        let begin = PQexec(
            handle,
            (["BEGIN"] + (settings + ["client_min_messages = warning"]).map { "SET LOCAL " + $0 }).joined(
                separator: "; "))
        defer { PQclear(begin) }
        guard PQresultStatus(begin) == PGRES_COMMAND_OK else {
            let message = String(cString: PQerrorMessage(handle)).trimmingCharacters(in: .whitespacesAndNewlines)
            // BEGIN ran and a SET LOCAL after it failed (a cancel, a setting refused): the transaction is open and
            // failed, and every statement on the connection would fail (25P02) until it ends. Ended here.
            if PQtransactionStatus(handle) == PQTRANS_INERROR { _ = try? query("ROLLBACK") }
            throw LedgerError(.unavailable, "postgresql: \(message.isEmpty ? "no answer (connection lost)" : message)")
        }
        do {
            let result = try body()
            try query("COMMIT")
            return result
        } catch {
            _ = try? query("ROLLBACK")  // the original error is the one to report
            throw error
        }
    }

    /// Each statement of the worker's transactions: 30 s.
    static let statementTimeoutMs = 30_000

    /// Runs one statement with text parameters; returns the rows' first column (nil for SQL NULL).
    @discardableResult
    func query(_ sql: String, _ parameters: [String] = []) throws -> [String?] {
        try rows(sql, parameters).map { $0.first ?? nil }
    }

    /// Runs one statement with text parameters (nil is SQL NULL); returns every row's columns.
    @discardableResult
    func rows(_ sql: String, _ parameters: [String?]) throws -> [[String?]] {
        roundTrips.add()
        let cParameters = parameters.map { $0.map { strdup($0) } ?? nil }
        defer { cParameters.forEach { free($0) } }
        let result = cParameters.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: UnsafePointer<CChar>?.self) { pointers in
                PQexecParams(handle, sql, Int32(parameters.count), nil, pointers.baseAddress, nil, nil, 0)
            }
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            var message = String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines)
            // After a lost connection there is no result message: the connection's own says why.
            if message.isEmpty {
                message = String(cString: PQerrorMessage(handle)).trimmingCharacters(in: .whitespacesAndNewlines)
            }
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
            var error = LedgerError(
                Self.code(sqlstate: state), "postgresql: \(message.isEmpty ? "no answer (connection lost)" : message)")
            error.sqlstate = state.isEmpty ? nil : state
            throw error
        }
        return (0..<PQntuples(result)).map { row in
            (0..<PQnfields(result)).map { column in
                PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
            }
        }
    }
}

/// Statements sent to PostgreSQL, each a round trip: what the ledger's calls cost the database, counted per pool
/// (``LedgerPoolStats/roundTrips``).
final class RoundTripCount: Sendable {
    private let count = Atomic<Int>(0)

    func add() { count.add(1, ordering: .relaxed) }

    var total: Int { count.load(ordering: .relaxed) }
}
