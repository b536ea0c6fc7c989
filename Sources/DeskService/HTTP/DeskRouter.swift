import Foundation
import HTTPServerKit
import Observability
import Synchronization

/// The desk's HTTP surface: the console's pages, its sign-in, and the API. Every API request names its agent by
/// a bearer token or the console's session, verified here on each request; a session's state-changing request
/// must also carry its CSRF token and come from the desk's own origin.
struct DeskRouter: Sendable {
    let actions: DeskActions
    let signIn: SignInFlow
    /// API tokens' verifier: their audience is `desk.oidc.audience`.
    let tokens: TokenVerifier
    let provider: SignInProvider
    let seal: Seal
    /// `desk.public_url`: what `Origin` must say.
    let origin: String
    let metrics: DeskMetrics
    let logger: Logger
    /// What each agent may ask in a minute (lookups, histories, credits, decisions), on this replica.
    let limiter = AgentLimiter(perMinute: 60)
    /// Requests being answered: a stop waits for them (a credit is never cut between the ledger and the broker).
    let inFlight = InFlight()

    func handle(_ request: ServerRequest) async -> ServerReply {
        inFlight.enter()
        defer { inFlight.leave() }
        let (route, reply) = await routed(request)
        if case .respond(let status, _, _, _) = reply { metrics.answered(route: route, status: status) }
        return reply
    }

    private func routed(_ request: ServerRequest) async -> (String, ServerReply) {
        let now = actions.now()
        let path = request.path
        switch (request.method, path) {
        case ("GET", "/desk"), ("GET", "/desk/"):
            return ("console", DeskPages.asset(ConsoleAssets.html, type: "text/html; charset=utf-8"))
        case ("GET", "/desk/console.js"):
            return ("console", DeskPages.asset(ConsoleAssets.script, type: "text/javascript; charset=utf-8"))
        case ("GET", "/desk/console.css"):
            return ("console", DeskPages.asset(ConsoleAssets.style, type: "text/css; charset=utf-8"))
        case ("GET", "/desk/login"):
            return ("login", await guarded { try await signIn.start(now: now) })
        case ("GET", "/desk/callback"):
            return ("callback", await guarded { try await signIn.finish(request, now: now) })
        case ("POST", "/desk/logout"):
            let reply = await api(request) { _ in DeskActions.Answer.json(200, ["outcome": "signed out"]) }
            guard case .respond(200, _, _, _) = reply else { return ("logout", reply) }
            return ("logout", reply.adding(Cookies.clear(ConsoleSession.cookie)))
        case ("GET", "/desk/api/session"):
            return ("session", await api(request, stateChanging: false) { agent in try await session(agent, request) })
        case ("POST", "/desk/api/lookup"):
            return ("lookup", await api(request) { try await actions.lookup($0, body: request.body) })
        case ("POST", "/desk/api/history"):
            return ("history", await api(request) { try await actions.history($0, body: request.body) })
        case ("POST", "/desk/api/credit"):
            return ("credit", await api(request) { try await actions.credit($0, body: request.body) })
        case ("GET", "/desk/api/approvals"):
            return ("approvals", await api(request, stateChanging: false) { try await actions.approvalRequests($0) })
        case ("GET", "/desk/api/audit"):
            return (
                "audit",
                await api(request, stateChanging: false) {
                    try await actions.auditLines($0, query: request.query)
                }
            )
        case ("POST", _) where path.hasPrefix("/desk/api/approvals/"):
            let parts = path.dropFirst("/desk/api/approvals/".count).split(separator: "/")
            guard parts.count == 2, let id = Int64(parts[0]), id > 0, ["approve", "reject"].contains(parts[1]) else {
                return ("approvals", DeskPages.json(404, ["error": "no such route"]))
            }
            return (
                "approvals",
                await api(request) { agent in
                    parts[1] == "approve"
                        ? try await actions.approve(agent, id: id, body: request.body)
                        : try await actions.reject(agent, id: id, body: request.body)
                }
            )
        case (_, _) where path.hasPrefix("/desk"):
            return ("other", DeskPages.json(path.hasPrefix("/desk/api/") ? 405 : 404, ["error": "no such route"]))
        default:
            return ("other", DeskPages.json(404, ["error": "no such route"]))
        }
    }

    private func session(_ agent: Agent, _ request: ServerRequest) async throws -> DeskActions.Answer {
        var object: [String: Any] = [
            "subject": agent.subject, "name": agent.name, "roles": agent.roles.sorted().map(\.rawValue),
            "caps": ["agent_daily": actions.caps.agentDaily, "player_daily": actions.caps.playerDaily],
            "apps": actions.apps.map(\.name),
        ]
        if agent.via == .session, let sealed = Cookies.value(ConsoleSession.cookie, in: request),
            let session = seal.open(ConsoleSession.self, from: sealed, purpose: ConsoleSession.cookie)
        {
            object["csrf_token"] = session.csrf
            object["expires_at"] = ISO8601DateFormatter().string(from: session.expiresAt)
        }
        return .json(200, object)
    }

