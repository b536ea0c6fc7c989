import Foundation
import Kafka
import ReceiptWorker
import TestSupport
import Testing

/// The `receipt-worker` binary as operators and front-end engineers use it.
@Suite("Command line") struct CommandLineTests {
    @Test("every subcommand has --help with its exit codes; unknown commands and options exit 2")
    func helpAndUsage() async throws {
        let top = try await CommandLineRun.run(["--help"])
        #expect(top.status == 0)
        for command in [["run"], ["check-config"], ["enqueue"], ["results"], ["dlq", "replay"], ["ledger"]] {
            #expect(top.output.contains(command.joined(separator: " ")))
            let help = try await CommandLineRun.run(command + ["--help"])
            #expect(help.status == 0, "\(command)")
            #expect(help.output.contains("usage: receipt-worker \(command.joined(separator: " "))"))
            #expect(help.output.contains("Exit codes"))
        }
        #expect(try await CommandLineRun.run([]).status == 2)
        let unknown = try await CommandLineRun.run(["frobnicate"])
        #expect(unknown.status == 2 && unknown.errors.contains("unknown command frobnicate"))
        let badOption = try await CommandLineRun.run(["results", "--colour", "red"])
        #expect(badOption.status == 2 && badOption.errors.contains("unknown option --colour"))
        let dlq = try await CommandLineRun.run(["dlq"])
        #expect(dlq.status == 2 && dlq.errors.contains("dlq replay"))
        // A role name that is every role: the ledger's rows would be granted to anyone on the database.
        let everyone = try await CommandLineRun.run(["ledger", "migrate", "--grant-to", "public"])
        #expect(everyone.status == 2 && everyone.errors.contains("--grant-to public names no one role"))
        let dlqHelp = try await CommandLineRun.run(["dlq", "--help"])
        #expect(dlqHelp.status == 0 && dlqHelp.output.contains("usage: receipt-worker dlq replay"))
        let version = try await CommandLineRun.run(["--version"])
        #expect(version.status == 0 && version.output.hasPrefix("receipt-worker "))
        // A data error says what is wrong without burying it under the usage text.
        #expect(!badOption.errors.contains("usage:"))
        let simulator = URL(fileURLWithPath: WorkerProcess.binary).deletingLastPathComponent()
            .appendingPathComponent("appstore-sim").path
        let simulatorHelp = try await CommandLineRun.run(["--help"], executable: simulator)
        #expect(simulatorHelp.status == 0 && simulatorHelp.output.contains("/admin/faults"))
    }

    @Test(
        "an option with its value forgotten never takes the next option as its value: --ticket --dry-run runs nothing")
    func optionNotAValue() async throws {
        let run = try await CommandLineRun.run(
            [
                "player", "erase", "--user-id", "p-7", "--by", "alice", "--ticket", "--dry-run", "--set",
                "kafka.bootstrap.servers=127.0.0.1:1",
            ])
        #expect(run.status == 2, "\(run.output)\(run.errors)")
        #expect(run.errors.contains("--ticket needs a value, not the option --dry-run"))
    }

    @Test("a command whose ledger URL its ledger refuses exits 2, a configuration error, naming ledger.url")
    func ledgerURLRefused() async throws {
        let run = try await CommandLineRun.run(
            [
                "lookup", "--user-id", "p-7", "--by", "alice", "--set", "apple.bundle_id=com.example", "--set",
                "ledger.url=sqlite:/nonexistent/ledger.sqlite",
            ])
        #expect(run.status == 2, "\(run.output)\(run.errors)")
        #expect(run.errors.contains("ledger.url"))
    }

    @Test("dlq replay --reason with a reason that does not exist is a usage error, not an empty success")
    func unknownReason() async throws {
        let run = try await CommandLineRun.run(
            ["dlq", "replay", "--reason", "retries_exhaused", "--set", "kafka.bootstrap.servers=127.0.0.1:1"])
        #expect(run.status == 2)
        #expect(run.errors.contains("retries_exhaused") && run.errors.contains("retries_exhausted"))
    }

