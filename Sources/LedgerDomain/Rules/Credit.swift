import Foundation
import Vocabulary

/// A grant made by the worker, not by a job: a subscription's period (to the subscription's order) or a
/// reported purchase no job claimed (to ``ReportedPurchase/creditOrderID(transactionID:)`` until a job ties it).
package struct Credit {
    /// `renewal` or `unclaimed`.
    package var kind: GrantKind
    package var purchase: PurchaseKey
    package var transactionID: String
    package var originalTransactionID: String?
    package var orderID: String
    package var userID: String
    package var productID: String
    package var quantity: Int
    /// The credit's event id: a job presenting the purchase for the order that holds it is answered with it.
    /// (A reported purchase's credit event is kept once, with the reported purchase.)
    package var eventID: String
    /// What the credit counts as revenue (its event's `revenue`).
    package var revenue: Int64?

    package init(
        kind: GrantKind, purchase: PurchaseKey, transactionID: String, originalTransactionID: String? = nil,
        orderID: String, userID: String, productID: String, quantity: Int, eventID: String, revenue: Int64? = nil
    ) {
        self.kind = kind
        self.purchase = purchase
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.orderID = orderID
        self.userID = userID
        self.productID = productID
        self.quantity = quantity
        self.eventID = eventID
        self.revenue = revenue
    }
}

/// A credit of the worker's that an order holds: its event id and what it counted as revenue.
package struct HeldCredit: Equatable {
    package var eventID: String
    package var revenue: Int64?

    package init(eventID: String, revenue: Int64? = nil) {
        self.eventID = eventID
        self.revenue = revenue
    }
}

/// An unclaimed credit that holds a purchase and that no job tied to its order yet.
package struct UntiedCredit {
    package var eventID: String
    package var originalTransactionID: String?
    /// Refunded or revoked since it was credited.
    package var revoked: Bool
    /// What the credit counted as revenue.
    package var revenue: Int64?
    /// While revoked: the share refunded in all and Apple's time of it (nil: not recorded, all of it).
    package var refund: RefundTaken? = nil

    package init(
        eventID: String, originalTransactionID: String? = nil, revoked: Bool, revenue: Int64? = nil,
        refund: RefundTaken? = nil
    ) {
        self.eventID = eventID
        self.originalTransactionID = originalTransactionID
        self.revoked = revoked
        self.revenue = revenue
        self.refund = refund
    }
}

/// How a job's claim of a purchase credited unclaimed ended (``PurchaseRules/claimCredit(_:answer:in:)``).
package enum CreditClaim: Sendable, Equatable {
    /// Tied to the job's order; the answer stored and to publish.
    case tied(StoredEvent)
    /// This job was decided before: its stored event.
    case replay(StoredEvent)
    /// The purchase is held by an order (another job's, or a credit tied before): not a credit to claim.
    case notACredit
    /// The job's order was granted with another purchase.
    case orderAlreadyFulfilled
    /// The credit was refunded or revoked meanwhile.
    case revoked

    /// What the job's claim answers, the purchase being held already (`duplicateTransaction` when it is not a
    /// credit to tie).
    package var outcome: ClaimVerdict {
        switch self {
        case .tied(let event): .tied(event)
        case .replay(let first): .replay(first)
        case .notACredit: .duplicateTransaction
        case .orderAlreadyFulfilled: .orderAlreadyFulfilled
        case .revoked: .revoked
        }
    }
}
