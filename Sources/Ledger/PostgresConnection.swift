import CPostgres
import Foundation
import Observability

/// One libpq connection. Used by one caller at a time (the pool hands it out), on a blocking queue.
///
/// `@unchecked Sendable`: the pool guarantees exclusive use; libpq connections may move between threads.
final class PostgresConnection: @unchecked Sendable {
    private let handle: OpaquePointer

    init(url: String) throws {
        guard let handle = PQconnectdb(Self.withDeadlines(url)) else {
            throw LedgerError(.unavailable, "postgresql: out of memory")
        }
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = String(cString: PQerrorMessage(handle)).trimmingCharacters(in: .whitespacesAndNewlines)
            PQfinish(handle)
            throw LedgerError(.unavailable, "postgresql: \(message)")
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

    /// Deadlines a ledger on a payment path needs, added unless the URL sets them: a hung or partitioned
    /// server must fail a call in seconds (then it is retried, and `/readyz` turns false), not after the
    /// kernel's TCP timeout of minutes; and a failover replica that is read-only must be refused at
    /// connection time (`target_session_attrs=read-write`), not loop every job on "read-only transaction".
    static let defaultParameters: [(String, String)] = [
        ("connect_timeout", "10"), ("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"),
        ("keepalives_count", "3"), ("tcp_user_timeout", "30000"), ("target_session_attrs", "read-write"),
        ("options", "-c%20statement_timeout%3D30000"),
    ]

    static func withDeadlines(_ url: String) -> String {
        let query = url.firstIndex(of: "?").map { url[url.index(after: $0)...] } ?? ""
        let present = Set(query.split(separator: "&").compactMap { $0.split(separator: "=").first.map(String.init) })
        let added = defaultParameters.filter { !present.contains($0.0) }.map { "\($0.0)=\($0.1)" }
        guard !added.isEmpty else { return url }
        return url + (url.contains("?") ? "&" : "?") + added.joined(separator: "&")
    }

    deinit {
        PQfinish(handle)
    }

    var isHealthy: Bool { PQstatus(handle) == CONNECTION_OK }

    /// Runs one statement with text parameters; returns the rows' first column (nil for SQL NULL).
    @discardableResult
    func query(_ sql: String, _ parameters: [String] = []) throws -> [String?] {
        try rows(sql, parameters).map { $0.first ?? nil }
    }

    /// Runs one statement with text parameters (nil is SQL NULL); returns every row's columns.
    @discardableResult
    func rows(_ sql: String, _ parameters: [String?]) throws -> [[String?]] {
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
            // A data exception (22) or a program limit (54, an index row too large) fails the same way forever.
            throw LedgerError(
                state.hasPrefix("22") || state.hasPrefix("54") ? .valueRefused : .unavailable,
                "postgresql: \(message.isEmpty ? "no answer (connection lost)" : message)")
        }
        return (0..<PQntuples(result)).map { row in
            (0..<PQnfields(result)).map { column in
                PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
            }
        }
    }
}
