public import Foundation
import Flows
public import LedgerDomain
public import Vocabulary

/// A player's data request (access: GDPR article 15, CCPA's right to know): everything the ledger holds about them
/// in one app as one JSON document (docs/schemas/player-export.json), found by their user id or by the order of
/// one of their jobs. It needs the ledger alone (no call to Apple). The results topic and the grant services hold
/// copies of the events for as long as their own retention keeps them (docs/support-desk.md, "A player's data").
public enum PlayerData {
    /// The app asked about: its ledger scope, its name (the audit's and held credits' `app`) and bundle id.
    public struct App: Sendable {
        public var scope: AppScope
        public var name: String
        public var bundleID: String

        public init(scope: AppScope, name: String, bundleID: String) {
            self.scope = scope
            self.name = name
            self.bundleID = bundleID
        }
    }

    /// How many of each kind of record a document shows at most.
    static let recordsShown = 10_000

    /// The player's document, or nil when the ledger knows no such order (a user id always answers, maybe empty).
    public static func export(
        _ query: SupportDesk.PlayerQuery, app: App, ledger: any SupportStore, now: Date = Date()
    ) async throws -> (userID: String, JSONValue)? {
        let userID: String
        switch query {
        case .userID(let id): userID = id
        case .orderID(let order):
            guard let found = try await ledger.player(ofOrder: order, app: app.scope) else { return nil }
            userID = found
        case .appAccountToken(let token):
            // A token is the app's to set: one that leads to two players names neither.
            let found = try await ledger.players(ofToken: token, app: app.scope)
            guard found.count == 1, let only = found.first else { return nil }
            userID = only
        }
        var records = try await ledger.playerRecords(userID, app: app.scope, limit: recordsShown)
        // The ledger's notifications, held credits and audit are kept for every app: this app's only.
        records.notices = records.notices.filter { notice in
            let named = (JSONValue(parsing: Data(notice.event))?.object?["bundle_id"]?.string)
            return named == nil || named == app.bundleID
        }
        records.heldCredits = records.heldCredits.filter { $0.app == app.name }
        records.audit = records.audit.filter { $0.app == app.name }
        return (userID, document(records, userID: userID, bundleID: app.bundleID, at: now))
    }

    /// The document: every field always present; times RFC 3339; the events as the ledger keeps them.
    static func document(_ records: PlayerRecords, userID: String, bundleID: String, at now: Date) -> JSONValue {
        func time(_ date: Date?) -> JSONValue { date.map { .string(RFC3339.format($0)) } ?? .null }
        func event(_ bytes: [UInt8]?) -> JSONValue { bytes.flatMap { JSONValue(parsing: Data($0)) } ?? .null }
        return [
            "user_id": .string(userID), "bundle_id": .string(bundleID), "exported_at": time(now),
            "truncated": .bool(records.truncated),
            "grants": .array(
                records.grants.map { grant in
                    [
                        "environment": .string(grant.environment.rawValue),
                        "transaction_id": .string(grant.transactionID),
                        "original_transaction_id": grant.originalTransactionID.map(JSONValue.string) ?? .null,
                        "order_id": .string(grant.orderID),
                        "product_id": grant.productID.map(JSONValue.string) ?? .null,
                        "quantity": grant.quantity.map { JSONValue($0) } ?? .null, "credit": .string(grant.credit),
                        "granted_at": time(grant.grantedAt), "revoked_at": time(grant.revokedAt),
                        "revenue": grant.revenue.map { .int($0) } ?? .null, "event": event(grant.event),
                    ]
                }),
            "refunds": .array(
                records.refunds.map { refund in
                    [
                        "environment": .string(refund.environment.rawValue),
                        "transaction_id": .string(refund.transactionID), "revoked": .bool(refund.revoked),
                        "revoked_share": refund.share.map { JSONValue($0) } ?? .null,
                        "changed_at": time(refund.changedAt),
                    ]
                }),
            "subscriptions": .array(
                records.subscriptions.map { subscription in
                    [
                        "environment": .string(subscription.environment.rawValue),
                        "original_transaction_id": .string(subscription.originalTransactionID),
                        "status": .string(subscription.status), "expires_at": time(subscription.expiresAt),
                        "auto_renew": subscription.autoRenew.map(JSONValue.bool) ?? .null,
                        "auto_renew_product_id": subscription.autoRenewProductID.map(JSONValue.string) ?? .null,
                        "changed_at": time(subscription.changedAt),
                    ]
                }),
            "refund_requests": .array(
                records.refundRequests.map { request in
                    [
                        "environment": .string(request.environment.rawValue),
                        "transaction_id": .string(request.transactionID), "requested_at": time(request.requestedAt),
                        "respond_by": time(request.respondBy), "answered_at": time(request.answeredAt),
                    ]
                }),
            "answers": .array(
                records.answers.map { ["job_id": .string($0.id), "decided_at": time($0.at), "event": event($0.event)] }
            ),
            "notices": .array(
                records.notices.map {
                    ["notification_id": .string($0.id), "handled_at": time($0.at), "event": event($0.event)]
                }),
            "held_credits": .array(
                records.heldCredits.map {
                    [
                        "approval_id": .string($0.id), "requested_at": time($0.at), "status": .string($0.state),
                        "request": event($0.event),
                    ]
                }),
            "reported_purchases": .array(
                records.reported.map {
                    [
                        "transaction_id": .string($0.id), "reported_at": time($0.at), "state": .string($0.state),
                        "event": event($0.event),
                    ]
                }),
            "audit": .array(records.audit.map(\.exported)),
        ]
    }

    /// What an export answered, for the audit: how many of each, never the data.
    public static func exportSummary(_ document: JSONValue) -> JSONValue {
        var counts: [String: JSONValue] = [:]
        for key in [
            "grants", "refunds", "subscriptions", "refund_requests", "answers", "notices", "held_credits",
            "reported_purchases", "audit",
        ] {
            counts[key] = JSONValue(document.object?[key]?.array?.count ?? 0)
        }
        return .object(counts)
    }
}

extension SupportDesk {
    public enum PlayerQuery: Sendable, Equatable {
        case userID(String)
        /// The game's order (`order_id` of a job granted here): its player's data.
        case orderID(String)
        /// An app account token (lower-case UUID) Apple reported with a purchase granted here: its player's data,
        /// when one player's alone.
        case appAccountToken(String)
    }

    /// This desk's app, as a player's data requests name it.
    public var playerDataApp: PlayerData.App {
        PlayerData.App(scope: app.scope, name: app.name, bundleID: app.bundleID)
    }

    /// The player's document in this desk's app.
    public func playerData(_ query: PlayerQuery, now: Date = Date()) async throws -> (userID: String, JSONValue)? {
        try await PlayerData.export(
            query, app: PlayerData.App(scope: app.scope, name: app.name, bundleID: app.bundleID), ledger: ledger,
            now: now)
    }
}

extension AuditEntry {
    /// An audit line in a player's document: when, in which role, what, the outcome, and what was asked and
    /// answered. Not who (support's staff are not the player's data) nor an operator's login name.
    var exported: JSONValue {
        func parsed(_ text: String) -> JSONValue { JSONValue(parsing: Data(text.utf8)) ?? .string(text) }
        var asked = parsed(request)
        if case .object(var fields) = asked {
            fields["login"] = nil
            asked = .object(fields)
        }
        return [
            "at": .string(RFC3339.format(at)), "app": .string(app), "role": .string(role), "action": .string(action),
            "outcome": .string(outcome), "ticket": .string(ticket), "request": asked, "answer": parsed(answer),
        ]
    }
}
