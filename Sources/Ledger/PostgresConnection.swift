import CPostgres
import Foundation
import Observability

/// One libpq connection. Used by one caller at a time (the pool hands it out), on a blocking queue.
///
/// `@unchecked Sendable`: the pool guarantees exclusive use; libpq connections may move between threads.
final class PostgresConnection: @unchecked Sendable {
    private let handle: OpaquePointer

    init(url: String) throws {
        guard let handle = PQconnectdb(url) else { throw LedgerError("postgresql: out of memory") }
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = String(cString: PQerrorMessage(handle)).trimmingCharacters(in: .whitespacesAndNewlines)
            PQfinish(handle)
            throw LedgerError("postgresql: \(message)")
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
            let message = String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines)
            throw LedgerError("postgresql: \(message)")
        }
        return (0..<PQntuples(result)).map { row in
            (0..<PQnfields(result)).map { column in
                PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
            }
        }
    }
}
