import Crypto
public import Foundation
import Synchronization

/// Makes the ES256 bearer token of the App Store Server API and reuses it until shortly before it expires.
///
/// Claims as Apple documents them: header `alg` ES256, `kid`, `typ` JWT; payload `iss` (issuer id), `iat`,
/// `exp` (`lifetime` after `iat`, at most 60 minutes), `aud` "appstoreconnect-v1", `bid` (bundle id).
public final class APITokenIssuer: Sendable {
    private struct Claims: Encodable {
        let iss: String
        let iat: Int64
        let exp: Int64
        let aud = "appstoreconnect-v1"
        let bid: String
    }

    private let signer: JWSSigner
    private let issuerID: String
    private let bundleID: String
    private let lifetime: Int64
    /// The token and when it must be renewed, on the monotonic clock: a wall clock stepped back must not
    /// keep an expired token in use for minutes.
    private let cached = Mutex<(token: String, renewAt: ContinuousClock.Instant)?>(nil)

    /// `privateKeyPEM` is the .p8 file's text. `lifetime` is capped at 60 minutes. Default: 20 minutes.
    public init(
        privateKeyPEM: String, keyID: String, issuerID: String, bundleID: String, lifetime: Duration = .seconds(1200)
    )
        throws
    {
        signer = try JWSSigner(key: ECPrivateKey(pem: privateKeyPEM), headerFields: ["kid": keyID, "typ": "JWT"])
        self.issuerID = issuerID
        self.bundleID = bundleID
        self.lifetime = min(3600, max(60, lifetime.components.seconds))
    }

    /// A valid token: the cached one while more than 5 minutes of it remain (on the monotonic clock,
    /// `elapsed`), else a new one (its `iat` from the wall clock, `now`).
    public func token(now: Date = Date(), elapsed: ContinuousClock.Instant = .now) throws -> String {
        if let current = cached.withLock({ $0 }), elapsed < current.renewAt { return current.token }
        let seconds = Int64(now.timeIntervalSince1970.rounded(.down))
        let claims = Claims(iss: issuerID, iat: seconds, exp: seconds + lifetime, bid: bundleID)
        let token = try signer.sign(claims)
        cached.withLock { $0 = (token, elapsed + .seconds(lifetime - 300)) }
        return token
    }

    /// Forgets the cached token (Apple answered 401 to it): the next call signs a new one.
    public func invalidate() {
        cached.withLock { $0 = nil }
    }
}
