import Foundation
import Testing

@testable import ReceiptWorker
import Messaging

@Suite("Worker configuration")
struct ConfigurationTests {
    func load(_ lines: [String], overrides: [String] = [], environment: [String: String] = [:]) throws
        -> WorkerConfiguration
    {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID()).properties").path
        try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return try ConfigurationLoader.load(file: path, overrides: overrides, environment: environment)
    }

    @Test("a rate that looks already divided by the replicas is warned about; Apple's own limit, or an odd one, is not")
    func dividedRateWarning() throws {
        #expect(WorkerAssembly.warnings(try load(["apple.bundle_id=com.example"])).isEmpty)
        let divided = WorkerAssembly.warnings(
            try load(["apple.bundle_id=com.example", "apple.api.max_requests_per_second=10"]))
        #expect(divided.count == 1 && divided[0].contains("divided by 5") && divided[0].contains("whole pool"))
        #expect(
            WorkerAssembly.warnings(try load(["apple.bundle_id=com.example", "apple.api.max_requests_per_second=30"]))
                .isEmpty)
    }

    @Test("games that share a partition of topics.retries are named: fewer partitions than games")
    func sharedParkingPartitions() {
        let games = ["alpha", "bravo", "charlie", "default"]
        #expect(Worker.gamesSharingParkingPartitions(apps: games, partitions: 4).isEmpty)
        #expect(Set(Worker.gamesSharingParkingPartitions(apps: games, partitions: 3)) == ["alpha", "default"])
        #expect(Set(Worker.gamesSharingParkingPartitions(apps: games, partitions: 1)) == Set(games))
    }

    @Test("a properties file with comments, then --set overrides")
    func loads() throws {
        let configuration = try load(
            [
                "# comment", "! also a comment", "", "apple.bundle_id = com.example.game", "worker.max_in_flight=50",
                "kafka.bootstrap.servers=broker:9092", "apple.allow_sandbox=true",
            ],
            overrides: ["worker.max_in_flight=75", "kafka.client.id=w1"])
        #expect(configuration.defaultApp.bundleID == "com.example.game")
        #expect(configuration.maxInFlight == 75)
        #expect(configuration.defaultApp.allowSandbox)
        #expect(configuration.kafka["bootstrap.servers"] == "broker:9092")
        #expect(configuration.kafka["client.id"] == "w1")
        #expect(configuration.apple.rootCertificates.count == 1)  // the compiled-in G3 root by default
    }

    @Test(
        "errors name the key",
        arguments: [
            (["apple.bundle_id=b", "no.such.key=1"], "no.such.key"),
            (["worker.max_in_flight=1"], "apple.bundle_id"),
            (["apple.bundle_id=b", "worker.max_in_flight=zero"], "worker.max_in_flight"),
            (["apple.bundle_id=b", "apple.allow_sandbox=yes"], "apple.allow_sandbox"),
            (["apple.bundle_id=b", "apple.receipt_verification=local"], "apple.receipt_verification"),
            // server_api fetches each receipt's transaction: without the API key it cannot.
            (["apple.bundle_id=b", "apple.receipt_verification=server_api"], "apple.receipt_verification"),
            (["apple.bundle_id=b", "apple.receipt_root_certificates=/no/such.pem"], "apple.receipt_root_certificates"),
            // Set to nothing (a template's empty value), it would trust no root and refuse every receipt.
            (["apple.bundle_id=b", "apple.receipt_root_certificates="], "apple.receipt_root_certificates"),
            (["apple.bundle_id=b", "apple.root_certificates= , "], "apple.root_certificates"),
            // One topic for two: malformed jobs dead-lettered onto the jobs topic, read again, for ever.
            (["apple.bundle_id=b", "topics.dlq=receipt-jobs"], "topics.dlq"),
            (["apple.bundle_id=b", "topics.results=receipt-jobs"], "topics.results"),
            (["apple.bundle_id=b", "ledger.url=mysql://x"], "ledger.url"),
            (
                ["apple.bundle_id=b", "apple.verify_receipt.production_url=ftp://x"],
                "apple.verify_receipt.production_url"
            ),
            (["apple.bundle_id=b", "apple.shared_secret_file=/nonexistent/secret"], "apple.shared_secret_file"),
            (["apple.bundle_id=b", "apple.root_certificates=/nonexistent/root.pem"], "apple.root_certificates"),
            (["apple.bundle_id=b", "apple.api.key_id=K"], "apple.api.key_id"),
            (
                ["apple.bundle_id=b", "retry.initial_backoff_ms=5000", "retry.max_backoff_ms=100"],
                "retry.initial_backoff_ms"
            ),
            (["apple.bundle_id=b", "metrics.listen=nowhere"], "metrics.listen"),
            (["apple.bundle_id=com.example'; DROP TABLE grants; --"], "apple.bundle_id"),
            (
                ["apple.bundle_id=b", "apple.api.sandbox_url=http://api.example"],
                "apple.api.sandbox_url"
            ),
            (["apple.bundle_id=b", "worker.stall_timeout_ms=5"], "worker.stall_timeout_ms"),
            (["apple.bundle_id=b", "just a line"], "properties:2"),
        ])
    func errorsNameTheKey(lines: [String], key: String) throws {
        let error = #expect(throws: ConfigurationError.self) { try load(lines) }
        #expect(error?.description.contains(key) == true, "\(error.map { "\($0)" } ?? "no error")")
    }

    @Test(
        "Kubernetes service-link variables (RECEIPT_WORKER_PORT, ...) are not keys; RECEIPT_WORKER_LOG_LEVEL is accepted"
    )
    func serviceLinks() throws {
        let configuration = try load(
            ["apple.bundle_id=b"],
            environment: [
                "RECEIPT_WORKER_PORT": "tcp://10.0.0.7:9090", "RECEIPT_WORKER_SERVICE_HOST": "10.0.0.7",
                "RECEIPT_WORKER_PORT_9090_TCP_ADDR": "10.0.0.7", "RECEIPT_WORKER_LOG_LEVEL": "debug",
                "RECEIPT_WORKER_WORKER__MAX_IN_FLIGHT": "7",
            ])
        #expect(configuration.maxInFlight == 7)
    }

    @Test("a log level that does not exist stops start-up, naming the variable")
    func badLogLevel() {
        for variable in ["LOG_LEVEL", "RECEIPT_WORKER_LOG_LEVEL"] {
            let error = #expect(throws: ConfigurationError.self) {
                try load(["apple.bundle_id=b"], environment: [variable: "verbose"])
            }
            #expect(error?.key == variable)
        }
    }

    @Test("a key given twice in one file is refused with both lines; a typo gets a suggestion")
    func duplicatesAndTypos() {
        let duplicate = #expect(throws: ConfigurationError.self) {
            try load(["apple.bundle_id=a", "worker.max_in_flight=5", "apple.bundle_id=b"])
        }
        #expect(duplicate?.description.contains(":3") == true && duplicate?.description.contains("line 1") == true)
        let typo = #expect(throws: ConfigurationError.self) { try load(["apple.bundle_id=b", "apple.bundel_id=c"]) }
        #expect(typo?.description.contains("did you mean apple.bundle_id?") == true)
    }

    @Test(
        "the Kafka-only tools do not read the App Store key, the shared secret, root certificates or the ledger URL file"
    )
    func toolsNeedNoSecrets() throws {
        let lines = [
            "apple.bundle_id=b", "apple.api.key_id=K", "apple.api.issuer_id=I",
            "apple.api.private_key_file=/root-only/AuthKey.p8", "apple.shared_secret_file=/root-only/secret",
            "apple.root_certificates=/root-only/root.pem", "ledger.url_file=/root-only/ledger-url",
        ]
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tool-\(UUID()).properties").path
        try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let tool = try ConfigurationLoader.load(file: path, overrides: [], environment: [:], purpose: .tool)
        #expect(tool.defaultApp.apiPrivateKeyPEM == nil && tool.defaultApp.sharedSecret == nil)
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(file: path, overrides: [], environment: [:], purpose: .worker)
        }
    }

    @Test("a properties file with Windows line endings is read line by line")
    func windowsLineEndings() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("crlf-\(UUID()).properties").path
        try "# written on Windows\r\napple.bundle_id=com.example\r\nworker.max_in_flight=9\r\n".write(
            toFile: path, atomically: true, encoding: .utf8)
        let configuration = try ConfigurationLoader.load(file: path, overrides: [], environment: [:])
        #expect(configuration.defaultApp.bundleID == "com.example")
        #expect(configuration.maxInFlight == 9)
    }

    @Test("http:// Apple URLs only with apple.allow_insecure_urls=true")
    func insecureURLs() throws {
        let configuration = try load([
            "apple.bundle_id=b", "apple.verify_receipt.production_url=http://127.0.0.1:9/verifyReceipt",
            "apple.allow_insecure_urls=true",
        ])
        #expect(configuration.apple.verifyReceiptProductionURL.hasPrefix("http://"))
    }

    @Test("check-config --print hides a PostgreSQL password given in the URL or as a query parameter, and a TLS key's")
    func printHidesPasswords() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID()).properties").path
        let text =
            "apple.bundle_id=b\nledger.url=postgresql://worker:hunter2@db/ledger?sslmode=require&PassWord=hunter3&password%3D=x"
            + "&sslpassword=hunter4"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let printed = try ConfigurationLoader.loadWithSources(file: path, overrides: [], environment: [:])
            .propertiesText()
        #expect(
            !printed.contains("hunter2") && !printed.contains("hunter3") && !printed.contains("hunter4"), "\(printed)")
        #expect(printed.contains("# ledger.url=postgresql://worker:<set>@db/ledger?sslmode=require"))
    }

    @Test("check-config --print reads back as a configuration file to the same configuration, sources named")
    func printedConfigurationReadsBack() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID()).properties").path
        try "apple.bundle_id=com.example\nworker.max_in_flight=50\nledger.url=sqlite:/tmp/x.sqlite\n"
            .write(toFile: path, atomically: true, encoding: .utf8)
        let loaded = try ConfigurationLoader.loadWithSources(
            file: path, overrides: ["retry.max_attempts=3", "apple.shared_secret=s3cr3t"],
            environment: ["RECEIPT_WORKER_KAFKA__CLIENT__ID": "w1"])
        let printed = loaded.propertiesText()
        #expect(printed.contains("# ---- from the file \(path) ----\napple.bundle_id=com.example\n"))
        #expect(printed.contains("# ---- from the environment ----\nkafka.client.id=w1\n"))
        #expect(printed.contains("# ---- from --set ----\nretry.max_attempts=3\n"))
        #expect(printed.contains("\nretry.initial_backoff_ms=200\n"))  // a default
        #expect(printed.contains("\n# metrics.listen=  (not set)\n"))
        // The settings the worker forces are shown, for reference, commented.
        #expect(printed.contains("\n# enable.auto.commit=false\n") && printed.contains("\n# enable.idempotence=true\n"))
        #expect(!printed.contains("s3cr3t"))
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("printed-\(UUID()).properties").path
        try printed.write(toFile: copy, atomically: true, encoding: .utf8)
        let again = try ConfigurationLoader.loadWithSources(
            file: copy, overrides: ["apple.shared_secret=s3cr3t"], environment: [:])
        #expect(again.configuration.maxInFlight == 50 && again.configuration.retry.maxAttempts == 3)
        #expect(again.configuration.kafka == loaded.configuration.kafka)
        #expect(again.configuration.ledgerURL == "sqlite:/tmp/x.sqlite")
        #expect(again.configuration.defaultApp.sharedSecret == "s3cr3t")
        // Printed again, it says the same (but for where each value came from).
        let strip = { (text: String) in text.split(separator: "\n").filter { !$0.hasPrefix("#") }.sorted() }
        #expect(strip(again.propertiesText()) == strip(printed))
    }

    @Test("an error names the key's source and value (a file's line, a variable), never a secret's value")
    func errorsShowSourceAndValue() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID()).properties").path
        try "apple.bundle_id=b\n\n# comment\nworker.max_in_flight=lots\n".write(
            toFile: path, atomically: true, encoding: .utf8)
        let fromFile = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(file: path, overrides: [], environment: [:])
        }
        #expect(
            fromFile.map { "\($0)" }?.contains("worker.max_in_flight=lots (from \(path):4): must be an integer") == true
        )
        let fromVariable = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(
                file: path, overrides: ["worker.max_in_flight=5"],
                environment: ["RECEIPT_WORKER_HTTP__TIMEOUT_MS": "1 000"])
        }
        #expect(
            fromVariable.map { "\($0)" }?.contains("http.timeout_ms=\"1 000\" (from RECEIPT_WORKER_HTTP__TIMEOUT_MS)")
                == true)
        let secret = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(
                file: path, overrides: ["worker.max_in_flight=5", "ledger.url=mysql://u:pa55@db/x"], environment: [:])
        }
        #expect(secret.map { "\($0)" }?.contains("ledger.url (from --set): must start with") == true)
        #expect(secret.map { "\($0)" }?.contains("pa55") == false)
        let controls = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(
                file: path, overrides: ["worker.max_in_flight=\u{1b}[2J" + String(repeating: "9", count: 500)],
                environment: [:])
        }
        let text = controls.map { "\($0)" } ?? ""
        #expect(!text.contains("\u{1b}") && text.count < 300, "\(text)")
    }

    @Test("a secret's value never appears in an error")
    func secretsNotEchoed() throws {
        let error = #expect(throws: ConfigurationError.self) {
            try load(["apple.shared_secret=s3cr3t-value", "worker.max_in_flight=-1"])
        }
        #expect(error.map { "\($0)" }?.contains("s3cr3t-value") == false)
    }

    @Test("a missing config file stops start-up naming --config")
    func missingFile() {
        let error = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(file: "/nonexistent/worker.properties", overrides: [])
        }
        #expect(error?.key == "--config")
    }

    @Test("environment variables: RECEIPT_WORKER_ + the key in capitals, . as __; file < environment < --set")
    func environment() throws {
        #expect(ConfigurationLoader.key(forEnvironmentVariable: "RECEIPT_WORKER_APPLE__BUNDLE_ID") == "apple.bundle_id")
        #expect(
            ConfigurationLoader.environmentVariable(forKey: "kafka.bootstrap.servers")
                == "RECEIPT_WORKER_KAFKA__BOOTSTRAP__SERVERS")
        let configuration = try load(
            ["apple.bundle_id=from.file", "worker.max_in_flight=10", "retry.max_attempts=4"],
            overrides: ["retry.max_attempts=6"],
            environment: [
                "RECEIPT_WORKER_WORKER__MAX_IN_FLIGHT": "20", "RECEIPT_WORKER_KAFKA__SASL__USERNAME": "svc",
                "RECEIPT_WORKER_RETRY__MAX_ATTEMPTS": "0", "UNRELATED": "x",
            ])
        #expect(configuration.defaultApp.bundleID == "from.file")
        #expect(configuration.maxInFlight == 20)
        #expect(configuration.retry.maxAttempts == 6)  // the environment's bad 0 was overridden, so no error
        #expect(configuration.kafka["sasl.username"] == "svc")
        let error = #expect(throws: ConfigurationError.self) {
            try load(["apple.bundle_id=b"], environment: ["RECEIPT_WORKER_WORKER__MAX_INFLIGHT": "5"])
        }
        #expect(error?.code == .unknownKey)
        #expect(error?.key == "worker.max_inflight")
        #expect(error?.source == "RECEIPT_WORKER_WORKER__MAX_INFLIGHT")
        #expect(
            error?.description
                == "configuration: worker.max_inflight (from RECEIPT_WORKER_WORKER__MAX_INFLIGHT): unknown key; "
                + "did you mean worker.max_in_flight?")
    }

    @Test(
        "a secret's key mistyped, or a value of a form the check does not expect, never shows the secret in the error",
        arguments: [
            "ledger.uri=postgresql://rw:hunter2@db/ledger", "otel.header=Authorization=Bearer hunter2",
            "desk.session_key=hunter2hunter2", "ledger.url=host=db user=rw password=hunter2",
            "otel.endpoint=rw:hunter2@collector:4318",
        ])
    func secretsNotShown(line: String) throws {
        let error = #expect(throws: ConfigurationError.self) { try load(["apple.bundle_id=b", line]) }
        let text = error.map { "\($0)" } ?? ""
        #expect(!text.isEmpty && !text.contains("hunter2"), "\(text)")
    }

    @Test("secrets from files: kafka.*_file and ledger.url_file")
    func secretFiles() throws {
        let directory = FileManager.default.temporaryDirectory
        let password = directory.appendingPathComponent("sasl-\(UUID())").path
        try "p4ss\n".write(toFile: password, atomically: true, encoding: .utf8)
        let url = directory.appendingPathComponent("ledger-\(UUID())").path
        try "postgresql://worker:pw@db/ledger\n".write(toFile: url, atomically: true, encoding: .utf8)
        let configuration = try load([
            "apple.bundle_id=b", "kafka.sasl.password_file=\(password)", "ledger.url_file=\(url)",
        ])
        #expect(configuration.kafka["sasl.password"] == "p4ss")
        #expect(configuration.ledgerURL == "postgresql://worker:pw@db/ledger")
        let error = #expect(throws: ConfigurationError.self) {
            try load(["apple.bundle_id=b", "kafka.sasl.password_file=/nonexistent"])
        }
        #expect(error?.code == .unreadableFile)
        #expect(error?.key == "kafka.sasl.password_file" && error?.value == "/nonexistent")
    }

    @Test("the command-line tools need no apple.bundle_id")
    func toolPurpose() throws {
        let configuration = try ConfigurationLoader.load(
            file: nil, overrides: ["topics.jobs=j"], environment: [:], purpose: .tool)
        #expect(configuration.topics.jobs == "j")
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(file: nil, overrides: [], environment: [:])
        }
    }

    @Test("every key in config/worker.properties is known and the file is valid as shipped")
    func shippedExample() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let example = root.appendingPathComponent("config/worker.properties").path
        let configuration = try ConfigurationLoader.load(file: example, overrides: [], environment: [:])
        #expect(configuration.defaultApp.bundleID == "com.example.game")
        // Every key of the contract and the extensions appears in the example, commented or not.
        let text = try String(contentsOfFile: example, encoding: .utf8)
        for key in ConfigurationLoader.documentedKeys {
            #expect(text.contains("\(key)="), "config/worker.properties does not show \(key)")
        }
    }

    @Test("a command's or the desk's send waits at most its patience, also when the worker's own limit is 0 (for ever)")
    func peoplesTimeout() {
        #expect(WorkerAssembly.peoplesTimeout([:], patience: 20_000) == 20_000)
        #expect(WorkerAssembly.peoplesTimeout(["message.timeout.ms": "5000"], patience: 20_000) == 5_000)
        #expect(WorkerAssembly.peoplesTimeout(["message.timeout.ms": "0"], patience: 20_000) == 20_000)
        #expect(
            WorkerAssembly.peoplesTimeout(["delivery.timeout.ms": "0", "message.timeout.ms": "3000"], patience: 20_000)
                == 20_000)
        #expect(WorkerAssembly.peoplesTimeout(["delivery.timeout.ms": "900000"], patience: 20_000) == 20_000)
    }
}
