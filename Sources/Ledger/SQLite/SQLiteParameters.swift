import CSQLite
import Foundation
import Vocabulary

/// A statement's parameters bound to it, its texts and blobs copied end to end into one buffer that the connection
/// keeps and SQLite reads in place (`SQLITE_STATIC`). Bound as `SQLITE_TRANSIENT`, SQLite allocated and freed a copy
/// of each text at every run: about thirty allocations a job on the ledger's thread.
///
/// The bytes stay valid until the next ``bind(_:to:)``: the caller resets the statement and clears its bindings
/// before then (``SQLiteConnection/rows(_:_:)`` does, on every way out), so no statement points into a buffer
/// that was grown or rewritten. The buffer grows to the largest statement's parameters and is kept.
final class SQLiteParameters {
    private var storage: UnsafeMutableRawPointer
    private var capacity: Int

    init() {
        capacity = 4_096
        storage = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit { storage.deallocate() }

    /// Binds `values` to `statement` at positions 1, 2, …: texts as their UTF-8 up to a first NUL (as a C string
    /// would end, and as what reads back), times as RFC 3339 text, booleans as 0 and 1.
    func bind(_ values: [SQLValue], to statement: OpaquePointer) {
        reserve(values.reduce(0) { total, value in total + Self.inlineBytes(value) })
        var offset = 0
        for (index, value) in values.enumerated() {
            let position = Int32(index + 1)
            switch value {
            case .text(let text):
                let length = copy(text, at: offset)
                sqlite3_bind_text64(
                    statement, position, (storage + offset).assumingMemoryBound(to: CChar.self), sqlite3_uint64(length),
                    nil, UInt8(SQLITE_UTF8))
                offset += length
            case .bytes(let bytes):
                bytes.withUnsafeBytes { source in
                    if let base = source.baseAddress {
                        (storage + offset).copyMemory(from: base, byteCount: source.count)
                    }
                }
                sqlite3_bind_blob(statement, position, storage + offset, Int32(bytes.count), nil)
                offset += bytes.count
            case .time(let date):
                let text = RFC3339.format(date)  // rare (a refund's time): SQLite's own copy
                sqlite3_bind_text(statement, position, text, -1, csqlite_transient())
            case .integer(let number): sqlite3_bind_int64(statement, position, number)
            case .bool(let flag): sqlite3_bind_int64(statement, position, flag ? 1 : 0)
            case .null: sqlite3_bind_null(statement, position)
            }
        }
    }

    /// The bytes a value takes in the buffer (a text's whole UTF-8: its NUL, if any, is found while copying).
    private static func inlineBytes(_ value: SQLValue) -> Int {
        switch value {
        case .text(let text): text.utf8.count
        case .bytes(let bytes): bytes.count
        case .time, .integer, .bool, .null: 0
        }
    }

    /// Room for `bytes`; what the buffer held is no longer bound to any statement.
    private func reserve(_ bytes: Int) {
        guard bytes > capacity else { return }
        storage.deallocate()
        capacity = max(bytes, capacity * 2)
        storage = .allocate(byteCount: capacity, alignment: 16)
    }

    /// Copies `text`'s UTF-8 up to its first NUL (found by memchr: a stored event is a kilobyte) to `offset`;
    /// returns the bytes copied.
    private func copy(_ text: String, at offset: Int) -> Int {
        var text = text
        return text.withUTF8 { bytes in
            guard let base = bytes.baseAddress else { return 0 }
            let length = memchr(base, 0, bytes.count).map { UnsafeRawPointer(base).distance(to: $0) } ?? bytes.count
            (storage + offset).copyMemory(from: base, byteCount: length)
            return length
        }
    }
}
