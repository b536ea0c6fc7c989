import Foundation
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
    private let cached = Mutex<(token: String, expires: Int64)?>(nil)

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

    /// A valid token: the cached one while more than 5 minutes of it remain, else a new one.
    public func token(now: Date = Date()) throws -> String {
        let seconds = Int64(now.timeIntervalSince1970)
        if let current = cached.withLock({ $0 }), current.expires - seconds > 300 { return current.token }
        let claims = Claims(iss: issuerID, iat: seconds, exp: seconds + lifetime, bid: bundleID)
        let token = try signer.sign(claims)
        cached.withLock { $0 = (token, claims.exp) }
        return token
    }
}
