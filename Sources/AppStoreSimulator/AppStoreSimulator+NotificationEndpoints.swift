import AppleVerification
import Crypto
import Foundation
import HTTPServerKit
import Synchronization
import Vocabulary

/// The two App Store Server API endpoints that go with notifications: Get Notification History and Send
/// Consumption Information (version 2).
extension AppStoreSimulator {
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
            // GRANT_PRORATED with a share: above 0 and below 100,000 milliunits (Apple's consumptionPercentage).
            if preference == "GRANT_PRORATED", let share = percentage, !(1..<100_000).contains(share) {
                return .json(
                    400,
                    Self.error(4000000, "Invalid request. The consumption percentage is out of range."))
            }
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
}
