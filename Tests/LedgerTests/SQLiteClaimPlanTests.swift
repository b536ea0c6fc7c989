import Foundation
import Testing

@testable import Ledger

/// The statements every job runs, as SQLite plans them on a ledger of this release: each value looked up in an
/// index, and no temporary b-tree built at every run (an `IN (…)` list on an index makes one: its own pager and
/// page cache, a dozen allocations a statement).
@Suite("SQLite's plans of a job's statements")
struct SQLiteClaimPlanTests {
    /// `statement`'s plan on a new ledger of this release: its searches and scans, after checking that it builds
    /// no temporary b-tree.
    static func searches(_ name: String, _ statement: String) throws -> [String] {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("plans-\(UUID()).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let connection = try SQLiteConnection(path: path)
        try SQLiteSchema.migrate(connection)
        let program = try connection.rows("EXPLAIN " + statement).compactMap { $0.text(1) }
        #expect(!program.isEmpty && !program.contains("OpenEphemeral"), "\(name): \(program)")
        return try connection.rows("EXPLAIN QUERY PLAN " + statement).compactMap { $0.text(3) }
            .filter { $0.hasPrefix("SEARCH") || $0.hasPrefix("SCAN") }
    }

    @Test("a job's stored results and its grant's facts: index searches only, no temporary b-tree")
    func plans() throws {
        let sql = ClaimSQL.of(SQLiteDialect.spelling)
        for (name, statement) in [
            ("stored results", sql.storedResults), ("grants by transaction", sql.grantsByTransaction),
            ("grants by order", sql.grantsByOrder),
        ] {
            let plan = try Self.searches(name, statement)
            #expect(plan.contains { $0.hasPrefix("SEARCH") }, "\(name): \(plan)")
            #expect(!plan.contains { $0.hasPrefix("SCAN") }, "\(name): \(plan)")
        }
    }

    @Test("a claim's refunds, also those remembered before apps: each looked up by its index's whole key")
    func refundPlans() throws {
        // A search by the app alone, or by the app and one id with the environment open, reads every row of the app
        // (all the refunds remembered before apps, at every claim).
        let searches = try Self.searches("refunds", ClaimSQL.of(SQLiteDialect.spelling).refunds)
        #expect(searches.count == 4, "\(searches)")
        for search in searches {
            #expect(
                search.hasSuffix("(app=? AND environment=? AND purchase_id=?)")
                    || search.hasSuffix("(app=? AND environment=? AND transaction_id=?)"), "\(search)")
        }
    }
}
