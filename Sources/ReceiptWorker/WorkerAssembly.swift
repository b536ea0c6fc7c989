import AppleVerification
import HTTPClient
import Kafka
import Ledger
import Observability

/// Builds a ``Worker`` and everything it needs from a validated configuration.
public enum WorkerAssembly {
    public static func make(_ configuration: WorkerConfiguration, logger: Logger) async throws -> Worker {
        let metrics = WorkerMetrics()
        let apple = try appleVerifier(
            configuration, logger: logger, observer: { metrics.observeAppleCall($0, outcome: $1, duration: $2) },
            laneObserver: { metrics.observeLane($0, waited: $1, paused: $2) })

        let kafka = try kafkaConfigurations(configuration)
        let consumer = try KafkaConsumer(configuration: kafka.consumer, logger: logger)
        let producer = try KafkaProducer(configuration: kafka.producer, logger: logger)
        let ledger = try await LedgerFactory.open(
            url: configuration.ledgerURL, poolSize: configuration.ledgerPoolSize, schema: configuration.ledgerSchema)
        return Worker(
            configuration: configuration, consumer: consumer, producer: producer, ledger: ledger, apple: apple,
            metrics: metrics,
            logger: logger)
    }

    /// Apple's side: verifyReceipt, the App Store Server API (when a key is configured) and the verifier of
    /// signed data, as the worker uses them (also for `notifications backfill`).
    public static func appleVerifier(
        _ configuration: WorkerConfiguration, logger: Logger, observer: AppleCallObserver? = nil,
        laneObserver: RateGovernor.Observer? = nil
    ) throws -> AppleVerifier {
        var http = HTTPClient.Configuration()
        http.caFile = configuration.httpCAFile
        // Apple speaks HTTP/2 (one connection carries many requests); over HTTP/1.1 each request in flight
        // holds a socket: at most 512 per host, so a thousand jobs in flight cannot exhaust descriptors,
        // and 512 × 100 ms is still 5,000 requests a second.
        http.maxConnectionsPerHost = 512
        let client = HTTPClient(configuration: http, logger: logger)

        var receipts = VerifyReceiptClient.Configuration()
        receipts.productionURL = configuration.apple.verifyReceiptProductionURL
        receipts.sandboxURL = configuration.apple.verifyReceiptSandboxURL
        receipts.sharedSecret = configuration.apple.sharedSecret
        receipts.allowSandbox = configuration.apple.allowSandbox
        receipts.timeout = configuration.httpTimeout
        receipts.maximumRetryAfter = configuration.retry.maxBackoff
        receipts.observer = observer

        var api: AppStoreServerAPIClient?
        if let tokens = try tokenIssuer(configuration) {
            var apiConfiguration = AppStoreServerAPIClient.Configuration()
            apiConfiguration.productionURL = configuration.apple.apiProductionURL
            apiConfiguration.sandboxURL = configuration.apple.apiSandboxURL
            apiConfiguration.allowSandbox = configuration.apple.allowSandbox
            apiConfiguration.timeout = configuration.httpTimeout
            apiConfiguration.maximumRetryAfter = configuration.retry.maxBackoff
            apiConfiguration.observer = observer
            apiConfiguration.governor = RateGovernor(
                productionRate: configuration.apple.apiMaxRequestsPerSecond,
                maximumPause: configuration.apple.apiMaxLanePause, observer: laneObserver)
            api = AppStoreServerAPIClient(configuration: apiConfiguration, tokens: tokens, http: client)
        }
        return AppleVerifier(
            bundleID: configuration.apple.bundleID,
            receipts: VerifyReceiptClient(configuration: receipts, http: client), api: api,
            signedData: try signedDataVerifier(configuration))
    }

    /// Builds everything ``make(_:logger:)`` builds short of connecting (the librdkafka configurations, the
    /// API key, the root certificates), failing the same way: for `check-config`.
    public static func validate(_ configuration: WorkerConfiguration) throws {
        _ = try tokenIssuer(configuration)
        _ = try signedDataVerifier(configuration)
        let kafka = try kafkaConfigurations(configuration)
        do {
            try kafka.consumer.validate()
            try kafka.producer.validate()
        } catch {
            throw configurationError(error)
        }
    }

