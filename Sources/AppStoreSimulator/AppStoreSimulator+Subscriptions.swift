import Foundation
import HTTPServerKit
import AppleVerification
import Synchronization

/// The simulator as Apple renewing, failing to bill and ending auto-renewable subscriptions, each change sent
/// as Apple sends it: a notification with the subscription's transaction and its `signedRenewalInfo`.
extension AppStoreSimulator {
    /// POST /admin/renew {transaction_id, period_seconds}: the subscription renews: a new transaction of the same
    /// subscription (a new transaction id and billing period, the same original transaction), from the last
    /// period's end for `period_seconds` (default: the last period's length); sends DID_RENEW
    /// (BILLING_RECOVERY after a billing failure). Answers the new transaction as /admin/purchases does. With
    /// `notify: false` (here and for fail-renewal and expire) the change is made and no notification sent: one
    /// Apple lost for good, for Get All Subscription Statuses to tell.
    func renew(_ body: [String: Any]) -> ServerReply {
        guard let id = body["transaction_id"] as? String else {
            return .json(400, Self.error(4000000, "transaction_id is required"))
        }
        if let raw = body["period_seconds"], (Self.number(raw) ?? 0) <= 0 {
            return .json(400, Self.error(4000000, "period_seconds is a positive number"))
        }
        let renewed = state.withLock { state -> (Purchase, recovered: Bool)? in
            guard let last = state.purchases[id], last.kind == .subscription, let lastEnd = last.expiresDate else {
                return nil
            }
            let period =
                body["period_seconds"].flatMap { Self.number($0) } ?? lastEnd.timeIntervalSince(last.purchaseDate)
            state.nextTransaction += 1
            let newID = String(state.nextTransaction)
            let start = max(lastEnd, Date())
            var purchase = Purchase(
                transactionID: newID, originalTransactionID: last.originalTransactionID, bundleID: last.bundleID,
                productID: last.productID, kind: .subscription, environment: last.environment, quantity: 1,
                appAccountToken: last.appAccountToken, purchaseDate: start,
                expiresDate: start.addingTimeInterval(period), webOrderLineItemID: newID, autoRenew: last.autoRenew,
                ownership: last.ownership)
            // The next instalment of a commitment, at the instalment's price.
            purchase.billingPlanType = last.billingPlanType
            purchase.commitment = last.commitment.map { commitment in
                var next = commitment
                next.billingPeriodNumber = (commitment.billingPeriodNumber ?? 0) + 1
                return next
            }
            if last.commitment != nil {
                purchase.price = last.price
                purchase.currency = last.currency
            }
            state.purchases[newID] = purchase
            return (purchase, last.billingRetry)
        }
        guard let (purchase, recovered) = renewed else {
            return .json(404, Self.error(4040010, "no subscription with that transaction_id"))
        }
        guard body["notify"] as? Bool != false else {
            // Renewed, and Apple never said so (a notification lost for good).
            return withTransaction(purchase, .json(200, Self.json(["notification_uuid": NSNull()])))
        }
        return withTransaction(
            purchase,
            sendNotification(
                type: "DID_RENEW", subtype: recovered ? "BILLING_RECOVERY" : nil, purchase: purchase,
                environment: purchase.environment, consumptionRequestReason: nil))
    }

    /// POST /admin/fail-renewal {transaction_id, grace_period_seconds}: the renewal's payment fails; Apple
    /// retries billing, with a grace period of `grace_period_seconds` when given; sends DID_FAIL_TO_RENEW
    /// (subtype GRACE_PERIOD with one).
    func failRenewal(_ body: [String: Any]) -> ServerReply {
        let grace = body["grace_period_seconds"].flatMap { Self.number($0) }
        return revise(body, type: "DID_FAIL_TO_RENEW", subtype: grace == nil ? nil : "GRACE_PERIOD") { purchase in
            guard purchase.kind == .subscription else { return "not a subscription" }
            purchase.billingRetry = true
            purchase.gracePeriodExpiresDate = grace.map { Date().addingTimeInterval($0) }
            return nil
        }
    }

    /// POST /admin/expire {transaction_id, subtype}: the subscription ends now (subtype VOLUNTARY by default,
    /// BILLING_RETRY, PRICE_INCREASE, PRODUCT_NOT_FOR_SALE); sends EXPIRED, or GRACE_PERIOD_EXPIRED when it
    /// was in a grace period.
    func expire(_ body: [String: Any]) -> ServerReply {
        let subtype = body["subtype"] as? String ?? "VOLUNTARY"
        let inGrace =
            (body["transaction_id"] as? String).flatMap { id in
                state.withLock { $0.purchases[id]?.gracePeriodExpiresDate }
            } != nil
        return revise(body, type: inGrace ? "GRACE_PERIOD_EXPIRED" : "EXPIRED", subtype: inGrace ? nil : subtype) {
            purchase in
            guard purchase.kind == .subscription else { return "not a subscription" }
            let now = Date()
            // The period ended a moment ago: a date in the past, whatever was left of it.
            purchase.expiresDate = min(purchase.expiresDate ?? now, now).addingTimeInterval(-0.001)
            purchase.autoRenew = false
            purchase.billingRetry = false
            purchase.gracePeriodExpiresDate = nil
            purchase.expirationIntent =
                switch subtype {
                case "BILLING_RETRY": 2
                case "PRICE_INCREASE": 3
                case "PRODUCT_NOT_FOR_SALE": 4
                default: 1
                }
            return nil
        }
    }

