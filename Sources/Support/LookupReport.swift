public import AppleVerification
import Events
public import Foundation
public import LedgerDomain
import Observability
public import Vocabulary

/// What `receipt-worker lookup` prints: each purchase the query led to, Apple's view beside the ledger's, and one
/// line that names the case. Safe to hand to support: it holds no receipt, no signed data, no secret, and an app
/// account token only shortened.
public struct LookupReport: Sendable {
    public var query: String
    public var bundleID: String
    public var purchases: [Purchase] = []
    /// Why nothing (or less) was found, when that is so.
    public var notFound: String?

    /// Adds a reason to ``notFound`` (several ids may each miss).
    mutating func notFound(_ reason: String) { notFound = notFound.map { "\($0); \(reason)" } ?? reason }

    public struct Purchase: Sendable {
        public var transactionID = ""
        public var originalTransactionID: String?
        public var productID: String?
        public var quantity = 0
        public var type: String?
        public var environment: AppleEnvironment?
        public var purchaseDate: Date?
        public var expiresDate: Date?
        public var revocationDate: Date?
        public var revocationType: RevocationType?
        /// Apple's milliunits (40000 is 40 %).
        public var revocationPercentage: Int?
        public var value = PurchaseValue()
        /// The first 8 characters and an ellipsis.
        public var appAccountToken: String?
        /// Apple's `appTransactionId`: the app download the purchase belongs to.
        public var appTransactionID: String?
        public var record = SupportRecord()
        /// Why the signed transaction did not verify (nothing else is then known).
        public var unverified: String?
        /// False for a Sandbox purchase the ledger holds where Sandbox is not accepted: no Sandbox endpoint is
        /// called then, so only the ledger's record is known.
        public var askedApple = true
        /// Apple's signed transaction was asked for and verified as this app's.
        public var verified: Bool { unverified == nil && askedApple }
        /// The one line that names the case.
        public var verdict = ""

        init(unverified reason: String) {
            unverified = reason
            verdict = "does not verify as this app's: \(reason)"
        }

        /// The ledger's record of a Sandbox purchase (from when Sandbox was accepted), not asked of Apple.
        init(sandboxRecord record: SupportRecord, transactionID: String) {
            self.transactionID = transactionID
            environment = .sandbox
            askedApple = false
            self.record = record
            let held = record.grant.map { ", granted here to order \($0.orderID) of player \($0.userID)" } ?? ""
            verdict =
                "Sandbox: a tester's purchase, no money paid\(held); not asked of Apple (apple.allow_sandbox is false)"
        }

        init(
            transaction: AppleTransaction, payload: JWSTransaction, environment: AppleEnvironment,
            record: SupportRecord, sandboxAccepted: Bool
        ) {
            transactionID = transaction.transactionID
            originalTransactionID = transaction.originalTransactionID
            productID = transaction.productID
            quantity = transaction.quantity
            type = payload.type
            self.environment = environment
            purchaseDate = transaction.purchaseDate
            expiresDate = transaction.expiresDate
            revocationDate = transaction.revocationDate
            revocationType = payload.revocationType
            revocationPercentage = payload.revocationPercentage
            value = transaction.value
            appAccountToken = transaction.appAccountToken.map(LookupReport.masked)
            appTransactionID = payload.appTransactionId
            self.record = record
            verdict = Self.verdict(self, sandboxAccepted: sandboxAccepted)
        }

