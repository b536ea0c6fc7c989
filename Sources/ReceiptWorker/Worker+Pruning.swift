import Foundation
import Observability

extension Worker {
    /// Deletes stored results past `ledger.results_retention_days`, a minute after start and then hourly.
    /// Every replica runs it; the PostgreSQL ledger lets one at a time do the work.
    func resultsPruneLoop() async {
        let days = configuration.resultsRetentionDays
        guard days > 0 else { return }
        try? await Task.sleep(for: .seconds(60))
        while !Task.isCancelled && !isStopping {
            let cutoff = Date(timeIntervalSinceNow: -Double(days) * 86_400)
            do {
                let deleted = try await ledger.pruneResults(decidedBefore: cutoff)
                if deleted > 0 {
                    logger.info(
                        "stored results pruned",
                        ["deleted": String(deleted), "decided_before": Timestamp.rfc3339(cutoff)])
                }
            } catch {
                logger.warning("pruning stored results failed; trying again in an hour", ["error": "\(error)"])
            }
            try? await Task.sleep(for: .seconds(3_600))
        }
    }
}
