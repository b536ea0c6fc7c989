public import AppleVerification
public import Flows
import HTTPClient
public import Kafka
import Ledger
public import Observability
import Vocabulary

/// Builds a ``Worker`` and everything it needs from a validated configuration.
public enum WorkerAssembly {
    /// `metrics`: the registry's owner, made before the worker when the metrics port serves during start-up
    /// (opening the ledger may wait for PostgreSQL, or run a long migration).
    public static func make(
        _ configuration: WorkerConfiguration, logger: Logger, metrics: WorkerMetrics = .ofProcess()
    ) async throws -> Worker {
        let apps = try appleApps(
            configuration, logger: logger,
            observer: { app in { metrics.observeAppleCall(app: app, $0, outcome: $1, duration: $2) } },
            laneObserver: { app in { metrics.observeLane(app: app, $0, waited: $1, paused: $2) } },
            revocationObserver: { outcome, detail in
                metrics.revocationCheck(outcome).increment()
                if let detail {
                    logger.warning("a certificate chain's revocation check", ["outcome": outcome, "why": detail])
                }
            })

        let kafka = try configuration.kafkaClients()
        let consumer: KafkaConsumer
        let producer: KafkaProducer
        do {
            // A setting librdkafka refuses is a configuration error, named as check-config names it (exit 2).
            consumer = try KafkaConsumer(configuration: kafka.consumer, logger: logger)
            producer = try KafkaProducer(configuration: kafka.producer, logger: logger)
        } catch {
            throw configurationError(error)
        }
        let ledger: any Ledger
        do {
            ledger = try await LedgerFactory.open(
                url: configuration.ledgerURL, poolSize: configuration.ledgerPoolSize,
                schema: configuration.ledgerSchema, defaultBundleID: configuration.defaultApp.bundleID,
                migrate: configuration.ledgerMigrateOnStart)
        } catch let error as LedgerError where error.key != nil {
            throw ConfigurationError(.unusable, key: error.key ?? "ledger.url", reason: error.reason)
        }
        return Worker(
            configuration: configuration, consumer: consumer, producer: producer, ledger: ledger, apps: apps,
            metrics: metrics,
            logger: logger)
    }

    /// Apple's side for every app: verifyReceipt, the App Store Server API (when the app has a key, its
    /// own or the default app's) and the verifier of signed data, as the worker uses them (also for
    /// `notifications backfill`). Each app has an HTTP client of its own (one app's thousand slow calls never
    /// queue another's, whose queued time would count against its timeout, attempts and breaker) and its own
    /// rate governor, since Apple's limits are per app.
    public static func appleApps(
        _ configuration: WorkerConfiguration, logger: Logger,
        observer: (@Sendable (_ app: String) -> AppleCallObserver)? = nil,
        laneObserver: (@Sendable (_ app: String) -> RateGovernor.Observer)? = nil,
        revocationObserver: RevocationChecker.Observer? = nil
    ) throws -> AppleApps {
        var http = HTTPClient.Configuration()
        http.caFile = configuration.httpCAFile
        // Apple speaks HTTP/2 (one connection carries many requests); over HTTP/1.1 each request in flight
        // holds a socket: at most 512 per host by default, so a thousand jobs in flight cannot exhaust
        // descriptors, and 512 × 100 ms is still 5,000 requests a second. Idle connections kept: the same
        // 2,000 in all, shared out among the apps.
        http.maxConnectionsPerHost = configuration.httpMaxConnectionsPerHost
        http.connectionCacheSize = max(64, http.connectionCacheSize / max(1, configuration.allApps.count))
        let receiptVerification = try receiptVerification(configuration)
        let receiptSignatures = try receiptSignatures(configuration)
        let revocation = try revocationChecker(
            configuration, http: HTTPClient(configuration: http, logger: logger), observer: revocationObserver)
        return AppleApps(
            try configuration.allApps.enumerated().map { index, app in
                try appleApp(
                    app, isDefault: index == 0, configuration, http: HTTPClient(configuration: http, logger: logger),
                    revocation: revocation, receiptVerification: receiptVerification,
                    receiptSignatures: receiptSignatures, observer: observer?(app.name),
                    laneObserver: laneObserver?(app.name))
            })
    }