    @Test("check-config names the key of every configuration error, from the file, the environment and --set")
    func checkConfigErrors() async throws {
        let valid = try WorkerProcess.writeConfig([
            "apple.bundle_id": "com.example", "metrics.listen": "127.0.0.1:9100",
        ])
        #expect(try await CommandLineRun.run(["check-config", "--config", valid]).status == 0)

        let cases: [(arguments: [String], environment: [String: String], names: String)] = [
            (["--set", "apple.bundel_id=x"], [:], "apple.bundel_id (from --set): unknown key"),
            (
                ["--set", "worker.max_in_flight=lots"], [:],
                "worker.max_in_flight=lots (from --set): must be an integer"
            ),
            (
                ["--set", "apple.shared_secret_file=/nonexistent/secret"], [:],
                "apple.shared_secret_file=/nonexistent/secret (from --set): cannot read"
            ),
            (
                ["--set", "metrics.listen=metrics.internal:9100"], [:],
                "metrics.listen=metrics.internal:9100 (from --set): must be host:port"
            ),
            (["--set", "ledger.url=mysql://db"], [:], "ledger.url=mysql://db (from --set): must start with"),
            // What run builds, check-config builds: guarded and unknown librdkafka settings, the API key.
            (["--set", "kafka.acks=1"], [:], "kafka.acks: must be all"),
            (["--set", "kafka.enable.idempotence=false"], [:], "kafka.enable.idempotence: must be true"),
            (["--set", "kafka.enable.auto.commit=true"], [:], "kafka.enable.auto.commit: must be false"),
            (["--set", "kafka.bogus.thing=1"], [:], "kafka.bogus.thing"),
            (
                [
                    "--set", "apple.api.key_id=K", "--set", "apple.api.issuer_id=I", "--set",
                    "apple.api.private_key_file=\(valid)",
                ], [:], "apple.api.private_key_file: not a PEM elliptic-curve private key"
            ),
            (
                [], ["RECEIPT_WORKER_RETRY__MAX_ATTEMPTS": "0"],
                "retry.max_attempts=0 (from RECEIPT_WORKER_RETRY__MAX_ATTEMPTS)"
            ),
            (
                [], ["RECEIPT_WORKER_APPLE__ALLOW_SANDBOX": "yes"],
                "apple.allow_sandbox=yes (from RECEIPT_WORKER_APPLE__ALLOW_SANDBOX)"
            ),
        ]
        for (arguments, environment, names) in cases {
            let run = try await CommandLineRun.run(
                ["check-config", "--config", valid] + arguments, environment: environment)
            #expect(run.status == 2, "\(names)")
            #expect(run.errors.contains(names), "\(run.errors)")
        }
        let missing = try await CommandLineRun.run(["check-config", "--config", "/nonexistent.properties"])
        #expect(missing.status == 2 && missing.errors.contains("--config: cannot read"))
        let noBundle = try await CommandLineRun.run(["check-config"])
        #expect(noBundle.status == 2 && noBundle.errors.contains("apple.bundle_id: is required"))
        // The environment sets what the file does not; --set wins over both.
        let fromEnvironment = try await CommandLineRun.run(
            ["check-config"], environment: ["RECEIPT_WORKER_APPLE__BUNDLE_ID": "com.example"])
        #expect(fromEnvironment.status == 0)
        let overridden = try await CommandLineRun.run(
            ["check-config", "--config", valid, "--set", "retry.max_attempts=3"],
            environment: ["RECEIPT_WORKER_RETRY__MAX_ATTEMPTS": "0"])
        #expect(overridden.status == 0)
    }

