import Crypto
import Foundation
import HTTPServerKit
import Synchronization

/// The simulator as Apple extending every active subscriber of a product: Extend Subscription Renewal Dates for
/// All Active Subscribers, taken at once and carried out a moment later (as Apple works through it in the
/// background), Get Status of Subscription Renewal Date Extensions, and the notifications of its end.
extension AppStoreSimulator {
    /// A mass extension: what it asked, and its counts once done.
    struct MassExtension: Sendable {
        var productID: String
        var storefronts: [String]?
        var complete = false
        var completeDate: Date?
        var succeeded = 0
        var failed = 0
    }

    /// `POST /inApps/v1/subscriptions/extend/mass`: accepted at once; the subscribers are extended a moment
    /// later (``Configuration/massExtensionDelay``), as Apple does it in the background.
    func extendAllRenewalDates(_ request: ServerRequest, role: String) -> ServerReply {
        guard let app = authorizedApp(request, role: role) else {
            return .respond(status: 401, headers: [], body: Data(), after: .zero)
        }
        guard let body = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] else {
            return .json(400, Self.error(4000000, "Bad request."))
        }
        let ask: ExtensionAsk
        switch ExtensionAsk.parse(body, uuid: true) {
        case .failure(let error): return error.reply
        case .success(let parsed): ask = parsed
        }
        guard let productID = body["productId"] as? String, Self.isProductID(productID) else {
            return .json(400, Self.error(4000023, "Invalid request. The product id parameter is invalid."))
        }
        var storefronts: [String]?
        if let raw = body["storefrontCountryCodes"], !(raw is NSNull) {
            guard let list = raw as? [Any], !list.isEmpty else {
                return .json(
                    400,
                    Self.error(
                        4000027,
                        "Invalid request. If provided, the list of storefront country codes must not be empty."))
            }
            let codes = list.compactMap { $0 as? String }
            guard codes.count == list.count,
                codes.allSatisfy({ $0.utf8.count == 3 && $0.utf8.allSatisfy { $0 >= 0x41 && $0 <= 0x5A } })
            else {
                return .json(400, Self.error(4000028, "Invalid request. A storefront country code was invalid."))
            }
            storefronts = codes
        }
        let key = "\(role)/\(productID)/\(ask.requestIdentifier.lowercased())"
        let isNew = state.withLock { state -> Bool in
            guard state.massExtensions[key] == nil else { return false }
            state.massExtensions[key] = MassExtension(productID: productID, storefronts: storefronts)
            return true
        }
        if isNew {
            let delay = state.withLock { $0.massExtensionDelay }
            Task.detached { [self] in
                try? await Task.sleep(for: delay)
                runMassExtension(key: key, ask: ask, role: role, bundleID: app.bundleID)
            }
        }
        // The same request identifier again: 200, and nothing started twice.
        return .json(200, Self.json(["requestIdentifier": ask.requestIdentifier]))
    }

    /// Extends every active subscription of the product in the storefronts (each extended sends RENEWAL_EXTENDED,
    /// each refused RENEWAL_EXTENSION/FAILURE), then marks the request complete and sends its SUMMARY.
    private func runMassExtension(key: String, ask: ExtensionAsk, role: String, bundleID: String) {
        let now = Date()
        let (extended, failed, request) = state.withLock {
            state -> (extended: [Purchase], failed: [Purchase], request: MassExtension?) in
            guard var request = state.massExtensions[key] else { return ([], [], nil) }
            let subscriptions = Set(
                state.purchases.values.filter {
                    $0.kind == .subscription && $0.environment == role && $0.bundleID == bundleID
                        && $0.productID == request.productID && $0.ownership == "PURCHASED"
                        && request.storefronts.map(Set.init)?.contains($0.storefront) != false
                }.map(\.originalTransactionID))
            var extended: [Purchase] = []
            var failed: [Purchase] = []
            for original in subscriptions.sorted() {
                switch Self.extend(
                    &state, originalTransactionID: original, days: ask.days, role: role, bundleID: bundleID, now: now,
                    direct: false)
                {
                case .success(let purchase): extended.append(purchase)
                case .failure:
                    // Only subscribers who were active count; an expired one is simply not eligible.
                    guard
                        let latest = state.purchases.values.filter({ $0.originalTransactionID == original })
                            .max(by: { $0.purchaseDate < $1.purchaseDate }),
                        latest.expiresDate.map({ $0 > now }) == true
                    else { continue }
                    failed.append(latest)
                }
            }
            request.complete = true
            request.completeDate = now
            request.succeeded = extended.count
            request.failed = failed.count
            state.massExtensions[key] = request
            return (extended, failed, request)
        }
        guard let request else { return }
        for purchase in extended {
            _ = sendNotification(
                type: "RENEWAL_EXTENDED", subtype: nil, purchase: purchase, environment: role,
                consumptionRequestReason: nil)
        }
        for purchase in failed {
            _ = sendNotification(
                type: "RENEWAL_EXTENSION", subtype: "FAILURE", purchase: purchase, environment: role,
                consumptionRequestReason: nil)
        }
        sendSummary(
            SummaryPayload(
                environment: role, appAppleId: app(bundleID)?.appAppleID ?? state.withLock { $0.appAppleID },
                bundleId: bundleID, productId: request.productID, requestIdentifier: ask.requestIdentifier,
                storefrontCountryCodes: request.storefronts, succeededCount: request.succeeded,
                failedCount: request.failed))
    }

    /// `GET /inApps/v1/subscriptions/extend/mass/{productId}/{requestIdentifier}`.
    func massExtensionStatus(_ request: ServerRequest, role: String, productID: String, requestIdentifier: String)
        -> ServerReply
    {
        guard authorizedApp(request, role: role) != nil else {
            return .respond(status: 401, headers: [], body: Data(), after: .zero)
        }
        guard Self.isProductID(productID) else {
            return .json(400, Self.error(4000023, "Invalid request. The product id parameter is invalid."))
        }
        guard UUID(uuidString: requestIdentifier) != nil else {
            return .json(400, Self.error(4000011, "Invalid request identifier."))
        }
        let key = "\(role)/\(productID)/\(requestIdentifier.lowercased())"
        guard let found = state.withLock({ $0.massExtensions[key] }) else {
            return .json(
                404,
                Self.error(
                    4040009,
                    "The server didn't find a subscription-renewal-date extension request for this requestIdentifier"
                        + " and productId combination."))
        }
        var answer: [String: Any] = ["requestIdentifier": requestIdentifier, "complete": found.complete]
        if found.complete {
            answer["completeDate"] = found.completeDate.map(Self.milliseconds) ?? 0
            answer["succeededCount"] = found.succeeded
            answer["failedCount"] = found.failed
        }
        return .json(200, Self.json(answer))
    }

    /// RENEWAL_EXTENSION/SUMMARY: a mass extension is done; its `summary` instead of a purchase's `data`.
    func sendSummary(_ summary: SummaryPayload) {
        let now = Date()
        let uuid = UUID().uuidString.lowercased()
        let settings = state.withLock { $0.notifications }
        guard
            let signedPayload = try? signer.sign(
                NotificationPayloadV2(
                    notificationType: "RENEWAL_EXTENSION", subtype: "SUMMARY", notificationUUID: uuid,
                    signedDate: Self.milliseconds(now), summary: summary))
        else { return }
        _ = deliver(
            uuid: uuid, signedPayload: signedPayload, at: now, type: "RENEWAL_EXTENSION", subtype: "SUMMARY",
            bundleID: summary.bundleId, environment: summary.environment, purchase: nil, settings: settings)
    }
}

/// The notification's `summary` (RENEWAL_EXTENSION/SUMMARY), in Apple's field names.
struct SummaryPayload: Encodable {
    let environment: String
    let appAppleId: Int64
    let bundleId: String
    let productId: String
    let requestIdentifier: String
    let storefrontCountryCodes: [String]?
    let succeededCount: Int
    let failedCount: Int
}