    /// One app: its verifyReceipt client, its App Store Server API client (when it has a key, its own or the
    /// default app's), its verifier of signed data, and its own circuit breakers and rate governor (Apple's
    /// limits and failures are per app).
    private static func appleApp(
        _ app: WorkerConfiguration.App, isDefault: Bool, _ configuration: WorkerConfiguration, http client: HTTPClient,
        revocation: RevocationChecker?, receiptVerification: ReceiptVerification,
        receiptSignatures: ReceiptSignatureVerifier,
        observer: AppleCallObserver?, laneObserver: RateGovernor.Observer?
    ) throws -> AppleApp {
        let breakers = CircuitBreakers()
        var receipts = VerifyReceiptClient.Configuration()
        receipts.productionURL = configuration.apple.verifyReceiptProductionURL
        receipts.sandboxURL = configuration.apple.verifyReceiptSandboxURL
        receipts.sharedSecret = app.sharedSecret
        receipts.allowSandbox = app.allowSandbox
        receipts.timeout = configuration.httpTimeout
        receipts.maximumRetryAfter = configuration.retry.maxBackoff
        receipts.observer = observer
        receipts.breakers = breakers
        receipts.receiptSignatures = receiptSignatures

        var api: AppStoreServerAPIClient?
        var governor: RateGovernor?
        if let tokens = try tokenIssuer(app) {
            var apiConfiguration = AppStoreServerAPIClient.Configuration()
            apiConfiguration.productionURL = configuration.apple.apiProductionURL
            apiConfiguration.sandboxURL = configuration.apple.apiSandboxURL
            apiConfiguration.allowSandbox = app.allowSandbox
            apiConfiguration.timeout = configuration.httpTimeout
            apiConfiguration.maximumRetryAfter = configuration.retry.maxBackoff
            apiConfiguration.observer = observer
            apiConfiguration.breakers = breakers
            governor = RateGovernor(
                productionRate: configuration.apple.apiMaxRequestsPerSecond,
                maximumPause: configuration.apple.apiMaxLanePause, observer: laneObserver)
            apiConfiguration.governor = governor
            api = AppStoreServerAPIClient(configuration: apiConfiguration, tokens: tokens, http: client)
        }
        let signedData = try signedDataVerifier(app, configuration, revocation: revocation)
        let verifier = AppleVerifier(
            bundleID: app.bundleID, receipts: VerifyReceiptClient(configuration: receipts, http: client), api: api,
            signedData: signedData, receiptVerification: receiptVerification)
        // The calls the worker makes, so that each breaker's state shows from the start.
        for call in ["verify_receipt_production", "verify_receipt_sandbox"] { _ = breakers.breaker(for: call) }
        if api != nil {
            for call in ["transaction_info_production", "transaction_info_sandbox"] { _ = breakers.breaker(for: call) }
        }
        return AppleApp(
            name: app.name, bundleID: app.bundleID, isDefault: isDefault, purchases: verifier,
            signedData: signedData, consumption: api, api: api, breakers: breakers, governor: governor)
    }

    /// verifyReceipt, or the receipt's signature checked against `apple.receipt_root_certificates`.
    static func receiptVerification(_ configuration: WorkerConfiguration) throws -> ReceiptVerification {
        guard configuration.apple.receiptsWithServerAPI else { return .verifyReceipt }
        return .serverAPI(try receiptSignatures(configuration))
    }

    /// Checks app receipts' signatures against `apple.receipt_root_certificates`: with `server_api` for every
    /// receipt, with verifyReceipt to tell Apple's bad minute from a malformed receipt when it answers 21002.
    static func receiptSignatures(_ configuration: WorkerConfiguration) throws -> ReceiptSignatureVerifier {
        do {
            return try ReceiptSignatureVerifier(rootCertificates: configuration.apple.receiptRootCertificates)
        } catch {
            throw ConfigurationError(.invalidValue, key: "apple.receipt_root_certificates", reason: error.reason)
        }
    }

    /// Builds everything ``make(_:logger:)`` builds short of connecting (the librdkafka configurations, the
    /// API key, the root certificates), failing the same way: for `check-config`.
    /// Apple's stated limit for Get Transaction Info in Production, a second: what `apple.api.max_requests_per_second`
    /// is meant to be.
    static let applesTransactionInfoLimit = 50

    /// What is valid but probably not meant: said by `check-config` and at start. A rate below Apple's limit
    /// that divides it evenly looks divided by the replicas already, which the worker does itself (each replica
    /// takes its partitions' share): following an old comment, that throttles Apple's calls by the replica count
    /// twice.
    public static func warnings(_ configuration: WorkerConfiguration) -> [String] {
        let ignored = configuration.tracing.ignored.map { "OpenTelemetry's \($0)" }
        let rate = configuration.apple.apiMaxRequestsPerSecond
        let limit = applesTransactionInfoLimit
        guard rate < limit, limit % rate == 0 else { return ignored }
        return ignored + [
            "apple.api.max_requests_per_second=\(rate) looks like Apple's limit (\(limit)) divided by \(limit / rate):"
                + " it is the whole pool's limit, and each replica already takes its share by its partitions; set"
                + " Apple's limit as Apple states it, unless Apple gave this app a lower one"
        ]
    }

    public static func validate(_ configuration: WorkerConfiguration) throws {
        _ = try receiptVerification(configuration)
        _ = try receiptSignatures(configuration)
        for app in configuration.allApps {
            _ = try tokenIssuer(app)
            _ = try signedDataVerifier(app, configuration)
        }
        let kafka = try configuration.kafkaClients()
        do {
            try kafka.consumer.validate()
            try kafka.producer.validate()
        } catch {
            throw configurationError(error)
        }
    }

