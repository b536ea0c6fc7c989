package import AppleVerification
package import Foundation
package import Messaging
package import Vocabulary

/// An App Store Server Notification V2, verified: the payload's signature, chain, bundle id, environment
/// and (in Production) app id, and the nested signed transaction and renewal info the same way.
package struct AppleNotification: Sendable {
    package let payload: NotificationPayload
    /// The nested `signedTransactionInfo`, verified (nil when the notification carries none, as TEST).
    package let transaction: JWSTransaction?
    /// The nested `signedRenewalInfo`, verified (auto-renewable subscriptions).
    package let renewalInfo: JWSRenewalInfo?
    /// The nested `appData.signedAppTransactionInfo`, verified (RESCIND_CONSENT).
    package var appTransaction: JWSAppTransaction? = nil
    package let id: String
    package let type: NotificationType
    package let subtype: NotificationSubtype?
    package let environment: AppleEnvironment?
    package let bundleID: String

    /// The record key on `topics.notifications`: a purchase's notifications stay in order on one partition.
    package var key: String { transaction?.originalTransactionId ?? id }

    /// Headers of the record on `topics.notifications` (docs/contract.md), with a trace of its own: the events
    /// the notification causes continue it.
    package func recordHeaders() -> [MessageHeader] {
        [
            ("notification_type", type.rawValue), ("notification_subtype", subtype?.rawValue ?? ""),
            ("notification_uuid", id),
            ("bundle_id", bundleID), ("environment", environment?.rawValue ?? ""),
            ("signed_date", payload.signedDate.map { String(Int64($0)) } ?? ""),
        ].map { MessageHeader(name: $0.0, string: $0.1) } + TraceContext.fresh().headers
    }

    /// The notification's `signedDate`.
    package var notifiedAt: Date {
        payload.signedDate.flatMap { AppleTimestamp.date(milliseconds: $0) } ?? Date(timeIntervalSince1970: 0)
    }

    package init(
        payload: NotificationPayload, transaction: JWSTransaction?, renewalInfo: JWSRenewalInfo?, id: String,
        type: NotificationType, subtype: NotificationSubtype?, environment: AppleEnvironment?, bundleID: String
    ) {
        self.payload = payload
        self.transaction = transaction
        self.renewalInfo = renewalInfo
        self.id = id
        self.type = type
        self.subtype = subtype
        self.environment = environment
        self.bundleID = bundleID
    }
}
