public import AppleVerification
import Crypto
public import Foundation
public import LedgerDomain
package import Messaging
import Observability
public import Vocabulary

/// One grant or deny (docs/contract.md §4). Every field is always present; absent values are JSON null.
public struct ResultEvent: Sendable, Equatable {
    /// A grant, or a deny and its reason.
    public enum Decision: Sendable, Equatable {
        case grant
        case deny(DenyReason)

        /// `grant` or `deny`: the event's `decision`.
        public var name: String {
            switch self {
            case .grant: "grant"
            case .deny: "deny"
            }
        }

        /// `verified` for a grant, else the deny reason: the event's `reason`.
        public var reason: String {
            switch self {
            case .grant: "verified"
            case .deny(let reason): reason.rawValue
            }
        }
    }

    public var eventID: String
    public var jobID: String
    public var orderID: String
    public var userID: String
    public var decision: Decision
    public var productID: String
    public var quantity: Int
    public var transactionID: String?
    public var originalTransactionID: String?
    public var environment: AppleEnvironment?
    public var purchaseDate: Date?
    public var expiresDate: Date?
    public var verifiedAt: Date
    public var attempts: Int
    /// For people; never a receipt, a token or a secret.
    public var detail: String?
    /// The app the job was verified for (its `bundle_id`, or the default app's); nil for a malformed job.
    public var bundleID: String? = nil
    /// What the granted purchase was worth (a grant's event only; its fields null where the proof says nothing).
    public var value = PurchaseValue()
    /// What the grant counts as revenue (``Revenue``), in milliunits of `value.currency`: a grant's event only.
    public var revenue: Int64? = nil
    /// Who credited it and why, for a grant support made (`receipt-worker credit`); nil for a job's.
    public var credit: SupportCredit? = nil

    public struct SupportCredit: Sendable, Equatable {
        public var by: String
        public var reason: String

        package init(by: String, reason: String) {
            self.by = by
            self.reason = reason
        }
    }

    package init(
        eventID: String, jobID: String, orderID: String, userID: String, decision: Decision, productID: String,
        quantity: Int, transactionID: String?, originalTransactionID: String?, environment: AppleEnvironment?,
        purchaseDate: Date?, expiresDate: Date?, verifiedAt: Date, attempts: Int, detail: String?,
        bundleID: String? = nil, value: PurchaseValue = PurchaseValue()
    ) {
        self.eventID = eventID
        self.jobID = jobID
        self.orderID = orderID
        self.userID = userID
        self.decision = decision
        self.productID = productID
        self.quantity = quantity
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.environment = environment
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.verifiedAt = verifiedAt
        self.attempts = attempts
        self.detail = detail
        self.bundleID = bundleID
        self.value = value
    }

    /// Stable ids: every grant of one (order, transaction) has the same id, whichever job produced it, as in
    /// every release before (a transaction is one app's: Apple's ids are its own, and the bundle id is checked,
    /// so the app adds nothing, and leaving it out keeps the ids of grants made before apps were scoped). Any
    /// other decision is identified by its app, its job and the job's content, so a re-delivered job repeats
    /// its id and a `job_id` reused with other content, or by another app, gets an id of its own.
    public static func eventID(
        decision: Decision, app: AppScope, jobID: String, fingerprint: String, orderID: String, transactionID: String?
    ) -> String {
        if decision == .grant { return StableID.uuid("grant\u{0}\(orderID)\u{0}\(transactionID ?? "")") }
        let scope = app == .defaultApp ? "" : "\(app.rawValue)\u{0}"
        return StableID.uuid("job\u{0}\(scope)\(jobID)\u{0}\(fingerprint)")
    }

    /// The event as the ledger keeps it: its JSON, and its key and headers' values.
    public func stored() -> StoredEvent {
        StoredEvent(
            eventID: eventID, type: decision == .grant ? EventType.granted.rawValue : EventType.denied.rawValue,
            time: RFC3339.format(verifiedAt), key: orderID, json: jsonBytes())
    }

    /// The JSON value, keys in the contract's order.
    public func json() -> Data { Data(jsonBytes()) }

