import AppleVerification
import Crypto
import Foundation
import HTTPServerKit
import Synchronization
import Vocabulary

/// The simulator as Apple's sender of App Store Server Notifications V2, and the two App Store Server API
/// endpoints that go with them: Get Notification History and Send Consumption Information (version 2).
extension AppStoreSimulator {
    // MARK: Admin API

    /// POST /admin/notifications/config {url, retry_delays_ms, app_apple_id, history_page_size}; GET answers it.
    func notificationConfig(_ request: ServerRequest, body: [String: Any]) -> ServerReply {
        if request.method == "POST" {
            if body.keys.contains("url"), !(body["url"] is String || body["url"] is NSNull) {
                return .json(400, Self.error(4000000, "url is a string or null"))
            }
            var delays: [Int]?
            if let raw = body["retry_delays_ms"] {
                guard let list = raw as? [Any], let numbers = Optional(list.compactMap { Self.integer($0) }),
                    numbers.count == list.count, numbers.allSatisfy({ $0 >= 0 && $0 <= 86_400_000 })
                else { return .json(400, Self.error(4000000, "retry_delays_ms is a list of milliseconds")) }
                delays = numbers
            }
            var appAppleID: Int64?
            if let raw = body["app_apple_id"] {
                guard let id = Self.integer(raw), id > 0 else {
                    return .json(400, Self.error(4000000, "app_apple_id is a positive integer"))
                }
                appAppleID = Int64(id)
            }
            var pageSize: Int?
            if let raw = body["history_page_size"] {
                guard let size = Self.integer(raw), (1...1000).contains(size) else {
                    return .json(400, Self.error(4000000, "history_page_size is 1 to 1000"))
                }
                pageSize = size
            }
            state.withLock { state in
                if body.keys.contains("url") {
                    let url = body["url"] as? String
                    state.notifications.url = url?.isEmpty == true ? nil : url
                }
                if let delays { state.notifications.retryDelaysMs = delays }
                if let appAppleID { state.appAppleID = appAppleID }
                if let pageSize { state.notifications.historyPageSize = pageSize }
            }
        }
        let (settings, appAppleID) = state.withLock { ($0.notifications, $0.appAppleID) }
        return .json(
            200,
            Self.json([
                "url": settings.url ?? NSNull(), "retry_delays_ms": settings.retryDelaysMs,
                "app_apple_id": appAppleID, "history_page_size": settings.historyPageSize,
            ]))
    }

    /// POST /admin/refund {transaction_id, percentage: 0-100 (default 100), reason: 0|1 (default 0)}: revokes the
    /// purchase now (REFUND_FULL at 100 %, else REFUND_PRORATED) and sends REFUND.
    func refund(_ body: [String: Any]) -> ServerReply {
        var percentage = 100.0
        if let raw = body["percentage"] {
            guard let value = Self.number(raw), value >= 0, value <= 100 else {
                return .json(400, Self.error(4000000, "percentage is a number from 0 to 100"))
            }
            percentage = value
        }
        var reason = 0
        if let raw = body["reason"] {
            guard let value = Self.integer(raw), value == 0 || value == 1 else {
                return .json(400, Self.error(4000000, "reason is 0 (other) or 1 (an issue with the app)"))
            }
            reason = value
        }
        let milliunits = Int((percentage * 1000).rounded())
        return revise(body, type: "REFUND") { purchase in
            purchase.revocationDate = Date()
            purchase.revocationReason = reason
            purchase.revocationType = milliunits == 100_000 ? "REFUND_FULL" : "REFUND_PRORATED"
            purchase.revocationPercentage = milliunits
            return nil
        }
    }

    /// POST /admin/reverse-refund {transaction_id}: clears the revocation and sends REFUND_REVERSED.
    func reverseRefund(_ body: [String: Any]) -> ServerReply {
        revise(body, type: "REFUND_REVERSED") { purchase in
            guard purchase.revocationDate != nil else { return "the transaction is not refunded" }
            purchase.revocationDate = nil
            purchase.revocationReason = nil
            purchase.revocationType = nil
            purchase.revocationPercentage = nil
            return nil
        }
    }

    /// POST /admin/revoke {transaction_id}: Family Sharing revokes the purchase (FAMILY_REVOKE); sends REVOKE.
    func revoke(_ body: [String: Any]) -> ServerReply {
        revise(body, type: "REVOKE") { purchase in
            purchase.revocationDate = Date()
            purchase.revocationReason = 0
            purchase.revocationType = "FAMILY_REVOKE"
            // Apple sends revocationPercentage for refunds only.
            purchase.revocationPercentage = nil
            return nil
        }
    }

