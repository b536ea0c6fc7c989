import Foundation

/// One key of the configuration: its name, its default as a properties file writes it (nil: none), and how
/// its value goes into the configuration being built. Each component declares its keys beside its checks
/// (ConfigurationKeys.swift); the loader only finds the key and calls it.
struct ConfigurationKey: Sendable {
    let name: String
    let defaultValue: String?
    let read: @Sendable (_ value: ConfigurationValue, _ draft: inout ConfigurationDraft) throws -> Void

    init(
        _ name: String, default defaultValue: String? = nil,
        _ read: @escaping @Sendable (_ value: ConfigurationValue, _ draft: inout ConfigurationDraft) throws -> Void
    ) {
        self.name = name
        self.defaultValue = defaultValue
        self.read = read
    }
}

/// What the keys build: the configuration, and what some keys leave for after every key was read (the files
/// they name, read only when the configuration's purpose needs them; the apps' settings; flags other keys'
/// checks read).
struct ConfigurationDraft {
    var configuration = WorkerConfiguration()
    let purpose: ConfigurationLoader.Purpose
    var allowInsecureURLs = false
    var rootFiles: [String]?
    var receiptRootFiles: [String]?
    var apps: [String: AppSettings] = [:]
    /// False for `check-config --no-files`: the files the keys name (Secrets, certificates) are not read, as a
    /// deployment's configuration is checked before its cluster has them.
    let readsFiles: Bool

    init(purpose: ConfigurationLoader.Purpose, readsFiles: Bool = true) {
        self.purpose = purpose
        self.readsFiles = readsFiles
    }

    /// Whether the configuration is the worker's, which reads files and needs Apple's settings; the tools
    /// need only the Kafka and topic keys (or the ledger's).
    var isWorker: Bool { purpose == .worker }

    /// Whether the files the keys name are read: the worker's, unless told not to.
    var readsWorkerFiles: Bool { isWorker && readsFiles }
}

/// A key's value with the readers of its kinds; each throws a ``ConfigurationError`` naming the key.
struct ConfigurationValue {
    /// False for `check-config --no-files`: a path is taken as written, its file not read.
    var readsFiles = true

    let key: String
    let text: String

    func integer(_ range: ClosedRange<Int>) throws -> Int {
        guard let number = Int(text), range.contains(number) else {
            throw invalid("must be an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    func milliseconds(_ range: ClosedRange<Int>) throws -> Duration { .milliseconds(try integer(range)) }

    /// A chore's interval: `0` turns it off (nil); else within `range`, refused outside it (never raised in
    /// silence: a value someone wrote is the value in effect, or start-up stops naming the key).
    func interval(_ range: ClosedRange<Int>) throws -> Duration? {
        guard let number = Int(text), number == 0 || range.contains(number) else {
            throw invalid("must be 0 (off) or an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return number == 0 ? nil : .milliseconds(number)
    }

    func boolean() throws -> Bool {
        switch text.lowercased() {
        case "true": return true
        case "false": return false
        default: throw invalid("must be true or false")
        }
    }

    func url() throws -> String {
        guard text.hasPrefix("https://") || text.hasPrefix("http://") else { throw invalid("must be an http(s) URL") }
        return text
    }

    func nonEmpty() throws -> String {
        guard !text.isEmpty else { throw invalid("must not be empty") }
        return text
    }

    /// An app's bundle id as Apple allows it: 1 to 155 of A-Z, a-z, 0-9, `-` and `.` (it is compared with
    /// Apple's, keys the ledger, and is written into the ledger's migration).
    func bundleID() throws -> String {
        let allowed = text.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-")
                || byte == UInt8(ascii: ".")
        }
        guard (1...155).contains(text.utf8.count), allowed else {
            throw invalid("must be a bundle id: 1 to 155 of A-Z, a-z, 0-9, - and .")
        }
        return text
    }

    func listenAddress() throws -> ListenAddress {
        guard let address = ListenAddress(text) else {
            throw invalid("must be host:port with an IPv4 host (0.0.0.0:9100, 127.0.0.1:9100, :9100)")
        }
        return address
    }

    /// The app's numeric Apple id.
    func appAppleID() throws -> Int64 {
        guard let id = Int64(text), id > 0 else {
            throw invalid("must be the app's numeric Apple id (a positive integer)")
        }
        return id
    }

    /// A comma-separated list of files.
    func files() -> [String] { text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }

    /// A path that must be readable now (when files are read).
    func readablePath() throws -> String {
        guard !readsFiles || FileManager.default.isReadableFile(atPath: text) else {
            throw ConfigurationError(.unreadableFile, key: key, reason: "cannot read \(text)")
        }
        return text
    }

    /// The contents of the file this value names; nil when files are not read (`check-config --no-files`), after
    /// checking that a path is given.
    func fileContents() throws -> String? {
        guard readsFiles else {
            guard !text.isEmpty else { throw invalid("must name a file") }
            return nil
        }
        return try ConfigurationValue.read(key, text)
    }

    func invalid(_ reason: String) -> ConfigurationError { ConfigurationError(.invalidValue, key: key, reason: reason) }

    static func read(_ key: String, _ path: String) throws -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ConfigurationError(.unreadableFile, key: key, reason: "cannot read \(path)")
        }
        return text
    }
}

/// A configuration problem, naming the key, with a code a caller can act on. Never repeats a secret's value.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// No such key (a suggestion may follow).
        public static let unknownKey = Code("unknown_key")
        /// The value is not of the key's kind or range.
        public static let invalidValue = Code("invalid_value")
        /// A file the key names cannot be read.
        public static let unreadableFile = Code("unreadable_file")
        /// A key that must be set is not.
        public static let missingKey = Code("missing_key")
        /// Keys that go together, or exclude each other, disagree.
        public static let conflictingKeys = Code("conflicting_keys")
        /// What the key names cannot be used: a topic missing or forbidden, an address that cannot be bound.
        public static let unusable = Code("unusable")
    }

    public let code: Code
    /// The key: `apple.bundle_id`, `kafka.acks`, `apps.puzzle.bundle_id`, or a source (`--config`).
    public let key: String
    public let reason: String
    /// The value, when it may be shown (never a secret's).
    public var value: String?
    /// Where the value came from: `worker.properties:12`, `RECEIPT_WORKER_APPLE__BUNDLE_ID`, `--set`.
    public var source: String?

    public init(_ code: Code = .invalidValue, key: String, reason: String) {
        self.code = code
        self.key = key
        self.reason = reason
    }

    public var description: String {
        "configuration: \(key)\(value.map { "=\($0)" } ?? "")\(source.map { " (from \($0))" } ?? ""): \(reason)"
    }
}
