import Vocabulary
import Foundation
import HTTPServerKit
import Observability
import Synchronization
import LedgerDomain

/// The desk's HTTP surface: the console's pages, its sign-in, and the API. Every API request names its agent by
/// a bearer token or the console's session, verified here on each request (a session in the ledger: ended at
/// sign-out or by a lead, idle, or expired, it is refused); a session's state-changing request must also carry
/// its CSRF token and come from the desk's own origin. A request refused for its agent's rate is audited.
struct DeskRouter: Sendable {
    let actions: DeskActions
    let signIn: SignInFlow
    /// API tokens' verifier: their audience is `desk.oidc.audience`.
    let tokens: TokenVerifier
    let provider: SignInProvider
    let sessions: ConsoleSessions
    /// `desk.public_url`: what `Origin` must say.
    let origin: String
    let metrics: DeskMetrics
    let logger: Logger
    /// What each agent may ask in a minute (lookups, histories, credits, decisions), on this replica.
    let limiter = AgentLimiter(perMinute: 60)
    /// What each agent may read in a minute (the session, the audit, approvals, a mass extension's status at
    /// Apple), on this replica: five a second on average, far above a console's refreshes, far below a loop's.
    let readLimiter = AgentLimiter(perMinute: 300)
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
        case ("GET", _) where Self.assets[path] != nil:
            let (body, type) = Self.assets[path] ?? ("", "")
            return ("console", DeskPages.asset(body, type: type))
        case ("GET", "/desk/login"):
            return ("login", await guarded { try await signIn.start(now: now) })
        case ("GET", "/desk/callback"):
            return ("callback", await guarded { try await signIn.finish(request, now: now) })
        case ("POST", "/desk/logout"):
            // A console session's sign-out is never refused for the agent's rate: it must end when its agent says
            // so. A bearer token's (no session to end) counts as any request (its audit line is a write).
            let reply = await api(request, sessionExemptFromRate: true) { agent, session in
                let answer = try await actions.signOut(agent, sessionID: session?.id)
                logger.info("a console session ended: signed out", ["subject": agent.subject])
                return answer
            }
            guard case .respond(200, _, _, _) = reply else { return ("logout", reply) }
            return ("logout", reply.adding(Cookies.clear(ConsoleSessions.cookie)))
        case ("GET", "/desk/api/session"):
            return (
                "session", await api(request, stateChanging: false) { agent, session in self.session(agent, session) }
            )
        case ("GET", "/desk/api/sessions"):
            return (
                "sessions",
                await api(request, stateChanging: false) { agent, _ in try await actions.openSessions(agent) }
            )
        case ("POST", "/desk/api/sessions/end"):
            return (
                "sessions", await api(request) { agent, _ in try await actions.endSessions(agent, body: request.body) }
            )
        case ("POST", "/desk/api/lookup"):
            return ("lookup", await api(request) { agent, _ in try await actions.lookup(agent, body: request.body) })
        case ("POST", "/desk/api/history"):
            return ("history", await api(request) { agent, _ in try await actions.history(agent, body: request.body) })
        case ("POST", "/desk/api/credit"):
            return ("credit", await api(request) { agent, _ in try await actions.credit(agent, body: request.body) })
        case ("POST", "/desk/api/extend"), ("POST", "/desk/api/extend-all"):
            return (
                "extend",
                await api(request) { agent, _ in
                    try await actions.extend(agent, body: request.body, all: path.hasSuffix("-all"))
                }
            )
        case ("POST", "/desk/api/player/erase"):
            return (
                "player", await api(request) { agent, _ in try await actions.erasePlayer(agent, body: request.body) }
            )
        case ("POST", "/desk/api/player/export"):
            return (
                "player", await api(request) { agent, _ in try await actions.exportPlayer(agent, body: request.body) }
            )
        case ("GET", "/desk/api/extensions"), ("GET", "/desk/api/extensions/status"):
            return (
                "extensions",
                await api(request, stateChanging: false) { agent, _ in
                    path.hasSuffix("/status")
                        ? try await actions.massExtensionStatus(agent, query: request.query)
                        : try await actions.massExtensions(agent)
                }
            )
        case ("GET", "/desk/api/approvals"):
            return (
                "approvals",
                await api(request, stateChanging: false) { agent, _ in try await actions.approvalRequests(agent) }
            )
        case ("GET", "/desk/api/audit"):
            return (
                "audit",
                await api(request, stateChanging: false) { agent, _ in
                    try await actions.auditLines(agent, query: request.query)
                }
            )
        case ("POST", _) where path.hasPrefix("/desk/api/approvals/"):
            let parts = path.dropFirst("/desk/api/approvals/".count).split(separator: "/")
            guard parts.count == 2, let id = Int64(parts[0]), id > 0, ["approve", "reject"].contains(parts[1]) else {
                return ("approvals", DeskPages.json(404, ["error": "no such route"]))
            }
            return (
                "approvals",
                await api(request) { agent, _ in
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

    /// The console's page, scripts and style, by path: served by the desk itself.
    static let assets: [String: (String, String)] = [
        "/desk": (ConsoleAssets.html, "text/html; charset=utf-8"),
        "/desk/": (ConsoleAssets.html, "text/html; charset=utf-8"),
        "/desk/console.js": (ConsoleAssets.script, "text/javascript; charset=utf-8"),
        "/desk/amends.js": (ConsoleAmends.script, "text/javascript; charset=utf-8"),
        "/desk/player-data.js": (ConsolePlayerData.script, "text/javascript; charset=utf-8"),
        "/desk/console.css": (ConsoleAssets.style, "text/css; charset=utf-8"),
    ]

    private func session(_ agent: Agent, _ session: ConsoleSessions.Open?) -> DeskActions.Answer {
        var object: [String: JSONValue] = [
            "subject": .string(agent.subject), "name": .string(agent.name),
            "roles": JSONValue(agent.roles.sorted().map(\.rawValue)),
            "caps": [
                "agent_daily": JSONValue(actions.caps.agentDaily), "player_daily": JSONValue(actions.caps.playerDaily),
            ],
            "apps": JSONValue(actions.apps.map(\.name)),
        ]
        if let session {
            object["csrf_token"] = .string(session.csrf)
            object["expires_at"] = .string(RFC3339.format(session.expiresAt))
        }
        return .json(200, .object(object))
    }

    /// An API request: its agent verified (and, for a session's state-changing request, its CSRF token and
    /// origin), then `body`; errors answered without their details (never a token or a secret).
    private func api(
        _ request: ServerRequest, stateChanging: Bool = true, sessionExemptFromRate: Bool = false,
        _ body: (Agent, ConsoleSessions.Open?) async throws -> DeskActions.Answer
    ) async -> ServerReply {
        let agent: Agent
        let session: ConsoleSessions.Open?
        switch await authenticate(request, stateChanging: stateChanging) {
        case .success(let found): (agent, session) = found
        case .failure(let refusal):
            // Anyone can send these: the first of each reason and every hundredth are logged, not a flood of them.
            let refusedSoFar = metrics.unauthenticated(refusal.reason)
            if refusedSoFar % 100 == 1 {
                // Why, and where: never the token.
                logger.notice(
                    "a desk request was refused",
                    [
                        "reason": refusal.reason, "path": DeskText.shown(request.path),
                        "refused_so_far": String(refusedSoFar),
                    ])
            }
            return DeskPages.json(refusal.status, ["error": .string(refusal.message)])
        }
        // The session's own read is not bounded: refused, the console would show its signed-out page over a session
        // still open. It is one indexed read, as each request's authentication is.
        if !stateChanging, request.path != "/desk/api/session", case .refused = readLimiter.take(agent.subject) {
            // Counted, not audited: reads are not (an audit read of 10,000 lines in a loop, a status asked of Apple).
            metrics.unauthenticated("rate_limited")
            return DeskPages.json(
                429, ["error": .string("too many reads: at most \(readLimiter.perMinute) a minute")])
        }
        let limited = !(sessionExemptFromRate && session != nil)
        if stateChanging && limited, case .refused(let first) = limiter.take(agent.subject) {
            metrics.unauthenticated("rate_limited")
            let reason = "too many requests: at most \(limiter.perMinute) a minute"
            // The first refusal of a run is audited; the rest are counted, not written: an agent's loop past the
            // limit must not become as many writes to the audit.
            guard first else { return DeskPages.json(429, ["outcome": "refused", "error": .string(reason)]) }
            return (try? await actions.refuseRequest(agent, path: request.path, status: 429, reason: reason))
                .map { reply($0) } ?? DeskPages.json(429, ["error": .string(reason)])
        }
        if stateChanging && request.method == "POST" {
            let type = request.headers["content-type"] ?? ""
            guard type.hasPrefix("application/json") else {
                return DeskPages.json(415, ["error": "the body must be JSON (Content-Type: application/json)"])
            }
        }
        do {
            return reply(try await body(agent, session))
        } catch let error as BadRequest {
            return DeskPages.json(400, ["error": .string(error.reason)])
        } catch {
            logger.warning("a desk request failed", ["error": String(describing: type(of: error))])
            return DeskPages.json(503, ["error": "Apple or the ledger did not answer in time: ask again"])
        }
    }

    private func reply(_ answer: DeskActions.Answer) -> ServerReply {
        .respond(
            status: answer.status, headers: [("Content-Type", "application/json")] + DeskHeaders.common,
            body: answer.body, after: .zero)
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
}

extension ServerReply {
    func adding(_ header: (String, String)) -> ServerReply {
        guard case .respond(let status, let headers, let body, let after) = self else { return self }
        return .respond(status: status, headers: headers + [header], body: body, after: after)
    }
}
