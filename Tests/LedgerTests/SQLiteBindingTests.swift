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

    @Test(
        "a statement whose step failed has its bindings cleared: after the buffer is grown, it reads NULL, not freed memory"
    )
    func clearedAfterAFailedStep() throws {
        let again = try withConnection { connection in
            // abs() of the smallest integer overflows: the step fails after the texts were bound.
            let statement = "SELECT ?1, ?2, CASE WHEN ?3 = 'fail' THEN abs(-9223372036854775808) ELSE 0 END"
            #expect(throws: LedgerError.self) {
                try connection.rows(statement, [.text("first"), .text("second"), .text("fail")])
            }
            _ = try connection.rows("SELECT ?", [.text(String(repeating: "z", count: 100_000))])  // a new buffer
            return try connection.rows(statement, [.text("again")]).first
        }
        #expect(again?.text(0) == "again")
        #expect(again?.text(1) == nil, "the failed run's second text is not bound any more")
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
