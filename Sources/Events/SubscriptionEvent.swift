package import AppleVerification
package import Foundation
package import LedgerDomain
import Observability
package import Vocabulary

/// The events of an auto-renewable subscription's life after its grant (docs/contract.md section 9): renewed,
/// expired, a billing issue, a change of its renewal (an extension among them), an extension that failed. Keyed by the order the subscription was granted to; each
/// carries the subscription's state as the ledger knows it after the notification, so a grant service sets the
/// entitlement from the event alone, without calling Apple. Every field always present, null when absent.
package enum SubscriptionEvent {
    package static let types: [EventType] = [.renewed, .expired, .billingIssue, .renewalChanged, .extensionFailed]

    /// The event type of a notification about a subscription, and whether it is a renewal (a new period, a
    /// purchase); nil for a type that says nothing of the subscription's entitlement. An upgrade is charged at
    /// once and starts a new period (Apple: "goes into effect immediately, starting a new billing period"): a
    /// renewal, credited to the subscription's order; a downgrade or a crossgrade waits for the next renewal.
    package static func type(of notificationType: NotificationType, subtype: NotificationSubtype?) -> (
        type: String, renewal: Bool
    )? {
        switch (notificationType, subtype) {
        case (.didRenew, _), (.didChangeRenewalPref, .some(.upgrade)), (.offerRedeemed, .some(.upgrade)):
            (EventType.renewed.rawValue, true)
        // A mass extension could not extend this subscription: its state unchanged, said to its holder.
        case (.renewalExtension, .some(.failure)): (EventType.extensionFailed.rawValue, false)
        default: type(of: notificationType)
        }
    }

    private static func type(of notificationType: NotificationType) -> (type: String, renewal: Bool)? {
        switch notificationType {
        case .expired, .gracePeriodExpired: (EventType.expired.rawValue, false)
        case .didFailToRenew: (EventType.billingIssue.rawValue, false)
        case .didChangeRenewalStatus, .didChangeRenewalPref, .renewalExtended:
            (EventType.renewalChanged.rawValue, false)
        default: nil
        }
    }

    /// What the notification says of the subscription's state: Apple's `data.status` when it gives one, else
    /// what the type implies; the transaction's expiry; the renewal info's renewal and grace period.
    package static func state(_ notification: AppleNotification, transaction: AppleTransaction) -> SubscriptionState {
        let renewal = notification.renewalInfo
        let status: SubscriptionStatus =
            switch notification.payload.data?.status {
            case 1: .active
            case 2: .expired
            case 3: .billingRetry
            case 4: .gracePeriod
            case 5: .revoked
            default:
                switch notification.type {
                case .expired, .gracePeriodExpired: .expired
                case .didFailToRenew: renewal?.gracePeriodExpiresDate != nil ? .gracePeriod : .billingRetry
                default: .active
                }
            }
        return SubscriptionState(
            status: status, expiresAt: transaction.expiresDate,
            gracePeriodExpiresAt: status == .gracePeriod
                ? renewal?.gracePeriodExpiresDate.flatMap { AppleTimestamp.date(milliseconds: $0) } : nil,
            autoRenew: renewal?.autoRenewStatus.map { $0 == 1 }, autoRenewProductID: renewal?.autoRenewProductId,
            changedAt: notification.notifiedAt)
    }

    /// A renewal's credit id: the period's (its purchase identity in its app and environment), whichever
    /// notification brings it. The ledger keeps it with the period's grant, and a job presenting the period for
    /// the order that holds it is answered with it: one credit.
    package static func renewalID(app: AppScope, environment: AppleEnvironment, purchaseID: PurchaseID) -> String {
        StableID.uuid(
            "\(EventType.renewed.rawValue)\u{0}\(app.rawValue)\u{0}\(environment.rawValue)\u{0}\(purchaseID.key)")
    }

    /// The event of `type` for `notification`, about the subscription `holder` holds. `renewalID`: the period's
    /// credit id (``renewalID(app:environment:purchaseID:)``) when the notification is a renewal.
    package static func make(type: String, notification: AppleNotification, holder: PurchaseHolder, renewalID: String?)
        -> StoredEvent?
    {
        guard let state = holder.subscription, let transaction = notification.transaction else { return nil }
        let grant = holder.grant
        let eventID = renewalID ?? StableID.uuid("\(type)\u{0}\(notification.id)\u{0}\(grant.orderID)")
        let string = EventJSON.string, time = EventJSON.time
        let purchaseDate = transaction.purchaseDate.flatMap { AppleTimestamp.date(milliseconds: $0) }
        var out = "{\"event_id\":\(string(eventID)),\"type\":\(string(type)),\"order_id\":\(string(grant.orderID))"
        out += ",\"user_id\":\(string(grant.userID)),\"product_id\":\(string(transaction.productId ?? grant.productID))"
        out += ",\"quantity\":\(transaction.quantity ?? 1),\"transaction_id\":\(string(transaction.transactionId))"
        out += ",\"original_transaction_id\":\(string(transaction.originalTransactionId))"
        out += ",\"environment\":\(string(notification.environment?.rawValue))"
        out += ",\"bundle_id\":\(string(notification.bundleID.isEmpty ? nil : notification.bundleID))"
        if type == EventType.renewed.rawValue {
            let value = PurchaseValue(transaction)
            out +=
                EventJSON.value(value) + EventJSON.revenue(Revenue.ofSale(value, environment: notification.environment))
        }
        out += ",\"notification_id\":\(string(notification.id))"
        out += ",\"notified_at\":\(time(notification.notifiedAt))"
        out += ",\"notification_type\":\(string(notification.type.rawValue))"
        out += ",\"notification_subtype\":\(string(notification.subtype?.rawValue))"
        out += ",\"purchase_date\":\(time(purchaseDate)),\"expires_at\":\(time(state.expiresAt))"
        out += ",\"status\":\(string(state.status.rawValue))"
        out += ",\"grace_period_expires_at\":\(time(state.gracePeriodExpiresAt))"
        out += ",\"auto_renew\":\(state.autoRenew.map { $0 ? "true" : "false" } ?? "null")"
        out += ",\"auto_renew_product_id\":\(string(state.autoRenewProductID))}"
        return StoredEvent(
            eventID: eventID, type: type, time: RFC3339.format(notification.notifiedAt), key: grant.orderID,
            json: Array(out.utf8))
    }
}