        /// The case, in the words support uses; the first that applies.
        static func verdict(_ purchase: Purchase, sandboxAccepted: Bool) -> String {
            let day = { (date: Date?) in date.map { String(RFC3339.format($0).prefix(10)) } ?? "?" }
            let grant = purchase.record.grant
            if purchase.environment == .sandbox && !sandboxAccepted {
                return "Sandbox: a tester's purchase, no money paid; never credited here"
            }
            let sandbox = purchase.environment == .sandbox ? "Sandbox (a tester's, no money): " : ""
            // A family member's access: the purchaser paid; nothing of it is this player's to be credited.
            let familyShared = purchase.value.ownershipType == .familyShared
            let paid = familyShared ? "a family member's access (Family Sharing, nothing paid for it)" : "paid"
            let partlyRefunded = (purchase.revocationPercentage ?? 100_000) < 100_000
            if let revoked = purchase.revocationDate {
                let what = purchase.revocationType == .familyRevoke ? "revoked (Family Sharing)" : "refunded"
                let share = purchase.revocationPercentage.map { " (\(NotificationEvent.percentage(milliunits: $0)) %)" }
                let holder = grant.map { ", was granted to order \($0.orderID) of player \($0.userID)" } ?? ""
                // Refunded in part and held by no order: the rest is the player's.
                if partlyRefunded && grant == nil && !familyShared {
                    return sandbox
                        + "refunded in part on \(day(revoked))\(share ?? ""), never claimed: credit the rest"
                        + " (receipt-worker credit; the refunded share is taken back at once)"
                }
                if partlyRefunded, let grant, grant.credit == .unclaimed, !familyShared {
                    return sandbox
                        + "credited unclaimed, then refunded in part on \(day(revoked))\(share ?? ""): if its player"
                        + " was not known, credit the rest to their order (receipt-worker credit, order \(grant.orderID))"
                }
                return sandbox + "\(what) on \(day(revoked))\(share ?? "")\(holder)"
            }
            if let grant, grant.credit != .unclaimed {
                return sandbox
                    + "\(paid), granted to order \(grant.orderID) of player \(grant.userID) on \(day(grant.grantedAt))"
            }
            if familyShared {
                return sandbox + "\(paid): nothing to credit; the app grants it when it presents the transaction"
            }
            if let report = purchase.record.report {
                switch report.state {
                case "waiting":
                    return sandbox + "paid, waiting for its job until \(day(report.dueAt)), then credited unclaimed"
                case "credited":
                    return sandbox
                        + "paid, never claimed: credited unclaimed on \(day(report.settledAt)) (event \(report.eventID)); "
                        + "its player is the one its app account token names, else credit it to an order"
                default: break
                }
            }
            if let expires = purchase.expiresDate, expires <= Date() {
                return sandbox + "paid, never claimed, and the period ended on \(day(expires)): nothing to credit now"
            }
            return sandbox + "paid, never claimed: credit it (receipt-worker credit)"
        }
    }

    /// The one line for the whole query: the purchase's, or why nothing was found.
    public var summary: String {
        if purchases.isEmpty { return notFound ?? "nothing found" }
        if purchases.count == 1 { return purchases[0].verdict }
        return "\(purchases.count) purchases: "
            + purchases.map { "\($0.transactionID): \($0.verdict)" }.joined(separator: "; ")
    }

    /// A token shortened for people: its first 8 characters.
    static func masked(_ token: String) -> String { String(token.prefix(8)) + "…" }

    /// The report for people: the summary, then one block per purchase.
    public func table() -> String {
        var lines = ["\(query) (app \(bundleID))", "=> \(summary)"]
        for purchase in purchases {
            lines.append("")
            lines.append("transaction \(purchase.transactionID): \(purchase.verdict)")
            guard purchase.unverified == nil else { continue }
            let time = { (date: Date?) in date.map(RFC3339.format) ?? "-" }
            let price =
                purchase.value.price.map { "\(Self.amount(milliunits: $0)) \(purchase.value.currency ?? "")" } ?? "-"
            let apple: [(String, String)] = [
                ("apple", ""),
                ("  product", "\(purchase.productID ?? "-") x \(purchase.quantity) (\(purchase.type ?? "-"))"),
                ("  environment", purchase.environment?.rawValue ?? "-"),
                ("  original transaction", purchase.originalTransactionID ?? "-"),
                ("  purchased", time(purchase.purchaseDate)),
                ("  expires", time(purchase.expiresDate)),
                ("  price", price + (purchase.value.storefront.map { " in \($0)" } ?? "")),
                ("  ownership", purchase.value.ownershipType?.rawValue ?? "-"),
                ("  offer", purchase.value.offerIdentifier ?? purchase.value.offerType.map { "type \($0)" } ?? "-"),
                (
                    "  revoked",
                    purchase.revocationDate.map {
                        "\(RFC3339.format($0)) \(purchase.revocationType?.rawValue ?? "")"
                            + (purchase.revocationPercentage.map {
                                " \(NotificationEvent.percentage(milliunits: $0)) %"
                            } ?? "")
                    } ?? "-"
                ),
                ("  app account token", purchase.appAccountToken ?? "-"),
                ("  app transaction", purchase.appTransactionID ?? "-"),
            ]
            let notAsked: [(String, String)] = [("apple", "not asked (Sandbox, not accepted here)")]
            let ledger: [(String, String)] = [
                ("ledger", ""),
                (
                    "  granted",
                    purchase.record.grant.map {
                        "order \($0.orderID) of player \($0.userID) at \(time($0.grantedAt)) (\($0.credit))"
                            + ($0.revokedAt.map { ", revoked at \(RFC3339.format($0))" } ?? "")
                    } ?? "no"
                ),
                (
                    "  reported by Apple",
                    purchase.record.report.map {
                        "\($0.state), due \(time($0.dueAt)), event \($0.eventID)"
                            + ($0.published ? ", published" : "")
                    } ?? "no"
                ),
            ]
            let rows = (purchase.askedApple ? apple : notAsked) + ledger
            lines += rows.map { $0.1.isEmpty ? $0.0 : $0.0.padding(toLength: 24, withPad: " ", startingAt: 0) + $0.1 }
        }
        return lines.joined(separator: "\n")
    }

