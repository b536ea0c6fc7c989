import Foundation
import Observability
import HTTPServerKit
import ReceiptWorker

/// `receipt-worker receive`: the notification receiver as a role of its own (deploy/kubernetes/receiver.yaml).
enum ReceiveCommand {
    static let help = """
        usage: receipt-worker receive [--config FILE] [--set key=value]...

        Serves App Store Server Notifications on notifications.listen (POST /notifications/apple) and
        /metrics, /healthz, /readyz on metrics.listen, and nothing else: no consumer group, no ledger.
        Verified notifications are produced to topics.notifications, as `run` does; the workers consume
        them. Ready while a record could be written: the broker describes the notifications topic, every
        partition of it has a leader, the broker does not say this client may not write to it, and no record
        was refused in the last 30 s. Apple's deliveries are answered whenever the broker takes records,
        whatever PostgreSQL or the workers are doing. Same
        configuration file as `run` (it reads the apps, the roots, kafka.* and the topics).
        SIGTERM or SIGINT: stop answering, flush the producer, exit 0.
        Exit codes: 0 stopped; 1 runtime failure; 2 configuration error (notifications.listen unset, a
        missing notifications topic, ...).
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        let options = try Options(arguments, valued: Options.configurationOptions, flags: [])
        let configuration = try options.configuration(purpose: .worker)
        let logger = Logger(label: "receipt-worker")
        signal(SIGPIPE, SIG_IGN)
        _ = DescriptorBudget.raiseToHardLimit()
        let code = await ExitStatus.serve(try ProcessRoles.receiver(configuration, logger: logger), logger: logger)
        if code == 0 { logger.info("notification receiver stopped") }
        return code
    }
}
