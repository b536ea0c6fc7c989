import Foundation
import Vocabulary

/// The claim statement by statement, in SQL both databases take: what a dialect runs unless it has a faster way.
/// SQLite runs it (in process: no round trips to save); PostgreSQL runs the same reads and writes as server
/// functions whose plans each connection keeps (``PostgresSchema/claimFunctionsV2``), one round trip each, and the
/// dialects' conformance test reads a batch's facts both ways on one PostgreSQL ledger.
extension LedgerDialect {
    func claimFacts(_ decisions: [Decision], in session: any SQLSession) throws -> ClaimFacts {
        try ClaimStatements.facts(decisions, in: session)
    }

    func claimWrite(_ decisions: [Decision], _ results: [ClaimResult], in session: any SQLSession) throws {
        try ClaimStatements.write(decisions, results, in: session)
    }

    func storedDecisions(_ keys: [DecisionKey], in session: any SQLSession) throws -> [StoredEvent?] {
        try keys.map { try LedgerQueries.storedDecision($0, in: session) }
    }
}

enum ClaimStatements {
    /// The batch's purchases locked first, in the order of their keys (PostgreSQL's advisory locks; SQLite's write
    /// transaction holds the only lock). Each query an exact key of an index: an OR of columns would make SQLite
    /// read every grant of the app and environment.
    static func facts(_ decisions: [Decision], in session: any SQLSession) throws -> ClaimFacts {
        let purchases = decisions.compactMap(\.purchase)
        for key in Set(purchases.map(PurchaseStatements.lockKey)).sorted() { try session.lock(key) }
        let sql = ClaimSQL.of(session.spelling)
        var facts = ClaimFacts()
        for decision in decisions {
            let key = decision.key
            for row in try LedgerQueries.storedResults(key, in: session) {
                facts.addResult(app: key.app, jobID: key.jobID, fingerprint: row.text(0) ?? "", row.event(from: 1))
            }
            guard let grant = decision.grant else { continue }
            let app = SQLValue.text(key.app.rawValue)
            let scope: [SQLValue] = [
                app, .text(grant.environment.rawValue), .text(grant.transactionID), .text(grant.purchaseID.key),
            ]
            let grants =
                try session.rows(sql.grantsByTransaction, scope)
                + session.rows(sql.grantsByOrder, [app, .text(grant.orderID)])
            for row in grants { facts.addGrant(row.grantFact()) }
            for row in try session.rows(sql.refunds, scope) { facts.addRefund(row.refundFact()) }
        }
        return facts
    }

    /// A job's grant, not its event (its result row keeps it): what later events name has columns of its own.
    static func write(_ decisions: [Decision], _ results: [ClaimResult], in session: any SQLSession) throws {
        let insertGrant = ClaimSQL.of(session.spelling).insertGrant
        for (decision, result) in zip(decisions, results) {
            if let grant = result.grant {
                try session.rows(
                    insertGrant,
                    [
                        .text(decision.key.app.rawValue), .text(grant.environment.rawValue),
                        .text(grant.transactionID), .text(grant.orderID), .text(grant.purchaseID.key),
                        .text(grant.userID), .text(grant.productID), .integer(grant.quantity),
                        grant.purchaseID.isBillingPeriod ? .optional(grant.originalTransactionID) : .null,
                        .optional(grant.revenue), .optional(result.revokedAt),
                    ])
            }
            if let event = result.result { try LedgerQueries.insertResult(decision.key, event: event, in: session) }
            if let followUp = result.followUp {
                try LedgerQueries.insertResult(ClaimRules.followUpKey(decision.key), event: followUp, in: session)
            }
        }
    }
}

extension SQLRow {
    /// A grant as the claim reads it, from column `index` on: app, environment, transaction, purchase, order,
    /// whether a job's, its credit's event id, whether revoked, its revenue.
    func grantFact(from index: Int = 0) -> GrantFact {
        let text = { self.text(index + $0) ?? "" }
        return GrantFact(
            app: AppScope(text(0)), environment: text(1), transactionID: text(2), purchaseID: text(3),
            orderID: text(4), isJobGrant: bool(index + 5), creditEventID: self.text(index + 6),
            revoked: bool(index + 7), revenue: int64(index + 8))
    }

    /// A refund remembered, from column `index` on: app, environment, purchase, transaction, share, time.
    func refundFact(from index: Int = 0) -> RefundFact {
        let text = { self.text(index + $0) ?? "" }
        return RefundFact(
            app: text(0), environment: text(1), purchaseID: text(2), transactionID: text(3), share: int(index + 4),
            at: time(index + 5))
    }
}
