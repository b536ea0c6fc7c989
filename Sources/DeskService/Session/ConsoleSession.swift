import Foundation
import HTTPServerKit

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

/// The console's session, sealed in its cookie: the agent, until when, and the CSRF token its requests carry.
struct ConsoleSession: Codable, Sendable, Equatable {
    var subject: String
    var name: String
    var roles: [AgentRole]
    var expiresAt: Date
    var csrf: String

    static let cookie = "__Host-desk-session"

    var agent: Agent { Agent(subject: subject, name: name, roles: Set(roles), via: .session) }
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
enum Cookies {
    /// The value of cookie `name` in a request's `Cookie` header (the first, as browsers order the most
    /// specific first), nil when absent.
    static func value(_ name: String, in request: ServerRequest) -> String? {
        guard let header = request.headers["cookie"], header.utf8.count <= 16_384 else { return nil }
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
