package import Foundation
import Vocabulary

/// A grant as the claim reads it.
package struct GrantFact {
    package var app: AppScope
    package var environment: String
    package var transactionID: String
    package var purchaseID: String
    package var orderID: String
    /// A job's grant (`credit` = `job`), which holds its order; a credit's (a renewal, an unclaimed purchase)
    /// holds only its purchase.
    package var isJobGrant: Bool
    /// The credit's event id, for a grant the worker made (a renewal, an unclaimed purchase, tied or not).
    package var creditEventID: String?
    package var revoked: Bool
    /// What the grant's sale counted as revenue (nil: not known).
    package var revenue: Int64? = nil

    package init(
        app: AppScope, environment: String, transactionID: String, purchaseID: String, orderID: String,
        isJobGrant: Bool, creditEventID: String? = nil, revoked: Bool, revenue: Int64? = nil
    ) {
        self.app = app
        self.environment = environment
        self.transactionID = transactionID
        self.purchaseID = purchaseID
        self.orderID = orderID
        self.isJobGrant = isJobGrant
        self.creditEventID = creditEventID
        self.revoked = revoked
        self.revenue = revenue
    }
}

/// A refund or revocation remembered for a purchase (revoked now): by its identity or its transaction id, in
/// its app and environment; app `*` for one remembered before apps were scoped (any app's). `share`: refunded in
/// all, in milliunits (nil: not recorded, all of it); `at`: Apple's time of it.
package struct RefundFact {
    package var app: String
    package var environment: String
    package var purchaseID: String
    package var transactionID: String
    package var share: Int? = nil
    package var at: Date? = nil

    package init(
        app: String, environment: String, purchaseID: String, transactionID: String, share: Int? = nil, at: Date? = nil
    ) {
        self.app = app
        self.environment = environment
        self.purchaseID = purchaseID
        self.transactionID = transactionID
        self.share = share
        self.at = at
    }
}

