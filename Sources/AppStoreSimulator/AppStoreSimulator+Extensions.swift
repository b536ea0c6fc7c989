import Foundation
import HTTPServerKit
import Synchronization

/// The simulator as Apple extending subscriptions' renewal dates: Extend a Subscription Renewal Date (one
/// subscription), Extend Subscription Renewal Dates for All Active Subscribers (a product, some storefronts) and
/// Get Status of Subscription Renewal Date Extensions, with Apple's validation, errors and limits (1 to 90 days,
/// reason 0 to 3, twice in 365 days per subscription, active purchased subscriptions only), and the notifications
/// Apple sends: RENEWAL_EXTENDED per subscription extended, RENEWAL_EXTENSION/FAILURE per one that could not be,
/// RENEWAL_EXTENSION/SUMMARY when a mass request is done.
extension AppStoreSimulator {
    /// What one extension request asked, checked as Apple checks it.
    struct ExtensionAsk {
        var days: Int
        var reason: Int
        var requestIdentifier: String

        /// nil and Apple's error when a field is out of its range.
        static func parse(_ body: [String: Any], uuid: Bool) -> Result<ExtensionAsk, ExtensionError> {
            guard let days = body["extendByDays"].flatMap(AppStoreSimulator.integer), (1...90).contains(days) else {
                return .failure(ExtensionError(400, 4000009, "Invalid extend by days value."))
            }
            guard let reason = body["extendReasonCode"].flatMap(AppStoreSimulator.integer), (0...3).contains(reason)
            else { return .failure(ExtensionError(400, 4000010, "Invalid extend reason code.")) }
            guard let identifier = body["requestIdentifier"] as? String, (1...128).contains(identifier.utf8.count),
                !uuid || UUID(uuidString: identifier) != nil
            else { return .failure(ExtensionError(400, 4000011, "Invalid request identifier.")) }
            return .success(ExtensionAsk(days: days, reason: reason, requestIdentifier: identifier))
        }
    }

    struct ExtensionError: Error {
        let status: Int
        let code: Int
        let message: String
        init(_ status: Int, _ code: Int, _ message: String) {
            self.status = status
            self.code = code
            self.message = message
        }
        var reply: ServerReply { .json(status, AppStoreSimulator.error(code, message)) }
    }

    /// Apple's limit: at most this many extensions of one subscription in 365 days.
    static let extensionsPerYear = 2

    /// `PUT /inApps/v1/subscriptions/extend/{originalTransactionId}`.
    func extendRenewalDate(_ request: ServerRequest, role: String, originalTransactionID: String) -> ServerReply {
        guard let app = authorizedApp(request, role: role) else {
            return .respond(status: 401, headers: [], body: Data(), after: .zero)
        }
        guard !originalTransactionID.isEmpty, originalTransactionID.count <= 64,
            originalTransactionID.allSatisfy({ $0.isASCII && $0.isNumber })
        else { return .json(400, Self.error(4000008, "Invalid original transaction id.")) }
        guard let body = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] else {
            return .json(400, Self.error(4000000, "Bad request."))
        }
        let ask: ExtensionAsk
        switch ExtensionAsk.parse(body, uuid: false) {
        case .failure(let error): return error.reply
        case .success(let parsed): ask = parsed
        }
        let now = Date()
        let replayKey = "\(role)/\(originalTransactionID)/\(ask.requestIdentifier)"
        let outcome = state.withLock { state -> Result<(Purchase, Data, fresh: Bool), ExtensionError> in
            // The same request again (a timeout, a retry): the same answer, nothing extended twice.
            if let answered = state.extensionAnswers[replayKey] { return answered.map { ($0.0, $0.1, false) } }
            let result = Self.extend(
                &state, originalTransactionID: originalTransactionID, days: ask.days, role: role,
                bundleID: app.bundleID, now: now, direct: true
            ).map { purchase in
                (
                    purchase,
                    Self.json([
                        "originalTransactionId": purchase.originalTransactionID,
                        "webOrderLineItemId": purchase.webOrderLineItemID ?? purchase.transactionID, "success": true,
                        "effectiveDate": purchase.expiresDate.map(Self.milliseconds) ?? 0,
                    ])
                )
            }
            state.extensionAnswers[replayKey] = result
            return result.map { ($0.0, $0.1, true) }
        }
        switch outcome {
        case .failure(let error):
            return error.reply
        case .success(let (purchase, answer, fresh)):
            if fresh {
                _ = sendNotification(
                    type: "RENEWAL_EXTENDED", subtype: nil, purchase: purchase, environment: role,
                    consumptionRequestReason: nil)
            }
            return .json(200, answer)
        }
    }

    /// Extends the latest period of one subscription by `days`, or says why Apple would not.
    static func extend(
        _ state: inout State, originalTransactionID: String, days: Int, role: String, bundleID: String, now: Date,
        direct: Bool
    ) -> Result<Purchase, ExtensionError> {
        let periods = state.purchases.values.filter {
            $0.originalTransactionID == originalTransactionID && $0.kind == .subscription && $0.environment == role
                && $0.bundleID == bundleID
        }
        guard
            var latest = periods.max(by: {
                ($0.purchaseDate, Int($0.transactionID) ?? 0) < ($1.purchaseDate, Int($1.transactionID) ?? 0)
            })
        else { return .failure(ExtensionError(404, 4040005, "Original transaction id not found.")) }
        if direct && latest.ownership == "FAMILY_SHARED" {
            return .failure(
                ExtensionError(
                    403, 4030007,
                    "Subscriptions that users obtain through Family Sharing can't get a renewal date extension directly."
                ))
        }
        guard latest.subscriptionStatus(at: now) == 1 else {
            return .failure(
                ExtensionError(403, 4030004, "Forbidden - subscription state ineligible for extension."))
        }
        let yearAgo = now.addingTimeInterval(-365 * 86_400)
        let recent = state.extensions[originalTransactionID, default: []].filter { $0 > yearAgo }
        guard recent.count < extensionsPerYear else {
            return .failure(
                ExtensionError(403, 4030005, "Forbidden - subscription has reached maximum extension count."))
        }
        latest.expiresDate = latest.expiresDate?.addingTimeInterval(Double(days) * 86_400)
        state.purchases[latest.transactionID] = latest
        state.extensions[originalTransactionID] = recent + [now]
        return .success(latest)
    }

    /// A product id as App Store Connect allows it: letters, digits, `.`, `_` and `-`, at most 100.
    static func isProductID(_ id: String) -> Bool {
        (1...100).contains(id.utf8.count)
            && id.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            }
    }
}
