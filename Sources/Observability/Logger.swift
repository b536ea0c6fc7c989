import Foundation
import Synchronization
import Vocabulary

/// A structured logger: one JSON object per line on standard error.
///
/// Fields are plain strings chosen by the caller. Never pass a receipt, a token, a key or a shared
/// secret as a field: nothing here can tell them apart from other strings.
public struct Logger: Sendable {
    /// Severity, in increasing order.
    public enum Level: Int, Sendable, Comparable, CaseIterable {
        case trace, debug, info, notice, warning, error, critical

        public var name: String { String(describing: self) }

        public init?(name: String) {
            guard let level = Level.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
            self = level
        }

        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// The component that logs, written as `"logger"` on every line.
    public let label: String
    /// Lines below this level are dropped before any formatting work.
    public var minimumLevel: Level
    private let sink: LogSink

    public init(label: String, minimumLevel: Level = Logger.defaultLevel, sink: LogSink = .standardError) {
        self.label = label
        self.minimumLevel = minimumLevel
        self.sink = sink
    }

    /// The level new loggers start with: `RECEIPT_WORKER_LOG_LEVEL` or `LOG_LEVEL` from the environment
    /// (the first wins), else `info`. An invalid value is refused at start-up by the configuration loader.
    public static var defaultLevel: Level {
        let environment = ProcessInfo.processInfo.environment
        return (environment["RECEIPT_WORKER_LOG_LEVEL"] ?? environment["LOG_LEVEL"]).flatMap(Level.init(name:)) ?? .info
    }

    /// The message and the fields are built only when the level is logged: a disabled debug line on a
    /// hot path costs a comparison (a field such as "\(outcome)" formatted eagerly once cost 12 % of the
    /// worker's CPU through reflection).
    public func log(
        _ level: Level, _ message: @autoclosure () -> String, _ fields: @autoclosure () -> [String: String] = [:]
    ) {
        guard level >= minimumLevel else { return }
        sink.write(Self.format(level: level, label: label, message: message(), fields: fields()))
    }

    public func trace(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> [String: String] = [:]) {
        log(.trace, message(), fields())
    }
    public func debug(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> [String: String] = [:]) {
        log(.debug, message(), fields())
    }
    public func info(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> [String: String] = [:]) {
        log(.info, message(), fields())
    }
    public func notice(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> [String: String] = [:]) {
        log(.notice, message(), fields())
    }
    public func warning(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> [String: String] = [:]) {
        log(.warning, message(), fields())
    }
    public func error(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> [String: String] = [:]) {
        log(.error, message(), fields())
    }
    public func critical(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> [String: String] = [:]) {
        log(.critical, message(), fields())
    }

    static func format(level: Level, label: String, message: String, fields: [String: String]) -> String {
        var line = "{\"time\":\"\(RFC3339.format(Date()))\",\"level\":\"\(level.name)\","
        line += "\"logger\":\(JSONString.quote(label)),\"message\":\(JSONString.quote(message))"
        for key in fields.keys.sorted() {
            line += ",\(JSONString.quote(key)):\(JSONString.quote(fields[key] ?? ""))"
        }
        line += "}\n"
        return line
    }
}

/// Where log lines go. A value type around a locked writer, so tests can capture lines.
public struct LogSink: Sendable {
    private let writeLine: @Sendable (String) -> Void

    public init(_ writeLine: @escaping @Sendable (String) -> Void) {
        self.writeLine = writeLine
    }

    func write(_ line: String) { writeLine(line) }

    /// Standard error, one whole line per write so lines from threads never interleave.
    public static let standardError: LogSink = {
        let lock = Mutex(())
        return LogSink { line in
            lock.withLock { _ in
                var line = line
                line.withUTF8 { bytes in
                    var offset = 0
                    while offset < bytes.count {
                        let written = Foundation.write(2, bytes.baseAddress! + offset, bytes.count - offset)
                        if written <= 0 { return }
                        offset += written
                    }
                }
            }
        }
    }()
}
