package import AppleVerification
package import Events
import Foundation
package import Messaging
import Observability
package import Vocabulary

/// A subscription's status asked of Apple (Get All Subscription Statuses), on the notifications topic as the
/// notification Apple would have sent: its latest period's signed transaction and signed renewal info, keyed by
/// the original transaction id (in order with Apple's own notifications of that subscription), marked by the
/// header `source: subscription_status`. The notification flow verifies both signatures again and reads what
/// happened from the signed values alone, never from the answer's unsigned `status`: a renewal (a period that
/// ends after Apple signed the renewal info), a grace period, billing retry, or an expiry.
package enum SubscriptionStatusRecord {
    package static let sourceHeader = RecordHeader.source
    package static let source = RecordHeader.statusSource
    /// Milliseconds between the two signatures of one answer of Apple's at most.
    package static let maximumSigningGap: Double = 60_000

    /// The record of Apple's answer on one subscription, verified as the flow will verify it (a chain met for the
    /// first time asked about first), with the notification it stands for (its headers are that notification's);
    /// a refusal without both signed values, or when they do not verify (why, for the log), or when a chain's
    /// revocation status is still not known (pending: asked again next round, never taken as Apple's answer).
    package static func record(
        _ status: AppStoreServerAPIClient.LastTransactionsItem, bundleID: String, apps: AppleApps, topic: String
    ) async -> Result<(record: OutboundMessage, notification: AppleNotification), Refusal> {
        guard let transaction = status.signedTransactionInfo, let renewal = status.signedRenewalInfo,
            let original = status.originalTransactionId
        else { return .failure(Refusal(reason: "Apple's answer lacks a signed transaction or renewal info")) }
        let value = Array(
            ("{\"subscriptionStatus\":{\"signedTransactionInfo\":\(JSONString.quote(transaction)),"
                + "\"signedRenewalInfo\":\(JSONString.quote(renewal))}}").utf8)
        switch await AppleNotification.settled(apps: apps, { verify(value: value, bundleID: bundleID, apps: apps) }) {
        case .verified(let notification):
            let headers =
                [MessageHeader(name: sourceHeader, string: source)] + notification.recordHeaders()
            return .success(
                (
                    OutboundMessage(topic: topic, key: Array(original.utf8), value: value, headers: headers),
                    notification
                ))
        case .environmentNotAllowed: return .failure(Refusal(reason: "an environment this worker does not accept"))
        case .rejected(let reason): return .failure(Refusal(reason: reason))
        case .unavailable(let error): return .failure(Refusal(reason: error.reason, pending: true))
        }
    }

    package struct Refusal: Error {
        let reason: String
        /// Not decided: a chain's revocation status is not known yet.
        var pending = false
    }

    /// What Apple's signed values say happened, as the notification that would have said it: its type, subtype
    /// and `data.status`. Nil for a revoked period (the refund's own notification, or the sweep, says so).
    package static func change(_ transaction: JWSTransaction, _ renewal: JWSRenewalInfo) -> (
        type: NotificationType, subtype: NotificationSubtype?, status: Int
    )? {
        guard transaction.revocationDate == nil, let signed = renewal.signedDate else { return nil }
        if let expires = transaction.expiresDate, expires > signed { return (.didRenew, nil, 1) }
        if let grace = renewal.gracePeriodExpiresDate, grace > signed {
            return (.didFailToRenew, NotificationSubtype(rawValue: "GRACE_PERIOD"), 4)
        }
        if renewal.isInBillingRetryPeriod == true { return (.didFailToRenew, nil, 3) }
        if renewal.gracePeriodExpiresDate != nil { return (.gracePeriodExpired, nil, 2) }
        let intent: String? =
            switch renewal.expirationIntent {
            case 1: "VOLUNTARY"
            case 2: "BILLING_RETRY"
            case 3: "PRICE_INCREASE"
            case 4: "PRODUCT_NOT_FOR_SALE"
            default: nil
            }
        return (.expired, intent.map { NotificationSubtype(rawValue: $0) }, 2)
    }

    /// The record's value verified as the receiver verifies a notification: both signatures, the bundle id of the
    /// app its `bundle_id` header names,
    /// an environment this worker accepts, and the two values of one subscription. Its id is stable for one
    /// answer (the same period in the same state): asked again, it is the same notification, handled once.
    package static func verify(value: [UInt8], bundleID: String?, apps: AppleApps) -> AppleNotification.Verification {
        guard let outer = JSONObjectScanner.members(value), outer.count == 1, outer[0].key == "subscriptionStatus",
            let members = JSONObjectScanner.members(outer[0].raw)
        else { return .rejected("the status record is not {\"subscriptionStatus\": {...}}") }
        var signedTransaction: String?
        var signedRenewal: String?
        for member in members {
            switch member.key {
            case "signedTransactionInfo": signedTransaction = JSONStringToken.text(member.raw)
            case "signedRenewalInfo": signedRenewal = JSONStringToken.text(member.raw)
            default: break
            }
        }
        guard let signedTransaction, let signedRenewal, members.count == 2 else {
            return .rejected("the status record has not one signed transaction and one signed renewal info")
        }
        guard let bundleID, let app = apps.app(bundleID: bundleID) else {
            return .rejected("the status record names a bundle id no configured app has")
        }
        do {
            let verifier = app.signedData
            let transaction = try verifier.verifyTransaction(signedTransaction)
            let renewal = try verifier.verifyRenewalInfo(signedRenewal, within: transaction.environment)
            guard let transactionID = transaction.transactionId, AppleNotification.isToken(transactionID, maximum: 64),
                let original = transaction.originalTransactionId, original == renewal.originalTransactionId,
                let environment = transaction.environment
            else { return .rejected("the status record's transaction and renewal info are not of one subscription") }
            // Apple signs both in one answer: an old period's transaction beside a recent renewal info (each
            // genuine, taken from elsewhere) would read as an expiry.
            guard let signedA = transaction.signedDate, let signedB = renewal.signedDate,
                abs(signedA - signedB) <= maximumSigningGap
            else { return .rejected("the status record's transaction and renewal info were not signed together") }
            guard let (type, subtype, status) = change(transaction, renewal) else {
                return .rejected("the status record's period is revoked: its refund's notification says so")
            }
            // One answer, one id: the same period in the same state (its expiry and grace period too: an extension
            // of the same transaction is news) asked again is the same notification, handled once.
            let id = StableID.uuid(
                "subscription-status\u{0}\(app.bundleID)\u{0}\(environment.rawValue)\u{0}\(transactionID)"
                    + "\u{0}\(type.rawValue)\u{0}\(subtype?.rawValue ?? "")\u{0}\(transaction.expiresDate ?? 0)"
                    + "\u{0}\(renewal.gracePeriodExpiresDate ?? 0)")
            var data = NotificationPayload.AppData()
            data.bundleId = app.bundleID
            data.environment = environment
            data.status = status
            var payload = NotificationPayload()
            payload.notificationType = type.rawValue
            payload.subtype = subtype?.rawValue
            payload.notificationUUID = id
            payload.signedDate = renewal.signedDate
            payload.data = data
            return .verified(
                AppleNotification(
                    payload: payload, transaction: transaction, renewalInfo: renewal, id: id, type: type,
                    subtype: subtype, environment: environment, bundleID: app.bundleID))
        } catch {
            if error.isRetriable { return .unavailable(error) }
            // One that names no environment is no more this worker's to act on than another environment's.
            if error.code == .environmentNotAllowed || error.code == .environmentMissing {
                return .environmentNotAllowed(type: .didRenew)
            }
            return .rejected(error.reason)
        }
    }
}