/// What the ledger holds about a batch's jobs, purchases and orders, read under the locks of their purchases;
/// ``ClaimRules`` adds the batch's own writes as it decides. Keys are compared as bytes, as the databases
/// compare them (Swift's `==` would call two spellings of "é" one order).
package struct ClaimFacts {
    private var results: [Bytes: StoredEvent] = [:]
    private var grants: [GrantFact] = []
    /// Grants by (app, environment, id) for their transaction id and their purchase id (one grant a purchase);
    /// job grants by (app, order).
    private var byTransaction: [Bytes: [Int]] = [:]
    private var byPurchase: [Bytes: Int] = [:]
    private var jobOrders: Set<Bytes> = []
    private var refunds: [Bytes: RefundTaken] = [:]
    /// Purchases given back (a refund reversed) after the refund a decision's proof states.
    private var reversals: Set<Bytes> = []

    package init() {}

    /// A stored result: `fingerprint` "" is one stored before fingerprints (it answers any of its job's).
    package mutating func addResult(app: AppScope, jobID: String, fingerprint: String, _ event: StoredEvent) {
        results[Bytes(app.rawValue, jobID, fingerprint)] = event
    }

    package mutating func addResult(_ key: DecisionKey, _ event: StoredEvent) {
        addResult(app: key.app, jobID: key.jobID, fingerprint: key.fingerprint, event)
    }

    /// Adds a grant the ledger holds; one already known (read twice, by two of its keys) is kept once: a purchase
    /// has one grant in its app and environment.
    package mutating func addGrant(_ grant: GrantFact) {
        let purchase = Bytes(grant.app.rawValue, grant.environment, grant.purchaseID)
        guard byPurchase[purchase] == nil else { return }
        let index = grants.count
        byPurchase[purchase] = index
        grants.append(grant)
        byTransaction[Bytes(grant.app.rawValue, grant.environment, grant.transactionID), default: []].append(index)
        if grant.isJobGrant { jobOrders.insert(Bytes(grant.app.rawValue, grant.orderID)) }
    }

    package mutating func addRefund(_ refund: RefundFact) {
        // A share not recorded (a release before shares) is all of it; a time not known, none to go by.
        let taken = RefundTaken(
            share: min(max(refund.share ?? 100_000, 0), 100_000), at: refund.at ?? Date(timeIntervalSince1970: 0))
        func add(_ key: Bytes) {
            if let known = refunds[key], known.share >= taken.share { return }
            refunds[key] = taken
        }
        add(Bytes(refund.app, refund.environment, "p", refund.purchaseID))
        add(Bytes(refund.app, refund.environment, "t", refund.transactionID))
        if refund.app == "*" {
            add(Bytes("*", "p", refund.purchaseID))
            add(Bytes("*", "t", refund.transactionID))
        }
    }

    /// The job's stored answer, with its follow-up (stored beside it) when it has one.
    package func result(_ key: DecisionKey) -> StoredEvent? {
        guard !results.isEmpty else { return nil }
        guard
            var stored = results[Bytes(key.app.rawValue, key.jobID, key.fingerprint)]
                ?? results[Bytes(key.app.rawValue, key.jobID, "")]
        else { return nil }
        if let followUp = results[Bytes(key.app.rawValue, key.jobID, key.fingerprint + ClaimRules.followUpSuffix)] {
            stored.followUps = [followUp]
        }
        return stored
    }

    /// The grants of the claim's purchase in its app and environment: of its transaction id, of its identity
    /// as a transaction id, or by its identity (under another transaction id: a restore).
    package func owners(app: AppScope, _ claim: GrantClaim) -> [GrantFact] {
        // Nothing held yet (a batch's first claim, most claims at a launch): no key built, nothing allocated.
        guard !grants.isEmpty else { return [] }
        let environment = claim.environment.rawValue
        var indexes: [Int] = []
        func add(_ found: [Int]?) {
            for index in found ?? [] where !indexes.contains(index) { indexes.append(index) }
        }
        add(byTransaction[Bytes(app.rawValue, environment, claim.transactionID)])
        add(byTransaction[Bytes(app.rawValue, environment, claim.purchaseID.key)])
        add(byPurchase[Bytes(app.rawValue, environment, claim.purchaseID.key)].map { [$0] })
        return indexes.map { grants[$0] }
    }

    /// The largest refund remembered for the claim's purchase (by its identity or its transaction id), if any.
    package func refund(app: AppScope, _ claim: GrantClaim) -> RefundTaken? {
        // Most batches remember no refund: no key built.
        guard !refunds.isEmpty else { return nil }
        return [
            Bytes(app.rawValue, claim.environment.rawValue, "p", claim.purchaseID.key),
            Bytes(app.rawValue, claim.environment.rawValue, "t", claim.transactionID),
            Bytes("*", "p", claim.purchaseID.key), Bytes("*", "t", claim.transactionID),
        ].compactMap { refunds[$0] }.max { $0.share < $1.share }
    }

    /// A purchase given back after the refund its decision's proof states: that refund is over.
    package mutating func addReversal(_ purchase: PurchaseKey) {
        reversals.insert(Bytes(purchase.app.rawValue, purchase.environment.rawValue, purchase.purchaseID.key))
    }

    package func isReversed(app: AppScope, _ claim: GrantClaim) -> Bool {
        !reversals.isEmpty && reversals.contains(Bytes(app.rawValue, claim.environment.rawValue, claim.purchaseID.key))
    }

    /// A grant held, revoked by this batch (a refund taken back): the batch's later decisions see it so.
    package mutating func revoke(_ grant: GrantFact) {
        if let index = byPurchase[Bytes(grant.app.rawValue, grant.environment, grant.purchaseID)] {
            grants[index].revoked = true
        }
    }

    package func orderHasJobGrant(app: AppScope, orderID: String) -> Bool {
        jobOrders.contains(Bytes(app.rawValue, orderID))
    }

    package static func same(_ a: String, _ b: String) -> Bool { a.utf8.elementsEqual(b.utf8) }
}

/// Strings joined as bytes, with a separator no key holds, hashed and compared as bytes.
package struct Bytes: Hashable {
    package let value: [UInt8]

    // Two to four parts, each spelled out: a variadic list would allocate an array of its own for every key, and
    // a claim makes about fifteen keys.
    package init(_ first: String, _ second: String) { value = Self.joined(first, second, nil, nil) }
    package init(_ first: String, _ second: String, _ third: String) { value = Self.joined(first, second, third, nil) }
    package init(_ first: String, _ second: String, _ third: String, _ fourth: String) {
        value = Self.joined(first, second, third, fourth)
    }

    private static func joined(_ first: String, _ second: String, _ third: String?, _ fourth: String?) -> [UInt8] {
        var count = first.utf8.count + 1 + second.utf8.count
        if let third { count += 1 + third.utf8.count }
        if let fourth { count += 1 + fourth.utf8.count }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        bytes += first.utf8
        bytes.append(0)
        bytes += second.utf8
        if let third {
            bytes.append(0)
            bytes += third.utf8
        }
        if let fourth {
            bytes.append(0)
            bytes += fourth.utf8
        }
        return bytes
    }

    /// The bytes hashed at once: an array's own hashing feeds the hasher one element at a time, which made hashing
    /// these keys the largest single cost of a claim's rules.
    package func hash(into hasher: inout Hasher) {
        value.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}
