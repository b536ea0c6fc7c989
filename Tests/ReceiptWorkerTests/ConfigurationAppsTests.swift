import Foundation
import Testing

@testable import ReceiptWorker
import Flows
import Messaging

/// `apps.NAME.*` (docs/contract.md section 10): more apps beside the default app of `apple.*`.
@Suite("Configuration of many apps")
struct ConfigurationAppsTests {
    static let keyFile = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("AppleClientTests/testSigningKey.p8").path

    func load(_ lines: [String], environment: [String: String] = [:]) throws -> WorkerConfiguration {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("apps-\(UUID()).properties").path
        try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return try ConfigurationLoader.load(file: path, overrides: [], environment: environment)
    }

    func error(_ lines: [String], environment: [String: String] = [:]) -> ConfigurationError? {
        do {
            _ = try load(lines, environment: environment)
            return nil
        } catch {
            return error as? ConfigurationError
        }
    }

    @Test(
        "two more apps: each its bundle id, app id, sandbox policy and secret; the API key is the default app's unless its own"
    )
    func twoApps() throws {
        let secret = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID())").path
        try "from-a-file\n".write(toFile: secret, atomically: true, encoding: .utf8)
        let configuration = try load(
            [
                "apple.bundle_id=com.example.game", "apple.api.key_id=K1", "apple.api.issuer_id=I1",
                "apple.api.private_key_file=\(Self.keyFile)",
                "apps.puzzle.bundle_id=com.example.puzzle", "apps.puzzle.app_apple_id=42",
                "apps.puzzle.allow_sandbox=TRUE", "apps.puzzle.shared_secret_file=\(secret)",
                "apps.racing.bundle_id=com.example.racing", "apps.racing.api.key_id=K2",
                "apps.racing.api.issuer_id=I2", "apps.racing.api.private_key_file=\(Self.keyFile)",
            ],
            environment: ["RECEIPT_WORKER_APPS__RACING__SHARED_SECRET": "racing-secret"])
        let apps = configuration.allApps
        #expect(apps.map(\.name) == ["default", "puzzle", "racing"])
        #expect(apps.map(\.bundleID) == ["com.example.game", "com.example.puzzle", "com.example.racing"])
        #expect(apps[1].appAppleID == 42 && apps[1].allowSandbox && apps[1].sharedSecret == "from-a-file")
        #expect(apps[1].apiKeyID == "K1" && apps[1].apiIssuerID == "I1", "no key of its own: the default app's")
        #expect(apps[2].apiKeyID == "K2" && apps[2].sharedSecret == "racing-secret" && !apps[2].allowSandbox)
        #expect(apps[0].sharedSecret == nil, "shared secrets are per app: the default app has none here")
        // Every app's verifiers build (the key, the roots) as `run` builds them.
        try WorkerAssembly.validate(configuration)
    }

    @Test(
        "every app is checked, its errors name the app's key",
        arguments: [
            (["apps.puzzle.app_apple_id=42"], "apps.puzzle.bundle_id", "is required"),
            (
                ["apps.puzzle.bundle_id=com.example.game"], "apps.puzzle.bundle_id",
                "already the bundle id of the default app"
            ),
            (
                ["apps.a.bundle_id=com.example.x", "apps.b.bundle_id=com.example.x"], "apps.b.bundle_id",
                "already the bundle id of app a"
            ),
            (["apps.Puzzle.bundle_id=x"], "apps.Puzzle.bundle_id", "1 to 32 of a-z"),
            // The default app's keys spelled apps.default.*: one key with apple.*, named as apple.* in errors.
            (["apps.default.bundle_id=x"], FileManager.default.temporaryDirectory.path, "is already set at line 1"),
            (["apps.default.allow_sandbox=yes"], "apple.allow_sandbox", "true or false"),
            (["apps.puzzle.bundle_id=com.example\\puzzle"], "apps.puzzle.bundle_id", "must be a bundle id"),
            (["apps.notifications.bundle_id=x"], "apps.notifications.bundle_id", "another name"),
            (["apps.consumption.bundle_id=x"], "apps.consumption.bundle_id", "another name"),
            (["apps.puzzle.bundel_id=x"], "apps.puzzle.bundel_id", "did you mean apps.puzzle.bundle_id?"),
            (["apps.puzzle=x"], "apps.puzzle", "apps.NAME.FIELD"),
            (["apps.puzzle.bundle_id=x", "apps.puzzle.app_apple_id=-1"], "apps.puzzle.app_apple_id", "positive"),
            (
                ["apps.puzzle.bundle_id=x", "apps.puzzle.allow_sandbox=yes"], "apps.puzzle.allow_sandbox",
                "true or false"
            ),
            (["apps.puzzle.bundle_id=x", "apps.puzzle.api.key_id=K"], "apps.puzzle.api.key_id", "go together"),
            (
                ["apps.puzzle.bundle_id=x", "apps.puzzle.shared_secret_file=/no/such/file"],
                "apps.puzzle.shared_secret_file", "cannot read"
            ),
            (["kafka.bootstrap.servers="], "kafka.bootstrap.servers", "must not be empty"),
            (["kafka.group.id="], "kafka.group.id", "must not be empty"),
            (
                ["apple.app_apple_id=1", "notifications.listen=:8090", "apps.puzzle.bundle_id=x"],
                "apps.puzzle.app_apple_id", "required with notifications.listen"
            ),
        ])
    func errors(lines: [String], key: String, reason: String) {
        let error = error(["apple.bundle_id=com.example.game"] + lines)
        #expect(error?.key.hasPrefix(key) == true, "\(String(describing: error))")
        #expect(error?.reason.contains(reason) == true, "\(String(describing: error))")
    }

    @Test("an empty secret file stops start-up, naming its key: every call to Apple would send an empty secret")
    func emptySecretFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("empty-secret-\(UUID().uuidString)")
            .path
        #expect(FileManager.default.createFile(atPath: path, contents: Data("\n".utf8)))
        defer { try? FileManager.default.removeItem(atPath: path) }
        for key in ["apple.shared_secret_file", "apps.puzzle.shared_secret_file"] {
            let error = error(["apple.bundle_id=com.example.game", "apps.puzzle.bundle_id=x", "\(key)=\(path)"])
            #expect(error?.key == key && error?.reason.contains("is empty") == true, "\(String(describing: error))")
        }
    }

    @Test(
        "the default app is configured as every app: apps.default.* is apple.*, the later source winning across the two"
    )
    func defaultAppSpelledAsAnApp() throws {
        let configuration = try load(
            [
                "apps.default.bundle_id=com.example.game", "apps.default.allow_sandbox=true",
                "apps.default.consumption.policy=decline", "apps.default.consumption.terms_carry_consent=true",
                "apps.puzzle.bundle_id=com.example.puzzle",
            ],
            environment: [
                "RECEIPT_WORKER_APPLE__ALLOW_SANDBOX": "false", "RECEIPT_WORKER_APPS__DEFAULT__APP_APPLE_ID": "7",
            ])
        #expect(configuration.defaultApp.bundleID == "com.example.game")
        #expect(!configuration.defaultApp.allowSandbox, "the environment's apple.allow_sandbox wins over the file's")
        #expect(configuration.defaultApp.appAppleID == 7)
        #expect(configuration.defaultApp.consumptionPolicy.answer == .decline)
        #expect(configuration.allApps.map(\.name) == ["default", "puzzle"])
        let spelledAsBefore = try load([
            "apple.bundle_id=com.example.game", "apple.allow_sandbox=true", "apple.consumption.policy=decline",
            "apple.consumption.terms_carry_consent=true", "apps.puzzle.bundle_id=com.example.puzzle",
            "apple.app_apple_id=7",
        ])
        #expect(
            spelledAsBefore.allApps
                == configuration.allApps.map { app in
                    var app = app
                    if app.name == "default" { app.allowSandbox = true }
                    return app
                })
    }

    @Test("the environment or --set naming one key by both its spellings is refused: which one won would be chance")
    func twoSpellingsInOneSource() {
        let environment = [
            "RECEIPT_WORKER_APPLE__ALLOW_SANDBOX": "true", "RECEIPT_WORKER_APPS__DEFAULT__ALLOW_SANDBOX": "false",
        ]
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(
                file: nil, overrides: ["apple.bundle_id=com.example.game"], environment: environment)
        }
        do {
            _ = try ConfigurationLoader.load(
                file: nil,
                overrides: ["apple.bundle_id=com.example.game", "apps.default.bundle_id=com.example.other"],
                environment: [:])
            Issue.record("two spellings in --set were taken")
        } catch let error as ConfigurationError {
            #expect(error.key == "apps.default.bundle_id" && error.reason.contains("apple.bundle_id"), "\(error)")
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test("an app's API key that is not a PEM EC key fails check-config naming that app's key")
    func badAppKey() throws {
        let notAKey = FileManager.default.temporaryDirectory.appendingPathComponent("key-\(UUID()).p8").path
        try "not a key".write(toFile: notAKey, atomically: true, encoding: .utf8)
        let configuration = try load([
            "apple.bundle_id=com.example.game", "apps.racing.bundle_id=com.example.racing",
            "apps.racing.api.key_id=K2", "apps.racing.api.issuer_id=I2", "apps.racing.api.private_key_file=\(notAKey)",
        ])
        #expect(throws: ConfigurationError.self) { try WorkerAssembly.validate(configuration) }
        do {
            try WorkerAssembly.validate(configuration)
        } catch let error as ConfigurationError {
            #expect(error.key == "apps.racing.api.private_key_file")
        }
    }

    @Test("check-config --print lists each app's keys, its secret as <set>, and reads back")
    func printed() throws {
        let loaded = try ConfigurationLoader.loadWithSources(
            file: nil,
            overrides: [
                "apple.bundle_id=com.example.game", "apps.puzzle.bundle_id=com.example.puzzle",
                "apps.puzzle.shared_secret=puzzle-s3cr3t",
            ], environment: [:])
        let printed = loaded.propertiesText()
        #expect(printed.contains("\napps.puzzle.bundle_id=com.example.puzzle\n"))
        #expect(printed.contains("# apps.puzzle.shared_secret=<set> (a secret: not printed; set it again)"))
        #expect(!printed.contains("puzzle-s3cr3t"))
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("printed-\(UUID()).properties").path
        try printed.write(toFile: copy, atomically: true, encoding: .utf8)
        let again = try ConfigurationLoader.load(file: copy, overrides: [], environment: [:])
        #expect(again.apps.map(\.bundleID) == ["com.example.game", "com.example.puzzle"])
    }

    @Test("the tools read no app's files: enqueue and results need neither its key nor its secret")
    func toolsReadNoAppFiles() throws {
        let configuration = try ConfigurationLoader.load(
            file: nil,
            overrides: [
                "apps.puzzle.bundle_id=com.example.puzzle", "apps.puzzle.shared_secret_file=/root/unreadable",
                "apps.puzzle.api.key_id=K", "apps.puzzle.api.issuer_id=I",
                "apps.puzzle.api.private_key_file=/root/no.p8",
            ], environment: [:], purpose: .tool)
        #expect(configuration.apps.map(\.name) == ["default", "puzzle"])
        #expect(configuration.apps.allSatisfy { $0.apiPrivateKeyPEM == nil && $0.sharedSecret == nil })
    }

    @Test("a mistyped key's value is never shown: it may be a secret (apps.x.sharedsecret)")
    func mistypedSecret() {
        let error = error(["apple.bundle_id=com.example.game", "apps.puzzle.sharedsecret=hunter2"])
        #expect(error?.reason.hasPrefix("unknown key") == true)
        #expect(error.map { !"\($0)".contains("hunter2") } == true, "\(String(describing: error))")
    }
}