    /// POST /admin/consumption-request {transaction_id, reason}: sends CONSUMPTION_REQUEST with
    /// data.consumptionRequestReason (left out when no reason is given).
    func consumptionRequest(_ body: [String: Any]) -> ServerReply {
        if body["reason"] != nil, !(body["reason"] is String) {
            return .json(400, Self.error(4000000, "reason is a string such as UNINTENDED_PURCHASE"))
        }
        return revise(body, type: "CONSUMPTION_REQUEST", consumptionRequestReason: body["reason"] as? String) { _ in
            nil
        }
    }

    /// POST /admin/notify {type, subtype, transaction_id, environment}: any notification, e.g. TEST. Without a
    /// transaction, `environment` (default Production) says which environment it belongs to.
    func notify(_ body: [String: Any]) -> ServerReply {
        guard let type = body["type"] as? String, !type.isEmpty else {
            return .json(400, Self.error(4000000, "type is required"))
        }
        if body["subtype"] != nil, !(body["subtype"] is String || body["subtype"] is NSNull) {
            return .json(400, Self.error(4000000, "subtype is a string"))
        }
        if body["transaction_id"] != nil {
            return revise(body, type: type, subtype: body["subtype"] as? String) { _ in nil }
        }
        let environment = body["environment"] as? String ?? "Production"
        guard environment == "Production" || environment == "Sandbox" else {
            return .json(400, Self.error(4000000, "environment is Production or Sandbox"))
        }
        return sendNotification(
            type: type, subtype: body["subtype"] as? String, purchase: nil, environment: environment,
            consumptionRequestReason: nil)
    }

    /// Changes the named purchase (`change` answers an error message to refuse), then sends the notification
    /// with its new state.
    func revise(
        _ body: [String: Any], type: String, subtype: String? = nil, consumptionRequestReason: String? = nil,
        change: (inout Purchase) -> String?
    ) -> ServerReply {
        guard let id = body["transaction_id"] as? String, !id.isEmpty else {
            return .json(400, Self.error(4000000, "transaction_id is required"))
        }
        let outcome = state.withLock { state -> Result<Purchase, NotFoundOrRefused> in
            guard var purchase = state.purchases[id] else { return .failure(.notFound) }
            if let refusal = change(&purchase) { return .failure(.refused(refusal)) }
            state.purchases[id] = purchase
            return .success(purchase)
        }
        switch outcome {
        case .failure(.notFound):
            return .json(404, Self.error(4040010, "Transaction id not found."))
        case .failure(.refused(let message)):
            return .json(409, Self.error(4090000, message))
        case .success where body["notify"] as? Bool == false:
            // Apple changed the purchase and never said so (a notification lost for good).
            return .json(200, Self.json(["notification_uuid": NSNull()]))
        case .success(let purchase):
            return sendNotification(
                type: type, subtype: subtype, purchase: purchase, environment: purchase.environment,
                consumptionRequestReason: consumptionRequestReason)
        }
    }

    private enum NotFoundOrRefused: Error { case notFound, refused(String) }

    /// Signs a notification about `purchase` as it is now, records it and starts delivering it; answers
    /// `{"notification_uuid"}`.
    func sendNotification(
        type: String, subtype: String?, purchase: Purchase?, environment: String, consumptionRequestReason: String?
    ) -> ServerReply {
        let now = Date()
        let uuid = UUID().uuidString.lowercased()
        let bundleID = purchase?.bundleID ?? configuration.bundleID
        let settings = state.withLock { $0.notifications }
        // The purchase's app's id (an app the simulator does not know: the default app's).
        let appAppleID = app(bundleID)?.appAppleID ?? state.withLock { $0.appAppleID }
        var data = NotificationData(
            appAppleId: appAppleID, bundleId: bundleID, bundleVersion: "1", environment: environment)
        data.consumptionRequestReason = consumptionRequestReason
        let signedPayload: String
        do {
            if let purchase {
                data.signedTransactionInfo = try signedTransaction(purchase)
                if purchase.kind == .subscription {
                    data.signedRenewalInfo = try signedRenewalInfo(purchase, at: now)
                    data.status = purchase.subscriptionStatus(at: now)
                }
            }
            signedPayload = try signer.sign(
                NotificationPayloadV2(
                    notificationType: type, subtype: subtype, notificationUUID: uuid,
                    signedDate: Self.milliseconds(now), data: data))
        } catch {
            return .json(500, Self.error(5000000, "signing failed"))
        }
        return deliver(
            uuid: uuid, signedPayload: signedPayload, at: now, type: type, subtype: subtype, bundleID: bundleID,
            environment: environment, purchase: purchase, settings: settings)
    }

