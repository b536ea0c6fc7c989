import Foundation
import Vocabulary

extension PostgresLedger: SupportStore {
    public func supportRecord(
        app: AppScope, environment: AppleEnvironment, purchaseID: PurchaseID, transactionID: String
    ) async throws -> SupportRecord {
        let name = schema.name
        return try await pool.withConnection { connection in
            let parameters: [String?] = [app.rawValue, environment.rawValue, purchaseID.key, transactionID]
            let grant = try connection.rows(
                """
                SELECT order_id, coalesce(user_id, ''), transaction_id, extract(epoch FROM granted_at)::text,
                    extract(epoch FROM revoked_at)::text, credit, 0
                FROM \(name).grants WHERE app = $1 AND environment = $2 AND purchase_id = $3
                UNION ALL
                SELECT order_id, coalesce(user_id, ''), transaction_id, extract(epoch FROM granted_at)::text,
                    extract(epoch FROM revoked_at)::text, credit, 1
                FROM \(name).grants WHERE app = $1 AND environment = $2 AND transaction_id = $4
                ORDER BY 7 LIMIT 1
                """, parameters
            ).first.map { row in
                SupportRecord.Grant(
                    orderID: row[0] ?? "", userID: row[1] ?? "", transactionID: row[2] ?? "",
                    grantedAt: Self.epoch(row[3]), revokedAt: Self.epoch(row[4]), credit: row[5] ?? "job")
            }
            let report = try connection.rows(
                """
                SELECT state, extract(epoch FROM due_at)::text, event_id, published::text,
                    extract(epoch FROM settled_at)::text
                FROM \(name).unclaimed_purchases WHERE app = $1 AND environment = $2 AND purchase_id = $3
                """, Array(parameters.prefix(3))
            ).first.map { row in
                SupportRecord.Report(
                    state: row[0] ?? "", dueAt: Self.epoch(row[1]), eventID: row[2] ?? "", published: row[3] == "true",
                    settledAt: Self.epoch(row[4]))
            }
            return SupportRecord(grant: grant, report: report)
        }
    }

    public func grantedTransactions(orderID: String, app: AppScope) async throws -> [(AppleEnvironment, String)] {
        let name = schema.name
        return try await pool.withConnection { connection in
            try connection.rows(
                """
                SELECT environment, transaction_id, granted_at FROM \(name).grants
                    WHERE app = $1 AND order_id = $2 AND credit = 'job'
                UNION ALL
                SELECT environment, transaction_id, granted_at FROM \(name).grants
                    WHERE app = $1 AND order_id = $2 AND credit = 'renewal'
                ORDER BY 3 LIMIT 100
                """, [app.rawValue, orderID]
            ).map { (AppleEnvironment(rawValue: $0[0] ?? ""), $0[1] ?? "") }
        }
    }

    public func reportedTransactions(appAccountToken: String, app: AppScope) async throws
        -> [(AppleEnvironment, String)]
    {
        let name = schema.name
        return try await pool.withConnection { connection in
            try connection.rows(
                """
                SELECT environment, transaction_id FROM \(name).unclaimed_purchases
                    WHERE app = $1 AND state IN ('waiting', 'credited')
                        AND \(name).event_json(event)->>'app_account_token' = $2
                    ORDER BY reported_at LIMIT 100
                """, [app.rawValue, appAccountToken]
            ).map { (AppleEnvironment(rawValue: $0[0] ?? ""), $0[1] ?? "") }
        }
    }

    static func epoch(_ text: String?) -> Date? {
        text.flatMap(Double.init).map { Date(timeIntervalSince1970: $0) }
    }
}
