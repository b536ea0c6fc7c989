import Crypto
import Foundation
import HTTPServerKit
import LedgerDomain

/// Who is asking, as the desk verified it: from a bearer token on every request, or from the console's session,
/// made at sign-in from a verified ID token. Never from a field of the request.
struct Agent: Sendable, Equatable {
    enum Via: String, Sendable { case bearer, session }

    var subject: String
    var name: String
    var roles: Set<AgentRole>
    var via: Via

    func has(_ role: AgentRole) -> Bool { roles.contains(role) }

    /// The highest role held, as the audit says it.
    var role: String { roles.max()?.rawValue ?? "none" }
}

/// The console's sessions, kept in the ledger (``DeskStore``), so that the studio can end them: the cookie carries
/// a random token and its MAC, the ledger the token's SHA-256 (neither the ledger nor a backup of it holds what a
/// browser presents). A session is refused once its agent signed out, a lead ended it, it was idle past
/// `desk.session_idle_s`, or it is older than `desk.session_max_age_s`; every desk replica sees it at once. The
/// MAC, under a key made from the session key (`desk.session_key_file`, every replica's), turns away a cookie no
/// desk made before the ledger is asked: a flood of made-up cookies costs no ledger read. Rotating the key signs
/// everyone out.
struct ConsoleSessions: Sendable {
    let store: any DeskStore
    /// `desk.session_max_age_s`.
    let maxAge: TimeInterval
    /// `desk.session_idle_s`.
    let idle: TimeInterval
    /// The cookies' MAC key: the session key's own MAC of this use, so it seals nothing else.
    private let macKey: [UInt8]

    /// Nil when OpenSSL makes no MAC (the desk does not start).
    init?(store: any DeskStore, maxAge: TimeInterval, idle: TimeInterval, sessionKey: [UInt8]) {
        guard let macKey = HMACSHA256.mac(key: sessionKey, Array("desk-session-cookie".utf8)) else { return nil }
        self.store = store
        self.maxAge = maxAge
        self.idle = idle
        self.macKey = macKey
    }

    static let cookie = "__Host-desk-session"
    /// A session's use is written at most this often (its idle time is this much coarser).
    static let seenEvery: TimeInterval = 60

    /// A session that is open: its agent, the CSRF token its state-changing requests carry, when it ends.
    struct Open: Sendable, Equatable {
        var id: String
        var agent: Agent
        var csrf: String
        var expiresAt: Date
    }

    /// Starts a session for a verified ID token; returns the cookie's value: the token, a dot, its MAC.
    func start(_ token: VerifiedToken, now: Date) async throws -> String {
        let secret = Random.token()
        guard let mac = mac(secret) else { throw LedgerError(.unavailable, "no MAC for the session's cookie") }
        try await store.startSession(
            DeskSession(
                id: Self.id(of: secret), subject: token.subject, name: token.name,
                roles: token.roles.sorted().map(\.rawValue), createdAt: now, seenAt: now,
                expiresAt: now.addingTimeInterval(maxAge)))
        return secret + "." + mac
    }

    /// The open session of a cookie, nil when it has none (a MAC no desk made, ended, idle, expired, unknown); its
    /// use noted.
    func open(_ cookie: String, now: Date) async throws -> Open? {
        guard (1...256).contains(cookie.utf8.count), let dot = cookie.lastIndex(of: ".") else { return nil }
        let secret = String(cookie[..<dot])
        guard let mac = mac(secret), Constant.equal(String(cookie[cookie.index(after: dot)...]), mac) else {
            return nil
        }
        let id = Self.id(of: secret)
        guard let session = try await store.session(id: id), session.endedAt == nil, session.expiresAt > now,
            now.timeIntervalSince(session.seenAt) < idle
        else { return nil }
        if now.timeIntervalSince(session.seenAt) >= Self.seenEvery { try await store.sessionSeen(id: id, at: now) }
        let roles = Set(session.roles.compactMap(AgentRole.init(rawValue:)))
        return Open(
            id: id, agent: Agent(subject: session.subject, name: session.name, roles: roles, via: .session),
            csrf: Self.csrf(of: secret), expiresAt: session.expiresAt)
    }

    /// The ledger's id of a session: the SHA-256 of its token.
    static func id(of secret: String) -> String { SHA256Digest.hex(Array(("desk-session\u{0}" + secret).utf8)) }

    /// A cookie's token (what comes before its MAC).
    static func token(ofCookie cookie: String) -> String {
        cookie.lastIndex(of: ".").map { String(cookie[..<$0]) } ?? cookie
    }

    /// Nil when OpenSSL makes none: then no cookie opens, rather than one with an empty MAC.
    private func mac(_ secret: String) -> String? {
        HMACSHA256.mac(key: macKey, Array(("desk-session\u{0}" + secret).utf8)).map(Base64URL.encode)
    }

    /// The session's CSRF token, derived from the cookie's token (never stored): only its holder knows it.
    static func csrf(of secret: String) -> String {
        SHA256Digest.hex(Array(("desk-csrf\u{0}" + secret).utf8))
    }
}

/// A sign-in under way, sealed in its own short-lived cookie: the state, nonce and PKCE verifier the callback
/// must match. `SameSite=Lax`: the provider's redirect back is a cross-site navigation, which a Strict cookie
/// would not join.
struct SignInState: Codable, Sendable, Equatable {
    var state: String
    var nonce: String
    var verifier: String
    var expiresAt: Date

    static let cookie = "__Host-desk-signin"
    /// How long an agent may take at the provider's sign-in page.
    static let lifetime: TimeInterval = 600
}

/// Cookies as the desk sets and reads them.
package enum Cookies {
    /// The value of cookie `name` in a request's `Cookie` header (the first, as browsers order the most
    /// specific first), nil when absent.
    static func value(_ name: String, in request: ServerRequest) -> String? {
        value(name, inHeader: request.headers["cookie"])
    }

    /// The value of cookie `name` in a `Cookie` header's text; nil when absent, or the header is over 16 KiB.
    package static func value(_ name: String, inHeader header: String?) -> String? {
        guard let header, header.utf8.count <= 16_384 else { return nil }
        for pair in header.split(separator: ";") {
            let trimmed = pair.drop(while: { $0 == " " })
            guard let equals = trimmed.firstIndex(of: "=") else { continue }
            if trimmed[..<equals] == name { return String(trimmed[trimmed.index(after: equals)...]) }
        }
        return nil
    }

    /// `__Host-` cookies: Secure, Path=/, no Domain (the browser binds them to this exact origin), HttpOnly.
    static func set(_ name: String, _ value: String, maxAge: Int, sameSite: String) -> (String, String) {
        ("Set-Cookie", "\(name)=\(value); Path=/; Max-Age=\(maxAge); Secure; HttpOnly; SameSite=\(sameSite)")
    }

    static func clear(_ name: String, sameSite: String = "Strict") -> (String, String) {
        set(name, "", maxAge: 0, sameSite: sameSite)
    }
}

extension Seal {
    func seal<T: Encodable>(_ value: T, purpose: String) -> String? {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        guard let data = try? encoder.encode(value) else { return nil }
        return seal(bytes: Array(data), purpose: purpose)
    }

    func open<T: Decodable>(_ type: T.Type, from sealed: String, purpose: String) -> T? {
        guard let bytes = open(bytes: sealed, purpose: purpose) else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return try? decoder.decode(type, from: Data(bytes))
    }
}