    /// Written member by member into one buffer: each line of interpolations made a string of its own, and each
    /// quoted value another (about sixty allocations an event).
    private func jsonBytes() -> [UInt8] {
        var out = EventJSON(capacity: 1_024)  // an event's size: built without growing
        out.string("{\"event_id\":", eventID)
        out.word(",\"type\":", decision == .grant ? EventType.granted.rawValue : EventType.denied.rawValue)
        out.string(",\"job_id\":", jobID)
        out.string(",\"order_id\":", orderID)
        out.string(",\"user_id\":", userID)
        out.word(",\"decision\":", decision.name)
        out.word(",\"reason\":", decision.reason)
        out.string(",\"product_id\":", productID)
        out.number(",\"quantity\":", quantity)
        out.string(",\"transaction_id\":", transactionID)
        out.string(",\"original_transaction_id\":", originalTransactionID)
        out.string(",\"environment\":", environment?.rawValue)
        out.string(",\"bundle_id\":", bundleID)
        if decision == .grant {
            out.value(value)
            out.number(",\"revenue\":", revenue)
            out.string(",\"credited_by\":", credit?.by)
            out.string(",\"credit_reason\":", credit?.reason)
        }
        out.time(",\"purchase_date\":", purchaseDate)
        out.time(",\"expires_date\":", expiresDate)
        out.time(",\"verified_at\":", verifiedAt)
        out.number(",\"attempts\":", attempts)
        out.string(",\"detail\":", detail)
        out.raw("}")
        return out.bytes
    }

    /// Every `ce_type` the worker publishes; a test holds docs/ to it.
    public static let eventTypes = EventType.allCases.map(\.rawValue)

}

extension StoredEvent {
    /// The record that publishes the event on `topic`, keyed by its order, with its CloudEvents 1.0 headers
    /// (Kafka binary mode: the attributes as `ce_` headers; docs/contract.md section 4).
    package func record(topic: String, source: String) -> OutboundRecord {
        OutboundRecord(
            topic: topic, key: key, value: json,
            headers: [
                MessageHeader(name: "ce_specversion", string: "1.0"), MessageHeader(name: "ce_id", string: eventID),
                MessageHeader(name: "ce_source", string: source), MessageHeader(name: "ce_type", string: type),
                MessageHeader(name: "ce_time", string: time),
                MessageHeader(name: "content-type", string: "application/json"),
            ])
    }
}

/// Name-based UUIDs (version 5 layout over SHA-1 is not in Foundation; SHA-256 truncated is used instead,
/// with the version nibble set to 8, "custom", per RFC 9562).
package enum StableID {
    package static func uuid(_ name: String) -> String {
        var digest = SHA256Digest.hash(utf8: name)
        digest[6] = (digest[6] & 0x0F) | 0x80
        digest[8] = (digest[8] & 0x3F) | 0x80
        return digest.withUnsafeBytes { Hex.uuid($0) }
    }
}

extension ResultEvent {
    /// The grant of a purchase support credited (`receipt-worker credit`, the desk): "credited by support", who
    /// and why, and what its sale counts as revenue.
    package static func supportGrant(
        key: DecisionKey, app: AppScope, bundleID: String, orderID: String, userID: String,
        transaction: AppleTransaction, environment: AppleEnvironment, by: String, reason: String, at now: Date
    ) -> ResultEvent {
        var event = ResultEvent(
            eventID: eventID(
                decision: .grant, app: app, jobID: key.jobID, fingerprint: key.fingerprint, orderID: orderID,
                transactionID: transaction.transactionID),
            jobID: key.jobID, orderID: orderID, userID: userID, decision: .grant,
            productID: transaction.productID ?? "", quantity: transaction.quantity,
            transactionID: transaction.transactionID, originalTransactionID: transaction.originalTransactionID,
            environment: environment, purchaseDate: transaction.purchaseDate, expiresDate: transaction.expiresDate,
            verifiedAt: now, attempts: 1, detail: "credited by support", bundleID: bundleID, value: transaction.value)
        event.credit = SupportCredit(by: by, reason: reason)
        event.revenue = Revenue.ofSale(transaction.value, environment: environment)
        return event
    }
}
