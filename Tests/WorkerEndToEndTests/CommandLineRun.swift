import Foundation

/// One run of the `receipt-worker` binary with its exit status and output.
struct CommandLineRun: Sendable {
    let status: Int32
    let output: String
    let errors: String

    /// Runs `receipt-worker ARGUMENTS` (or another `executable`) with `environment` added to this
    /// process's, and waits for it (up to `timeout`, then it is killed and the status is -9).
    static func run(
        _ arguments: [String], executable: String = WorkerProcess.binary, environment: [String: String] = [:],
        timeout: Duration = .seconds(60)
    ) async throws -> CommandLineRun {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cli-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let (out, err) = (directory.appendingPathComponent("out").path, directory.appendingPathComponent("err").path)
        let pid = try spawnProcess(executable, arguments, environment: environment, output: out, errors: err)
        let status = await exitStatus(of: pid, killedAfter: timeout) ?? -9
        let read = { (path: String) in (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
        let run = CommandLineRun(status: status, output: read(out), errors: read(err))
        try? FileManager.default.removeItem(at: directory)
        return run
    }
}
