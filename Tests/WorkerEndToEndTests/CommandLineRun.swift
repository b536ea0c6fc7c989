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
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let binary = executable
        var argv: [UnsafeMutablePointer<CChar>?] = ([binary] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let merged = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        var envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, binary, &actions, nil, &argv, &envp)
        guard spawned == 0 else { throw ProcessError("posix_spawn receipt-worker: \(spawned)") }
        let deadline = ContinuousClock.now + timeout
        var status: Int32 = 0
        var exitStatus: Int32 = -9
        while true {
            if waitpid(pid, &status, WNOHANG) == pid {
                exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : -(status & 0x7f)
                break
            }
            if ContinuousClock.now > deadline {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                break
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        let read = { (path: String) in (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
        let run = CommandLineRun(status: exitStatus, output: read(out), errors: read(err))
        try? FileManager.default.removeItem(at: directory)
        return run
    }
}
