import AppStoreSimulator
import Foundation
import TestProcess
import Testing

/// `receipt-worker run` as a real process, started from a config file the test writes.
final class WorkerProcess: Sendable {
    let pid: pid_t
    let logPath: String

    /// The binary beside the test bundle (`swift build --build-tests` builds every product).
    static var binary: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
            "receipt-worker"
        ).path
    }

    static func writeConfig(_ lines: [String: String]) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("worker-\(UUID()).properties").path
        let text =
            "# written by the end-to-end tests\n"
            + lines.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "\n")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// `environment` is added to this process's (LOG_LEVEL=debug, say).
    /// `command`: `run`, or another role of the binary (`receive`).
    init(config: String, environment: [String: String] = [:], command: String = "run") throws {
        logPath = FileManager.default.temporaryDirectory.appendingPathComponent("worker-\(UUID()).log").path
        pid = try spawnProcess(
            Self.binary, [command, "--config", config], environment: environment, output: "/dev/null", errors: logPath)
    }

    /// Sends `signal` and, for SIGTERM/SIGKILL, waits for the exit status (nil when it had to be killed).
    @discardableResult
    func stop(_ signal: Int32, timeout: Duration = .seconds(30)) async -> Int32? {
        kill(pid, signal)
        return await exitStatus(of: pid, killedAfter: timeout)
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// The partitions of `topic` the process holds now, as its log's "partitions assigned" and "partitions
    /// revoked" lines tell (`topic[N]`), whichever the group's assignment strategy.
    func partitionsHeld(of topic: String) -> Set<String> {
        var held: Set<String> = []
        for line in log.split(separator: "\n") where line.contains("\"partitions ") {
            guard let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any],
                let message = object["message"] as? String, let list = object["partitions"] as? String
            else { continue }
            let partitions = list.split(separator: ",").map(String.init).filter { $0.hasPrefix(topic + "[") }
            switch message {
            case "partitions assigned": held.formUnion(partitions)
            case "partitions revoked": held.subtract(partitions)
            default: break
            }
        }
        return held
    }
}

struct ProcessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Starts `executable` with `arguments` and this process's environment plus `environment`; standard input
/// from /dev/null, standard output and error to the files `output` and `errors`. Returns its pid.
func spawnProcess(
    _ executable: String, _ arguments: [String], environment: [String: String], output: String, errors: String
) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, errors, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    // Nothing else of this process's: the tests hold thousands of sockets at times (libcurl's are not
    // close-on-exec), and a child counts inherited descriptors against its limit (PostgreSQL refused to start
    // with 57 left of 20,000).
    _ = test_process_spawn_close_from(&actions, 3)
    var argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    let merged = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    var envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { envp.forEach { free($0) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, executable, &actions, nil, &argv, &envp)
    guard spawned == 0 else { throw ProcessError("posix_spawn \(executable): \(spawned)") }
    return pid
}

/// Waits for `pid` to exit and returns its exit code (minus the signal number when a signal ended it). Past
/// `timeout` it is killed, reaped, and the answer is nil. Polls with Task.sleep: a blocking wait would hold
/// one of the few cooperative threads every concurrent test shares.
func exitStatus(of pid: pid_t, killedAfter timeout: Duration) async -> Int32? {
    let deadline = ContinuousClock.now + timeout
    var status: Int32 = 0
    while ContinuousClock.now < deadline {
        if waitpid(pid, &status, WNOHANG) == pid {
            return (status & 0x7f) == 0 ? (status >> 8) & 0xff : -(status & 0x7f)
        }
        try? await Task.sleep(for: .milliseconds(20))
    }
    kill(pid, SIGKILL)
    waitpid(pid, &status, 0)
    return nil
}
