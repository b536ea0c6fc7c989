import AppleVerification
import Crypto
import Foundation
import HTTPServerKit
import Vocabulary
import Synchronization

extension AppStoreSimulator {
    /// Get Transaction Info: checks the bearer token like Apple (ES256 with the configured key, kid, iss,
    /// aud, bid, iat/exp at most 60 minutes apart and not expired), then answers `signedTransactionInfo`.
    /// A bad token gets 401 with an empty body, as Apple's does.
    func transactionInfo(_ request: ServerRequest, role: String, id: String) -> ServerReply {
        guard let app = authorizedApp(request, role: role) else {
            return .respond(status: 401, headers: [], body: Data(), after: .zero)
        }
        guard !id.isEmpty, id.allSatisfy(\.isNumber) else {
            return .json(400, Self.error(4000006, "Invalid transaction id."))
        }
        let purchase = state.withLock { $0.purchases[id] }
        // Another app's transaction is not found, as at Apple: each app sees its own.
        guard let purchase, purchase.environment == role, purchase.bundleID == app.bundleID else {
            return .json(404, Self.error(4040010, "Transaction id not found."))
        }
        guard let signed = try? signedTransaction(purchase) else {
            return .json(500, Self.error(5000000, "An unknown error occurred."))
        }
        return .json(200, Self.json(["signedTransactionInfo": signed]))
    }

    func signedTransaction(_ purchase: Purchase) throws -> String {
        var transaction = JWSTransaction()
        transaction.transactionId = purchase.transactionID
        transaction.originalTransactionId = purchase.originalTransactionID
        transaction.bundleId = purchase.bundleID
        transaction.productId = purchase.productID
        transaction.purchaseDate = (purchase.purchaseDate.timeIntervalSince1970 * 1000).rounded()
        transaction.originalPurchaseDate = transaction.purchaseDate
        transaction.expiresDate = purchase.expiresDate.map { ($0.timeIntervalSince1970 * 1000).rounded() }
        transaction.quantity = purchase.quantity
        transaction.type = purchase.kind.appleType
        transaction.appAccountToken = purchase.appAccountToken
        transaction.inAppOwnershipType = InAppOwnershipType(rawValue: purchase.ownership)
        transaction.signedDate = (Date().timeIntervalSince1970 * 1000).rounded()
        transaction.environment = AppleEnvironment(rawValue: purchase.environment)
        transaction.revocationDate = purchase.revocationDate.map { ($0.timeIntervalSince1970 * 1000).rounded() }
        if purchase.revocationDate != nil {
            transaction.revocationReason = RevocationReason(rawValue: purchase.revocationReason ?? 0)
            transaction.revocationType = purchase.revocationType.map(RevocationType.init)
            transaction.revocationPercentage = purchase.revocationPercentage
        }
        // A subscription's later period is Apple's RENEWAL; anything else, its first purchase, a PURCHASE.
        let renewal = purchase.kind == .subscription && purchase.originalTransactionID != purchase.transactionID
        transaction.transactionReason = renewal ? "RENEWAL" : "PURCHASE"
        transaction.storefront = purchase.storefront
        transaction.storefrontId = purchase.storefront == "USA" ? "143441" : "143442"
        transaction.price = purchase.price
        transaction.currency = purchase.currency
        transaction.offerType = purchase.offerType
        transaction.offerIdentifier = purchase.offerIdentifier
        transaction.offerDiscountType = purchase.offerDiscountType
        transaction.offerPeriod = purchase.offerPeriod
        transaction.billingPlanType = purchase.billingPlanType
        transaction.commitmentInfo = purchase.commitment
        transaction.appTransactionId = "70\(purchase.originalTransactionID)"
        if purchase.kind == .subscription { transaction.webOrderLineItemId = purchase.webOrderLineItemID }
        return try signer.sign(transaction)
    }

    /// The app whose bearer token the request carries, when Apple would accept it: signed with the key, the
    /// claims in order, `bid` a known app; in Production, an app with a released version (before its first
    /// release Apple answers 401 there, and only Sandbox works).
    func authorizedApp(_ request: ServerRequest, role: String) -> SimulatedApp? {
        guard let authorization = request.headers["authorization"], authorization.hasPrefix("Bearer "),
            let bid = validToken(String(authorization.dropFirst("Bearer ".count))), let app = app(bid)
        else { return nil }
        return app.released || role != "Production" ? app : nil
    }

    /// The token's `bid` when its signature and claims hold.
    private func validToken(_ token: String) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerData = Base64URL.decode(parts[0]), let payloadData = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2]),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: payloadData) as? [String: Any]
        else { return nil }
        let signingInput = Array("\(parts[0]).\(parts[1])".utf8)
        let signed = signingInput.withUnsafeBytes { apiKey.verifyES256(signature: signature, message: $0) }
        let now = Date().timeIntervalSince1970
        guard signed, header["alg"] as? String == "ES256", header["kid"] as? String == configuration.apiKeyID,
            claims["iss"] as? String == configuration.apiIssuerID, claims["aud"] as? String == "appstoreconnect-v1",
            let bid = claims["bid"] as? String,
            let issuedAt = (claims["iat"] as? NSNumber)?.doubleValue,
            let expires = (claims["exp"] as? NSNumber)?.doubleValue
        else { return nil }
        return expires > now && issuedAt <= now + 60 && expires - issuedAt <= 3600 ? bid : nil
    }
}
