import Flows
import Foundation
import Observability

/// The keys of one app, `apps.NAME.FIELD` (docs/contract.md, sections 7 and 10), as read before the files they
/// name are read and the whole is checked. Every app is configured this one way; the default app is the app
/// named `default`, whose keys are also spelled `apple.FIELD` (`apple.bundle_id` is `apps.default.bundle_id`,
/// the spelling of every release before, and the one errors and `check-config --print` use).
struct AppSettings: Sendable {
    /// FIELD, after `apps.NAME.` (or the default app's `apple.`).
    static let fields = [
        "bundle_id", "app_apple_id", "allow_sandbox", "shared_secret", "shared_secret_file", "api.key_id",
        "api.issuer_id", "api.private_key_file", "consumption.policy", "consumption.margin_ms",
        "consumption.terms_carry_consent",
    ]

    /// What a field is when not set, as a properties file writes it, from ``WorkerConfiguration/App``'s own
    /// defaults (the other fields have none).
    static let defaults: [String: String] = {
        let app = WorkerConfiguration.App(name: WorkerConfiguration.App.defaultName)
        return [
            "allow_sandbox": String(app.allowSandbox), "consumption.policy": app.consumptionPolicy.answer.rawValue,
            "consumption.margin_ms": String(app.consumptionPolicy.margin.milliseconds),
            "consumption.terms_carry_consent": String(app.consumptionPolicy.termsCarryConsent),
        ]
    }()

    /// Names an app may not have: the groups of the flows beside the jobs.
    static let reservedNames: Set<String> = [FlowGroup.notifications, FlowGroup.consumption]

    var settings: [String: String] = [:]

    /// The default app's keys as `ConfigurationKeys` lists them (`apple.FIELD`), read as the app's.
    static let defaultAppKeys: [ConfigurationKey] = fields.map { field in
        ConfigurationKey("apple.\(field)", default: defaults[field]) { value, draft in
            try set(field, of: WorkerConfiguration.App.defaultName, value, &draft)
        }
    }

    /// The prefix of an app's keys as errors name them.
    static func prefix(of name: String) -> String {
        name == WorkerConfiguration.App.defaultName ? "apple." : "apps.\(name)."
    }

    /// `apps.default.FIELD`, written as the default app's `apple.FIELD`: one key however it was spelled, so the
    /// later of two sources wins across the two spellings.
    static func canonical(_ key: String) -> String {
        let alias = "apps.\(WorkerConfiguration.App.defaultName)."
        guard key.hasPrefix(alias), fields.contains(String(key.dropFirst(alias.count))) else { return key }
        return "apple." + key.dropFirst(alias.count)
    }

    /// `apps.NAME.FIELD=value`: NAME checked, FIELD known, the value of the right kind. False for a key that
    /// is not under `apps.`.
    static func read(_ value: ConfigurationValue, _ draft: inout ConfigurationDraft) throws -> Bool {
        let key = value.key
        guard key.hasPrefix("apps.") else { return false }
        let rest = key.dropFirst("apps.".count)
        guard let dot = rest.firstIndex(of: ".") else {
            throw ConfigurationError(
                .unknownKey, key: key,
                reason: "unknown key: apps.NAME.FIELD, FIELD one of \(fields.joined(separator: ", "))")
        }
        let name = String(rest[..<dot])
        let field = String(rest[rest.index(after: dot)...])
        guard !name.isEmpty, name.count <= 32,
            name.utf8.allSatisfy({ byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
            })
        else { throw value.invalid("the app's name must be 1 to 32 of a-z, 0-9 and _") }
        // The other flows' budgets and metric series have these names: an app of that name would share them.
        guard !reservedNames.contains(name) else {
            throw value.invalid("\(name) names the \(name) flow's budget and metrics: give this app another name")
        }
        guard fields.contains(field) else {
            let near = fields.map { "apps.\(name).\($0)" }.map { ($0, ConfigurationLoader.editDistance(key, $0)) }
                .min { $0.1 < $1.1 }
            let hint = near.flatMap { $0.1 <= 2 ? "; did you mean \($0.0)?" : nil } ?? ""
            throw ConfigurationError(.unknownKey, key: key, reason: "unknown key" + hint)
        }
        try set(field, of: name, value, &draft)
        return true
    }

