import Foundation
import Vocabulary

extension SQLiteLedger: SupportStore {
    public func supportRecord(
        app: AppScope, environment: AppleEnvironment, purchaseID: PurchaseID, transactionID: String
    ) async throws -> SupportRecord {
        try await queue.perform {
            let values: [SQLiteConnection.Value] = [
                .text(app.rawValue), .text(environment.rawValue), .text(purchaseID.key), .text(transactionID),
            ]
            let grant = try self.connection.first(
                """
                SELECT order_id, coalesce(user_id, ''), transaction_id, granted_at, revoked_at, credit, 0 FROM grants
                    WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
                UNION ALL
                SELECT order_id, coalesce(user_id, ''), transaction_id, granted_at, revoked_at, credit, 1 FROM grants
                    WHERE app = ?1 AND environment = ?2 AND transaction_id = ?4
                ORDER BY 7 LIMIT 1
                """, values
            ) { row in
                SupportRecord.Grant(
                    orderID: row.text(0) ?? "", userID: row.text(1) ?? "", transactionID: row.text(2) ?? "",
                    grantedAt: row.text(3).flatMap(RFC3339Milliseconds.parse),
                    revokedAt: row.text(4).flatMap(RFC3339Milliseconds.parse), credit: row.text(5) ?? "job")
            }
            let report = try self.connection.first(
                """
                SELECT state, due_at, event_id, published, settled_at FROM unclaimed_purchases
                    WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
                """, Array(values.prefix(3))
            ) { row in
                SupportRecord.Report(
                    state: row.text(0) ?? "", dueAt: row.text(1).flatMap(RFC3339Milliseconds.parse),
                    eventID: row.text(2) ?? "", published: row.integer(3) == 1,
                    settledAt: row.text(4).flatMap(RFC3339Milliseconds.parse))
            }
            return SupportRecord(grant: grant, report: report)
        }
    }

    public func grantedTransactions(orderID: String, app: AppScope) async throws -> [(AppleEnvironment, String)] {
        try await queue.perform {
            var found: [(AppleEnvironment, String)] = []
            try self.connection.query(
                """
                SELECT environment, transaction_id, granted_at FROM grants
                    WHERE app = ?1 AND order_id = ?2 AND credit = 'job'
                UNION ALL
                SELECT environment, transaction_id, granted_at FROM grants
                    WHERE app = ?1 AND order_id = ?2 AND credit = 'renewal'
                ORDER BY 3 LIMIT 100
                """, [.text(app.rawValue), .text(orderID)]
            ) { row in found.append((AppleEnvironment(rawValue: row.text(0) ?? ""), row.text(1) ?? "")) }
            return found
        }
    }

    public func reportedTransactions(appAccountToken: String, app: AppScope) async throws
        -> [(AppleEnvironment, String)]
    {
        try await queue.perform {
            var found: [(AppleEnvironment, String)] = []
            try self.connection.query(
                """
                SELECT environment, transaction_id FROM unclaimed_purchases
                    WHERE app = ?1 AND state IN ('waiting', 'credited') AND json_valid(CAST(event AS TEXT))
                        AND json_extract(CAST(event AS TEXT), '$.app_account_token') = ?2
                    ORDER BY reported_at LIMIT 100
                """, [.text(app.rawValue), .text(appAccountToken)]
            ) { row in found.append((AppleEnvironment(rawValue: row.text(0) ?? ""), row.text(1) ?? "")) }
            return found
        }
    }
}
