import Foundation

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

/// Runs one SQL statement with psql; returns its exit status.
public func runPsql(_ url: String, _ sql: String) -> Int32 {
    let arguments: [String] = ["/usr/bin/psql", url, "-qtAc", sql]
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    guard posix_spawn(&pid, "/usr/bin/psql", nil, nil, &argv, environ) == 0 else { return -1 }
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    return (status >> 8) & 0xff
}

public struct TestSupportError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
