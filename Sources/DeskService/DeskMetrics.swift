import Observability

/// The desk's metrics (docs/metrics.md, "The support desk"), every label a word of the desk's own: never an
/// agent, a player or a ticket. The series a dashboard and an alert read start at zero.
struct DeskMetrics: Sendable {
    let registry: MetricsRegistry

    static let creditOutcomes = [
        "credited", "held", "refused", "failed", "unpublished", "approved_credited", "approved_refused",
        "approved_unpublished", "rejected",
    ]
    static let authReasons = [
        "missing", "malformed", "algorithm", "unknown_key", "signature", "issuer", "audience", "expired",
        "not_yet_valid", "subject", "nonce", "no_role", "csrf", "origin", "provider_unavailable", "rate_limited",
        "authorized_party", "ledger_unavailable",
    ]

    init(registry: MetricsRegistry) {
        self.registry = registry
        for outcome in Self.creditOutcomes {
            for role in AgentRole.allCases { _ = creditCounter(outcome, role: role.rawValue) }
        }
        for reason in Self.authReasons { _ = authCounter(reason) }
    }

    /// Credits by outcome and the role of who asked (or approved).
    func credited(outcome: String, role: String) { creditCounter(outcome, role: role).increment() }

    func looked(action: String, outcome: String) {
        registry.counter(
            "receipt_worker_desk_lookups_total",
            help: "Lookups and histories the desk answered, by action and outcome.",
            labels: ["action": action, "outcome": outcome]
        ).increment()
    }

    /// A request refused by a rule of the desk (a role, a lead's own credit), audited.
    func refused(action: String, role: String) {
        registry.counter(
            "receipt_worker_desk_refusals_total",
            help: "Requests of known agents the desk refused by its rules (a role, a lead's own credit), by action.",
            labels: ["action": action, "role": role]
        ).increment()
    }

    /// A request refused before its agent was known (no token, a forged one, a cross-site request): not audited.
    /// Counted; returns how many of `reason` so far (for sampled logs).
    @discardableResult
    func unauthenticated(_ reason: String) -> Int {
        let counter = authCounter(reason)
        counter.increment()
        return Int(counter.value)
    }

    /// Counted; returns how many of `outcome` so far (for sampled logs).
    @discardableResult
    func signedIn(_ outcome: String) -> Int {
        let counter = registry.counter(
            "receipt_worker_desk_signins_total", help: "Console sign-ins, by outcome.", labels: ["outcome": outcome])
        counter.increment()
        return Int(counter.value)
    }

    func answered(route: String, status: Int) {
        registry.counter(
            "receipt_worker_desk_requests_total", help: "Requests the desk answered, by route and status.",
            labels: ["route": route, "status": String(status)]
        ).increment()
    }

    private func creditCounter(_ outcome: String, role: String) -> Counter {
        registry.counter(
            "receipt_worker_desk_credits_total",
            help: "Support credits asked at the desk, by outcome and the role of who asked (or approved).",
            labels: ["outcome": outcome, "role": role])
    }

    private func authCounter(_ reason: String) -> Counter {
        registry.counter(
            "receipt_worker_desk_auth_refusals_total",
            help: "Requests refused before the agent was known (no token, a forged or expired one, a cross-site"
                + " request), by reason; never audited.", labels: ["reason": reason])
    }
}
