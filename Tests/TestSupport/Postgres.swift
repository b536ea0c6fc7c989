public import Foundation

/// A fresh database on the PostgreSQL the test command started (`POSTGRES_URL`); returns its URL.
public func makePostgresDatabase() throws -> String {
    guard let base = ProcessInfo.processInfo.environment["POSTGRES_URL"] else {
        throw TestSupportError("POSTGRES_URL is not set: run the tests with scripts/test.sh, which starts PostgreSQL")
    }
    let name = "test_\(UUID().uuidString.prefix(8).lowercased())"
    guard runPsql(base, "CREATE DATABASE \(name)") == 0 else {
        throw TestSupportError("CREATE DATABASE \(name) failed")
    }
    return String(base[..<(base.lastIndex(of: "/") ?? base.endIndex)]) + "/\(name)"
}

/// Runs SQL with psql, as a script (each statement on its own unless it says BEGIN, as `psql -f` runs a DBA's
/// script: a migration's CREATE INDEX CONCURRENTLY needs that), stopping at the first error; returns its exit
/// status (0 only when every statement succeeded).
public func runPsql(_ url: String, _ sql: String) -> Int32 {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("psql-\(UUID().uuidString).sql")
    guard (try? sql.write(to: file, atomically: true, encoding: .utf8)) != nil else { return -1 }
    defer { try? FileManager.default.removeItem(at: file) }
    return runAndWait(["/usr/bin/psql", url, "-qtA", "-v", "ON_ERROR_STOP=1", "-f", file.path])
}

/// Starts `arguments[0]` (a path) with the rest as its arguments, with posix_spawn: unlike Foundation's Process,
/// waiting for it never depends on a run loop or on a pipe that a daemon it starts keeps open (and its `run` reads
/// past a heap buffer of its own, where the address sanitizer stops the tests). Nil when it cannot start. The child
/// inherits the calling thread's blocked signals (in Swift's pool, SIGTERM among them), and `actions`' redirections.
public func spawn(_ arguments: [String], _ actions: UnsafePointer<posix_spawn_file_actions_t>? = nil) -> pid_t? {
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    guard posix_spawn(&pid, arguments[0], actions, nil, &argv, environ) == 0 else { return nil }
    return pid
}

/// Waits for `pid` to end; its exit status, or 128 plus the signal that ended it, as a shell reports it.
public func exitStatus(waitingFor pid: pid_t) -> Int32 {
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + status & 0x7f
}

/// Runs `arguments` as ``spawn(_:_:)`` does and waits for it; returns its exit status (-1 when it cannot start).
public func runAndWait(_ arguments: [String]) -> Int32 {
    guard let pid = spawn(arguments) else { return -1 }
    return exitStatus(waitingFor: pid)
}

/// Runs `arguments` as ``runAndWait(_:)`` does, its standard output to a file read once it exits (its standard
/// error discarded when `quietly`): its exit status (-1 when it cannot start) and what it wrote.
public func runAndRead(_ arguments: [String], quietly: Bool = false) -> (status: Int32, output: Data) {
    let output = FileManager.default.temporaryDirectory.appendingPathComponent("run-\(UUID().uuidString).out")
    defer { try? FileManager.default.removeItem(at: output) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, output.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    if quietly { posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0) }
    guard let pid = spawn(arguments, &actions) else { return (-1, Data()) }
    let status = exitStatus(waitingFor: pid)
    return (status, (try? Data(contentsOf: output)) ?? Data())
}

public struct TestSupportError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The first column of the first row `sql` returns on `url` (psql's unaligned output), nil when psql fails.
public func psqlValue(_ url: String, _ sql: String) -> String? { psqlLines(url, sql)?.first }

/// Every row's first column `sql` returns on `url`, nil when psql fails.
public func psqlLines(_ url: String, _ sql: String) -> [String]? {
    let (status, output) = runAndRead(
        ["/usr/bin/psql", url, "-qtAX", "-v", "ON_ERROR_STOP=1", "-c", sql], quietly: true)
    guard status == 0 else { return nil }
    return String(decoding: output, as: UTF8.self).split(separator: "\n").map(String.init)
}