    /// POST /admin/renewal-status {transaction_id, auto_renew}: the player turns auto-renewal on or off; sends
    /// DID_CHANGE_RENEWAL_STATUS (AUTO_RENEW_ENABLED or AUTO_RENEW_DISABLED).
    func renewalStatus(_ body: [String: Any]) -> ServerReply {
        guard let raw = body["auto_renew"], Self.isBoolean(raw), let on = raw as? Bool else {
            return .json(400, Self.error(4000000, "auto_renew is true or false"))
        }
        return revise(
            body, type: "DID_CHANGE_RENEWAL_STATUS", subtype: on ? "AUTO_RENEW_ENABLED" : "AUTO_RENEW_DISABLED"
        ) { purchase in
            guard purchase.kind == .subscription else { return "not a subscription" }
            purchase.autoRenew = on
            return nil
        }
    }

    /// A purchase as Apple reports it to the server on its own (/admin/purchases with `notify`): SUBSCRIBED
    /// (INITIAL_BUY) for a subscription, ONE_TIME_CHARGE for any other product.
    func reportPurchase(_ purchase: Purchase) -> String? {
        let reply = sendNotification(
            type: purchase.kind == .subscription ? "SUBSCRIBED" : "ONE_TIME_CHARGE",
            subtype: purchase.kind == .subscription ? "INITIAL_BUY" : nil, purchase: purchase,
            environment: purchase.environment, consumptionRequestReason: nil)
        guard case .respond(200, _, let answer, _) = reply,
            let fields = try? JSONSerialization.jsonObject(with: answer) as? [String: Any]
        else { return nil }
        return fields["notification_uuid"] as? String
    }

    /// `GET /inApps/v1/subscriptions/{transactionId}` (Get All Subscription Statuses): the subscription of any of
    /// its transactions, as it stands now: its latest period, its status and renewal info, each signed. The
    /// simulator keeps one subscription group per subscription.
    func subscriptionStatuses(_ request: ServerRequest, role: String, id: String) -> ServerReply {
        guard let app = authorizedApp(request, role: role) else {
            return .respond(status: 401, headers: [], body: Data(), after: .zero)
        }
        guard !id.isEmpty, id.allSatisfy(\.isNumber) else {
            return .json(400, Self.error(4000006, "Invalid transaction id."))
        }
        let latest = state.withLock { state -> Purchase? in
            guard let known = state.purchases[id], known.kind == .subscription, known.environment == role,
                known.bundleID == app.bundleID
            else { return nil }
            return state.purchases.values.filter { $0.originalTransactionID == known.originalTransactionID }
                .max { ($0.purchaseDate, Int($0.transactionID) ?? 0) < ($1.purchaseDate, Int($1.transactionID) ?? 0) }
        }
        guard let latest else { return .json(404, Self.error(4040010, "Transaction id not found.")) }
        let now = Date()
        guard let transaction = try? signedTransaction(latest), let renewal = try? signedRenewalInfo(latest, at: now)
        else { return .json(500, Self.error(5000000, "An unknown error occurred.")) }
        let item: [String: Any] = [
            "status": latest.subscriptionStatus(at: now), "originalTransactionId": latest.originalTransactionID,
            "signedTransactionInfo": transaction, "signedRenewalInfo": renewal,
        ]
        return .json(
            200,
            Self.json([
                "environment": role, "bundleId": app.bundleID, "appAppleId": app.appAppleID,
                "data": [["subscriptionGroupIdentifier": latest.productID, "lastTransactions": [item]]],
            ]))
    }

    /// The notification's answer with the new transaction's fields added.
    private func withTransaction(_ purchase: Purchase, _ reply: ServerReply) -> ServerReply {
        guard case .respond(200, _, let answer, _) = reply,
            var fields = try? JSONSerialization.jsonObject(with: answer) as? [String: Any],
            let signed = try? signedTransaction(purchase)
        else { return reply }
        fields["transaction_id"] = purchase.transactionID
        fields["original_transaction_id"] = purchase.originalTransactionID
        fields["signed_transaction"] = signed
        fields["expires_date_ms"] = purchase.expiresDate.map(Self.milliseconds)
        return .json(200, Self.json(fields))
    }
}
