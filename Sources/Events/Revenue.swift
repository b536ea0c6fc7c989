package import AppleVerification
package import Vocabulary

/// What each event counts as revenue (its `revenue` field, docs/contract.md section 4): one rule for every event
/// that credits or takes back a purchase, so that indicative revenue is the sum of `revenue` by app and currency
/// over the events, deduplicated on `event_id`, with nothing else to know.
///
/// - A sale (`receipt.granted`, `receipt.renewed`, `receipt.unclaimed`) counts Apple's price of a Production
///   purchase the player bought; nothing for a tester's (Sandbox), a family member's access (`FAMILY_SHARED`: the
///   purchaser's purchase is the sale) or a proof without a price (a verifyReceipt receipt).
/// - A refund (`receipt.revoked`) takes back its share of what the sale counted, less what earlier refunds of it
///   took: nothing for a sale that counted nothing.
/// - A reversal (`receipt.reinstated`) gives back what the refunds took.
///
/// Amounts are milliunits of the event's `currency`.
package enum Revenue {
    /// What a sale counts.
    package static func ofSale(_ value: PurchaseValue, environment: AppleEnvironment?) -> Int64 {
        guard environment == .production, value.ownershipType != .familyShared, let price = value.price else {
            return 0
        }
        return max(price, 0)
    }

    /// What a refund of `share` (milliunits of the whole: 100,000 is all) takes of a sale that counted `revenue`,
    /// rounded half up: successive refunds' differences add up to the last share's, to the milliunit.
    package static func taken(_ revenue: Int64, share: Int) -> Int64 {
        let share = Int64(min(max(share, 0), 100_000))
        let revenue = max(revenue, 0)
        // In two parts, so that no product can overflow whatever the price.
        return revenue / 100_000 * share + (revenue % 100_000 * share + 50_000) / 100_000
    }

    /// What a refund event counts: minus what it takes beyond the refunds before it. Nil when the ledger does not
    /// know what the sale counted (a grant recorded by a release before revenue) or what was refunded before.
    package static func ofRefund(saleRevenue: Int64?, share: Int, refundedBefore: Int?) -> Int64? {
        guard let saleRevenue, let refundedBefore else { return nil }
        return -(taken(saleRevenue, share: share) - taken(saleRevenue, share: refundedBefore))
    }

    /// What a reversal counts: what the refunds before it took, given back.
    package static func ofReversal(saleRevenue: Int64?, refundedBefore: Int?) -> Int64? {
        guard let saleRevenue, let refundedBefore else { return nil }
        return taken(saleRevenue, share: refundedBefore)
    }
}