    /// The app's API token issuer (its JWT's `bid` is the app's bundle id); nil without a key.
    static func tokenIssuer(_ app: WorkerConfiguration.App) throws -> APITokenIssuer? {
        guard let keyID = app.apiKeyID, let issuerID = app.apiIssuerID, let pem = app.apiPrivateKeyPEM else {
            return nil
        }
        do {
            return try APITokenIssuer(privateKeyPEM: pem, keyID: keyID, issuerID: issuerID, bundleID: app.bundleID)
        } catch {
            throw ConfigurationError(
                .invalidValue, key: appKey(app, "api.private_key_file"), reason: "not a PEM elliptic-curve private key")
        }
    }

    static func signedDataVerifier(
        _ app: WorkerConfiguration.App, _ configuration: WorkerConfiguration, revocation: RevocationChecker? = nil
    ) throws -> SignedDataVerifier {
        var signed = SignedDataVerifier.Configuration(
            rootCertificates: configuration.apple.rootCertificates, bundleID: app.bundleID)
        signed.revocation = revocation
        signed.allowedEnvironments = app.allowSandbox ? [.production, .sandbox] : [.production]
        signed.appAppleID = app.appAppleID
        do {
            return try SignedDataVerifier(configuration: signed)
        } catch {
            throw ConfigurationError(.invalidValue, key: "apple.root_certificates", reason: error.reason)
        }
    }

    /// One checker of revocation for every app (Apple signs them all with one chain), with its own HTTP client:
    /// OCSP responders are asked over plain HTTP (their answers are signed), nil with `apple.revocation_check=off`.
    static func revocationChecker(
        _ configuration: WorkerConfiguration, http: HTTPClient, observer: RevocationChecker.Observer?
    ) throws -> RevocationChecker? {
        guard configuration.apple.revocationCheck else { return nil }
        do {
            return try RevocationChecker(rootCertificates: configuration.apple.rootCertificates, observer: observer) {
                url, request, timeout in
                let answer = try await http.execute(
                    HTTPRequest(
                        method: .post, url: url, headers: [(name: "Content-Type", value: "application/ocsp-request")],
                        body: request, timeout: timeout))
                guard answer.status == 200 else { throw OCSPUnanswered(status: answer.status) }
                return answer.body
            }
        } catch {
            throw ConfigurationError(.invalidValue, key: "apple.root_certificates", reason: error.reason)
        }
    }

    struct OCSPUnanswered: Error, CustomStringConvertible {
        let status: Int
        var description: String { "HTTP \(status)" }
    }

    /// `apple.KEY` for the default app, `apps.NAME.KEY` for another (the default app's key when it has none).
    private static func appKey(_ app: WorkerConfiguration.App, _ key: String) -> String {
        app.name == "default" ? "apple.\(key)" : "apps.\(app.name).\(key)"
    }

    /// A producer for a person waiting (a command, the support desk): a broker that does not take the message
    /// within `patienceMilliseconds` fails the send (librdkafka's default is 300 s), and the person is told.
    public static func producerForPeople(
        _ configuration: WorkerConfiguration, patienceMilliseconds: Int, logger: Logger
    ) throws -> KafkaProducer {
        var properties = configuration.kafka
        let bootstrap = properties.removeValue(forKey: "bootstrap.servers") ?? "127.0.0.1:9092"
        properties.removeValue(forKey: "group.id")
        for key in WorkerConfiguration.consumerOnly { properties.removeValue(forKey: key) }
        properties["message.timeout.ms"] = String(peoplesTimeout(properties, patience: patienceMilliseconds))
        properties.removeValue(forKey: "delivery.timeout.ms")
        return try KafkaProducer(
            configuration: KafkaProducer.Configuration(bootstrapServers: bootstrap, properties: properties),
            logger: logger)
    }

    /// A send's limit for a person waiting: the configured one (`delivery.timeout.ms`, else `message.timeout.ms`)
    /// when it is shorter than `patience`. 0 is librdkafka's "for ever" (a worker's operator may set it so that no
    /// answer is ever dropped): never a person's wait.
    static func peoplesTimeout(_ properties: [String: String], patience: Int) -> Int {
        let configured = (properties["delivery.timeout.ms"] ?? properties["message.timeout.ms"]).flatMap { Int($0) }
        guard let configured, configured > 0 else { return patience }
        return min(configured, patience)
    }

    /// A Kafka configuration error as the configuration's own: librdkafka refusing `acks` names `kafka.acks`.
    static func configurationError(_ error: any Error) -> any Error {
        guard let kafka = error as? KafkaError, kafka.code == .invalidConfiguration else { return error }
        return ConfigurationError(
            .invalidValue, key: kafka.property.map { "kafka.\($0)" } ?? "kafka", reason: kafka.reason)
    }

    /// The properties of a producer-type client for metadata requests: consumer settings would only draw
    /// librdkafka's warnings.
    static func adminProperties(_ configuration: WorkerConfiguration) -> [String: String] {
        configuration.kafka.filter { !WorkerConfiguration.consumerOnly.contains($0.key) && $0.key != "group.id" }
    }

}
