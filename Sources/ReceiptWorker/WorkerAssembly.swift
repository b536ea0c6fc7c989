import AppleVerification
import HTTPClient
import Kafka
import Ledger
import Observability

/// Builds a ``Worker`` and everything it needs from a validated configuration.
public enum WorkerAssembly {
    public static func make(_ configuration: WorkerConfiguration, logger: Logger) async throws -> Worker {
        let metrics = WorkerMetrics()
        let observer: AppleCallObserver = { metrics.observeAppleCall($0, outcome: $1, duration: $2) }
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
        if let keyID = configuration.apple.apiKeyID, let issuerID = configuration.apple.apiIssuerID,
            let pem = configuration.apple.apiPrivateKeyPEM
        {
            let tokens: APITokenIssuer
            do {
                tokens = try APITokenIssuer(
                    privateKeyPEM: pem, keyID: keyID, issuerID: issuerID, bundleID: configuration.apple.bundleID)
            } catch {
                throw ConfigurationError(
                    key: "apple.api.private_key_file", reason: "not a PEM elliptic-curve private key")
            }
            var apiConfiguration = AppStoreServerAPIClient.Configuration()
            apiConfiguration.productionURL = configuration.apple.apiProductionURL
            apiConfiguration.sandboxURL = configuration.apple.apiSandboxURL
            apiConfiguration.allowSandbox = configuration.apple.allowSandbox
            apiConfiguration.timeout = configuration.httpTimeout
            apiConfiguration.maximumRetryAfter = configuration.retry.maxBackoff
            apiConfiguration.observer = observer
            api = AppStoreServerAPIClient(configuration: apiConfiguration, tokens: tokens, http: client)
        }

        var signed = SignedDataVerifier.Configuration(
            rootCertificates: configuration.apple.rootCertificates, bundleID: configuration.apple.bundleID)
        signed.allowedEnvironments = configuration.apple.allowSandbox ? [.production, .sandbox] : [.production]
        let verifier: SignedDataVerifier
        do {
            verifier = try SignedDataVerifier(configuration: signed)
        } catch {
            throw ConfigurationError(key: "apple.root_certificates", reason: error.reason)
        }
        let apple = AppleVerifier(
            bundleID: configuration.apple.bundleID,
            receipts: VerifyReceiptClient(configuration: receipts, http: client), api: api, signedData: verifier)

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
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumer.Configuration(
                bootstrapServers: bootstrap, groupID: group, properties: consumerProperties),
            logger: logger)
        // One event per job, awaited: batching longer than 1 ms only adds latency.
        let producerProperties = ["linger.ms": "1"].merging(kafka.filter { !Self.consumerOnly.contains($0.key) }) { $1 }
        let producer = try KafkaProducer(
            configuration: KafkaProducer.Configuration(bootstrapServers: bootstrap, properties: producerProperties),
            logger: logger)
        let ledger = try await LedgerFactory.open(url: configuration.ledgerURL, poolSize: configuration.ledgerPoolSize)
        return Worker(
            configuration: configuration, consumer: consumer, producer: producer, ledger: ledger, apple: apple,
            metrics: metrics,
            logger: logger)
    }

    /// Consumer properties that librdkafka would warn about on a producer.
    public static let consumerOnly: Set<String> = [
        "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms", "auto.offset.reset",
        "partition.assignment.strategy", "queued.max.messages.kbytes", "fetch.max.bytes", "group.instance.id",
        "enable.auto.commit", "isolation.level", "fetch.wait.max.ms",
    ]
}