    /// The subscription's `signedRenewalInfo` as Apple signs it at `now`.
    func signedRenewalInfo(_ purchase: Purchase, at now: Date) throws -> String {
        try signer.sign(
            RenewalInfoPayload(
                originalTransactionId: purchase.originalTransactionID,
                autoRenewProductId: purchase.productID, productId: purchase.productID,
                autoRenewStatus: purchase.revocationDate == nil && purchase.autoRenew ? 1 : 0,
                signedDate: Self.milliseconds(now), environment: purchase.environment,
                recentSubscriptionStartDate: Self.milliseconds(purchase.purchaseDate),
                renewalDate: purchase.expiresDate.map(Self.milliseconds),
                isInBillingRetryPeriod: purchase.billingRetry,
                gracePeriodExpiresDate: purchase.gracePeriodExpiresDate.map(Self.milliseconds),
                expirationIntent: purchase.expirationIntent))
    }

    /// POST /admin/rescind-consent {app_transaction_id, environment, bundle_id}: a parent withdrew consent for
    /// the app's download (RESCIND_CONSENT, its `appData` carrying the signed app transaction).
    func rescindConsent(_ body: [String: Any]) -> ServerReply {
        guard let appTransactionID = body["app_transaction_id"] as? String, !appTransactionID.isEmpty else {
            return .json(400, Self.error(4000000, "app_transaction_id is required"))
        }
        let environment = body["environment"] as? String ?? "Production"
        guard environment == "Production" || environment == "Sandbox" else {
            return .json(400, Self.error(4000000, "environment is Production or Sandbox"))
        }
        let now = Date()
        let uuid = UUID().uuidString.lowercased()
        let bundleID = body["bundle_id"] as? String ?? configuration.bundleID
        let settings = state.withLock { $0.notifications }
        let appAppleID = app(bundleID)?.appAppleID ?? state.withLock { $0.appAppleID }
        let signedPayload: String
        do {
            let appTransaction = try signer.sign(
                AppTransactionPayload(
                    appTransactionId: appTransactionID, bundleId: bundleID, appAppleId: appAppleID,
                    receiptType: environment, originalPurchaseDate: Self.milliseconds(now.addingTimeInterval(-86_400)),
                    receiptCreationDate: Self.milliseconds(now), signedDate: Self.milliseconds(now)))
            signedPayload = try signer.sign(
                NotificationPayloadV2(
                    notificationType: "RESCIND_CONSENT", subtype: nil, notificationUUID: uuid,
                    signedDate: Self.milliseconds(now),
                    appData: AppDataPayload(
                        appAppleId: appAppleID, bundleId: bundleID, environment: environment,
                        signedAppTransactionInfo: appTransaction)))
        } catch {
            return .json(500, Self.error(5000000, "signing failed"))
        }
        return deliver(
            uuid: uuid, signedPayload: signedPayload, at: now, type: "RESCIND_CONSENT", subtype: nil,
            bundleID: bundleID, environment: environment, purchase: nil, settings: settings)
    }

    /// Records a signed notification and starts delivering it; answers `{"notification_uuid"}`.
    func deliver(
        uuid: String, signedPayload: String, at now: Date, type: String, subtype: String?, bundleID: String,
        environment: String, purchase: Purchase?, settings: NotificationSettings
    ) -> ServerReply {
        let sequence = state.withLock { state -> Int in
            state.nextNotification += 1
            return state.nextNotification
        }
        sender.send(
            NotificationRecord(
                sequence: sequence, uuid: uuid, bundleID: bundleID, type: type, subtype: subtype,
                environment: environment,
                transactionID: purchase?.transactionID, originalTransactionID: purchase?.originalTransactionID,
                signedDate: now, signedPayload: signedPayload),
            settings: settings)
        return .json(200, Self.json(["notification_uuid": uuid]))
    }

}

/// One Send Consumption Information request the simulator accepted.
struct ConsumptionRecord: Sendable {
    let transactionID: String
    let environment: String
    let body: Data
    let status: Int
}