    /// An API request: its agent verified (and, for a session's state-changing request, its CSRF token and
    /// origin), then `body`; errors answered without their details (never a token or a secret).
    private func api(
        _ request: ServerRequest, stateChanging: Bool = true, _ body: (Agent) async throws -> DeskActions.Answer
    ) async -> ServerReply {
        let agent: Agent
        switch await authenticate(request, stateChanging: stateChanging) {
        case .success(let found): agent = found
        case .failure(let refusal):
            metrics.unauthenticated(refusal.reason)
            return DeskPages.json(refusal.status, ["error": refusal.message])
        }
        if stateChanging && !limiter.take(agent.subject) {
            metrics.unauthenticated("rate_limited")
            return DeskPages.json(429, ["error": "too many requests: at most \(limiter.perMinute) a minute"])
        }
        if stateChanging && request.method == "POST" {
            let type = request.headers["content-type"] ?? ""
            guard type.hasPrefix("application/json") else {
                return DeskPages.json(415, ["error": "the body must be JSON (Content-Type: application/json)"])
            }
        }
        do {
            let answer = try await body(agent)
            return .respond(
                status: answer.status, headers: [("Content-Type", "application/json")] + DeskHeaders.common,
                body: answer.body, after: .zero)
        } catch let error as BadRequest {
            return DeskPages.json(400, ["error": error.reason])
        } catch {
            logger.warning("a desk request failed", ["error": String(describing: type(of: error))])
            return DeskPages.json(503, ["error": "Apple or the ledger did not answer in time: ask again"])
        }
    }

    private func guarded(_ body: () async throws -> ServerReply) async -> ServerReply {
        do {
            return try await body()
        } catch {
            metrics.unauthenticated("provider_unavailable")
            logger.warning("the sign-in provider did not answer", ["error": String(describing: error)])
            return DeskPages.message(
                503, title: "Sign-in unavailable", text: "The studio's sign-in does not answer. Try again shortly.",
                link: ("/desk/login", "Try again"), headers: [])
        }
    }

    struct Refusal: Error {
        var status: Int
        var reason: String
        var message: String
    }

    /// Who is asking: a bearer token (verified against the provider's keys), else the console's session.
    func authenticate(_ request: ServerRequest, stateChanging: Bool) async -> Result<Agent, Refusal> {
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
                return .success(Agent(subject: token.subject, name: token.name, roles: token.roles, via: .bearer))
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
        guard let sealed = Cookies.value(ConsoleSession.cookie, in: request) else {
            return .failure(Refusal(status: 401, reason: "missing", message: "sign in first (no token, no session)"))
        }
        guard let session = seal.open(ConsoleSession.self, from: sealed, purpose: ConsoleSession.cookie),
            session.expiresAt > now
        else { return .failure(Refusal(status: 401, reason: "expired", message: "the session ended: sign in again")) }
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
        return .success(session.agent)
    }
}

extension ServerReply {
    func adding(_ header: (String, String)) -> ServerReply {
        guard case .respond(let status, let headers, let body, let after) = self else { return self }
        return .respond(status: status, headers: headers + [header], body: body, after: after)
    }
}

/// A bucket per agent: `perMinute` requests, refilled evenly; the oldest agents forgotten past 10,000.
final class AgentLimiter: Sendable {
    let perMinute: Int
    private let buckets = Mutex<[String: (tokens: Double, at: ContinuousClock.Instant)]>([:])

    init(perMinute: Int) { self.perMinute = perMinute }

    func take(_ subject: String, now: ContinuousClock.Instant = .now) -> Bool {
        buckets.withLock { buckets in
            if buckets.count > 10_000 { buckets.removeAll() }
            let capacity = Double(perMinute)
            var bucket = buckets[subject] ?? (capacity, now)
            bucket.tokens = min(capacity, bucket.tokens + (now - bucket.at).inSeconds * capacity / 60)
            bucket.at = now
            guard bucket.tokens >= 1 else {
                buckets[subject] = bucket
                return false
            }
            bucket.tokens -= 1
            buckets[subject] = bucket
            return true
        }
    }
}

/// How many requests are being answered.
final class InFlight: Sendable {
    private let count = Atomic<Int>(0)
    func enter() { count.add(1, ordering: .relaxed) }
    func leave() { count.subtract(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}
