import Lifecycle
import Foundation
import HTTPServerKit
import Kafka
import Observability
import ReceiptWorker

enum RunCommand {
    static let help = """
        usage: receipt-worker run [--config FILE] [--set key=value]...

        Consumes receipt jobs, verifies each with Apple, runs the contract's checks, records the decision
        in the ledger and publishes a grant or deny event. Serves /metrics, /healthz and /readyz on
        metrics.listen when set, and App Store Server Notifications on notifications.listen (POST
        /notifications/apple). SIGTERM or SIGINT: stop taking jobs, finish those in flight within
        worker.drain_timeout_ms, commit, flush, exit 0.

        options:
          --config FILE      a properties file (key=value; # comments)
          --set key=value    override one key (repeatable; wins over the file and the environment)

        Every key can also come from the environment: RECEIPT_WORKER_ + the key in capitals with each
        "." written "__" (apple.bundle_id: RECEIPT_WORKER_APPLE__BUNDLE_ID).
        Logs: JSON lines on standard error; LOG_LEVEL (or RECEIPT_WORKER_LOG_LEVEL) = trace, debug, info,
        notice, warning, error or critical (default info).
        Exit codes: 0 stopped gracefully; 1 runtime failure (fatal Kafka error); 2 configuration error.
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        let options = try Options(arguments, valued: Options.configurationOptions, flags: [])
        let configuration = try options.configuration(purpose: .worker)
        let logger = Logger(label: "receipt-worker")
        // A server: a peer that closes its socket mid-write must cost that write an EPIPE, never the process.
        signal(SIGPIPE, SIG_IGN)
        // The servers' connection limits are shares of this budget: a flood of idle connections must leave
        // room for the probes.
        let descriptors = DescriptorBudget.raiseToHardLimit()
        for warning in WorkerAssembly.warnings(configuration) { logger.warning("configuration: \(warning)") }
        let group: ServiceGroup
        do {
            group = try ProcessRoles.worker(configuration, logger: logger, descriptors: descriptors)
        } catch {
            ExitStatus.log(error, logger)
            return ExitStatus.of(error)
        }
        return await ExitStatus.serve(group, logger: logger)
    }
}

enum CheckConfigCommand {
    static let help = """
        usage: receipt-worker check-config [--config FILE] [--set key=value]... [--print] [--no-files]

        Validates the configuration (file, RECEIPT_WORKER_* environment, --set) as `run` would, without
        connecting to anything: unknown keys, bad values and unreadable files are reported with the key, every
        problem in one run (one line each), and what `run` builds is built (librdkafka's configuration, guarded
        Kafka settings, the API key, the root certificates), so what passes here does not fail at start-up for
        its configuration.

        options:
          --print            also print the configuration in effect as a properties file that --config
                             reads back: each key grouped by where it was set, the defaults, and the
                             settings librdkafka is given; secrets commented out, never printed
          --no-files         read none of the files the keys name (Secrets, keys, certificates, CA bundles):
                             a deployment's configuration checked before its cluster holds them; what the
                             files hold is then not checked (a PEM, a key's bytes)

        Exit codes: 0 valid; 2 invalid (each problem names its key).
        """

    static func run(_ arguments: [String]) throws -> Int32 {
        let options = try Options(arguments, valued: Options.configurationOptions, flags: ["--print", "--no-files"])
        let loaded: LoadedConfiguration
        do {
            loaded = try ConfigurationLoader.loadWithSources(
                file: options.value("--config"), overrides: options.all("--set"), purpose: .worker,
                readsFiles: !options.has("--no-files"), everyProblem: true)
        } catch let problems as ConfigurationProblems {
            for problem in problems.problems { complain(problem.description) }
            complain("\(problems.problems.count) problem(s): the configuration is invalid")
            return 2
        }
        try WorkerAssembly.validate(loaded.configuration)
        for warning in WorkerAssembly.warnings(loaded.configuration) { complain("warning: \(warning)") }
        if options.has("--print") {
            // Standard output reads back as a properties file: the verdict too is a comment there. Both
            // through `emit`: `print` buffers, and the verdict would land inside a line of a long text.
            emit(loaded.propertiesText())
            emit("# configuration is valid")
        } else {
            emit("configuration is valid")
        }
        return 0
    }
}
