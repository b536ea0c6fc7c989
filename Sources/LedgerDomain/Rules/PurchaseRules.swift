package import Foundation
import Vocabulary

/// What an App Store notification does to a purchase: the one place that decides it. The ledger engine reads a
/// notification's facts under its purchase's lock (``factsQuery(_:)``), lets ``decide(_:facts:)`` say what to
/// write and which event is wanted, makes the event and writes, all in one transaction; a subscription's change,
/// which reads what it writes, runs statement by statement (``applySubscription(_:change:in:)``).
///
/// - A notification is handled once (its `notificationUUID`): handled before, it answers its first outcome.
/// - A revoke or reinstate changes the purchase's state (in its app and environment) unless it is older than
///   the purchase's last change (Apple's `signedDate` orders them); it publishes an event only when it changes
///   what is taken back from a purchase granted here: a first refund, a later refund of a larger share (a
///   prorated refund, then a full one), a reversal. A second refund of the same share does not.
/// - A consumption request is kept, with its deadline, only for a purchase granted here: nobody else could
///   answer it, and the oldest-unanswered gauge must not alarm for another system's purchase.
/// - A notification of one environment never touches a grant of the other.
/// - A subscription's state changes only for a notification newer than the last one applied; a renewal (a
///   new period, a purchase) is credited to the subscription's order once, whenever it arrives, unless a job
///   claimed it first.
/// - A purchase Apple reports is credited by an event of its own when no job claimed it by its due time; a job
///   that presents it later ties the credit to its order (``claimCredit(_:answer:in:)``). One refunded by then is
///   not credited, until a reversal makes it due again.
package enum PurchaseRules {
    /// What to read for a notification (a subscription's change reads its own: ``applySubscription(_:change:in:)``).
    package static func factsQuery(_ change: NotificationChange) -> PurchaseFactsQuery {
        var query = PurchaseFactsQuery(notificationID: change.id)
        func purchase(_ id: PurchaseID) -> PurchaseKey {
            PurchaseKey(app: change.app, environment: change.environment, purchaseID: id)
        }
        switch change.kind {
        case .none, .notice, .subscription:
            break
        case .revoke(let purchaseID, let transactionID, _, _), .reinstate(let purchaseID, let transactionID, _, _):
            query.purchase = purchase(purchaseID)
            query.transactionID = transactionID
            query.locks = true
            query.readsState = true
        case .consumptionRequest(let transactionID, _):
            query.purchase = purchase(.transaction(transactionID))
            query.transactionID = transactionID
        case .purchased(let reported):
            query.purchase = purchase(reported.purchaseID)
            query.transactionID = reported.transactionID
            query.locks = true
        }
        return query
    }

    /// What a notification not handled before does, given what ``factsQuery(_:)`` read.
    package static func decide(_ change: NotificationChange, facts: PurchaseFacts) -> NotificationDecision {
        var decided = NotificationDecision(granted: facts.grant != nil)
        switch change.kind {
        case .none, .subscription:
            decided.granted = false
        case .notice(let event):
            decided.notice = event
            decided.granted = true
        case .revoke(let purchaseID, let transactionID, let at, _),
            .reinstate(let purchaseID, let transactionID, let at, _):
            let share: Int? =
                if case .revoke(_, _, _, let share) = change.kind { min(max(share, 0), 100_000) } else { nil }
            let revoke = share != nil
            let last = facts.state
            let outcome = outcome(revoke: revoke, at: at, share: share, last: last)
            if outcome.applies {
                let purchase = PurchaseKey(app: change.app, environment: change.environment, purchaseID: purchaseID)
                decided.writes.append(
                    .state(purchase, transactionID: transactionID, revoked: revoke, at: at, share: outcome.share))
                if !revoke, last?.revoked == true, facts.grant == nil {
                    // A reversal of a purchase no job claimed: a credit withheld for the refund is the player's again.
                    decided.writes.append(.reopenUnclaimed(purchase))
                }
            }
            if outcome.changes, let grant = facts.grant {
                // What was refunded before this change: what the event takes back, or gives back, is the difference.
                let before: Int? = last?.revoked == true ? last?.share : 0
                decided.wanted = PurchaseHolder(grant: grant, refundedBefore: before)
            }
        case .consumptionRequest(let transactionID, let respondBy):
            if let grant = facts.grant {
                decided.writes.append(
                    .consumptionRequest(
                        app: change.app, environment: change.environment, transactionID: transactionID,
                        notificationID: change.id, respondBy: respondBy))
                decided.wanted = PurchaseHolder(grant: grant)
            }
        case .purchased(let reported):
            // A job claimed it first: nothing to wait for.
            if facts.grant == nil {
                decided.writes.append(.waitUnclaimed(app: change.app, environment: change.environment, reported))
            }
        }
        return decided
    }

    /// A subscription notification, read and written statement by statement (a period credited, then its grant
    /// read): the subscription's holder and the event wanted, when an order here holds the subscription; else a
    /// renewal kept as a purchase Apple reported.
    package static func applySubscription(
        _ subscription: SubscriptionChange, change: NotificationChange, in transaction: some PurchaseStateTransaction
    ) throws -> NotificationDecision {
        var decided = NotificationDecision()
        if let holder = try subscriptionHolder(subscription, change: change, in: transaction) {
            decided.granted = true
            decided.wanted = holder.publish ? holder.holder : nil
        } else if let unheld = subscription.unheld {
            // A renewal before any grant of its subscription (the job late, the first purchase waiting for
            // one): a purchase Apple reported, like any other.
            decided.writes.append(.waitUnclaimed(app: change.app, environment: change.environment, unheld))
        }
        return decided
    }

    /// A subscription notification: the subscription's holder and its state after it, and whether it publishes
    /// an event; nil when no order here holds the subscription.
    private static func subscriptionHolder(
        _ subscription: SubscriptionChange, change: NotificationChange, in transaction: some PurchaseStateTransaction
    ) throws -> (holder: PurchaseHolder, publish: Bool)? {
        let key = PurchaseKey(
            app: change.app, environment: change.environment,
            purchaseID: .subscription(originalTransactionID: subscription.originalTransactionID))
        try transaction.lock(key)
        guard
            let grant = try transaction.subscriptionGrant(
                app: change.app, environment: change.environment,
                originalTransactionID: subscription.originalTransactionID)
        else { return nil }
        let last = try transaction.subscriptionState(
            app: change.app, environment: change.environment, originalTransactionID: subscription.originalTransactionID)
        let (state, newer) = merge(subscription.state, into: last)
        var publish = newer
        var holder = grant
        var stateOnly = false
        if let renewal = subscription.renewal {
            // A period is a purchase: credited once, to the subscription's order, even delivered after a newer
            // notification; a job that claimed it first keeps it (its order's grant was the credit).
            let period = PurchaseKey(app: change.app, environment: change.environment, purchaseID: renewal.purchaseID)
            try transaction.lock(period)
            if try transaction.state(of: period)?.revoked == true {
                // Refunded before its renewal was heard of (Apple's retries, a backfill): never credited.
                publish = false
            } else if try transaction.insertCredit(
                Credit(
                    kind: .renewal, purchase: period, transactionID: renewal.transactionID,
                    originalTransactionID: subscription.originalTransactionID, orderID: grant.orderID,
                    userID: grant.userID, productID: renewal.productID, quantity: renewal.quantity,
                    eventID: renewal.eventID, revenue: renewal.revenue))
            {
                let credited = try transaction.grant(of: period, transactionID: renewal.transactionID)
                publish = credited.map { !$0.revoked } ?? false
                if let credited { holder = credited }
            } else {
                // Credited before: by a job's or support's grant (whose own event was the credit), or by an earlier
                // notification of the period (its receipt.renewed). No second credit; a state that entitles
                // otherwise than the ledger's (an extension whose RENEWAL_EXTENDED was lost, found by the status
                // check; a billing issue recovered) is said to the subscription's order, by an event of its own.
                // So is Apple's recovery from a billing issue when a job granted the period to another order: the
                // job's grant set the ledger's state already, but the subscription's order heard only the issue.
                let entitlesOtherwise = last.map(state.entitlesOtherwise(than:)) ?? false
                let toAnotherOrder =
                    subscription.recovery && newer && !entitlesOtherwise
                    ? try transaction.grant(of: period, transactionID: renewal.transactionID)
                        .map { $0.orderID != grant.orderID } ?? false : false
                publish = newer && (entitlesOtherwise || toAnotherOrder)
                stateOnly = true
            }
        }
        if state != last {
            try transaction.setSubscriptionState(
                app: change.app, environment: change.environment,
                originalTransactionID: subscription.originalTransactionID, state)
        }
        return (PurchaseHolder(grant: holder, subscription: state, stateOnly: stateOnly), publish)
    }

    /// A subscription's state after a notification's: the notification's, when it is newer than the last one
    /// applied (Apple's `signedDate`), else the last unchanged; the latest expiry of either in both cases.
    package static func merge(_ said: SubscriptionState, into last: SubscriptionState?) -> (
        SubscriptionState, newer: Bool
    ) {
        guard let last else { return (said, true) }
        let newer = said.changedAt > last.changedAt
        var state = newer ? said : last
        state.expiresAt = [said.expiresAt, last.expiresAt].compactMap { $0 }.max()
        return (state, newer)
    }

    /// Credits the reported purchases due by `now` that no job claimed and that were not refunded (in part
    /// either: without a job the worker knows no order to grant what was kept to, and a job or support's credit
    /// grants it then, the refunded share taken back at once); answers the credits not yet published, those
    /// refunded since too: the refund found the credit's grant, so its `receipt.revoked` went out for the credit's
    /// order, and a grant service holds it until the credit comes (never a refund whose grant never comes).
    package static func creditDue(now: Date, limit: Int, in transaction: some PurchaseStateTransaction) throws
        -> [StoredEvent]
    {
        for (app, environment, reported) in try transaction.dueUnclaimed(now: now, limit: limit) {
            let purchase = PurchaseKey(app: app, environment: environment, purchaseID: reported.purchaseID)
            try transaction.lock(purchase)
            let outcome: UnclaimedEnding
            if try transaction.grant(of: purchase, transactionID: reported.transactionID) != nil {
                outcome = .claimed
            } else if try transaction.state(of: purchase)?.revoked == true {
                outcome = .refunded
            } else {
                outcome =
                    try transaction.insertCredit(
                        Credit(
                            kind: .unclaimed, purchase: purchase, transactionID: reported.transactionID,
                            originalTransactionID: reported.originalTransactionID,
                            orderID: ReportedPurchase.creditOrderID(transactionID: reported.transactionID),
                            userID: "", productID: reported.productID, quantity: reported.quantity,
                            eventID: reported.event.eventID, revenue: reported.revenue)) ? .credited : .claimed
            }
            try transaction.settleUnclaimed(purchase, outcome)
        }
        return try transaction.unpublishedCredits(limit: limit)
    }

    /// A job's grant that met a purchase held by an unclaimed credit: the credit becomes the job's order's (its
    /// player's), and the job is answered with the credit's event id, so that nothing is credited twice and the
    /// order is tied to the credit.
    package static func claimCredit(
        _ decision: Decision, answer: (_ creditEventID: String, _ revenue: Int64?) -> StoredEvent,
        in transaction: some PurchaseStateTransaction
    ) throws -> CreditClaim {
        if let stored = try transaction.storedDecision(decision.key) { return .replay(stored) }
        guard let claim = decision.grant, let purchase = decision.purchase else { return .notACredit }
        // The subscription first, as a renewal takes them: a period credited meanwhile moves with the tie.
        let credit = try transaction.untiedCredit(of: purchase, transactionID: claim.transactionID)
        if let original = credit?.originalTransactionID { try transaction.lock(purchase.subscription(original)) }
        try transaction.lock(purchase)
        guard let current = try transaction.untiedCredit(of: purchase, transactionID: claim.transactionID) else {
            // Two jobs of one order at once: the other tied the credit first (its job's lookup and this one's
            // both found it untied). This order holds it now: the same credit, never a deny of its own order.
            if let held = try transaction.creditHeld(of: purchase, byOrder: claim.orderID) {
                let event = answer(held.eventID, held.revenue)
                try transaction.insertResult(decision.key, event: event)
                return .tied(event)
            }
            return .notACredit
        }
        // Refunded since it was credited: in all, nothing to tie; in part, the rest is the player's, tied with a
        // follow-up that takes the share back from this order (its revenue was taken back by the credit's refund).
        var followUp: StoredEvent?
        if current.revoked {
            guard let refund = current.refund, refund.share < 100_000, let make = decision.refundFollowUp else {
                return .revoked
            }
            followUp = make(RefundTaken(share: refund.share, at: refund.at, revenueTaken: true))
        }
        if try transaction.orderGranted(app: decision.key.app, orderID: claim.orderID) {
            return .orderAlreadyFulfilled
        }
        try transaction.tieCredit(of: purchase, transactionID: claim.transactionID, to: claim)
        var event = answer(current.eventID, current.revenue)
        try transaction.insertResult(decision.key, event: event)
        if let followUp {
            try transaction.insertResult(ClaimRules.followUpKey(decision.key), event: followUp)
            event.followUps = [followUp]
        }
        return .tied(event)
    }

    /// The rule for a revoke or reinstate, given the purchase's last change (revoked or not, the share refunded,
    /// and Apple's time of it): a change older than the last is stale and applies nothing. A change that applies
    /// changes what is taken back when the purchase was not revoked (a refund), was revoked (a reversal), or is
    /// refunded now of a larger share than before (a prorated refund, then a full one). The share refunded
    /// only grows until a reversal; a share not recorded (by a release before shares) is unknown, so any later
    /// refund of it publishes (its event says the share in all: publishing it again takes back nothing twice).
    package static func outcome(revoke: Bool, at: Date, share: Int?, last: PurchaseState?)
        -> (applies: Bool, changes: Bool, share: Int?)
    {
        if let last, last.at >= at { return (false, false, last.share) }
        guard revoke, let share else { return (true, last?.revoked ?? false, nil) }
        guard let last, last.revoked else { return (true, true, share) }
        guard let before = last.share else { return (true, true, share) }
        return (true, share > before, max(share, before))
    }
}
