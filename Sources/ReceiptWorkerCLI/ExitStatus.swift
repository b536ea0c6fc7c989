import Lifecycle
import Foundation
import Kafka
import LedgerDomain
import Observability
import ReceiptWorker

/// Every command's exit code for an error, decided here once: 2 for what a restart would only repeat (a usage
/// or configuration error, a ledger that does not match the consumer group: an operator must act), 1 for a
/// runtime failure (the broker, the ledger), which a restart may heal.
enum ExitStatus {
    static func of(_ error: any Error) -> Int32 {
        switch error {
        case is UsageError, is ConfigurationError, is LedgerMismatchError: 2
        case let error as KafkaError where error.code == .invalidConfiguration: 2
        // A ledger URL or schema a command's ledger refuses (`ledger.url`, named): as `run` answers it.
        case let error as LedgerError where error.code == .misconfigured: 2
        default: 1
        }
    }

    /// What a long-running command logs as it exits on `error`.
    static func log(_ error: any Error, _ logger: Logger) {
        switch error {
        case is ConfigurationError: logger.critical("configuration error", ["error": "\(error)"])
        case let error as KafkaError where error.code == .invalidConfiguration:
            logger.critical("configuration error", ["error": "\(error)"])
        case let error as LedgerError where error.code == .misconfigured:
            logger.critical("configuration error", ["error": "\(error)"])
        case is LedgerMismatchError: logger.critical("ledger does not match the consumer group", ["error": "\(error)"])
        default: logger.critical("worker failed", ["error": "\(error)"])
        }
    }

    /// Runs a long-running command's services until SIGTERM or SIGINT (graceful: each stops in turn) or until
    /// one fails; 0 after a graceful stop, else the error's code.
    static func serve(_ group: ServiceGroup, logger: Logger) async -> Int32 {
        TerminationSignals.install { received in
            logger.notice("signal received; draining", ["signal": received == SIGTERM ? "SIGTERM" : "SIGINT"])
            group.shutdown()
        }
        do {
            try await group.run()
            return 0
        } catch {
            log(error, logger)
            return of(error)
        }
    }
}
