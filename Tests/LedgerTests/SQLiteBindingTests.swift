import Foundation
import Testing

@testable import Ledger

/// Texts bound to SQLite's statements from their own bytes: what is stored is what reads back.
@Suite("SQLite's bound texts")
struct SQLiteBindingTests {
    func withConnection<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("binding-\(UUID()).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try body(try SQLiteConnection(path: path))
    }

    func roundTrip(_ text: String) throws -> String? {
        try withConnection { try $0.rows("SELECT ?", [.text(text)]).first?.text(0) }
    }

    @Test("empty, short, long and non-ASCII texts read back as bound; empty is not NULL")
    func texts() throws {
        for text in ["", "a", "coins.1000", String(repeating: "x", count: 5_000), "é ✓ 🎮 e\u{301}"] {
            #expect(try roundTrip(text) == text)
        }
    }

    @Test("a text ends at a NUL, as a C string did, so what is stored is what reads back")
    func nul() throws {
        #expect(try roundTrip("player\u{0}hidden") == "player")
    }

    @Test("texts and blobs of one statement past the connection's buffer read back each as bound, beside numbers")
    func many() throws {
        let texts = (0..<3).map { String(repeating: Character(UnicodeScalar(UInt8(97 + $0))), count: 3_000) }
        let blob = (0..<2_000).map { UInt8(truncatingIfNeeded: $0) }
        let row = try withConnection { connection in
            try connection.rows(
                "SELECT ?, ?, ?, ?, ?, ?, ?",
                [.text(texts[0]), .integer(7), .text(""), .bytes(blob), .text(texts[1]), .null, .text(texts[2])]
            ).first
        }
        #expect(row?.text(0) == texts[0] && row?.int(1) == 7 && row?.text(2) == "")
        #expect(row?.text(4) == texts[1] && row?.text(5) == nil && row?.text(6) == texts[2])
        if case .bytes(let read) = row?.cells[3] { #expect(read == blob) } else { Issue.record("no blob") }
    }

    @Test("a stored row keeps its text after the buffer it was bound from is rewritten and grown by later statements")
    func storedRowsOutliveTheBuffer() throws {
        let stored = try withConnection { connection in
            try connection.execute("CREATE TABLE t (v TEXT)")
            try connection.rows("INSERT INTO t (v) VALUES (?)", [.text("first-" + String(repeating: "1", count: 100))])
            _ = try connection.rows("SELECT ?", [.text(String(repeating: "z", count: 100_000))])
            _ = try connection.rows("SELECT ?, ?", [.text("other"), .text("texts")])
            return try connection.rows("SELECT v FROM t").first?.text(0)
        }
        #expect(stored == "first-" + String(repeating: "1", count: 100))
    }

    @Test("a run with fewer values than the statement's parameters binds NULL to the rest, not the last run's values")
    func noLeftovers() throws {
        let second = try withConnection { connection in
            _ = try connection.rows("SELECT ?1, ?2", [.text("a"), .text("b")])
            return try connection.rows("SELECT ?1, ?2", [.text("c")]).first
        }
        #expect(second?.text(0) == "c")
        #expect(second?.text(1) == nil)
    }
}
