import Vocabulary
import AppleVerification
package import Crypto
package import Foundation

/// Who a verified token says is asking, and what it lets them do.
package struct VerifiedToken: Sendable, Equatable {
    package var subject: String
    package var name: String
    package var roles: Set<AgentRole>
    var expiresAt: Date
    var nonce: String?
}

/// Why a token is refused: said in the 401, counted by reason, never with the token.
package struct TokenRefusal: Error, Equatable, CustomStringConvertible {
    package enum Reason: String, Sendable {
        case malformed, algorithm, unknownKey = "unknown_key", signature, issuer, audience, expired
        case notYetValid = "not_yet_valid", subject, nonce
        case authorizedParty = "authorized_party"
    }

    package let reason: Reason
    let detail: String
    package var description: String { detail }

    init(_ reason: Reason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }
}

/// Verifies a sign-in provider's JWT (RFC 7519) as an OpenID Connect relying party must: a compact JWS signed
/// with RS256 or ES256 by a key of the provider's JWKS (`none`, HMAC and every other algorithm refused, whatever
/// the header says), its `iss` the issuer, its `aud` the audience, `exp` not past and `nbf`/`iat` not ahead
/// (with `clockSkew` of leeway), a subject; its `azp` (the client the token was issued to), when it names one, one
/// of `authorizedParties`; and, for an ID token of the console's sign-in, its nonce, and an `azp` whenever it is for
/// more than one audience (OpenID Connect Core 3.1.3.7).
package struct TokenVerifier: Sendable {
    package let issuer: String
    package let audience: String
    let clockSkew: TimeInterval
    let claims: DeskClaims
    /// The clients whose tokens are taken when a token names its client: the console's alone for its ID tokens;
    /// for API tokens, `desk.oidc.authorized_parties` (by default the console's).
    let authorizedParties: Set<String>

    /// With the default claims (`email`, `groups`, `support-*`) and a minute of leeway.
    package init(issuer: String, audience: String, authorizedParties: Set<String>) {
        self.init(
            issuer: issuer, audience: audience, clockSkew: 60, claims: DeskClaims(),
            authorizedParties: authorizedParties)
    }

    init(
        issuer: String, audience: String, clockSkew: TimeInterval, claims: DeskClaims, authorizedParties: Set<String>
    ) {
        self.issuer = issuer
        self.audience = audience
        self.clockSkew = clockSkew
        self.claims = claims
        self.authorizedParties = authorizedParties
    }

    /// A token is a few kilobytes; anything larger is refused unread.
    static let maximumTokenBytes = 16 * 1024

    /// `key`: the provider's key of a `kid` (nil: none known, even after the JWKS was fetched again).
    func verify(
        _ token: String, now: Date, nonce: String? = nil, key: (String) async throws -> SigningKey?
    ) async throws -> VerifiedToken {
        let parsed = try Self.parse(token)
        return try verify(parsed, with: try await key(parsed.kid), now: now, nonce: nonce)
    }

    /// A compact JWS read, nothing verified yet: what its header says, the bytes its signature signs, its claims.
    package struct ParsedToken {
        let algorithm: SigningKey.Algorithm
        package let kid: String
        let signed: [UInt8]
        let signature: [UInt8]
        let payload: TokenClaims
    }

    /// Reads a token's parts: refused unread past ``maximumTokenBytes``, and for any algorithm but RS256 and ES256,
    /// a critical header extension, or no key id.
    package static func parse(_ token: String) throws(TokenRefusal) -> ParsedToken {
        guard token.utf8.count <= maximumTokenBytes else { throw TokenRefusal(.malformed, "token too large") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decodeBytes(parts[0]),
            let payloadBytes = Base64URL.decodeBytes(parts[1]), let signature = Base64URL.decodeBytes(parts[2]),
            let header = JSONValue(parsing: headerBytes)?.object,
            let payload = JSONValue(parsing: payloadBytes)?.object.map(TokenClaims.init)
        else { throw TokenRefusal(.malformed, "not a signed JWT") }
        guard let name = header["alg"]?.string, let algorithm = SigningKey.Algorithm(rawValue: name) else {
            throw TokenRefusal(.algorithm, "only RS256 and ES256 tokens are accepted")
        }
        guard header["crit"] == nil else { throw TokenRefusal(.malformed, "critical header extensions are refused") }
        guard let kid = header["kid"]?.string, (1...256).contains(kid.utf8.count) else {
            throw TokenRefusal(.unknownKey, "the token names no key (kid)")
        }
        return ParsedToken(
            algorithm: algorithm, kid: kid, signed: Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8),
            signature: signature, payload: payload)
    }

    /// A parsed token's signature against the provider's key of its `kid` (nil: none), then its claims.
    package func verify(_ parsed: ParsedToken, with signingKey: SigningKey?, now: Date, nonce: String? = nil)
        throws(TokenRefusal) -> VerifiedToken
    {
        guard let signingKey else {
            throw TokenRefusal(.unknownKey, "the provider publishes no key \(Self.shown(parsed.kid))")
        }
        guard signingKey.algorithm == parsed.algorithm else {
            throw TokenRefusal(.algorithm, "key \(Self.shown(parsed.kid)) is not an \(parsed.algorithm.rawValue) key")
        }
        guard signingKey.verifies(parsed.signature, of: parsed.signed) else {
            throw TokenRefusal(.signature, "the signature does not verify")
        }
        return try check(parsed.payload, now: now, nonce: nonce)
    }

    /// The claims of a token whose signature verified.
    func check(_ payload: TokenClaims, now: Date, nonce: String?) throws(TokenRefusal) -> VerifiedToken {
        guard payload.issuer == issuer else { throw TokenRefusal(.issuer, "another issuer's token") }
        let audiences = payload.audiences
        guard audiences.contains(audience) else { throw TokenRefusal(.audience, "a token for another audience") }
        if let party = payload["azp"] {
            guard let party = party.string, authorizedParties.contains(party) else {
                throw TokenRefusal(.authorizedParty, "a token issued to a client this desk does not take (azp)")
            }
        } else if audiences.count > 1 && nonce != nil {
            // An ID token for several audiences must say which client it was issued to (OpenID Connect Core
            // 3.1.3.7); an API token for several APIs need not.
            throw TokenRefusal(.authorizedParty, "an ID token for several audiences names no client (azp)")
        }
        guard let expires = Self.seconds(payload["exp"]) else { throw TokenRefusal(.malformed, "the token has no exp") }
        let time = now.timeIntervalSince1970
        guard expires + clockSkew > time else { throw TokenRefusal(.expired, "the token expired") }
        if let notBefore = Self.seconds(payload["nbf"]), notBefore - clockSkew > time {
            throw TokenRefusal(.notYetValid, "the token is not valid yet")
        }
        if let issued = Self.seconds(payload["iat"]), issued - clockSkew > time {
            throw TokenRefusal(.notYetValid, "the token was issued in the future")
        }
        guard let subject = payload.subject, DeskText.isPlain(subject, maxBytes: 255) else {
            throw TokenRefusal(.subject, "the token names no usable subject")
        }
        if let nonce {
            guard let given = payload.nonce, Constant.equal(given, nonce) else {
                throw TokenRefusal(.nonce, "the sign-in's nonce does not match")
            }
        }
        return VerifiedToken(
            subject: subject, name: claims.name(payload) ?? subject, roles: claims.roles(payload),
            expiresAt: Date(timeIntervalSince1970: expires), nonce: payload.nonce)
    }

    /// A NumericDate: a finite number of seconds, within the years a token can mean.
    static func seconds(_ value: JSONValue?) -> TimeInterval? {
        let seconds: Double
        switch value {
        case .int(let whole)?: seconds = Double(whole)
        case .double(let number)?: seconds = number
        default: return nil
        }
        return seconds.isFinite && (0...32_503_680_000).contains(seconds) ? seconds : nil
    }

    /// A key id as shown in an error: short and plain.
    static func shown(_ kid: String) -> String {
        DeskText.isPlain(kid, maxBytes: 64) ? kid : "(an unprintable key id)"
    }
}

/// Comparisons that take as long whatever the bytes (a CSRF token, a nonce, a state).
enum Constant {
    static func equal(_ a: String, _ b: String) -> Bool {
        let (x, y) = (Array(a.utf8), Array(b.utf8))
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }
}