    @Test(
        "check-config names every problem in one run, one line each; --no-files checks a configuration whose Secrets are not there yet"
    )
    func everyProblemAndNoFiles() async throws {
        let broken = try WorkerProcess.writeConfig([
            "apple.bundle_id": "com.example", "worker.max_in_flight": "lots", "notifications.sweep_interval_ms": "500",
            "desk.session_idle_s": "5", "kafka.sasl.password_file": "/nonexistent/password", "unknown.key": "1",
            "apple.api.key_id": "K", "apple.api.issuer_id": "I", "apple.api.private_key_file": "/nonexistent/key.p8",
        ])
        let every = try await CommandLineRun.run(["check-config", "--config", broken])
        #expect(every.status == 2)
        for named in [
            "worker.max_in_flight=lots", "notifications.sweep_interval_ms=500",
            "must be 0 (off) or an integer from 1000",
            "desk.session_idle_s=5", "kafka.sasl.password_file=/nonexistent/password", "unknown.key (from",
            "apple.api.private_key_file=/nonexistent/key.p8", "6 problem(s)",
        ] {
            #expect(every.errors.contains(named), "\(named) not named:\n\(every.errors)")
        }
        // The same without reading files: the values' own problems only.
        let unread = try await CommandLineRun.run(["check-config", "--config", broken, "--no-files"])
        #expect(unread.status == 2 && unread.errors.contains("4 problem(s)"), "\(unread.errors)")
        #expect(!unread.errors.contains("/nonexistent"), "\(unread.errors)")
        // A deployment's configuration before its Secrets exist: valid without its files, and not with them.
        let deployment = try WorkerProcess.writeConfig([
            "apple.bundle_id": "com.example", "apple.api.key_id": "K", "apple.api.issuer_id": "I",
            "apple.api.private_key_file": "/var/run/secrets/app-store-key.p8",
            "ledger.url_file": "/var/run/secrets/ledger-url", "kafka.sasl.password_file": "/var/run/secrets/kafka",
            "apple.root_certificates": "/var/run/secrets/roots.pem", "http.ca_file": "/var/run/secrets/ca.pem",
        ])
        #expect(try await CommandLineRun.run(["check-config", "--config", deployment, "--no-files"]).status == 0)
        #expect(try await CommandLineRun.run(["check-config", "--config", deployment]).status == 2)
    }

    @Test("run refuses what check-config refuses, with exit 2 (systemd does not restart into it), naming the key")
    func runExitsTwoOnKafkaSettings() async throws {
        let valid = try WorkerProcess.writeConfig(["apple.bundle_id": "com.example"])
        for (setting, names) in [
            ("kafka.acks=1", "kafka.acks: must be all"), ("kafka.bogus.thing=1", "kafka.bogus.thing"),
            ("kafka.security.protocol=bogus", "kafka.security.protocol"),
        ] {
            let run = try await CommandLineRun.run(
                ["run", "--config", valid, "--set", setting], timeout: .seconds(30))
            #expect(run.status == 2, "\(setting): \(run.errors)")
            #expect(run.errors.contains(names), "\(run.errors)")
        }
    }

    @Test("check-config --print's output is a configuration file check-config reads back, with the same values")
    func printedOutputReadsBack() async throws {
        // Longer than a 4 KiB buffer: the verdict must not land inside a line.
        let source = "game-backend-" + String(repeating: "x", count: 6_000)
        let printed = try await CommandLineRun.run(
            [
                "check-config", "--print", "--set", "apple.bundle_id=com.example", "--set", "retry.max_attempts=3",
                "--set", "events.source=\(source)",
            ],
            environment: ["RECEIPT_WORKER_WORKER__MAX_IN_FLIGHT": "250"])
        #expect(printed.status == 0, "\(printed.errors)")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("printed-\(UUID()).properties").path
        try printed.output.write(toFile: file, atomically: true, encoding: .utf8)
        let again = try await CommandLineRun.run(["check-config", "--print", "--config", file])
        #expect(again.status == 0, "\(again.errors)")
        let lines = Set(again.output.split(separator: "\n").map(String.init))
        for line in [
            "worker.max_in_flight=250", "retry.max_attempts=3", "apple.bundle_id=com.example",
            "events.source=\(source)",
        ] {
            #expect(lines.contains(line), "\(line)")
        }
    }

