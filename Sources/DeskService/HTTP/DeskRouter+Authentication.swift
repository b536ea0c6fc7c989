import Foundation
import HTTPServerKit
import Observability

/// Who is asking the desk: a bearer token, verified against the provider's keys, or the console's session in the
/// ledger (with, for a state-changing request, its CSRF token and the desk's own origin).
extension DeskRouter {
    struct Refusal: Error {
        var status: Int
        var reason: String
        var message: String
    }

    /// Who is asking: a bearer token (verified against the provider's keys), else the console's session (with it).
    func authenticate(_ request: ServerRequest, stateChanging: Bool) async -> Result<
        (Agent, ConsoleSessions.Open?), Refusal
    > {
        let now = actions.now()
        if let authorization = request.headers["authorization"] {
            // The scheme is case-insensitive (RFC 9110): "bearer" and "Bearer" alike.
            guard authorization.utf8.count > 7, authorization.prefix(7).lowercased() == "bearer " else {
                return .failure(Refusal(status: 401, reason: "malformed", message: "a Bearer token is expected"))
            }
            do {
                let token = try await tokens.verify(String(authorization.dropFirst(7)), now: now) {
                    try await provider.key($0, now: now)
                }
                guard !token.roles.isEmpty else {
                    return .failure(
                        Refusal(status: 403, reason: "no_role", message: "the token grants no support role"))
                }
                return .success(
                    (Agent(subject: token.subject, name: token.name, roles: token.roles, via: .bearer), nil))
            } catch let refusal as TokenRefusal {
                return .failure(
                    Refusal(status: 401, reason: refusal.reason.rawValue, message: "token refused: \(refusal.detail)"))
            } catch {
                return .failure(
                    Refusal(
                        status: 503, reason: "provider_unavailable",
                        message: "the sign-in provider's keys cannot be fetched: try again shortly"))
            }
        }
        guard let secret = Cookies.value(ConsoleSessions.cookie, in: request) else {
            return .failure(Refusal(status: 401, reason: "missing", message: "sign in first (no token, no session)"))
        }
        let found: ConsoleSessions.Open?
        do {
            found = try await sessions.open(secret, now: now)
        } catch {
            return .failure(
                Refusal(status: 503, reason: "ledger_unavailable", message: "the ledger did not answer: try again"))
        }
        // Signed out, ended by a lead, idle, expired, or never made here: one answer for all.
        guard let session = found else {
            return .failure(Refusal(status: 401, reason: "expired", message: "the session ended: sign in again"))
        }
        if stateChanging {
            guard request.headers["origin"] == origin else {
                return .failure(
                    Refusal(status: 403, reason: "origin", message: "a request from another site is refused"))
            }
            guard let csrf = request.headers["x-csrf-token"], Constant.equal(csrf, session.csrf) else {
                return .failure(
                    Refusal(status: 403, reason: "csrf", message: "the request lacks the session's CSRF token"))
            }
        }
        return .success((session.agent, session))
    }
}
