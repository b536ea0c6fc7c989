import Foundation
import ReceiptWorker

/// A usage error: exit code 2, with the command's help on standard error.
struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// `--name value` and `--flag` options of one subcommand. A valued option may repeat (`--set`,
/// `--reason`); `--name=value` is accepted too. No positional arguments: every value is named.
struct Options {
    private(set) var values: [String: [String]] = [:]
    private(set) var flags: Set<String> = []

    init(_ arguments: [String], valued: Set<String>, flags known: Set<String>) throws {
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            var name = argument
            var inline: String?
            if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                name = String(argument[..<equals])
                inline = String(argument[argument.index(after: equals)...])
            }
            if known.contains(name) && inline == nil {
                flags.insert(name)
            } else if valued.contains(name) {
                guard let value = inline ?? remaining.popFirst() else { throw UsageError("\(name) needs a value") }
                // `--ticket --dry-run`: the next option is no value (taken as one, the run would be for real).
                let optionName = String(value.prefix { $0 != "=" })
                if inline == nil, valued.contains(optionName) || known.contains(optionName) {
                    throw UsageError("\(name) needs a value, not the option \(optionName)")
                }
                values[name, default: []].append(value)
            } else {
                throw UsageError("unknown option \(argument)")
            }
        }
    }

    func value(_ name: String) -> String? { values[name]?.last }
    func all(_ name: String) -> [String] { values[name] ?? [] }
    func has(_ name: String) -> Bool { flags.contains(name) }

    func integer(_ name: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let text = value(name) else { return nil }
        guard let number = Int(text), range.contains(number) else {
            throw UsageError("\(name) must be an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    /// A UUID option's value (nil when absent); any other text is a usage error.
    func uuid(_ name: String) throws -> UUID? {
        guard let text = value(name) else { return nil }
        guard let uuid = UUID(uuidString: text) else { throw UsageError("\(name) must be a UUID") }
        return uuid
    }

    /// The configuration the options name: `--config FILE`, `RECEIPT_WORKER_*` variables, `--set key=value`.
    func configuration(purpose: ConfigurationLoader.Purpose) throws -> WorkerConfiguration {
        try ConfigurationLoader.load(file: value("--config"), overrides: all("--set"), purpose: purpose)
    }

    /// What a job carries as a user id or an order id, and what an operator names themselves or a request by:
    /// 1 to 128 bytes without control characters.
    static func isPlain(_ value: String) -> Bool {
        (1...128).contains(value.utf8.count)
            && !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
    }

    /// The options every subcommand takes.
    static let configurationOptions: Set<String> = ["--config", "--set"]
}
