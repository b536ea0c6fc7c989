import AppleVerification
import Crypto
import Foundation
import HTTPServerKit
import Observability

/// The console's sign-in with the studio's provider: OpenID Connect's authorization code flow with PKCE (S256),
/// a state and a nonce, as a confidential client. The state, nonce and verifier wait in a sealed cookie of their
/// own; the callback checks them, exchanges the code, verifies the ID token, and starts the session in the ledger
/// (``ConsoleSessions``). A refused sign-in is counted and logged with why (never a token or a code).
struct SignInFlow: Sendable {
    let provider: SignInProvider
    let seal: Seal
    let sessions: ConsoleSessions
    let logger: Logger
    let clientID: String
    let clientSecret: String
    let redirectURI: String
    let scopes: String
    /// The ID token's verifier: its audience is the client id.
    let verifier: TokenVerifier
    let metrics: DeskMetrics
    /// Callbacks already taken: each sign-in's code is exchanged once at most.
    let used = UsedSignInStates()

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
        var subject: String?
        func refused(_ reason: String, _ outcome: String) -> ServerReply {
            // Anyone can call back: the first refusal of each outcome and every hundredth are logged.
            let refusedSoFar = metrics.signedIn(outcome)
            if refusedSoFar % 100 == 1 {
                var fields = ["outcome": outcome, "why": reason, "refused_so_far": String(refusedSoFar)]
                if let subject { fields["subject"] = subject }
                logger.warning("a console sign-in was refused", fields)
            }
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
        guard used.claim(pending.state, until: pending.expiresAt, now: now) else {
            return refused("This sign-in was used already.", "state")
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
        subject = token.subject
        guard !token.roles.isEmpty else {
            return refused("Your account has no support role: ask your lead for one.", "no_role")
        }
        let cookie = try await sessions.start(token, now: now)
        metrics.signedIn("signed_in")
        logger.info(
            "a console session started",
            ["subject": token.subject, "roles": token.roles.sorted().map(\.rawValue).joined(separator: ",")])
        return .respond(
            status: 303,
            headers: [
                ("Location", "/desk/"), clearing,
                Cookies.set(
                    ConsoleSessions.cookie, cookie, maxAge: Int(sessions.maxAge), sameSite: "Strict"),
            ] + DeskHeaders.common, body: Data(), after: .zero)
    }

    /// PKCE's S256: base64url(SHA-256(verifier)).
    static func challenge(_ verifier: String) -> String {
        Base64URL.encode(SHA256Digest.hash(Array(verifier.utf8)))
    }
}
