import AppleVerification
import Crypto
import Foundation
import HTTPServerKit
import Synchronization

/// An app the simulator sells for: the default one (its configuration's bundle id) or one added with
/// `POST /admin/apps`. Apple keys its Server API, its limits and its notifications by app.
struct SimulatedApp: Sendable {
    var bundleID: String
    var appAppleID: Int64
    /// verifyReceipt requires it as `password` when set, else 21004.
    var sharedSecret: String?
    /// Apple answers 401 to Production Server API requests of an app with no version released yet.
    var released = true
}

extension AppStoreSimulator {
    /// The app of a bundle id: the default app, or one added; nil for a bundle id the simulator never heard of.
    func app(_ bundleID: String) -> SimulatedApp? {
        state.withLock { state in
            if bundleID == configuration.bundleID {
                return SimulatedApp(
                    bundleID: bundleID, appAppleID: state.appAppleID, sharedSecret: configuration.sharedSecret)
            }
            return state.apps[bundleID]
        }
    }

    /// `POST /admin/apps` `{"bundle_id", "app_apple_id", "shared_secret"?, "released"?}`: adds or replaces an
    /// app (never the default one).
    func addApp(_ body: [String: Any]) -> ServerReply {
        guard let bundleID = body["bundle_id"] as? String, !bundleID.isEmpty, bundleID != configuration.bundleID else {
            return .json(400, Self.error(4000000, "bundle_id is required and is not the default app's"))
        }
        guard let appAppleID = (body["app_apple_id"] as? NSNumber)?.int64Value, appAppleID > 0 else {
            return .json(400, Self.error(4000000, "app_apple_id is required"))
        }
        let app = SimulatedApp(
            bundleID: bundleID, appAppleID: appAppleID, sharedSecret: body["shared_secret"] as? String,
            released: body["released"] as? Bool ?? true)
        state.withLock { $0.apps[bundleID] = app }
        return .json(200, Self.json(["bundle_id": bundleID, "app_apple_id": appAppleID, "released": app.released]))
    }

    /// The `bid` claim of a request's bearer token, unverified: which app's rate-limit lane it counts in
    /// (the token is checked when the request is served).
    static func tokenBundleID(_ request: ServerRequest) -> String? {
        guard let authorization = request.headers["authorization"], authorization.hasPrefix("Bearer ") else {
            return nil
        }
        let parts = authorization.dropFirst("Bearer ".count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decode(parts[1]),
            let claims = try? JSONSerialization.jsonObject(with: payload) as? [String: Any]
        else { return nil }
        return claims["bid"] as? String
    }
}
