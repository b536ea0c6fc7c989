import AppleVerification
import Crypto
import Foundation
import HTTPServerKit
import Synchronization

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
    private func deliver(
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

    /// GET /admin/notifications: every notification made, oldest first, with its delivery attempts.
    func notificationList() -> ServerReply {
        let list: [[String: Any]] = sender.records.map { record in
            [
                "notification_uuid": record.uuid, "type": record.type, "subtype": record.subtype ?? NSNull(),
                "environment": record.environment, "transaction_id": record.transactionID ?? NSNull(),
                "signed_payload": record.signedPayload, "delivered": record.delivered,
                "attempts": record.attempts.map { attempt -> [String: Any] in
                    var entry: [String: Any] = [
                        "at": Self.rfc3339(attempt.at), "status": attempt.status.map { $0 as Any } ?? NSNull(),
                    ]
                    if let error = attempt.error { entry["error"] = error }
                    return entry
                },
            ]
        }
        return .json(200, Self.json(list))
    }

    /// GET /admin/consumption: every Send Consumption Information request accepted (202), oldest first.
    func consumptionList() -> ServerReply {
        let list: [[String: Any]] = state.withLock { $0.consumption }.map { record in
            [
                "transaction_id": record.transactionID, "environment": record.environment,
                "body": (try? JSONSerialization.jsonObject(with: record.body)) ?? NSNull(), "status": record.status,
            ]
        }
        return .json(200, Self.json(list))
    }

    // MARK: Apple's endpoints

    /// Get Notification History: `POST /inApps/v1/notifications/history[?paginationToken=T]`, Apple's request
    /// and answer, the notifications of this environment whose signedDate is in [startDate, endDate), oldest
    /// first, `history_page_size` (20) a page. The token names the last notification returned, so every
    /// notification comes exactly once across pages, whatever is sent in between.
    func notificationHistory(_ request: ServerRequest, role: String) -> ServerReply {
        guard let app = authorizedApp(request, role: role) else {
            return .respond(status: 401, headers: [], body: Data(), after: .zero)
        }
        guard let body = try? JSONDecoder().decode(NotificationHistoryRequest.self, from: request.body) else {
            return .json(400, Self.error(4000000, "Bad request."))
        }
        guard let startDate = body.startDate, startDate >= 0 else {
            return .json(
                400,
                Self.error(
                    4000015, "Invalid request. The start date is not a timestamp value represented in milliseconds."))
        }
        guard let endDate = body.endDate, endDate >= 0 else {
            return .json(
                400,
                Self.error(
                    4000016, "Invalid request. The end date is not a timestamp value represented in milliseconds."))
        }
        guard startDate < endDate else {
            return .json(
                400,
                Self.error(4000013, "Invalid request. The end date precedes the start date or the dates are the same."))
        }
        if startDate < Self.milliseconds(Date()) - 180 * 86_400_000 {
            return .json(
                400, Self.error(4000012, "Invalid request. The start date is earlier than the allowed start date."))
        }
        if body.transactionId != nil, body.notificationType != nil {
            return .json(
                400,
                Self.error(
                    4000019, "Invalid request. Supply either a transaction id or a notification type, but not both."))
        }
        if body.notificationSubtype != nil, body.notificationType == nil {
            return .json(400, Self.error(4000018, "Invalid request. The notification type or subtype is invalid."))
        }
        var after = 0
        if let token = request.query["paginationToken"] {
            guard let decoded = Self.historyToken(token, role: role) else {
                return .json(400, Self.error(4000014, "Invalid request. The pagination token is invalid."))
            }
            after = decoded
        }
        let pageSize = state.withLock { $0.notifications.historyPageSize }
        let matching = sender.records.filter { record in
            let signed = Self.milliseconds(record.signedDate)
            guard record.environment == role, record.bundleID == app.bundleID, record.sequence > after,
                signed >= startDate, signed < endDate
            else {
                return false
            }
            if let type = body.notificationType, record.type != type { return false }
            if let subtype = body.notificationSubtype, record.subtype != subtype { return false }
            if let id = body.transactionId, record.transactionID != id, record.originalTransactionID != id {
                return false
            }
            return body.onlyFailures != true || !record.delivered
        }
        let page = matching.prefix(pageSize)
        let items = page.map { record in
            let attempts = record.attempts.map {
                NotificationHistoryResponse.Item.SendAttempt(
                    attemptDate: Self.milliseconds($0.at), sendAttemptResult: $0.result)
            }
            return NotificationHistoryResponse.Item(
                signedPayload: record.signedPayload, sendAttempts: attempts,
                firstSendAttemptResult: attempts.first?.sendAttemptResult)
        }
        let last = page.last?.sequence ?? after
        return .json(
            200,
            Self.encode(
                NotificationHistoryResponse(
                    notificationHistory: items, hasMore: matching.count > page.count,
                    paginationToken: Self.makeHistoryToken(after: last, role: role))))
    }

    /// Send Consumption Information (version 2): `PUT /inApps/v2/transactions/consumption/{transactionId}`
    /// with Apple's validation; 202 with an empty body when accepted, and the body is kept for
    /// GET /admin/consumption.
    func sendConsumption(_ request: ServerRequest, role: String, id: String) -> ServerReply {
        guard let app = authorizedApp(request, role: role) else {
            return .respond(status: 401, headers: [], body: Data(), after: .zero)
        }
        guard !id.isEmpty, id.count <= 64, id.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            return .json(400, Self.error(4000006, "Invalid transaction id."))
        }
        guard let body = try? JSONDecoder().decode([String: JSONScalar].self, from: request.body) else {
            return .json(400, Self.error(4000000, "Bad request."))
        }
        guard body["customerConsented"] == .bool(true) else {
            return .json(
                400,
                Self.error(
                    4000035,
                    "Invalid request. The customer consented field is required and must indicate the customer consented."
                ))
        }
        guard case .bool = body["sampleContentProvided"] else {
            return .json(
                400, Self.error(4000041, "Invalid request. The sample content provided field is invalid."))
        }
        guard case .string(let delivery) = body["deliveryStatus"], ConsumptionValues.deliveryStatuses.contains(delivery)
        else { return .json(400, Self.error(4000036, "Invalid request. The delivery status field is invalid.")) }
        var percentage: Int64?
        switch body["consumptionPercentage"] {
        case nil, .null?:
            break
        case .integer(let value)? where (0...100_000).contains(value):
            percentage = value
        default:
            // Apple documents ConsumptionPercentageOutOfRangeError without publishing its number.
            return .json(400, Self.error(4000000, "Invalid request. The consumption percentage is out of range."))
        }
        switch body["refundPreference"] {
        case nil, .null?:
            break
        case .string(let preference)? where ConsumptionValues.refundPreferences.contains(preference):
            break
        default:
            return .json(400, Self.error(4000044, "Invalid request. The refund preference field is invalid."))
        }
        if delivery != "DELIVERED", let percentage, percentage != 0 {
            // UndeliveredConsumptionPercentageNonZeroError: documented without its number.
            return .json(
                400,
                Self.error(
                    4000000, "Invalid request. The consumption percentage must be zero for this delivery status."))
        }
        let purchase = state.withLock { $0.purchases[id] }
        guard let purchase, purchase.environment == role, purchase.bundleID == app.bundleID else {
            return .json(404, Self.error(4040010, "Transaction id not found."))
        }
        if purchase.kind == .subscription, percentage != nil {
            return .json(
                400,
                Self.error(
                    4000209,
                    "Invalid request. The consumption percentage field is not supported for auto-renewable subscription transactions."
                ))
        }
        state.withLock {
            $0.consumption.append(
                ConsumptionRecord(transactionID: id, environment: role, body: request.body, status: 202))
        }
        return .respond(status: 202, headers: [], body: Data(), after: .zero)
    }

    // MARK: Helpers

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    static func rfc3339(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }

    /// An integer from a JSONSerialization value (not a Boolean, not a fraction).
    static func integer(_ value: Any) -> Int? {
        guard !isBoolean(value), let number = value as? NSNumber else { return nil }
        let double = number.doubleValue
        guard double.rounded() == double, abs(double) < 9e15 else { return nil }
        return Int(double)
    }

    static func number(_ value: Any) -> Double? {
        guard !isBoolean(value), let number = value as? NSNumber, number.doubleValue.isFinite else { return nil }
        return number.doubleValue
    }

    /// JSONSerialization's `true` and `false` are NSNumbers that `is Bool` cannot tell from 1 and 0 on Linux;
    /// their class can.
    static func isBoolean(_ value: Any) -> Bool {
        ObjectIdentifier(type(of: value)) == booleanClass
    }

    private static let booleanClass = ObjectIdentifier(
        type(of: (try? JSONSerialization.jsonObject(with: Data("true".utf8), options: .fragmentsAllowed)) ?? 0))

    static func makeHistoryToken(after sequence: Int, role: String) -> String {
        Base64URL.encode(Data("\(role):\(sequence)".utf8))
    }

    static func historyToken(_ token: String, role: String) -> Int? {
        guard let data = Base64URL.decode(Substring(token)), let text = String(data: data, encoding: .utf8) else {
            return nil
        }
        let parts = text.split(separator: ":")
        guard parts.count == 2, parts[0] == role, let sequence = Int(parts[1]), sequence >= 0 else { return nil }
        return sequence
    }
}

/// One Send Consumption Information request the simulator accepted.
struct ConsumptionRecord: Sendable {
    let transactionID: String
    let environment: String
    let body: Data
    let status: Int
}
