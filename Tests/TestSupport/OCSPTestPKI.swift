public import Foundation
import Synchronization

/// A throwaway PKI shaped like Apple's signing chain (Tests/ocsp/make-pki.sh: a root, an intermediate whose OCSP
/// responder the root runs, leaves `good`, `revoked`, `unknown`, `unreachable`, `slow`, `forged`), and the real
/// responders serving it: `openssl ocsp` for the intermediate and the leaves, a server that takes connections and
/// never answers for `slow`, one signing with a key nobody authorised for `forged`; nothing listens for
/// `unreachable`. Each responder can start late and stop early (a responder down, then back). Everything stops,
/// and the files go, with the value.
public final class OCSPTestPKI: Sendable {
    public enum Responder: Sendable, CaseIterable {
        /// The intermediate's (run by the root).
        case root
        /// `good`'s, `revoked`'s and `unknown`'s (run by the intermediate).
        case leaf
        /// `slow`'s: takes connections, never answers.
        case silent
        /// `forged`'s: answers signed by a key nobody authorised.
        case forged
    }

    public let directory: String
    private let ports: [Responder: UInt16]
    private let running = Mutex<[Responder: pid_t]>([:])

    /// Made off Swift's thread pool: the PKI's openssl runs and the waits for the servers block a thread for seconds
    /// on a busy machine, which the pool's two threads cannot spare for the tests beside. `responders`: started now.
    public static func make(starting responders: [Responder] = Responder.allCases) async throws -> OCSPTestPKI {
        try await offPool {
            // A port is checked free when chosen, below the range the kernel gives connections, but another test's
            // server could still take it first: its responder then exits at once, and the PKI is made again.
            var attempt = 1
            while true {
                let pki = try OCSPTestPKI()
                do {
                    for responder in responders { try pki.startBlocking(responder) }
                    return pki
                } catch is ResponderExited where attempt < 3 {
                    attempt += 1
                }
            }
        }
    }

    /// A responder that ended before it listened, with what it wrote.
    struct ResponderExited: Error, CustomStringConvertible {
        let description: String
    }

    private init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ocsp-\(UUID())").path
        let chosen = try (0..<5).map { _ in try freePortBelowEphemeralRange() }
        // make-pki.sh's order: ROOT_PORT LEAF_PORT DEAD_PORT SLOW_PORT FORGED_PORT (nothing listens on DEAD_PORT).
        ports = [.root: chosen[0], .leaf: chosen[1], .silent: chosen[3], .forged: chosen[4]]
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../ocsp/make-pki.sh").standardized.path
        let made = runAndWait(["/bin/bash", script, directory] + chosen.map(String.init))
        guard made == 0 else { throw TestSupportError("make-pki.sh exited \(made)") }
    }

    deinit {
        let pids = running.withLock { Array($0.values) }
        for pid in pids { kill(pid, SIGKILL) }
        for pid in pids { waitpid(pid, nil, 0) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    public func file(_ name: String) -> String { "\(directory)/\(name)" }
    public func data(_ name: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: file(name))) }

    /// `leaf`'s PEM chain as x5c lists it: the leaf, the intermediate, the root.
    public func chainPEM(of leaf: String) throws -> String {
        try ["\(leaf).pem", "intermediate.pem", "root.pem"].map {
            try String(contentsOfFile: file($0), encoding: .utf8)
        }.joined()
    }

    /// Starts `responder` and returns once it listens.
    public func start(_ responder: Responder) async throws {
        try await Self.offPool { try self.startBlocking(responder) }
    }

    /// Stops `responder` (a responder down): the ports of its certificates answer nothing.
    public func stop(_ responder: Responder) {
        guard let pid = running.withLock({ $0.removeValue(forKey: responder) }) else { return }
        kill(pid, SIGKILL)
        waitpid(pid, nil, 0)
    }

    private func startBlocking(_ responder: Responder) throws {
        guard let port = ports[responder], running.withLock({ $0[responder] }) == nil else { return }
        let log = file("\(port).log")
        try? FileManager.default.removeItem(atPath: log)
        func ocsp(index: String, signer: String, ca: String) -> [String] {
            [
                "/bin/sh", "-c",
                "exec /usr/bin/openssl ocsp -index \(file(index)) -port \(port) -rsigner \(file("\(signer).pem"))"
                    + " -rkey \(file("\(signer).key")) -CA \(file("\(ca).pem")) -nmin 60 > \(log) 2>&1",
            ]
        }
        let command: [String]
        switch responder {
        case .root: command = ocsp(index: "intermediates.index", signer: "root", ca: "root")
        case .leaf: command = ocsp(index: "leaves.index", signer: "intermediate", ca: "intermediate")
        case .forged: command = ocsp(index: "leaves.index", signer: "stranger", ca: "intermediate")
        case .silent:
            command = [
                "/usr/bin/python3", "-c",
                """
                import socket
                s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", \(port))); s.listen(64); held = []
                open("\(log)", "w").write("ACCEPT\\n")
                while True: held.append(s.accept()[0])
                """,
            ]
        }
        guard let pid = spawn(command) else { throw TestSupportError("cannot start the \(responder) responder") }
        running.withLock { $0[responder] = pid }
        // Each server says when it listens in its log (a probe connection would leave `openssl ocsp`, which serves
        // one connection at a time, waiting on it).
        for _ in 0..<1_200 {  // a minute: processes start slowly beside every other test
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if text.contains("ACCEPT") { return }
            if waitpid(pid, nil, WNOHANG) == pid {
                running.withLock { _ = $0.removeValue(forKey: responder) }
                throw ResponderExited(description: "the \(responder) responder on \(port) exited: \(text)")
            }
            usleep(50_000)
        }
        stop(responder)
        throw TestSupportError("the \(responder) responder does not listen on \(port)")
    }

    private static func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
        }
    }
}