    @Test("check-config --print shows every key in effect, and no secret")
    func printConfiguration() async throws {
        let secretFile = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID())").path
        try "shared-s3cret-value".write(toFile: secretFile, atomically: true, encoding: .utf8)
        let run = try await CommandLineRun.run(
            [
                "check-config", "--print", "--set", "apple.bundle_id=com.example", "--set",
                "apple.shared_secret_file=\(secretFile)",
                "--set", "ledger.url=postgresql://worker:db-pa55@db/ledger", "--set", "kafka.sasl.password=kafka-pa55",
            ], environment: ["RECEIPT_WORKER_WORKER__MAX_IN_FLIGHT": "250"])
        #expect(run.status == 0, "\(run.errors)")
        let lines = Set(run.output.split(separator: "\n").map(String.init))
        #expect(lines.contains("worker.max_in_flight=250"))
        #expect(lines.contains("retry.max_attempts=8"))  // a default
        #expect(lines.contains("apple.shared_secret_file=\(secretFile)"))  // a path, not the secret
        #expect(
            lines.contains("# ledger.url=postgresql://worker:<set>@db/ledger (a secret: not printed; set it again)"))
        #expect(lines.contains("# kafka.sasl.password=<set> (a secret: not printed; set it again)"))
        for secret in ["shared-s3cret-value", "db-pa55", "kafka-pa55"] { #expect(!run.output.contains(secret)) }
    }

    @Test(
        "ledger migrate applies the missing migrations once and reports the version; --print shows the SQL; prune deletes old results; none needs Apple's keys"
    )
    func ledgerCommands() async throws {
        let url = try makePostgresDatabase()
        // Apple's key is named but unreadable: a DBA running these does not hold it.
        let common = [
            "--set", "ledger.url=\(url)", "--set", "apple.api.private_key_file=/nonexistent/key.p8", "--set",
            "apple.api.key_id=K", "--set", "apple.api.issuer_id=I", "--set", "apple.bundle_id=com.example.game",
        ]
        let first = try await CommandLineRun.run(["ledger", "migrate"] + common)
        #expect(first.status == 0, "\(first.errors)")
        // A new ledger: 1.0.0's at once, then what came since.
        #expect(first.output.contains("applied 11: the ledger of 1.0.0") && !first.output.contains("applied 10"))
        #expect(
            first.output.contains("applied 12: the support desk") && first.output.contains("applied 13: leases")
                && first.output.contains("applied 14: subscriptions whose news is overdue")
                && first.output.contains("applied 15: the facts of a notification in one statement")
                && first.output.contains("applied 16: what only releases before 1.0.0 called, dropped")
                && first.output.contains("applied 17: a grant service's answer to a refund request, received")
                && first.output.contains("applied 18: the support desk's sessions, kept in the ledger")
                && first.output.contains("applied 19: the audit by action; players erased")
                && first.output.contains("applied 20: refunds remembered before apps found by their whole key"))
        #expect(first.output.contains("ledger schema receipt_worker is at version 21"))
        // Each migration says how long it took and the longest it held a lock writers could wait behind.
        #expect(first.output.contains(" s; longest lock "))
        // As the migration Job runs it: nothing left to apply, the worker's role granted on every run.
        let role = "rw_job_\(UUID().uuidString.prefix(8).lowercased())"
        #expect(runPsql(url, "CREATE ROLE \(role) LOGIN") == 0)
        let second = try await CommandLineRun.run(["ledger", "migrate", "--grant-to", role] + common)
        #expect(second.status == 0 && !second.output.contains("applied") && second.output.contains("version 21"))
        #expect(second.output.contains("granted role \(role)"), "\(second.errors)")
        #expect(
            runPsql(
                url,
                "SELECT 1 / (CASE WHEN has_table_privilege('\(role)', 'receipt_worker.grants', 'INSERT')"
                    + " AND has_function_privilege('\(role)', 'receipt_worker.claim_write_v2(text[], text[], text[],"
                    + " text[], text[], text[], text[], integer[], text[], bigint[], double precision[], text[],"
                    + " text[], text[], text[], text[], text[], text[], text[])', 'EXECUTE')"
                    + " AND NOT has_table_privilege('\(role)', 'receipt_worker.grants', 'DELETE') THEN 1 ELSE 0 END)")
                == 0, "the worker's role may write and call, never delete a grant")
        // The operators' lookup and credit (run with the workers' configuration) append to the desk's audit, and
        // read none of it.
        let audit =
            "INSERT INTO receipt_worker.desk_audit (at, app, agent, agent_name, role, action, outcome, ticket,"
            + " request, answer) VALUES (now(), 'default', 'op', 'op', 'operator', 'lookup', 'found', '', '{}', '{}')"
            + " RETURNING id"
        #expect(runPsql(url, "SET ROLE \(role); \(audit)") == 0, "the worker's role appends to the audit")
        #expect(runPsql(url, "SET ROLE \(role); SELECT agent FROM receipt_worker.desk_audit") != 0)
        let noRole = try await CommandLineRun.run(["ledger", "migrate", "--grant-to", "no_such_role"] + common)
        #expect(noRole.status == 1 && noRole.errors.contains("no_such_role"), "\(noRole.errors)")
        let printed = try await CommandLineRun.run(
            ["ledger", "migrate", "--print", "--grant-to", "rw_app", "--set", "apple.bundle_id=com.example.game"])
        #expect(printed.status == 0)
        #expect(printed.output.contains("CREATE TABLE IF NOT EXISTS receipt_worker.grants"))
        #expect(printed.output.contains("GRANT USAGE ON SCHEMA receipt_worker TO rw_app;"))
        // Steps as they run beside traffic: transactions, concurrent index builds outside them, under the lock.
        #expect(printed.output.hasPrefix("\\set ON_ERROR_STOP on") && printed.output.contains("CONCURRENTLY"))
        #expect(printed.output.hasSuffix("SELECT pg_advisory_unlock(7261115);\n"))
        // A schema of a release before 1.0.0 stops the script before anything is made.
        #expect(printed.output.contains("RAISE EXCEPTION '%', $m$this ledger was written by a release before 1.0.0"))
        let injected = try await CommandLineRun.run(["ledger", "migrate", "--print", "--grant-to", "x; DROP TABLE y"])
        #expect(injected.status == 2)
        let badSchema = try await CommandLineRun.run(["ledger", "migrate", "--set", "ledger.schema=Public"])
        #expect(badSchema.status == 2 && badSchema.errors.contains("ledger.schema=Public (from --set)"))
        #expect(
            runPsql(
                url,
                "INSERT INTO receipt_worker.results (job_id, event, decided_at) VALUES ('old', '{}', now() - interval '9 days'), ('new', '{}', now())"
            ) == 0)
        #expect(
            runPsql(
                url,
                "INSERT INTO receipt_worker.notifications (notification_id, handled_at) VALUES ('n-old', now() - interval '300 days'), ('n-new', now())"
            ) == 0)
        let prune = try await CommandLineRun.run(["ledger", "prune", "--older-than-days", "7"] + common)
        #expect(prune.status == 0, "\(prune.errors)")
        #expect(prune.output.contains("deleted 1 stored result(s) decided more than 7 day(s) ago"))
        // The rest of the retention too, at its windows (200 days for handled notifications).
        #expect(prune.output.contains("deleted 1 notifications past retention"), "\(prune.output)")
        #expect(prune.output.contains("deleted 0 purchase_states past retention"))
        #expect(try await CommandLineRun.run(["ledger", "vacuum"]).status == 2)
    }

    @Test("a secret file's contents never appear in an error")
    func secretsStayOut() async throws {
        let secret = FileManager.default.temporaryDirectory.appendingPathComponent("password-\(UUID())").path
        try "hunter2-not-a-url".write(toFile: secret, atomically: true, encoding: .utf8)
        let run = try await CommandLineRun.run(
            ["check-config", "--set", "apple.bundle_id=com.example", "--set", "ledger.url_file=\(secret)"])
        #expect(run.status == 2 && run.errors.contains("ledger.url_file"))
        #expect(!run.errors.contains("hunter2"))
    }

    @Test(
        "enqueue submits a job the worker answers; results prints it as one line; invalid jobs are refused; neither needs the App Store key or secret"
    )
    func enqueueAndResults() async throws {
        let harness = try await WorkerHarness()
        let purchase = try await harness.purchase(["product_id": "coins_100"])
        // The on-call engineer's configuration names the worker's key and secret files, which they cannot read.
        let kafka = [
            "--set", "kafka.bootstrap.servers=\(WorkerHarness.bootstrap)", "--set",
            "topics.jobs=\(harness.topics.jobs)",
            "--set", "topics.results=\(harness.topics.results)",
            "--set", "apple.api.key_id=K", "--set", "apple.api.issuer_id=I",
            "--set", "apple.api.private_key_file=/nonexistent/AuthKey.p8",
            "--set", "apple.shared_secret_file=/nonexistent/shared-secret",
        ]
        let submitted = try await CommandLineRun.run(
            ["enqueue"] + kafka + [
                "--job-id", "cli-job-1", "--order-id", "cli-order-1", "--user-id", "p1", "--product-id", "coins_100",
                "--receipt", purchase.receipt,
            ])
        #expect(submitted.status == 0, "\(submitted.errors)")
        #expect(submitted.output.hasPrefix("enqueued cli-job-1 \(harness.topics.jobs)["))
        #expect(!submitted.output.contains(purchase.receipt) && !submitted.errors.contains(purchase.receipt))

        let results = try await CommandLineRun.run(
            ["results"] + kafka + [
                "--from-beginning", "--order-id", "cli-order-1", "--count", "1", "--timeout", "40",
            ])
        #expect(results.status == 0, "\(results.errors)")
        let lines = results.output.split(separator: "\n")
        #expect(lines.first?.hasPrefix("VERIFIED AT") == true)
        let words = lines.dropFirst().first?.split(separator: " ").map(String.init) ?? []
        #expect(Array(words.dropFirst().prefix(4)) == ["grant", "verified", "cli-order-1", "coins_100"])
        #expect(words.contains(purchase.transactionID) && words.contains("Production"))

        let invalid = try await CommandLineRun.run(
            ["enqueue"] + kafka + [
                "--order-id", "o", "--user-id", "u", "--product-id", "p", "--receipt", "x", "--quantity", "5000",
            ])
        #expect(invalid.status == 2 && invalid.errors.contains("--quantity"))
        let jobFile = FileManager.default.temporaryDirectory.appendingPathComponent("jobs-\(UUID()).jsonl").path
        try "{\"job_id\":\"a\",\"order_id\":\"o\",\"user_id\":\"u\"}\n".write(
            toFile: jobFile, atomically: true, encoding: .utf8)
        let incomplete = try await CommandLineRun.run(["enqueue"] + kafka + ["--file", jobFile])
        #expect(incomplete.status == 2 && incomplete.errors.contains("job 1"))

        // --timeout without --count: whatever arrived in that time, and success.
        let window = try await CommandLineRun.run(
            ["results"] + kafka + ["--from-beginning", "--order-id", "cli-order-1", "--timeout", "3"])
        #expect(window.status == 0, "\(window.errors)")
        #expect(window.output.contains("cli-order-1"))

        let timedOut = try await CommandLineRun.run(
            ["results"] + kafka + ["--order-id", "never", "--count", "1", "--timeout", "1"])
        #expect(timedOut.status == 1 && timedOut.errors.contains("0 of 1 events"))
        await harness.stop()
    }

    @Test(
        "dlq replay sends the matching letters back: jobs to the jobs topic, consumption answers to theirs; --dry-run sends nothing"
    )
    func deadLetterReplay() async throws {
        let suffix = UUID().uuidString.prefix(8).lowercased()
        let (dlq, jobs, consumption) = ("dlq-replay-\(suffix)", "jobs-replay-\(suffix)", "consumption-replay-\(suffix)")
        let logger = WorkerHarness.logger
        try await KafkaAdmin.createTopics(
            bootstrapServers: WorkerHarness.bootstrap, topics: [(dlq, 2), (jobs, 1), (consumption, 1)], logger: logger)
        let producer = try KafkaProducer(
            configuration: .init(bootstrapServers: WorkerHarness.bootstrap), logger: logger)
        // Letters 0-3 go back (by their source topic, or by their reason without one; 2 was a job parked on
        // the retries topic, which goes back to the jobs topic); 4 is a truncated stub and 5 came from a topic
        // this configuration does not name: listed, never replayed.
        let retries = "retries-replay-\(suffix)"
        let letters: [(reason: String, extra: [MessageHeader])] = [
            ("retries_exhausted", []), ("malformed_job", [MessageHeader(name: "dlq_source_topic", string: jobs)]),
            ("retries_exhausted", [MessageHeader(name: "dlq_source_topic", string: retries)]),
            // A policy's answer: its answered_by goes back with it (else it would come back as a grant service's).
            (
                "consumption_not_sent",
                [
                    MessageHeader(name: "answered_by", string: "policy"), MessageHeader(name: "x-other", string: "-"),
                    MessageHeader(name: "dlq_source_topic", string: consumption),
                    MessageHeader(name: "dlq_source_partition", string: "0"),
                    MessageHeader(name: "dlq_source_offset", string: "41"),
                ]
            ),
            ("retries_exhausted", [MessageHeader(name: "dlq_truncated", string: "true")]),
            ("malformed_job", [MessageHeader(name: "dlq_source_topic", string: "someone-elses-topic")]),
        ]
        for (index, letter) in letters.enumerated() {
            _ = try await producer.send(
                OutboundMessage(
                    topic: dlq, partition: Int32(index % 2), key: Array("order-\(index)".utf8),
                    value: index == 4 ? [] : Array("{\"job_id\":\"j\(index)\"}".utf8),
                    headers: [
                        MessageHeader(name: "dlq_reason", string: letter.reason),
                        MessageHeader(name: "dlq_error", string: "Apple was down"),
                    ] + letter.extra))
        }
        await producer.close()
        let kafka = [
            "--set", "kafka.bootstrap.servers=\(WorkerHarness.bootstrap)", "--set", "topics.jobs=\(jobs)", "--set",
            "topics.dlq=\(dlq)", "--set", "topics.consumption=\(consumption)", "--set", "topics.retries=\(retries)",
        ]

        let dryRun = try await CommandLineRun.run(
            ["dlq", "replay"] + kafka + ["--reason", "retries_exhausted", "--dry-run"])
        #expect(dryRun.status == 0, "\(dryRun.errors)")
        #expect(dryRun.output.contains("would replay 2 of 6 dead letters"))
        #expect(try await jobsIn(jobs).isEmpty)

        let future = try await CommandLineRun.run(["dlq", "replay"] + kafka + ["--since", "2100-01-01T00:00:00Z"])
        // Kafka's time index skips them all; Tansu answers offset 0 and the filter skips them: none is replayed.
        #expect(future.status == 0 && future.output.contains("replayed 0 of"), "\(future.output)\(future.errors)")

        let past = try await CommandLineRun.run(
            ["dlq", "replay"] + kafka + ["--since", "2000-01-01T00:00:00Z", "--dry-run"])
        // Without --reason, every letter but a refund request's answer, which is replayed only by name.
        #expect(past.status == 0 && past.output.contains("would replay 3 of 6"), "\(past.output)\(past.errors)")
        #expect(past.output.contains("consumption_not_sent") && past.output.contains("only with --reason"))
        #expect(past.output.components(separatedBy: "cannot replay").count == 3, "\(past.output)")
        #expect(past.output.contains("(truncated") && past.output.contains("someone-elses-topic"))

        let replay = try await CommandLineRun.run(["dlq", "replay"] + kafka + ["--reason", "retries_exhausted"])
        #expect(replay.status == 0, "\(replay.errors)")
        #expect(replay.output.contains("replayed 2 of 6 dead letters"))
        let replayed = try await jobsIn(jobs)
        #expect(
            Set(replayed.map { String(decoding: $0.value, as: UTF8.self) }) == [
                "{\"job_id\":\"j0\"}", "{\"job_id\":\"j2\"}",
            ])
        #expect(
            Set(replayed.compactMap { $0.key.map { String(decoding: $0, as: UTF8.self) } }) == ["order-0", "order-2"])
        #expect(replayed.allSatisfy { $0.header("dlq_replayed_from") != nil })
        #expect(try await jobsIn(consumption).isEmpty)

        let answers = try await CommandLineRun.run(["dlq", "replay"] + kafka + ["--reason", "consumption_not_sent"])
        #expect(answers.status == 0 && answers.output.contains("replayed 1 of 6"), "\(answers.errors)")
        let answer = try await jobsIn(consumption)
        #expect(answer.map { String(decoding: $0.value, as: UTF8.self) } == ["{\"job_id\":\"j3\"}"])
        #expect(answer.first?.header("answered_by")?.stringValue == "policy")
        #expect(answer.first?.header("x-other") == nil && answer.first?.header("dlq_reason") == nil)
        // Where the original was read goes back with it: a newer answer of its transaction still supersedes it.
        #expect(answer.first?.header("dlq_first_read")?.stringValue == "\(consumption)[0]@41")
        #expect(try await jobsIn(jobs).count == 2, "a consumption answer went to the jobs topic")

        let badTime = try await CommandLineRun.run(["dlq", "replay"] + kafka + ["--since", "yesterday"])
        #expect(badTime.status == 2 && badTime.errors.contains("--since"))
    }

    /// What is on `topic` (one partition), read to its end: every record the broker took before the call, as its
    /// high watermark says. None there is shown at once, not by reading for a while.
    private func jobsIn(_ topic: String) async throws -> [InboundMessage] {
        let consumer = try KafkaConsumer(
            configuration: .init(bootstrapServers: WorkerHarness.bootstrap, groupID: "check-\(UUID())"),
            logger: WorkerHarness.logger)
        _ = try await consumer.assign(topic: topic, from: .beginning)
        let end = try await consumer.watermarks(TopicPartition(topic: topic, partition: 0)).high
        var messages: [InboundMessage] = []
        if end > 0 {
            let stopper = Task {
                try? await Task.sleep(for: .seconds(30))
                consumer.endEvents()
            }
            for await event in consumer.events {
                if case .message(let message) = event { messages.append(message) }
                if let last = messages.last, last.offset >= end - 1 { break }
            }
            stopper.cancel()
        }
        await consumer.close()
        return messages
    }
}