    /// The report for tools: one JSON object.
    public func json() -> Data {
        func time(_ date: Date?) -> JSONValue { JSONValue(date.map(RFC3339.format)) }
        let purchases = self.purchases.map { purchase -> JSONValue in
            let grant = purchase.record.grant.map { grant -> JSONValue in
                [
                    "order_id": .string(grant.orderID), "user_id": .string(grant.userID),
                    "transaction_id": .string(grant.transactionID), "granted_at": time(grant.grantedAt),
                    "revoked_at": time(grant.revokedAt), "credit": .string(grant.credit.rawValue),
                ]
            }
            let reported = purchase.record.report.map { report -> JSONValue in
                [
                    "state": .string(report.state), "due_at": time(report.dueAt), "event_id": .string(report.eventID),
                    "published": .bool(report.published), "settled_at": time(report.settledAt),
                ]
            }
            return [
                "transaction_id": .string(purchase.transactionID), "verdict": .string(purchase.verdict),
                "verified": .bool(purchase.verified), "asked_apple": .bool(purchase.askedApple),
                "unverified_reason": JSONValue(purchase.unverified),
                "original_transaction_id": JSONValue(purchase.originalTransactionID),
                "product_id": JSONValue(purchase.productID), "quantity": JSONValue(purchase.quantity),
                "type": JSONValue(purchase.type), "environment": JSONValue(purchase.environment?.rawValue),
                "purchase_date": time(purchase.purchaseDate), "expires_date": time(purchase.expiresDate),
                "revocation_date": time(purchase.revocationDate),
                "revocation_type": JSONValue(purchase.revocationType?.rawValue),
                "revocation_percentage": purchase.revocationPercentage.map { .double(Double($0) / 1000) } ?? .null,
                "price": JSONValue(purchase.value.price), "currency": JSONValue(purchase.value.currency),
                "storefront": JSONValue(purchase.value.storefront),
                "in_app_ownership_type": JSONValue(purchase.value.ownershipType?.rawValue),
                "offer_type": JSONValue(purchase.value.offerType),
                "offer_identifier": JSONValue(purchase.value.offerIdentifier),
                "app_account_token": JSONValue(purchase.appAccountToken),
                "app_transaction_id": JSONValue(purchase.appTransactionID),
                "ledger": ["grant": grant ?? .null, "reported": reported ?? .null],
            ]
        }
        let object: JSONValue = [
            "query": .string(query), "bundle_id": .string(bundleID), "summary": .string(summary),
            "not_found": JSONValue(notFound), "purchases": .array(purchases),
        ]
        return object.data
    }

    /// Milliunits as a decimal amount, at least two decimals: 990 is 0.99, 4990 is 4.99, 1234 is 1.234.
    static func amount(milliunits: Int64) -> String {
        let sign = milliunits < 0 ? "-" : ""
        let magnitude = milliunits.magnitude
        var fraction = String(magnitude % 1000)
        fraction = String(repeating: "0", count: 3 - fraction.count) + fraction
        if fraction.hasSuffix("0") { fraction.removeLast() }
        return "\(sign)\(magnitude / 1000).\(fraction)"
    }
}
