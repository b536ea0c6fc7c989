import AppleVerification
import COpenSSL
import Foundation
import HTTPServerKit

/// The console's sign-in with the studio's provider: OpenID Connect's authorization code flow with PKCE (S256),
/// a state and a nonce, as a confidential client. The state, nonce and verifier wait in a sealed cookie of their
/// own; the callback checks them, exchanges the code, verifies the ID token, and makes the session.
struct SignInFlow: Sendable {
    let provider: SignInProvider
    let seal: Seal
    let clientID: String
    let clientSecret: String
    let redirectURI: String
    let scopes: String
    /// The ID token's verifier: its audience is the client id.
    let verifier: TokenVerifier
    let sessionMaxAge: TimeInterval
    let metrics: DeskMetrics

    /// `GET /desk/login`: to the provider's sign-in page.
    func start(now: Date) async throws -> ServerReply {
        let endpoints = try await provider.discovered()
        let state = SignInState(
            state: Random.token(), nonce: Random.token(), verifier: Random.token(48),
            expiresAt: now.addingTimeInterval(SignInState.lifetime))
        guard let sealed = seal.seal(state, purpose: SignInState.cookie) else {
            return .text(500, "the sign-in could not be prepared\n")
        }
        let parameters = [
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI), ("scope", scopes),
            ("state", state.state), ("nonce", state.nonce), ("code_challenge", Self.challenge(state.verifier)),
            ("code_challenge_method", "S256"),
        ].map { "\($0.0)=\(FormEncoding.escape($0.1))" }.joined(separator: "&")
        let separator = endpoints.authorization.contains("?") ? "&" : "?"
        return .respond(
            status: 302,
            headers: [
                ("Location", endpoints.authorization + separator + parameters),
                Cookies.set(SignInState.cookie, sealed, maxAge: Int(SignInState.lifetime), sameSite: "Lax"),
            ] + DeskHeaders.common, body: Data(), after: .zero)
    }

    /// `GET /desk/callback?code=&state=`: the session, or a page that says why not (and signs in again).
    func finish(_ request: ServerRequest, now: Date) async throws -> ServerReply {
        let clearing = Cookies.clear(SignInState.cookie, sameSite: "Lax")
        func refused(_ reason: String, _ outcome: String) -> ServerReply {
            metrics.signedIn(outcome)
            return DeskPages.message(
                403, title: "Not signed in", text: reason, link: ("/desk/login", "Sign in again"), headers: [clearing])
        }
        if request.query["error"] != nil { return refused("The sign-in was cancelled or refused.", "refused") }
        guard let sealed = Cookies.value(SignInState.cookie, in: request),
            let pending = seal.open(SignInState.self, from: sealed, purpose: SignInState.cookie),
            pending.expiresAt > now
        else { return refused("The sign-in took too long, or did not start here.", "expired") }
        guard let state = request.query["state"], Constant.equal(state, pending.state) else {
            return refused("The sign-in's state does not match: it did not start in this browser.", "state")
        }
        guard let code = request.query["code"], (1...2_048).contains(code.utf8.count) else {
            return refused("The provider sent no code.", "refused")
        }
        let idToken: String
        do {
            idToken = try await provider.exchange(
                code: code, verifier: pending.verifier, redirectURI: redirectURI, clientID: clientID,
                clientSecret: clientSecret)
        } catch let error as SignInRefused {
            return refused(error.description, "refused")
        }
        let token: VerifiedToken
        do {
            token = try await verifier.verify(idToken, now: now, nonce: pending.nonce) {
                try await provider.key($0, now: now)
            }
        } catch let refusal as TokenRefusal {
            return refused(
                "The provider's answer did not verify (\(refusal.reason.rawValue)).", refusal.reason.rawValue)
        }
        guard !token.roles.isEmpty else {
            return refused("Your account has no support role: ask your lead for one.", "no_role")
        }
        let session = ConsoleSession(
            subject: token.subject, name: token.name, roles: token.roles.sorted(),
            expiresAt: now.addingTimeInterval(sessionMaxAge), csrf: Random.token())
        guard let cookie = seal.seal(session, purpose: ConsoleSession.cookie) else {
            return .text(500, "the session could not be made\n")
        }
        metrics.signedIn("signed_in")
        return .respond(
            status: 303,
            headers: [
                ("Location", "/desk/"), clearing,
                Cookies.set(ConsoleSession.cookie, cookie, maxAge: Int(sessionMaxAge), sameSite: "Strict"),
            ] + DeskHeaders.common, body: Data(), after: .zero)
    }

    /// PKCE's S256: base64url(SHA-256(verifier)).
    static func challenge(_ verifier: String) -> String {
        let bytes = Array(verifier.utf8)
        var digest = [UInt8](repeating: 0, count: 32)
        _ = bytes.withUnsafeBufferPointer { input in
            digest.withUnsafeMutableBufferPointer { SHA256(input.baseAddress, input.count, $0.baseAddress) }
        }
        return Base64URL.encode(digest)
    }
}