/// `receipt.unclaimed`: a purchase Apple reported (`ONE_TIME_CHARGE`, `SUBSCRIBED`) that no job claimed within
/// `notifications.unclaimed_after_ms`, credited by this event (docs/contract.md section 9). The backend finds
/// its player by `app_account_token`.
package enum UnclaimedEvent {
    /// Whether a notification reports a purchase that starts now: a one-time charge, a new subscription or a
    /// resubscription, by itself or with an offer code or promotional offer (`OFFER_REDEEMED` `INITIAL_BUY`,
    /// `RESUBSCRIBE`). An upgrade is a renewal of the subscription (``SubscriptionEvent/type(of:subtype:)``);
    /// an offer for the active subscription (no subtype) or a downgrade takes effect at the next renewal.
    package static func reports(type: NotificationType, subtype: NotificationSubtype?) -> Bool {
        switch (type, subtype) {
        case (.oneTimeCharge, _), (.subscribed, _), (.offerRedeemed, .some(.initialBuy)),
            (.offerRedeemed, .some(.resubscribe)):
            true
        default: false
        }
    }

    /// The credit a reported purchase gets at `dueAt` if no job claims it first. Its id is the purchase's in its
    /// app and environment: a purchase reported twice (another notification) is one credit.
    package static func make(
        notification: AppleNotification, transaction: AppleTransaction, app: AppScope, purchaseID: PurchaseID,
        dueAt: Date
    ) -> StoredEvent {
        let type = EventType.unclaimed.rawValue
        let environment = notification.environment?.rawValue ?? ""
        let eventID = StableID.uuid("\(type)\u{0}\(app.rawValue)\u{0}\(environment)\u{0}\(purchaseID.key)")
        let orderID = ReportedPurchase.creditOrderID(transactionID: transaction.transactionID)
        let string = EventJSON.string, time = EventJSON.time
        var out = "{\"event_id\":\(string(eventID)),\"type\":\(string(type)),\"order_id\":\(string(orderID))"
        out += ",\"user_id\":null,\"app_account_token\":\(string(transaction.appAccountToken?.lowercased()))"
        out += ",\"product_id\":\(string(transaction.productID)),\"quantity\":\(transaction.quantity)"
        out += ",\"transaction_id\":\(string(transaction.transactionID))"
        out += ",\"original_transaction_id\":\(string(transaction.originalTransactionID))"
        out += ",\"environment\":\(string(environment)),\"bundle_id\":\(string(notification.bundleID))"
        out += EventJSON.value(transaction.value)
        out += EventJSON.revenue(Revenue.ofSale(transaction.value, environment: notification.environment))
        out += ",\"purchase_date\":\(time(transaction.purchaseDate)),\"expires_date\":\(time(transaction.expiresDate))"
        out += ",\"notification_id\":\(string(notification.id)),\"notified_at\":\(time(notification.notifiedAt))"
        out += ",\"notification_type\":\(string(notification.type.rawValue)),\"credited_at\":\(time(dueAt))}"
        return StoredEvent(
            eventID: eventID, type: type, time: RFC3339.format(dueAt), key: orderID, json: Array(out.utf8))
    }
}
