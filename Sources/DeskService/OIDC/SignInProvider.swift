import Crypto
import Foundation
import HTTPClient

/// The studio's OpenID Connect provider as the desk uses it: its discovery document, its signing keys (JWKS),
/// cached, and its token endpoint for the console's sign-in. Every call is HTTPS (`desk.oidc.ca_file` may add a
/// CA); a provider that does not answer makes requests fail (503), never accepted.
actor SignInProvider {
    struct Endpoints: Sendable, Equatable {
        var authorization: String
        var token: String
        var jwks: String
    }

    let issuer: String
    private let http: HTTPClient
    private let keysMaxAge: TimeInterval
    /// A key id the cache lacks fetches the JWKS again, at most this often: a flood of forged key ids costs the
    /// provider one request per interval.
    static let refetchInterval: TimeInterval = 30
    static let timeout = Duration.seconds(5)

    private var endpoints: Endpoints?
    private var keys: [String: SigningKey] = [:]
    private var keysFetchedAt: Date?
    private var lastFetchAttempt: Date?

    init(issuer: String, http: HTTPClient, keysMaxAge: TimeInterval) {
        self.issuer = issuer
        self.http = http
        self.keysMaxAge = keysMaxAge
    }

    /// Whether the provider's keys are at hand (for `/readyz`).
    var hasKeys: Bool { !keys.isEmpty }

    /// The provider's endpoints, from its discovery document (fetched once; again after a failure).
    func discovered() async throws -> Endpoints {
        if let endpoints { return endpoints }
        let document = try await json(
            DiscoveryDocument.self, issuer.trimmingSuffix("/") + "/.well-known/openid-configuration")
        guard document.issuer == issuer else {
            throw ProviderUnavailable("the discovery document names another issuer")
        }
        func endpoint(_ url: String?, _ name: String) throws -> String {
            guard let url, url.hasPrefix("https://"), url.utf8.count <= 2_048 else {
                throw ProviderUnavailable("the discovery document has no https \(name)")
            }
            return url
        }
        let found = Endpoints(
            authorization: try endpoint(document.authorizationEndpoint, "authorization_endpoint"),
            token: try endpoint(document.tokenEndpoint, "token_endpoint"),
            jwks: try endpoint(document.jwksURI, "jwks_uri"))
        endpoints = found
        return found
    }

    /// The signing key `kid`: from the cache while it is younger than `desk.oidc.jwks_max_age_s`; else, and for a
    /// key id it lacks (the provider rotated its keys), from the JWKS fetched again, at most every
    /// ``refetchInterval``. A fetch that fails throws (the request is answered 503) and is not tried again
    /// within the interval: the keys at hand answer meanwhile.
    func key(_ kid: String, now: Date = Date()) async throws -> SigningKey? {
        let fresh = keysFetchedAt.map { now.timeIntervalSince($0) < keysMaxAge } ?? false
        if fresh, let key = keys[kid] { return key }
        if let last = lastFetchAttempt, now.timeIntervalSince(last) < Self.refetchInterval {
            // Fetched (or tried) a moment ago: the keys at hand answer, a failed fetch's older ones included.
            return keys[kid]
        }
        lastFetchAttempt = now
        keys = try await fetchKeys()
        keysFetchedAt = now
        return keys[kid]
    }

    /// Fetches the keys when none are at hand or they are older than `desk.oidc.jwks_max_age_s` (at most every
    /// ``refetchInterval``); whether keys are at hand after it. For readiness: never spends a refetch a rotated
    /// key may need.
    func refreshIfStale(now: Date = Date()) async -> Bool {
        if let fetched = keysFetchedAt, now.timeIntervalSince(fetched) < keysMaxAge, !keys.isEmpty { return true }
        if let last = lastFetchAttempt, now.timeIntervalSince(last) < Self.refetchInterval { return !keys.isEmpty }
        lastFetchAttempt = now
        if let fetched = try? await fetchKeys() {
            keys = fetched
            keysFetchedAt = now
        }
        return !keys.isEmpty
    }

    private func fetchKeys() async throws -> [String: SigningKey] {
        guard let keys = try await json(JWKS.self, try await discovered().jwks).signingKeys else {
            throw ProviderUnavailable("the JWKS has no keys")
        }
        return keys
    }

    /// The console's sign-in: the authorization code exchanged, with the PKCE verifier, for the ID token.
    func exchange(code: String, verifier: String, redirectURI: String, clientID: String, clientSecret: String)
        async throws -> String
    {
        let form = [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
            ("code_verifier", verifier),
        ].map { "\($0.0)=\(FormEncoding.escape($0.1))" }.joined(separator: "&")
        let basic = Data("\(FormEncoding.escape(clientID)):\(FormEncoding.escape(clientSecret))".utf8)
            .base64EncodedString()
        let response = try await send(
            HTTPRequest(
                method: .post, url: try await discovered().token,
                headers: [
                    ("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
                    ("Authorization", "Basic \(basic)"),
                ], body: Data(form.utf8), timeout: Self.timeout))
        let body = try? JSONDecoder().decode(TokenAnswer.self, from: response.body)
        guard response.status == 200, let token = body?.idToken else {
            // The provider's error code only (never its description, which may echo what was sent).
            let code = body?.error.map { DeskText.isPlain($0, maxBytes: 64) ? $0 : "?" } ?? "none"
            throw SignInRefused("the provider refused the sign-in (HTTP \(response.status), error \(code))")
        }
        return token
    }

    private func json<Document: Decodable>(_ type: Document.Type, _ url: String) async throws -> Document {
        let response = try await send(
            HTTPRequest(url: url, headers: [("Accept", "application/json")], timeout: Self.timeout))
        guard response.status == 200, let document = try? JSONDecoder().decode(Document.self, from: response.body)
        else { throw ProviderUnavailable("\(url) answered HTTP \(response.status) without JSON") }
        return document
    }

    private func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard request.url.hasPrefix("https://") else { throw ProviderUnavailable("the provider is not https") }
        do {
            return try await http.execute(request)
        } catch {
            throw ProviderUnavailable("the provider did not answer (\(error))")
        }
    }
}

/// The provider did not answer as a provider must: the request is answered 503, never let in.
struct ProviderUnavailable: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The provider refused a sign-in (a code used twice, expired, or not this client's).
struct SignInRefused: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// `application/x-www-form-urlencoded` values: everything but unreserved characters escaped.
enum FormEncoding {
    static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}