    static func tokenIssuer(_ configuration: WorkerConfiguration) throws -> APITokenIssuer? {
        guard let keyID = configuration.apple.apiKeyID, let issuerID = configuration.apple.apiIssuerID,
            let pem = configuration.apple.apiPrivateKeyPEM
        else { return nil }
        do {
            return try APITokenIssuer(
                privateKeyPEM: pem, keyID: keyID, issuerID: issuerID, bundleID: configuration.apple.bundleID)
        } catch {
            throw ConfigurationError(key: "apple.api.private_key_file", reason: "not a PEM elliptic-curve private key")
        }
    }

    static func signedDataVerifier(_ configuration: WorkerConfiguration) throws -> SignedDataVerifier {
        var signed = SignedDataVerifier.Configuration(
            rootCertificates: configuration.apple.rootCertificates, bundleID: configuration.apple.bundleID)
        signed.allowedEnvironments = configuration.apple.allowSandbox ? [.production, .sandbox] : [.production]
        signed.appAppleID = configuration.apple.appAppleID
        do {
            return try SignedDataVerifier(configuration: signed)
        } catch {
            throw ConfigurationError(key: "apple.root_certificates", reason: error.reason)
        }
    }

    static func kafkaConfigurations(_ configuration: WorkerConfiguration) throws -> (
        consumer: KafkaConsumer.Configuration, producer: KafkaProducer.Configuration
    ) {
        var kafka = configuration.kafka
        guard let bootstrap = kafka.removeValue(forKey: "bootstrap.servers"),
            let group = kafka.removeValue(forKey: "group.id")
        else {
            throw ConfigurationError(
                key: "kafka.bootstrap.servers", reason: "kafka.bootstrap.servers and kafka.group.id are required")
        }
        // Bound what librdkafka prefetches, so memory stays flat when Apple is slow and intake pauses; and
        // answer fetches quickly: librdkafka's 500 ms fetch wait would sit in every job's latency.
        var consumerProperties = ["queued.max.messages.kbytes": "16384", "fetch.wait.max.ms": "10"]
        consumerProperties.merge(kafka) { _, configured in configured }
        // One event per job, awaited: batching longer than 1 ms only adds latency.
        let producerProperties = ["linger.ms": "1"].merging(kafka.filter { !Self.consumerOnly.contains($0.key) }) { $1 }
        var consumer = KafkaConsumer.Configuration(
            bootstrapServers: bootstrap, groupID: group, properties: consumerProperties)
        // A revocation waits for the drain: librdkafka must not release the partitions first.
        consumer.revocationTimeout = configuration.drainTimeout + .seconds(5)
        return (
            consumer,
            KafkaProducer.Configuration(bootstrapServers: bootstrap, properties: producerProperties)
        )
    }

    /// A Kafka configuration error as the configuration's own: `kafka.acks: must be all` names `kafka.acks`.
    static func configurationError(_ error: any Error) -> any Error {
        guard let kafka = error as? KafkaError, kafka.code == .invalidConfiguration else { return error }
        let parts = kafka.reason.split(separator: ":", maxSplits: 1)
        guard parts.count == 2, parts[0].hasPrefix("kafka.") else {
            return ConfigurationError(key: "kafka", reason: kafka.reason)
        }
        return ConfigurationError(key: String(parts[0]), reason: parts[1].trimmingCharacters(in: .whitespaces))
    }

    /// Consumer properties that librdkafka would warn about on a producer.
    public static let consumerOnly: Set<String> = [
        "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms", "auto.offset.reset",
        "partition.assignment.strategy", "queued.max.messages.kbytes", "fetch.max.bytes", "group.instance.id",
        "enable.auto.commit", "isolation.level", "fetch.wait.max.ms",
    ]
}
