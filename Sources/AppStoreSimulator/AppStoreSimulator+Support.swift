import AppleVerification
import Foundation
import HTTPServerKit
import Synchronization

/// The Server API endpoints a support desk and a grant's follow-up use: Look Up Order ID, Set App Account Token,
/// Finish Transaction. Each checks the bearer token like Get Transaction Info, and sees only its app's purchases in
/// its environment, as at Apple.
extension AppStoreSimulator {
    /// `GET /inApps/v1/lookup/{orderId}`: `{"status": 0, "signedTransactions": [...]}` for an order of the app,
    /// `{"status": 1}` for an order id Apple does not know for it (another app's included); Production only.
    func lookUpOrderID(_ request: ServerRequest, role: String, orderID: String) -> ServerReply {
        guard let app = authorizedApp(request, role: role) else {
            return .respond(status: 401, headers: [], body: Data(), after: .zero)
        }
        // Apple: "This endpoint isn't available in the sandbox environment."
        guard role == "Production" else { return .json(404, Self.error(4040000, "Not available in the sandbox.")) }
        let purchases = state.withLock { state in
            state.purchases.values.filter {
                !orderID.isEmpty && $0.orderID == orderID && $0.environment == role && $0.bundleID == app.bundleID
            }
        }.sorted { $0.transactionID < $1.transactionID }
        guard !purchases.isEmpty else { return .json(200, Self.json(["status": 1])) }
        let signed = purchases.compactMap { try? signedTransaction($0) }
        guard signed.count == purchases.count else {
            return .json(500, Self.error(5000000, "An unknown error occurred."))
        }
        return .json(200, Self.json(["status": 0, "signedTransactions": signed]))
    }

    /// `PUT /inApps/v1/transactions/{originalTransactionId}/appAccountToken` `{"appAccountToken": UUID}`: every
    /// transaction of the purchase says the token from now on. Apple's errors: 4000183 not a UUID, 4000185 a
    /// family member's transaction, 4000187 not an original transaction id, 4040010 not found.
    func setAppAccountToken(_ request: ServerRequest, role: String, id: String) -> ServerReply {
        guard let app = authorizedApp(request, role: role) else {
            return .respond(status: 401, headers: [], body: Data(), after: .zero)
        }
        let body = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any]
        guard let text = body?["appAccountToken"] as? String, let token = UUID(uuidString: text) else {
            return .json(400, Self.error(4000183, "Invalid request. The app account token field must be a valid UUID."))
        }
        return state.withLock { state -> ServerReply in
            guard let purchase = state.purchases[id], purchase.environment == role, purchase.bundleID == app.bundleID
            else { return .json(404, Self.error(4040010, "Transaction id not found.")) }
            guard purchase.originalTransactionID == id else {
                return .json(
                    400, Self.error(4000187, "Invalid request. The transaction id is not an original transaction id."))
            }
            guard purchase.ownership != "FAMILY_SHARED" else {
                return .json(400, Self.error(4000185, "Invalid request. Family Sharing transactions aren't supported."))
            }
            for (key, other) in state.purchases
            where other.originalTransactionID == id && other.bundleID == app.bundleID {
                state.purchases[key]?.appAccountToken = token.uuidString.lowercased()
            }
            return .respond(status: 200, headers: [], body: Data(), after: .zero)
        }
    }

    /// `POST /inApps/v1/transactions/{transactionId}/finish`: the transaction is finished (StoreKit delivers it to
    /// the app no more). 200 also for one finished before; 4040010 for one the app does not have.
    func finishTransaction(_ request: ServerRequest, role: String, id: String) -> ServerReply {
        guard let app = authorizedApp(request, role: role) else {
            return .respond(status: 401, headers: [], body: Data(), after: .zero)
        }
        guard !id.isEmpty, id.allSatisfy(\.isNumber) else {
            return .json(400, Self.error(4000006, "Invalid transaction id."))
        }
        return state.withLock { state -> ServerReply in
            guard let purchase = state.purchases[id], purchase.environment == role, purchase.bundleID == app.bundleID
            else { return .json(404, Self.error(4040010, "Transaction id not found.")) }
            state.purchases[id]?.finished = true
            return .respond(status: 200, headers: [], body: Data(), after: .zero)
        }
    }

    /// `GET /inApps/v2/history/{transactionId}?revision=R`: every purchase of the transaction's customer in the
    /// app and environment, oldest first, 20 a page; `revision` is the count already sent, as opaque text.
    func transactionHistory(_ request: ServerRequest, role: String, id: String) -> ServerReply {
        guard let app = authorizedApp(request, role: role) else {
            return .respond(status: 401, headers: [], body: Data(), after: .zero)
        }
        guard !id.isEmpty, id.allSatisfy(\.isNumber) else {
            return .json(400, Self.error(4000006, "Invalid transaction id."))
        }
        let start: Int
        if let revision = request.query["revision"] {
            guard revision.hasPrefix("r"), let sent = Int(revision.dropFirst()), sent >= 0 else {
                return .json(400, Self.error(4000005, "Invalid revision."))
            }
            start = sent
        } else {
            start = 0
        }
        let purchases = state.withLock { state -> [Purchase]? in
            guard let known = state.purchases[id], known.environment == role, known.bundleID == app.bundleID else {
                return nil
            }
            return state.purchases.values.filter {
                $0.customer == known.customer && $0.environment == role && $0.bundleID == app.bundleID
            }.sorted { ($0.purchaseDate, Int($0.transactionID) ?? 0) < ($1.purchaseDate, Int($1.transactionID) ?? 0) }
        }
        guard let purchases else { return .json(404, Self.error(4040010, "Transaction id not found.")) }
        let page = Array(purchases.dropFirst(start).prefix(20))
        let signed = page.compactMap { try? signedTransaction($0) }
        guard signed.count == page.count else { return .json(500, Self.error(5000000, "An unknown error occurred.")) }
        let sent = start + page.count
        return .json(
            200,
            Self.json([
                "revision": "r\(sent)", "hasMore": sent < purchases.count, "bundleId": app.bundleID,
                "environment": role, "signedTransactions": signed,
            ]))
    }

    /// `GET /admin/transactions/{id}`: what the support endpoints left on a purchase.
    func purchaseState(_ id: String) -> ServerReply {
        guard let purchase = state.withLock({ $0.purchases[id] }) else {
            return .json(404, Self.error(4040010, "Transaction id not found."))
        }
        return .json(
            200,
            Self.json([
                "transaction_id": purchase.transactionID, "order_id": purchase.orderID,
                "app_account_token": purchase.appAccountToken as Any? ?? NSNull(), "finished": purchase.finished,
            ]))
    }

    /// An invoice's order id, as Apple prints them (ten letters and digits), from the transaction id.
    static func appleOrderID(_ transactionID: String) -> String {
        let letters = Array("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
        var value = UInt64(transactionID) ?? 0
        var text = "M"
        for _ in 0..<9 {
            text.append(letters[Int(value % UInt64(letters.count))])
            value /= UInt64(letters.count)
        }
        return text
    }
}
