package import Crypto
import Foundation

// What the desk reads from its OpenID provider, as types. Each reads leniently: a field of another type reads as
// missing (and is refused as missing), never as a failure of the whole document.

/// The discovery document (`/.well-known/openid-configuration`): the issuer and the endpoints the desk calls.
struct DiscoveryDocument: Decodable {
    let issuer: String?
    let authorizationEndpoint: String?
    let tokenEndpoint: String?
    let jwksURI: String?

    private enum CodingKeys: String, CodingKey {
        case issuer
        case authorizationEndpoint = "authorization_endpoint"
        case tokenEndpoint = "token_endpoint"
        case jwksURI = "jwks_uri"
    }

    init(from decoder: any Decoder) throws {
        let fields = try decoder.container(keyedBy: CodingKeys.self)
        issuer = fields.text(.issuer)
        authorizationEndpoint = fields.text(.authorizationEndpoint)
        tokenEndpoint = fields.text(.tokenEndpoint)
        jwksURI = fields.text(.jwksURI)
    }
}

/// The token endpoint's answer: the ID token, or the provider's error code.
struct TokenAnswer: Decodable {
    let idToken: String?
    let error: String?

    private enum CodingKeys: String, CodingKey {
        case idToken = "id_token"
        case error
    }

    init(from decoder: any Decoder) throws {
        let fields = try decoder.container(keyedBy: CodingKeys.self)
        idToken = fields.text(.idToken)
        error = fields.text(.error)
    }
}

/// A JSON Web Key Set (RFC 7517): the provider's signing keys.
package struct JWKS: Decodable {
    /// One entry; an entry that is not an object reads as nil.
    struct Entry: Decodable {
        let kid, kty, alg, use, crv, n, e, x, y: String?

        private enum CodingKeys: String, CodingKey { case kid, kty, alg, use, crv, n, e, x, y }

        init(from decoder: any Decoder) throws {
            let fields = try decoder.container(keyedBy: CodingKeys.self)
            (kid, kty, alg, use, crv) = (
                fields.text(.kid), fields.text(.kty), fields.text(.alg), fields.text(.use), fields.text(.crv)
            )
            (n, e, x, y) = (fields.text(.n), fields.text(.e), fields.text(.x), fields.text(.y))
        }
    }

    /// Nil when the document has no `keys` list.
    let keys: [Entry?]?

    private enum CodingKeys: String, CodingKey { case keys }

    package init(from decoder: any Decoder) throws {
        let fields = try decoder.container(keyedBy: CodingKeys.self)
        keys = (try? fields.decodeIfPresent([Lenient<Entry>].self, forKey: .keys))?.map(\.value)
    }

    /// The signing keys by key id: RS256 and ES256 (P-256) keys for signatures, the first 64 entries read; any
    /// other entry skipped. Nil when the document has no `keys` list.
    package var signingKeys: [String: SigningKey]? {
        guard let keys else { return nil }
        var found: [String: SigningKey] = [:]
        for case let jwk? in keys.prefix(64) {
            guard let kid = jwk.kid, (1...256).contains(kid.utf8.count), (jwk.use ?? "sig") == "sig" else { continue }
            let bytes = { (value: String?) in value.flatMap { Base64URL.decodeBytes(Substring($0)) } }
            switch (jwk.kty, jwk.alg) {
            case ("RSA", "RS256"), ("RSA", nil):
                if let n = bytes(jwk.n), let e = bytes(jwk.e) { found[kid] = SigningKey(rsaModulus: n, exponent: e) }
            case ("EC", "ES256"), ("EC", nil):
                if jwk.crv == "P-256", let x = bytes(jwk.x), let y = bytes(jwk.y) {
                    found[kid] = SigningKey(p256X: x, y: y)
                }
            default:
                continue
            }
        }
        return found
    }
}

/// An element of a list that reads as nil when it is not a `Value`, so that one odd entry skips only itself.
struct Lenient<Value: Decodable>: Decodable {
    let value: Value?
    init(from decoder: any Decoder) throws { value = try? Value(from: decoder) }
}

extension KeyedDecodingContainer {
    /// The text at `key`, or nil when it is missing or not a string.
    func text(_ key: Key) -> String? { (try? decodeIfPresent(String.self, forKey: key)) ?? nil }
}