    /// One field of the app `name`, its value checked.
    static func set(_ field: String, of name: String, _ value: ConfigurationValue, _ draft: inout ConfigurationDraft)
        throws
    {
        switch field {
        case "bundle_id": _ = try value.bundleID()
        case "api.key_id", "api.issuer_id": _ = try value.nonEmpty()
        case "allow_sandbox": _ = try value.boolean()
        case "app_apple_id": _ = try value.appAppleID()
        case "consumption.policy": _ = try ConfigurationKeys.consumptionAnswer(value)
        case "consumption.margin_ms": _ = try ConfigurationKeys.consumptionMargin(value)
        case "consumption.terms_carry_consent": _ = try value.boolean()
        default: break
        }
        draft.apps[name, default: AppSettings()].settings[field] =
            field == "allow_sandbox" || field == "consumption.terms_carry_consent"
            ? value.text.lowercased() : value.text
    }

    /// The app NAME as configured; its files read for the worker.
    func app(name: String, isWorker: Bool, readsFiles: Bool = true) throws -> WorkerConfiguration.App {
        var app = WorkerConfiguration.App(name: name)
        let prefix = Self.prefix(of: name)
        app.bundleID = settings["bundle_id"] ?? ""
        guard !app.bundleID.isEmpty || !isWorker else {
            throw ConfigurationError(.missingKey, key: prefix + "bundle_id", reason: "is required for every app")
        }
        app.appAppleID = try settings["app_apple_id"].map {
            try ConfigurationValue(key: prefix + "app_apple_id", text: $0).appAppleID()
        }
        app.allowSandbox = settings["allow_sandbox"] == "true"
        app.sharedSecret = settings["shared_secret"].flatMap { $0.isEmpty ? nil : $0 }
        if let answer = settings["consumption.policy"] {
            app.consumptionPolicy.answer = try ConfigurationKeys.consumptionAnswer(
                ConfigurationValue(key: prefix + "consumption.policy", text: answer))
        }
        if let margin = settings["consumption.margin_ms"] {
            app.consumptionPolicy.margin = try ConfigurationKeys.consumptionMargin(
                ConfigurationValue(key: prefix + "consumption.margin_ms", text: margin))
        }
        app.consumptionPolicy.termsCarryConsent = settings["consumption.terms_carry_consent"]?.lowercased() == "true"
        app.apiKeyID = settings["api.key_id"]
        app.apiIssuerID = settings["api.issuer_id"]
        let given = [app.apiKeyID != nil, app.apiIssuerID != nil, settings["api.private_key_file"] != nil]
        if given.contains(true) && given.contains(false) {
            throw ConfigurationError(
                .conflictingKeys, key: prefix + "api.key_id",
                reason: "\(prefix)api.key_id, \(prefix)api.issuer_id and \(prefix)api.private_key_file go together")
        }
        guard isWorker, readsFiles else { return app }
        // Files are read only by the worker: the tools never call Apple.
        if let path = settings["shared_secret_file"] {
            let secret = try ConfigurationValue.read(prefix + "shared_secret_file", path)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            // An empty file is a mount gone wrong, not "no secret": every call to Apple would send an empty one.
            guard !secret.isEmpty else {
                throw ConfigurationError(key: prefix + "shared_secret_file", reason: "the file \(path) is empty")
            }
            app.sharedSecret = secret
        }
        if let path = settings["api.private_key_file"] {
            app.apiPrivateKeyPEM = try ConfigurationValue.read(prefix + "api.private_key_file", path)
        }
        return app
    }

    /// Every app built, the default first, then the others in name order; each app's bundle id its own, and
    /// each able to take notifications when the receiver listens.
    static func checkAll(_ draft: inout ConfigurationDraft) throws {
        let isWorker = draft.isWorker
        let defaultName = WorkerConfiguration.App.defaultName
        let others = draft.apps.keys.filter { $0 != defaultName }.sorted()
        draft.configuration.apps = try ([defaultName] + others).map { name in
            try draft.apps[name, default: AppSettings()].app(
                name: name, isWorker: isWorker, readsFiles: draft.readsFiles)
        }
        guard isWorker else { return }
        let configuration = draft.configuration
        var owners: [[UInt8]: String] = [:]
        for app in configuration.apps {
            let prefix = prefix(of: app.name)
            if let owner = owners[Array(app.bundleID.utf8)] {
                throw ConfigurationError(
                    .conflictingKeys, key: prefix + "bundle_id",
                    reason: "\(app.bundleID) is already the bundle id of \(owner)")
            }
            owners[Array(app.bundleID.utf8)] =
                app.name == defaultName ? "the default app (apple.bundle_id)" : "app \(app.name)"
            if configuration.notificationsListen != nil && app.appAppleID == nil {
                throw ConfigurationError(
                    .missingKey, key: prefix + "app_apple_id",
                    reason: "is required with notifications.listen: Production notifications must name this app")
            }
        }
    }
}
