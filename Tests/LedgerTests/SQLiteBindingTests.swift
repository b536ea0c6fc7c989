import Foundation
import Testing

@testable import Ledger

/// Texts bound to SQLite's statements from their own bytes: what is stored is what reads back.
@Suite("SQLite's bound texts")
struct SQLiteBindingTests {
    func roundTrip(_ text: String) throws -> String? {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("binding-\(UUID()).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let connection = try SQLiteConnection(path: path)
        return try connection.rows("SELECT ?", [.text(text)]).first?.text(0)
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
}
