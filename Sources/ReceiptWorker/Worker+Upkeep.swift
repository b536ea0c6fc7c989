import AppleVerification
import Flows
import Foundation
import Kafka
import LedgerDomain
import Lifecycle
import Observability
import Runtime
import Synchronization
import Vocabulary

/// The worker's chores beside its flows: the ledger's health and retention, and the gauges read at scrape time.
extension Worker {
    /// Checks the ledger (every 5 s) for `/readyz` and `receipt_worker_ledger_up`, each check with a deadline
    /// of its own: a ledger hung behind a network partition must turn readiness false in seconds.
    func checkLedger() async {
        do {
            let reachable: Bool
            do {
                let ledger = self.ledger
                try await withDeadline(.seconds(5), timeout: LedgerError(.unavailable, "no answer within 5000 ms")) {
                    try await ledger.ping()
                }
                reachable = true
            } catch {
                reachable = false
                logger.warning("ledger health check failed", ["error": "\(error)"])
            }
            ledgerReachable.store(reachable, ordering: .relaxed)
        }
    }

    /// The ledger's retention (a minute after start, then hourly): stored results past
    /// `ledger.results_retention_days`, handled notifications past `ledger.notifications_retention_days`, and
    /// what is settled past `ledger.settled_retention_days`, each in bounded batches. Every replica runs it;
    /// the PostgreSQL ledger lets one at a time do the work.
    func prune() async {
        func cutoff(_ days: Int) -> Date? { days > 0 ? Date(timeIntervalSinceNow: -Double(days) * 86_400) : nil }
        do {
            do {
                if let before = cutoff(configuration.resultsRetentionDays) {
                    let deleted = try await ledger.pruneResults(decidedBefore: before)
                    if deleted > 0 {
                        logger.info(
                            "stored results pruned",
                            ["deleted": String(deleted), "decided_before": RFC3339.format(before)])
                    }
                }
                let deleted = try await ledger.prune(configuration.retention())
                for (kind, count) in deleted.sorted(by: { $0.key.rawValue < $1.key.rawValue }) where count > 0 {
                    logger.info(
                        "ledger rows past their retention pruned", ["kind": kind.rawValue, "deleted": String(count)])
                }
            } catch {
                logger.warning("pruning the ledger failed; trying again in an hour", ["error": "\(error)"])
            }
        }
    }

    /// Refreshes `receipt_worker_consumption_request_oldest_unanswered_seconds` and
    /// `receipt_worker_consumption_requests_missed` (every 30 s). A ledger that does not answer leaves the last
    /// values: an alarm must not clear itself. The unanswered alert ends at a request's deadline; the missed gauge
    /// keeps a request that passed it unanswered in sight for a day.
    func refreshConsumptionGauge() async {
        let now = Date()
        if let oldest = try? await ledger.oldestOpenConsumptionRequests() {
            for app in apps.all {
                let age = oldest[app.scope].map { max(0, Int(now.timeIntervalSince($0))) } ?? 0
                metrics.oldestConsumptionRequest(app: app.name).set(age)
            }
        }
        if let missed = try? await ledger.missedConsumptionRequests(since: now.addingTimeInterval(-86_400), now: now) {
            for app in apps.all { metrics.missedConsumptionRequests(app: app.name).set(missed[app.scope] ?? 0) }
        }
    }

    /// Gauges read at scrape time from the state the worker already keeps.
    func registerGauges() {
        let registry = metrics.registry
        registry.gauges(
            "receipt_worker_circuit_state",
            help: "1 for each Apple call's circuit breaker state (closed, open, half_open), by app and call."
        ) { [apps] in
            apps.all.flatMap { app in
                (app.breakers?.states ?? []).flatMap { call, current in
                    [CircuitBreaker.State.closed, .open, .halfOpen].map {
                        (["app": app.name, "call": call, "state": $0.rawValue], $0 == current ? 1 : 0)
                    }
                }
            }
        }
        registry.counters(
            "receipt_worker_chain_validations_total",
            help:
                "Certificate chains of signed data validated from their certificates (cache misses), by app: Apple's few chains once each; growth is a sender posting chains of its own."
        ) { [apps] in apps.all.map { (["app": $0.name], Double($0.signedData.chainValidations)) } }
        registry.gauges(
            "receipt_worker_ledger_up", help: "1 when the ledger answered its last health check (every 5 s)."
        ) { [weak self] in [(Labels.none, self?.ledgerReachable.load(ordering: .relaxed) == true ? 1 : 0)] }
        // The PostgreSQL ledger's pool (SQLite has none: no series).
        registry.gauges(
            "receipt_worker_ledger_pool_connections",
            help: "PostgreSQL ledger connections: allowed (ledger.pool_size), open, and in use by a call."
        ) { [ledger] in
            guard let stats = ledger.poolStats else { return [] }
            return [
                (["state": "allowed"], Double(stats.size)), (["state": "open"], Double(stats.open)),
                (["state": "in_use"], Double(stats.inUse)),
            ]
        }
        registry.gauges(
            "receipt_worker_ledger_pool_waiting", help: "Ledger calls waiting for a PostgreSQL connection of the pool."
        ) { [ledger] in ledger.poolStats.map { [(Labels.none, Double($0.waiting))] } ?? [] }
        registry.counters(
            "receipt_worker_ledger_pool_waits_total",
            help: "Ledger calls that found every PostgreSQL connection in use and waited for one."
        ) { [ledger] in ledger.poolStats.map { [(Labels.none, Double($0.waits))] } ?? [] }
        registry.counters(
            "receipt_worker_ledger_round_trips_total",
            help:
                "Statements sent to the PostgreSQL ledger, each a round trip (per job or notification: its cost there)."
        ) { [ledger] in ledger.poolStats.map { [(Labels.none, Double($0.roundTrips))] } ?? [] }
        let certificates = CertificateExpiry(configuration)
        registry.gauges(
            "receipt_worker_certificate_expiry_timestamp_seconds",
            help:
                "When the earliest certificate of each trusted CA file or root set expires (kafka_ca, ledger_ca, http_ca, apple_root, apple_receipt_root)."
        ) { certificates.expiries.map { (["certificate": $0.0], $0.1) } }
    }
}
